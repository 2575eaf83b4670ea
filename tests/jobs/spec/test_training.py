"""The job spec builders: overrides per framework and release, run identity, the Ray submission."""

from __future__ import annotations

import inspect
import json
import os
import shlex
import subprocess
import sys

import pytest

from core.config.model import StackConfig
from core.config.problems import ConfigError
from core.facts.job import NEMO_RL_WORKDIR, VERL_ENTRY_MODULE
from jobs.spec.training import (
    for_attempt,
    hf_architecture,
    model_size_b,
    nemo_rl_recipe,
    scheduled_steps,
    submission_for,
    submission_of,
    training_spec,
)
from jobs.spec.validate import parse_override
from plan.harness import REPO_ROOT
from tests.conftest import SHIPPED_STACKS, config_of
from workloads import paths


def ray_runtime_env_fields() -> set[str]:
    """The public fields of the installed Ray's RuntimeEnv."""
    from ray.runtime_env import RuntimeEnv

    return {name for name in RuntimeEnv.known_fields if not name.startswith("_")}


def submit_job_kwargs() -> set[str]:
    """The keyword arguments of the installed Ray's JobSubmissionClient.submit_job."""
    from ray.job_submission import JobSubmissionClient

    return set(inspect.signature(JobSubmissionClient.submit_job).parameters) - {"self"}


def overrides_of(config: StackConfig) -> dict[str, object]:
    """The spec's overrides as key -> value, parsed with Hydra's grammar."""
    return dict(parse_override(item) for item in training_spec(config).overrides)


def nemo_rl(release: str, **sections: dict) -> StackConfig:
    """The shipped NeMo-RL stack on the image of `release`."""
    workload = {"image": f"nvcr.io/nvidia/nemo-rl:{release}", "rayVersion": "2.46.0", "nemoRlRelease": release}
    return config_of("nemo-rl-standard-b200", workload={**workload, **sections.pop("workload", {})}, **sections)


def test_verl_spec_is_grpo_with_kl_loss_on_the_staged_model_data_and_pool():
    config = config_of("verl-standard-h200")
    spec = training_spec(config)
    values = overrides_of(config)
    assert values["algorithm.adv_estimator"] == "grpo"
    assert values["actor_rollout_ref.actor.use_kl_loss"] is True
    assert values["actor_rollout_ref.actor.kl_loss_coef"] == config.grpo.kl_loss_coef
    assert values["algorithm.use_kl_in_reward"] is False
    assert values["data.train_files"] == paths.gsm8k_files().train
    assert values["data.val_files"] == paths.gsm8k_files().test
    assert values["actor_rollout_ref.model.path"] == paths.model_dir(config) == "/data/models/Qwen/Qwen2.5-32B-Instruct"
    assert values["data.train_batch_size"] == 256 and values["actor_rollout_ref.actor.ppo_mini_batch_size"] == 256
    assert values["actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"] == 8
    assert values["actor_rollout_ref.rollout.name"] == "vllm"
    assert values["actor_rollout_ref.rollout.tensor_model_parallel_size"] == 8
    assert values["actor_rollout_ref.rollout.n"] == 8
    assert values["trainer.nnodes"] == 2 and values["trainer.n_gpus_per_node"] == 8
    assert values["trainer.logger"] == ["console"]  # Cloud Storage: no TensorBoard (tests/jobs/test_tracking.py)
    assert values["trainer.default_local_dir"] == spec.run_dir == f"{paths.checkpoint_root()}/{spec.run}"
    assert values["trainer.max_actor_ckpt_to_keep"] == config.grpo.keep_checkpoints
    assert values["trainer.resume_mode"] == "auto"
    assert "trainer.total_training_steps" not in values
    assert shlex.split(spec.entrypoint)[:3] == ["python3", "-m", VERL_ENTRY_MODULE]
    assert shlex.split(spec.entrypoint)[3:] == list(spec.overrides)
    assert spec.env_vars["PYTHONPATH"] == paths.verl_site_dir()
    # No verl file logger (issue 30 item 7): it holds one file open for the whole attempt; the metrics are in the step
    # lines of the attempt's rolled log.
    for env in (spec.env_vars, submission_for(config)["runtime_env"]["env_vars"]):
        assert not [name for name in env if name.startswith("VERL_FILE_LOGGER")]


