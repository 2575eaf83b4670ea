"""One W&B run per attempt, grouped by the run: `grpo-gke:wandbApiKey` turns on Weights & Biases for both frameworks
(the run id as WANDB_RUN_GROUP, the attempt's submission id as WANDB_RUN_ID, the project and entity from
`grpo-gke:tracking`), so a resumed attempt's redone steps are not dropped below W&B's current step; and
TensorBoard event files written per run on Managed Lustre only (not on Cloud Storage, where a file held open is lost
with its pod); tracking stays outside the run's identity, verl's
overrides still compose in struct mode and NeMo-RL's fit each release's recipe; the key is in no submission."""

from __future__ import annotations

import json
import shlex

import pytest
from omegaconf import OmegaConf

from core.config.problems import ConfigError
from core.facts import platform
from core.facts.platform import NEMO_RL_RELEASES
from jobs.spec.training import for_attempt, submission_for, submission_of, training_spec
from jobs.spec.validate import check, nemo_rl_problems, verl_problems
from tests.conftest import combination_config, config_of
from tests.jobs.spec.test_training import nemo_rl, overrides_of
from tests.jobs.spec.test_validate import SHARED_RELEASES, apply_overrides, shared_recipe

KEY = "wandb-TrackingTestKey-0123456789abcdef"
"""A recognisable fake W&B key."""


def env_of(config, attempt: int = 1) -> dict[str, str]:
    spec = training_spec(config)
    return submission_of(config, spec, attempt)["runtime_env"]["env_vars"]


def test_verl_writes_tensorboard_per_run_on_lustre_only_and_wandb_only_with_the_key():
    """Issue 30 item 7: on Cloud Storage no TensorBoard (its event file, held open for the attempt, would be lost with
    the head); on Managed Lustre it is on, in the run's directory."""
    on_gcs, on_lustre = combination_config(), combination_config(storage_type="lustre")
    assert overrides_of(on_gcs)["trainer.logger"] == ["console"]
    assert overrides_of(on_lustre)["trainer.logger"] == ["console", "tensorboard"]
    assert overrides_of(on_gcs)["trainer.project_name"] == "grpo-gke"
    run_dir = training_spec(on_lustre).run_dir
    for attempt in (1, 2):
        env = env_of(on_lustre, attempt)
        assert env["TENSORBOARD_DIR"] == f"{run_dir}/tensorboard"
        assert not [name for name in env if name.startswith("WANDB_")]
    assert overrides_of(config_of("dev", wandb_key=KEY))["trainer.logger"] == ["console", "wandb"]


@pytest.mark.parametrize("framework", ["verl", "nemo-rl"])
@pytest.mark.parametrize(("storage", "tensorboard"), [("gcs", False), ("lustre", True)])
def test_the_attempts_command_carries_tensorboard_only_where_the_storage_writes_an_open_file(
    framework, storage, tensorboard
):
    """The command an attempt runs, as Ray gets it: verl's `trainer.logger` and NeMo-RL's `logger.tensorboard_enabled`
    follow the storage (core/facts/platform.py DURABLE_BEFORE_CLOSE)."""
    config = combination_config(storage_type=storage, framework=framework)
    command = shlex.split(shlex.split(submission_for(config)["entrypoint"])[-1])
    if framework == "verl":
        logger = next(word for word in command if word.startswith("trainer.logger="))
        assert ("tensorboard" in logger) is tensorboard and "file" not in logger
    else:
        assert f"logger.tensorboard_enabled={str(tensorboard).lower()}" in command


def test_turning_tensorboard_on_or_off_is_the_same_run(monkeypatch):
    """The logger overrides are outside the run's hash (TRACKING_OVERRIDES): the storage's TensorBoard choice changes
    the command, never the run."""
    for stack in ("dev", "nemo-rl-standard-b200"):
        before = training_spec(config_of(stack))
        storage = config_of(stack).storage.type
        monkeypatch.setitem(platform.DURABLE_BEFORE_CLOSE, storage, not platform.DURABLE_BEFORE_CLOSE[storage])
        after = training_spec(config_of(stack))
        monkeypatch.undo()
        assert after.entrypoint != before.entrypoint and (after.run, after.run_dir) == (before.run, before.run_dir)