def test_verl_max_steps_maps_to_total_training_steps():
    assert overrides_of(config_of("dev", grpo={"maxSteps": 7}))["trainer.total_training_steps"] == 7


@pytest.mark.parametrize(
    ("release", "script", "dataset_keys", "converter"),
    [
        ("v0.4.0", "examples/run_grpo_math.py", {"data.dataset_name"}, True),
        ("v0.5.0", "examples/run_grpo_math.py", {"data.dataset_name"}, True),
        ("v0.6.0", "examples/run_grpo.py", {"data.train.dataset_name", "data.validation"}, True),
        ("v0.7.0", "examples/run_grpo.py", {"data.train.dataset_name", "data.validation"}, False),
    ],
)
def test_nemo_rl_spec_follows_the_release_in_the_image(release, script, dataset_keys, converter):
    config = nemo_rl(release)
    spec = training_spec(config)
    words = shlex.split(spec.entrypoint)
    assert words[:4] == ["cd", NEMO_RL_WORKDIR, "&&", "uv"]
    assert words[6] == script
    assert words[7:9] == ["--config", "examples/configs/grpo_math_70B_megatron.yaml"]
    values = overrides_of(config)
    assert dataset_keys <= set(values)
    assert ("data.dataset_name" in values) == (dataset_keys == {"data.dataset_name"})
    if "data.validation" in values:
        assert values["data.validation"] == {"dataset_name": "AIME2024", "repeat": 16}
    assert ("policy.megatron_cfg.converter_type" in values) == converter
    if converter:
        assert values["policy.megatron_cfg.converter_type"] == "Qwen2ForCausalLM"
    assert values["policy.megatron_cfg.optimizer.lr"] == 3e-7
    assert "policy.optimizer.kwargs.lr" not in values
    assert values["checkpointing.checkpoint_dir"] == spec.run_dir
    assert values["checkpointing.enabled"] is True
    assert values["logger.log_dir"] == f"{spec.run_dir}/logs"
    assert values["cluster.num_nodes"] == 8 and values["cluster.gpus_per_node"] == 8
    assert values["policy.train_global_batch_size"] == 32 * 8
    assert values["grpo.max_num_steps"] == 500
    assert spec.env_vars["RAY_OVERRIDE_JOB_RUNTIME_ENV"] == "1"
    assert "PYTHONPATH" not in spec.env_vars


def test_nemo_rl_recipe_and_learning_rate_key_follow_the_model_size():
    small = nemo_rl("v0.7.0", workload={"model": "Qwen/Qwen2.5-1.5B-Instruct"}, gpu={"nodes": 1})
    assert nemo_rl_recipe(small).config == "examples/configs/grpo_math_1B.yaml"
    values = overrides_of(small)
    assert values["policy.optimizer.kwargs.lr"] == 3e-7 and "policy.megatron_cfg.optimizer.lr" not in values
    middle = nemo_rl("v0.4.0", workload={"model": "meta-llama/Llama-3.1-8B-Instruct"}, gpu={"nodes": 1})
    assert nemo_rl_recipe(middle).config == "examples/configs/grpo_math_8B.yaml"
    assert "policy.megatron_cfg.converter_type" not in overrides_of(middle)
    large = nemo_rl("v0.4.0", workload={"model": "meta-llama/Llama-3.3-70B-Instruct"})
    assert overrides_of(large)["policy.megatron_cfg.converter_type"] == "LlamaForCausalLM"


def test_model_size_comes_from_the_config_or_the_model_id():
    assert model_size_b(config_of("dev").workload) == 0.5
    assert model_size_b(config_of("verl-standard-h200").workload) == 32
    assert model_size_b(config_of("dev", workload={"model": "meta-llama/Llama-3.1-8B-Instruct"}).workload) == 8
    assert model_size_b(config_of("dev").workload.model_copy(update={"model": "org/mystery"})) is None
    assert model_size_b(config_of("dev", workload={"model": "org/mystery", "modelSizeB": 13}).workload) == 13


def test_unknown_size_or_family_is_refused_with_the_key_to_change():
    with pytest.raises(ConfigError, match=r"grpo-gke:workload.modelSizeB: is required"):
        training_spec(nemo_rl("v0.7.0", workload={"model": "org/mystery"}))
    assert training_spec(nemo_rl("v0.7.0", workload={"model": "org/mystery-70B"})).run
    assert hf_architecture("Qwen/Qwen3-32B") == "Qwen3ForCausalLM"
    assert hf_architecture("mistralai/Mistral-7B") is None


def test_an_unknown_family_keeps_the_recipes_unread_converter_type_instead_of_being_refused():
    # converter_type is in the v0.4.0-v0.6.0 Megatron recipes but no release reads it (AutoBridge
    # takes the architecture from the model's config.json), so an unknown family is no reason to refuse.
    for release in ("v0.4.0", "v0.6.0"):
        config = nemo_rl(release, workload={"model": "org/mystery-70B"})
        assert "policy.megatron_cfg.converter_type" not in overrides_of(config)
        assert nemo_rl_recipe(config).backend == "megatron"


def test_framework_and_dataset_without_a_mapping_are_refused_by_the_config_model():
    with pytest.raises(
        ConfigError, match="grpo-gke:workload.dataset: workload.framework 'verl' with dataset 'deepscaler'"
    ):
        config_of("dev", workload={"dataset": "deepscaler"})


def test_the_same_spec_is_the_same_run_and_a_changed_spec_a_new_one():
    first, again = training_spec(config_of("dev")), training_spec(config_of("dev"))
    assert first == again
    assert first.run.startswith("dev-") and len(first.run) == len("dev-") + 10
    changed = training_spec(config_of("dev", grpo={"learningRate": 2e-6}))
    assert changed.run != first.run and changed.run_dir != first.run_dir
    assert training_spec(config_of("dev", job={"readyTimeoutSeconds": 60})).run == first.run
    assert training_spec(config_of("dev"), entrypoint="echo hi").run != first.run
    assert training_spec(config_of("dev", stack="other")).run.startswith("other-")


SHIPPED_LAST_STEPS = {
    "dev": "116",  # epochs-only: 1 epoch of GSM8K's 7473 training rows at 64 prompts a step, the last batch dropped
    "first-run": "116",  # the same
    "nemo-rl-standard-b200": "500",  # its grpo.maxSteps
    "verl-autopilot-b200": "58",  # 2 epochs of 7473 // 256 = 29 steps: verl's GSM8K quickstart's 58 steps
    "verl-standard-h200": "58",  # the same
}
"""Each shipped stack's last step as the trainer counts it (job metadata `lastStep`)."""


def test_submission_holds_only_submit_job_kwargs_known_runtime_env_fields_and_no_token():
    kwargs, runtime_env_fields = submit_job_kwargs(), ray_runtime_env_fields()
    for stack in SHIPPED_STACKS:
        config = config_of(stack, secret_token=True)
        submission = submission_for(config)
        assert set(submission) <= kwargs
        assert set(submission["runtime_env"]) <= runtime_env_fields
        assert set(submission["runtime_env"]) == {"env_vars"}
        text = json.dumps(submission)
        assert "hf_do_not_leak" not in text and "HF_TOKEN" not in text
        run = submission["metadata"]["run"]
        assert submission["submission_id"] == f"{run}-1"
        max_steps = "" if config.grpo.max_steps is None else str(config.grpo.max_steps)
        assert submission["metadata"] == {
            "stack": stack, "framework": config.workload.framework, "run": run, "attempt": "1",
            "maxSteps": max_steps, "epochs": str(config.grpo.epochs), "lastStep": SHIPPED_LAST_STEPS[stack],
            # the budget a shipped stack sets (first-run's job.maxGpuHours), as incluster/budget.py limits_of reads it
            **({"maxGpuHours": str(config.job.max_gpu_hours)} if config.job.max_gpu_hours is not None else {}),
        }  # fmt: skip
        assert all(isinstance(value, str) for value in submission["runtime_env"]["env_vars"].values())


def test_attempts_share_the_run_and_differ_only_in_id_attempt_and_grpo_attempt():
    config = config_of("dev")
    first, third = submission_for(config), submission_of(config, training_spec(config), 3)
    assert third["submission_id"] == f"{first['metadata']['run']}-3" and third["metadata"]["attempt"] == "3"
    first_env, third_env = (dict(item["runtime_env"]["env_vars"]) for item in (first, third))
    assert (first_env.pop("GRPO_ATTEMPT"), third_env.pop("GRPO_ATTEMPT")) == ("1", "3")
    assert third_env == first_env
    unrelated = {"submission_id": None, "metadata": None, "runtime_env": None}
    assert {**third, **unrelated} == {**first, **unrelated}