@pytest.mark.parametrize("stack", ["dev", "nemo-rl-standard-b200"])
def test_with_the_key_every_attempt_logs_its_own_wandb_run_in_the_group_of_the_grpo_gke_run(stack):
    config = config_of(stack, wandb_key=KEY, tracking={"wandbProject": "my-grpo", "wandbEntity": "my-team"})
    run = training_spec(config).run
    for attempt in (1, 2, 7):
        env = env_of(config, attempt)
        assert {name: env[name] for name in env if name.startswith("WANDB_")} == {
            "WANDB_ENTITY": "my-team",
            "WANDB_PROJECT": "my-grpo",
            "WANDB_RESUME": "allow",
            "WANDB_RUN_GROUP": run,
            "WANDB_RUN_ID": f"{run}-{attempt}",
        }
    assert "WANDB_ENTITY" not in env_of(config_of(stack, wandb_key=KEY))


@pytest.mark.parametrize("stack", ["dev", "nemo-rl-standard-b200"])
def test_the_guardians_next_attempt_built_from_attempt_1_gets_its_own_wandb_run(stack):
    """The guardian submits attempt N from the settings' attempt-1 submission (run_submission.ensure_run ->
    for_attempt): attempt N's W&B run is its own, whatever attempt it was built from."""
    first = submission_for(config_of(stack, wandb_key=KEY))
    run = first["metadata"]["run"]
    for attempt in (2, 3):
        env = for_attempt(first, attempt)["runtime_env"]["env_vars"]
        assert (env["WANDB_RUN_ID"], env["WANDB_RUN_GROUP"]) == (f"{run}-{attempt}", run)
        again = for_attempt(for_attempt(first, 5), attempt)["runtime_env"]["env_vars"]
        assert again["WANDB_RUN_ID"] == f"{run}-{attempt}"


def test_without_the_key_no_attempt_names_a_wandb_run():
    first = submission_for(config_of("dev"))
    assert not [name for name in for_attempt(first, 2)["runtime_env"]["env_vars"] if name.startswith("WANDB_")]
    assert overrides_of(config_of("dev", wandb_key=KEY))["trainer.project_name"] == "grpo-gke"


def test_nemo_rl_turns_on_tensorboard_on_lustre_and_wandb_with_the_key():
    plain = nemo_rl("v0.7.0")
    workload = plain.workload.model_dump(by_alias=True, exclude_none=True)
    tracked = config_of("nemo-rl-standard-b200", wandb_key=KEY, workload=workload, tracking={"wandbProject": "my-grpo"})
    run = training_spec(tracked).run
    assert overrides_of(plain)["logger.tensorboard_enabled"] is True
    assert overrides_of(plain)["logger.wandb_enabled"] is False
    values = overrides_of(tracked)
    assert (values["logger.wandb_enabled"], values["logger.wandb.project"], values["logger.wandb.name"]) == (
        True,
        "my-grpo",
        run,
    )
    assert values["logger.log_dir"] == f"{training_spec(tracked).run_dir}/logs"
    assert env_of(tracked)["WANDB_RUN_GROUP"] == run and "TENSORBOARD_DIR" not in env_of(tracked)


@pytest.mark.parametrize("stack", ["dev", "nemo-rl-standard-b200"])
@pytest.mark.parametrize(
    "tracking",
    [{"wandb_key": KEY}, {"wandb_key": KEY, "tracking": {"wandbProject": "other", "wandbEntity": "team"}}],
)
def test_a_tracking_change_is_not_a_new_run(stack, tracking):
    base = training_spec(config_of(stack))
    changed = training_spec(config_of(stack, **tracking))
    assert changed.run == base.run and changed.run_dir == base.run_dir
    assert changed.entrypoint != base.entrypoint


def test_verl_overrides_with_wandb_compose_in_struct_mode():
    config = config_of("dev", wandb_key=KEY, tracking={"wandbProject": "my-grpo"})
    assert verl_problems(training_spec(config).overrides) == ()
    check(config)


@pytest.mark.parametrize("release", NEMO_RL_RELEASES)
def test_nemo_rl_tracking_keys_fit_the_typed_model_of_each_release(release):
    config = nemo_rl(release)
    values = config.workload.model_dump(by_alias=True, exclude_none=True)
    tracked = config_of("nemo-rl-standard-b200", wandb_key=KEY, workload=values)
    assert nemo_rl_problems(training_spec(tracked).overrides, release, "megatron") == []


@pytest.mark.parametrize("release", sorted(SHARED_RELEASES))
def test_nemo_rl_tracking_overrides_apply_in_struct_mode_to_the_release_recipe(shared_dir, release):
    values = nemo_rl(release).workload.model_dump(by_alias=True, exclude_none=True)
    tracked = config_of("nemo-rl-standard-b200", wandb_key=KEY, workload=values, tracking={"wandbProject": "p"})
    applied = apply_overrides(shared_recipe(shared_dir, release, "megatron"), list(training_spec(tracked).overrides))
    logger = OmegaConf.to_container(OmegaConf.select(applied, "logger"))
    assert (logger["wandb_enabled"], logger["tensorboard_enabled"], logger["wandb"]["project"]) == (True, True, "p")
    assert logger["wandb"]["name"] == training_spec(tracked).run


def test_the_key_is_in_no_submission_spec_or_attempt():
    for stack in ("dev", "nemo-rl-standard-b200"):
        config = config_of(stack, wandb_key=KEY)
        submission = submission_for(config)
        texts = [json.dumps(submission), json.dumps(for_attempt(submission, 2)), repr(training_spec(config))]
        assert not any(KEY in text for text in texts)
        assert "WANDB_API_KEY" not in json.dumps(submission)


@pytest.mark.parametrize(
    ("sections", "where"),
    [
        ({"secretEnv": {"WANDB_API_KEY": "k"}}, "secretEnv"),
        ({"workload": {"extraEnv": {"WANDB_API_KEY": "k"}}}, "workload.extraEnv"),
    ],
)
def test_a_second_wandb_api_key_beside_wandbapikey_is_refused(sections, where):
    from core.config.model import PROJECT_NAMESPACE
    from jobs.spec.load import load_config
    from tests.conftest import stack_values, values_of, with_secrets

    env = sections.pop("secretEnv", None)
    values, secret_keys = with_secrets(values_of("dev", **sections), secret_env=env, wandb_key=KEY)
    with pytest.raises(ConfigError) as refused:
        load_config(values, {*stack_values("dev").secret_keys, *secret_keys}, "dev")
    assert [str(problem) for problem in refused.value.problems] == [
        f"{PROJECT_NAMESPACE}:{where}: WANDB_API_KEY comes from {PROJECT_NAMESPACE}:wandbApiKey; remove it here:"
        f" pulumi config rm --path '{PROJECT_NAMESPACE}:{where}.WANDB_API_KEY'"
    ]


def test_secret_env_wandb_api_key_alone_is_still_allowed():
    from jobs.spec.load import load_config
    from tests.conftest import stack_values, values_of, with_secrets

    values, secret_keys = with_secrets(values_of("dev"), secret_env={"WANDB_API_KEY": "k"})
    config = load_config(values, {*stack_values("dev").secret_keys, *secret_keys}, "dev").config
    assert config.wandb_api_key is None and "WANDB_API_KEY" in config.secret_env


def test_an_empty_key_is_refused_without_showing_it():
    with pytest.raises(ConfigError, match="grpo-gke:wandbApiKey: must not be empty; unset it to turn W&B off"):
        config_of("dev", wandb_key=" ")