def test_the_submission_and_its_run_are_the_same_in_every_process():
    code = (
        "import json; from tests.conftest import config_of; from jobs.spec.training import submission_for;"
        " print(json.dumps(submission_for(config_of('nemo-rl-standard-b200'))))"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        result = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
        assert result.returncode == 0, result.stderr
        outputs.add(result.stdout)
    assert outputs == {json.dumps(submission_for(config_of("nemo-rl-standard-b200"))) + "\n"}


SCHEDULE_CHANGES = {
    "maxSteps": 777, "epochs": 3, "saveEvery": 5, "validateEvery": 7, "keepCheckpoints": 4,
}  # fmt: skip
IDENTITY_CHANGES = {
    ("grpo", "promptsPerStep"): 32,
    ("grpo", "generationsPerPrompt"): 4,
    ("grpo", "learningRate"): 2e-6,
    ("grpo", "maxPromptLength"): 256,
    ("grpo", "maxResponseLength"): 512,
    ("grpo", "miniBatchSize"): 16,
    ("grpo", "microBatchSizePerGpu"): 2,
    ("grpo", "klLossCoef"): 0.01,
    ("grpo", "gpuMemoryUtilization"): 0.5,
    ("grpo", "rolloutTensorParallel"): 2,
    ("workload", "model"): "Qwen/Qwen2.5-1.5B-Instruct",
    ("gpu", "nodes"): 2,
    ("job", "runGeneration"): 1,
}


@pytest.mark.parametrize("stack", ["dev", "nemo-rl-standard-b200"])
@pytest.mark.parametrize("key", sorted(SCHEDULE_CHANGES))
def test_a_schedule_knob_keeps_the_run_but_reaches_the_trainer(stack, key):
    base = training_spec(config_of(stack))
    changed = training_spec(config_of(stack, grpo={key: SCHEDULE_CHANGES[key]}))
    assert changed.run == base.run and changed.run_dir == base.run_dir
    assert changed.entrypoint != base.entrypoint


@pytest.mark.parametrize("stack", ["dev", "nemo-rl-standard-b200"])
def test_job_knobs_keep_the_run(stack):
    base = training_spec(config_of(stack)).run
    assert training_spec(config_of(stack, job={"readyTimeoutSeconds": 60, "submit": False})).run == base


@pytest.mark.parametrize(("section", "key"), sorted(IDENTITY_CHANGES))
def test_an_identity_knob_makes_a_new_run(section, key):
    base = training_spec(config_of("dev"))
    changed = training_spec(config_of("dev", **{section: {key: IDENTITY_CHANGES[(section, key)]}}))
    assert changed.run != base.run and changed.run.startswith("dev-")


def test_each_attempt_gets_grpo_run_attempt_and_run_dir_outside_the_hash():
    config = config_of("dev")
    spec = training_spec(config)
    for attempt in (1, 2, 10):
        env = submission_of(config, spec, attempt)["runtime_env"]["env_vars"]
        assert (env["GRPO_RUN"], env["GRPO_ATTEMPT"], env["GRPO_RUN_DIR"]) == (spec.run, str(attempt), spec.run_dir)
    assert not any(name.startswith("GRPO_") for name in spec.env_vars)
    assert "GRPO_" not in spec.entrypoint


def test_a_submission_that_names_its_run_directory_keeps_it_for_every_attempt():
    """A run on this machine places the shared storage's run directory under a local one; the next attempt's
    GRPO_RUN_DIR and verl's TensorBoard directory stay there (once they moved back to /data on the host)."""
    config = config_of("dev")
    spec = training_spec(config)
    local = f"/tmp/local-data{spec.run_dir}"
    first = submission_of(config, spec, 1)
    first["runtime_env"]["env_vars"]["GRPO_RUN_DIR"] = local
    env = for_attempt(first, 2)["runtime_env"]["env_vars"]
    assert (env["GRPO_RUN_DIR"], env["GRPO_ATTEMPT"]) == (local, "2")
    assert env["TENSORBOARD_DIR"] == f"{local}/tensorboard"


def test_the_schedule_is_recorded_in_the_metadata():
    metadata = submission_for(config_of("dev", grpo={"maxSteps": 40, "epochs": 2}))["metadata"]
    assert (metadata["maxSteps"], metadata["epochs"]) == ("40", "2")
    assert submission_for(config_of("dev"))["metadata"]["maxSteps"] == ""


@pytest.mark.parametrize(
    ("done", "wanted", "extended"),
    [
        ({"maxSteps": "100", "epochs": "1"}, {"maxSteps": "200", "epochs": "1"}, True),
        ({"maxSteps": "100", "epochs": "1"}, {"maxSteps": "", "epochs": "1"}, True),
        ({"maxSteps": "100", "epochs": "1"}, {"maxSteps": "100", "epochs": "2"}, True),
        ({"maxSteps": "100", "epochs": "1"}, {"maxSteps": "100", "epochs": "1"}, False),
        ({"maxSteps": "100", "epochs": "2"}, {"maxSteps": "50", "epochs": "2"}, False),
        ({"maxSteps": "", "epochs": "1"}, {"maxSteps": "900", "epochs": "1"}, False),
        ({"maxSteps": "", "epochs": "1"}, {"maxSteps": "", "epochs": "1"}, False),
        ({}, {"maxSteps": "900", "epochs": "9"}, False),
    ],
)
def test_a_succeeded_run_is_extended_only_when_the_schedule_asks_for_more(done, wanted, extended):
    from incluster.runs import extends

    assert extends(done, wanted) is extended


def test_a_negative_run_generation_is_refused_naming_the_key():
    with pytest.raises(ConfigError, match="grpo-gke:job.runGeneration"):
        config_of("dev", job={"runGeneration": -1})


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_attempt_runs_the_spec_command_under_the_attempt_wrapper_outside_the_run_hash(stack):
    config = config_of(stack)
    spec = training_spec(config)
    words = shlex.split(submission_for(config)["entrypoint"])
    world = str((1 if stack == "first-run" else 8) * config.gpu.nodes)  # first-run: one L4 a node
    # Every attempt keeps grpo.keepCheckpoints across attempts (--keep): the cut saves moved to incomplete/ of either
    # framework, and verl's complete steps (NeMo-RL's keep_top_k rotates its own).
    keep = ["--keep", str(config.grpo.keep_checkpoints)]
    assert words == ["python3", "-m", "incluster.attempt", "--framework", spec.framework, "--world-size", world, *keep,
                     "--", "sh", "-c", spec.entrypoint]  # fmt: skip
    smoke = training_spec(config, "echo hi")
    assert shlex.split(submission_of(config, smoke, 1)["entrypoint"])[-3:] == ["sh", "-c", "echo hi"]
    assert spec.run == training_spec(config).run and "incluster.attempt" not in spec.entrypoint


def test_on_data_root_places_every_shared_storage_path_under_the_directory_and_nothing_else():
    from jobs.spec.training import on_data_root

    config = config_of("dev")
    submission = submission_for(config)
    moved = on_data_root(submission, "/tmp/local/")
    env = moved["runtime_env"]["env_vars"]
    run = submission["metadata"]["run"]
    assert env["GRPO_RUN_DIR"] == f"/tmp/local/checkpoints/{run}"
    assert env["HF_HOME"] == "/tmp/local/hf-home" and env["PYTHONPATH"] == "/tmp/local/verl/0.9.1"
    assert "/data/" not in json.dumps(moved)
    assert "data.train_files=/tmp/local/gsm8k/train.parquet" in moved["entrypoint"]
    assert (moved["metadata"], moved["submission_id"]) == (submission["metadata"], submission["submission_id"])
    odd = {**submission, "entrypoint": "cat /database /x/data/y /data", "runtime_env": {"env_vars": {"A": "/data"}}}
    assert on_data_root(odd, "/d")["entrypoint"] == "cat /database /x/data/y /d"
    assert on_data_root(odd, "/d")["runtime_env"]["env_vars"] == {"A": "/d"}


def test_an_epochs_only_schedule_lasts_its_epochs_of_the_data_sets_whole_batches_and_a_step_limit_wins():
    nemo = config_of("nemo-rl-standard-b200", grpo={"maxSteps": None, "epochs": 2})
    assert scheduled_steps(nemo) == 2 * (40315 // 32)  # DeepScaleR's training rows at its 32 prompts a step
    assert scheduled_steps(config_of("dev", grpo={"epochs": 3})) == 3 * (7473 // 64)  # GSM8K's at dev's 64
    assert scheduled_steps(config_of("dev", grpo={"epochs": 3, "maxSteps": 7})) == 7
