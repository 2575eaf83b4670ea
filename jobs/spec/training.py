"""The GRPO job as plain data: config in, entrypoint, runtime env and Ray submission out.

A *run* is identified by a stable hash of what shapes the trained model (model, data, algorithm
and its hyperparameters, node count, release, `job.runGeneration`): the same identity is the same
run, writing to (and resuming from) the same checkpoint directory; another is a new run. The
schedule (SCHEDULE_OVERRIDES: steps, epochs, save, validation and retention periods) is kept out of
the hash, so raising `grpo.maxSteps` extends the run. Each submission of a run is an *attempt*
with the Ray submission id `<run>-<n>`.
Pure: no Ray, no Pulumi, no I/O.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from dataclasses import dataclass, field

from core.config.model import PROJECT_NAMESPACE, StackConfig, WorkloadConfig, sanitize_name
from core.config.problems import ConfigError, Problem
from core.facts.job import (
    HF_ARCHITECTURES,
    NEMO_RL_DEEPSCALER,
    NEMO_RL_RECIPES,
    NEMO_RL_RELEASE_FACTS,
    NEMO_RL_WORKDIR,
    TRAIN_ROWS,
    VERL_ENTRY_MODULE,
    NemoRlRecipe,
)
from core.facts.memory import TRAINING_STATES, TrainingFamily
from core.facts.platform import DURABLE_BEFORE_CLOSE
from core.names import DATA_MOUNT
from incluster import budget
from incluster.runs import for_attempt
from workloads import paths

RUN_DIR_PLACEHOLDER = "@RUN_DIR@"
"""Stands for the run's directory while the spec is hashed (the directory is named after the hash)."""

RUN_PLACEHOLDER = "@RUN@"
"""Stands for the run id while the spec is hashed."""

SCHEDULE_OVERRIDES = {
    "verl": frozenset(
        {
            "trainer.total_epochs",
            "trainer.total_training_steps",
            "trainer.save_freq",
            "trainer.test_freq",
            "trainer.max_actor_ckpt_to_keep",
        }
    ),
    "nemo-rl": frozenset(
        {
            "grpo.max_num_epochs",
            "grpo.max_num_steps",
            "checkpointing.save_period",
            "grpo.val_period",
            "checkpointing.keep_top_k",
        }
    ),
}
"""Overrides of `grpo.epochs`, `maxSteps`, `saveEvery`, `validateEvery` and `keepCheckpoints` per
framework: how long and how often, not what is trained, so they are kept out of the run's hash."""

TRACKING_OVERRIDES = {
    "verl": frozenset({"trainer.logger", "trainer.project_name"}),
    "nemo-rl": frozenset(
        {"logger.wandb_enabled", "logger.tensorboard_enabled", "logger.wandb.project", "logger.wandb.name"}
    ),
}
"""Overrides that turn experiment tracking (W&B, TensorBoard) on and name its project: where the run's
figures are sent, not what is trained, so they are kept out of the run's hash like the schedule."""


def tensorboard_on(config: StackConfig) -> bool:
    """Whether the run writes TensorBoard event files: only on a storage where a file held open is written as it goes
    (core/facts/platform.py DURABLE_BEFORE_CLOSE), Managed Lustre, not Cloud Storage. Both frameworks write them with
    torch's SummaryWriter (verl 0.9.1 verl/utils/tracking.py L551-567 _TensorboardAdapter, closed in finish L566-567;
    NeMo-RL nemo_rl/utils/logger.py TensorboardLogger), whose EventFileWriter opens one event file for the writer's life
    (tensorflow/tensorboard tensorboard/summary/writer/event_file_writer.py L86, `tf.io.gfile.GFile(name, "wb")`, stored
    commit 70b76c9): with TensorFlow in the image that file is held open for the whole attempt, and a lost head loses
    it on Cloud Storage; without, tensorboard's stub opens, appends to and closes the file for every record
    (tensorboard/compat/tensorflow_stub/io/gfile.py L159-173, L767-775), and gcsfuse rewrites a modified object whole on
    each close (docs/semantics.md, "Staged Writes": the whole object, or what is appended once it is 2 MB) under Cloud
    Storage's lower limit on repeated writes to one object name (cloud.google.com/storage/docs/request-rate, "Auto-
    scaling", read 2026-12-07): a write per scalar, hundreds a step. W&B, when `wandbApiKey` is set, streams instead."""
    return DURABLE_BEFORE_CLOSE[config.storage.type]


def verl_loggers(config: StackConfig) -> list[str]:
    """verl's `trainer.logger` backends (verl/utils/tracking.py Tracking.supported_backend): `console`, whose step line
    carries every metric into the attempt's rolled log (incluster/export_run.py REWARD_KEYS); `tensorboard` where
    `tensorboard_on`; `wandb` when `grpo-gke:wandbApiKey` is set. No `file`: its FileLogger opens one file for the whole
    attempt and closes it only at the end (verl 0.9.1 verl/utils/tracking.py L529-548), which on Cloud Storage reaches
    the bucket only then."""
    return [
        "console",
        *(["tensorboard"] if tensorboard_on(config) else []),
        *(["wandb"] if config.wandb_api_key is not None else []),
    ]


@dataclass(frozen=True)
class TrainingSpec:
    """Everything that defines one training run, before it becomes a Ray submission."""

    framework: str
    """`verl` or `nemo-rl`."""
    release: str
    """Framework release the spec is written for (verl version or NeMo-RL tag)."""
    run: str
    """Run id: `<stack>-<hash of the spec>`."""
    run_dir: str
    """Absolute directory of the run's checkpoints and logs on the shared storage."""
    entrypoint: str
    """Shell command Ray runs as the job's driver."""
    overrides: tuple[str, ...] = field(default_factory=tuple)
    """The framework's config overrides inside `entrypoint`, in order."""
    env_vars: dict[str, str] = field(default_factory=dict)
    """Environment of the driver and every worker of the job (no secrets)."""


def model_size_b(workload: WorkloadConfig) -> float | None:
    """Parameters in billions: `workload.modelSizeB`, else the size the model id names (`...-72B-...`)."""
    if workload.model_size_b is not None:
        return workload.model_size_b
    name = workload.model.split("/", 1)[1]
    match = re.search(r"(?<![\d.])(\d+(?:\.\d+)?)[Bb](?![A-Za-z])", name)
    return float(match.group(1)) if match else None


def nemo_rl_recipe(config: StackConfig) -> NemoRlRecipe:
    """The release's example recipe that fits the model size; ConfigError when the size is unknown."""
    size = model_size_b(config.workload)
    if size is None:
        raise ConfigError(
            [
                Problem(
                    f"{PROJECT_NAMESPACE}:workload.modelSizeB",
                    f"is required: the model id {config.workload.model!r} names no size such as 7B,"
                    " and NeMo-RL's recipe is chosen by size",
                )
            ]
        )
    return recipe_for_size(size)


def recipe_for_size(size_b: float) -> NemoRlRecipe:
    """The first NeMo-RL example recipe whose max_size_b a model of `size_b` billion parameters fits."""
    return next(recipe for recipe in NEMO_RL_RECIPES if size_b <= recipe.max_size_b)


NEMO_RL_FAMILIES: dict[str, TrainingFamily] = {"dtensor": "nemo-rl-dtensor", "megatron": "nemo-rl-megatron"}
"""The training backend of each NeMo-RL recipe backend (NemoRlRecipe.backend)."""


def training_family(config: StackConfig) -> tuple[TrainingFamily, int]:
    """The stack's training backend and the GPUs one model replica spans in it (Megatron TP x PP, else 1);
    ConfigError for NeMo-RL when the model's size, which picks the recipe, is unknown."""
    if config.workload.framework == "verl":
        return "verl-fsdp", 1
    recipe = nemo_rl_recipe(config)
    return NEMO_RL_FAMILIES[recipe.backend], recipe.model_parallel_gpus


def offload_overrides(config: StackConfig) -> list[tuple[str, object]]:
    """The framework's own offload switches when `grpo.cpuOffload` is true (core/facts/memory.py), else none:
    left out when off, so a stack without offload keeps its overrides and its run."""
    if not config.grpo.cpu_offload:
        return []
    family, _ = training_family(config)
    return list(TRAINING_STATES[family].offload_overrides)


def hf_architecture(model: str) -> str | None:
    """The Hugging Face architecture of `model`'s family (NeMo-RL's converter_type), or None."""
    for prefix, architecture in sorted(HF_ARCHITECTURES.items(), key=lambda item: -len(item[0])):
        if model.startswith(prefix):
            return architecture
    return None


def _override(key: str, value: object) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    elif isinstance(value, (list, tuple)):
        text = "[" + ",".join(json.dumps(item) for item in value) + "]"
    elif isinstance(value, float):
        text = repr(value)
    else:
        text = str(value)
    return f"{key}={text}"


def verl_overrides(config: StackConfig, run: str, run_dir: str) -> list[str]:
    """Hydra overrides of `verl.trainer.main_ppo` for GRPO with KL as a loss (verl's GRPO examples)."""
    grpo = config.grpo
    data = paths.gsm8k_files()
    micro = grpo.micro_batch_size_per_gpu
    values: list[tuple[str, object]] = [
        ("algorithm.adv_estimator", "grpo"),
        ("algorithm.use_kl_in_reward", False),
        ("data.train_files", data.train),
        ("data.val_files", data.test),
        ("data.train_batch_size", grpo.prompts_per_step),
        ("data.max_prompt_length", grpo.max_prompt_length),
        ("data.max_response_length", grpo.max_response_length),
        ("actor_rollout_ref.model.path", paths.model_dir(config)),
        ("actor_rollout_ref.actor.strategy", "fsdp2"),
        ("actor_rollout_ref.actor.optim.lr", grpo.learning_rate),
        ("actor_rollout_ref.actor.ppo_mini_batch_size", grpo.effective_mini_batch()),
        ("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro),
        ("actor_rollout_ref.actor.use_kl_loss", True),
        ("actor_rollout_ref.actor.kl_loss_coef", grpo.kl_loss_coef),
        ("actor_rollout_ref.actor.kl_loss_type", "low_var_kl"),
        ("actor_rollout_ref.actor.entropy_coeff", 0),
        ("actor_rollout_ref.rollout.name", "vllm"),
        ("actor_rollout_ref.rollout.n", grpo.generations_per_prompt),
        ("actor_rollout_ref.rollout.tensor_model_parallel_size", grpo.rollout_tensor_parallel),
        ("actor_rollout_ref.rollout.gpu_memory_utilization", grpo.gpu_memory_utilization),
        ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", micro),
        ("actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", micro),
        ("trainer.logger", verl_loggers(config)),
        ("trainer.project_name", config.tracking.wandb_project),
        ("trainer.experiment_name", run),
        ("trainer.nnodes", config.gpu.nodes),
        ("trainer.n_gpus_per_node", config.gpus_per_node),
        ("trainer.total_epochs", grpo.epochs),
        ("trainer.save_freq", grpo.save_every),
        ("trainer.test_freq", grpo.validate_every),
        ("trainer.default_local_dir", run_dir),
        ("trainer.max_actor_ckpt_to_keep", grpo.keep_checkpoints),
        ("trainer.resume_mode", "auto"),
    ]
    if grpo.max_steps is not None:
        values.append(("trainer.total_training_steps", grpo.max_steps))
    values += offload_overrides(config)
    return [_override(key, value) for key, value in values]


def nemo_rl_overrides(config: StackConfig, run: str, run_dir: str) -> list[str]:
    """Overrides of the release's GRPO entry script, on the keys of the recipe that fits the model."""
    grpo = config.grpo
    release = NEMO_RL_RELEASE_FACTS[config.workload.resolved_image().release]
    recipe = nemo_rl_recipe(config)
    values: list[tuple[str, object]] = [
        ("policy.model_name", paths.model_dir(config)),
        ("grpo.num_prompts_per_step", grpo.prompts_per_step),
        ("grpo.num_generations_per_prompt", grpo.generations_per_prompt),
        ("grpo.max_num_epochs", grpo.epochs),
        ("grpo.val_period", grpo.validate_every),
        ("loss_fn.reference_policy_kl_penalty", grpo.kl_loss_coef),
        ("policy.train_global_batch_size", grpo.effective_mini_batch() * grpo.generations_per_prompt),
        ("policy.train_micro_batch_size", grpo.micro_batch_size_per_gpu),
        ("policy.max_total_sequence_length", grpo.max_prompt_length + grpo.max_response_length),
        (recipe.learning_rate_key, grpo.learning_rate),
        ("policy.generation.vllm_cfg.tensor_parallel_size", grpo.rollout_tensor_parallel),
        ("policy.generation.vllm_cfg.gpu_memory_utilization", grpo.gpu_memory_utilization),
        ("data.max_input_seq_length", grpo.max_prompt_length),
        ("cluster.num_nodes", config.gpu.nodes),
        ("cluster.gpus_per_node", config.gpus_per_node),
        ("checkpointing.enabled", True),
        ("checkpointing.checkpoint_dir", run_dir),
        ("checkpointing.save_period", grpo.save_every),
        ("checkpointing.keep_top_k", grpo.keep_checkpoints),
        ("checkpointing.metric_name", None),
        ("logger.log_dir", f"{run_dir}/logs"),
        ("logger.tensorboard_enabled", tensorboard_on(config)),
        ("logger.wandb_enabled", config.wandb_api_key is not None),
        ("logger.wandb.project", config.tracking.wandb_project),
        ("logger.wandb.name", run),
    ]
    if grpo.max_steps is not None:
        values.append(("grpo.max_num_steps", grpo.max_steps))
    if recipe.backend == "dtensor":
        # The DTensor recipes save safetensors (v0.7.0 examples/configs/grpo_math_1B.yaml L97), which write no
        # torch DCP `.metadata` (NVIDIA-NeMo/Automodel nemo_automodel/components/checkpoint/_backports/hf_storage.py
        # _HuggingFaceStorageWriter.finish, stored commit 11ec209: a safetensors index at most), and the export's
        # convert_dcp_to_hf needs one (nemo_rl/utils/native_checkpoint.py L241-253): so torch_save (DCP).
        values.append(("checkpointing.model_save_format", "torch_save"))
    train, validation, repeat = NEMO_RL_DEEPSCALER
    if release.dataset_layout == "flat":
        values.append(("data.dataset_name", train))
    else:
        values.append(("data.train.dataset_name", train))
        values.append(("data.validation", f"{{dataset_name:{validation},repeat:{repeat}}}"))
    architecture = hf_architecture(config.workload.model)
    if recipe.backend == "megatron" and release.recipes_carry_converter_type and architecture is not None:
        # The recipe's converter_type names the recipe's own model (Llama); no supported release
        # reads it (Megatron-Bridge's AutoBridge takes the architecture from the model's HF config,
        # v0.4.0 on), so it is set for a known family and left alone, never refused, otherwise.
        values.append(("policy.megatron_cfg.converter_type", architecture))
    values += offload_overrides(config)
    return [_override(key, value) for key, value in values]


def _entrypoint(config: StackConfig, overrides: list[str]) -> str:
    if config.workload.framework == "verl":
        return shlex.join(["python3", "-m", VERL_ENTRY_MODULE, *overrides])
    release = NEMO_RL_RELEASE_FACTS[config.workload.resolved_image().release]
    command = ["uv", "run", "python", release.entry_script, "--config", nemo_rl_recipe(config).config, *overrides]
    return f"cd {NEMO_RL_WORKDIR} && {shlex.join(command)}"


def _env_vars(config: StackConfig, run_dir: str) -> dict[str, str]:
    env = {"HF_HOME": paths.hf_home()}
    if config.workload.framework == "verl":
        env["PYTHONPATH"] = paths.verl_site_dir()
    else:
        # NeMo-RL's init_ray passes os.environ as ray.init's runtime env, which clashes with the
        # job's env_vars unless the job's runtime env may be overridden (jobs-and-frameworks.md §2).
        env["RAY_OVERRIDE_JOB_RUNTIME_ENV"] = "1"
    return dict(sorted(env.items()))


def _spec_hash(framework: str, release: str, entrypoint: str, env_vars: dict[str, str], generation: int) -> str:
    identity: dict[str, object] = {
        "framework": framework,
        "release": release,
        "entrypoint": entrypoint,
        "env_vars": env_vars,
    }
    if generation:
        identity["generation"] = generation
    canonical = json.dumps(
        identity,
        sort_keys=True,
        separators=(",", ":"),
    )
    return hashlib.sha256(canonical.encode()).hexdigest()[:10]


def _substitute(text: str, run: str, run_dir: str) -> str:
    return text.replace(RUN_DIR_PLACEHOLDER, run_dir).replace(RUN_PLACEHOLDER, run)


def training_spec(config: StackConfig, entrypoint: str | None = None) -> TrainingSpec:
    """The run of `config`; `entrypoint` replaces the trainer command (smoke tests) and so names another run."""
    framework = config.workload.framework
    release = config.workload.resolved_image().release
    if framework == "verl":
        overrides = verl_overrides(config, RUN_PLACEHOLDER, RUN_DIR_PLACEHOLDER)
    else:
        overrides = nemo_rl_overrides(config, RUN_PLACEHOLDER, RUN_DIR_PLACEHOLDER)
    command = entrypoint if entrypoint is not None else _entrypoint(config, overrides)
    outside = SCHEDULE_OVERRIDES[framework] | TRACKING_OVERRIDES[framework]
    identity = [item for item in overrides if item.split("=", 1)[0] not in outside]
    hashed = entrypoint if entrypoint is not None else _entrypoint(config, identity)
    env = _env_vars(config, RUN_DIR_PLACEHOLDER)
    digest = _spec_hash(framework, release, hashed, env, config.job.run_generation)
    run = f"{sanitize_name(config.stack, 40)}-{digest}"
    run_dir = run_directory(run)
    return TrainingSpec(
        framework=framework,
        release=release,
        run=run,
        run_dir=run_dir,
        entrypoint=_substitute(command, run, run_dir),
        overrides=tuple(_substitute(item, run, run_dir) for item in overrides),
        env_vars={key: _substitute(value, run, run_dir) for key, value in env.items()},
    )


def run_directory(run: str) -> str:
    """Where a run keeps its checkpoints and logs on the shared storage."""
    return f"{paths.checkpoint_root()}/{run}"


def attempt_entrypoint(spec: TrainingSpec, world_size: int, keep: int | None = None) -> str:
    """The attempt's entrypoint: the attempt wrapper (incluster/attempt.py: the checkpoint check, the timestamped
    log) around the spec's command, run by a shell as Ray runs every entrypoint. Not part of the run's hash.

    It keeps `grpo.keepCheckpoints` across attempts (`--keep`): of the cut saves it moved to `incomplete/`, for
    either framework, and of verl's complete steps, which verl's rotation reaches only when its own process saved them
    (incluster/checkpoints.py prunable); NeMo-RL's keep_top_k already reaches every complete step of the directory."""
    wrapper = ["python3", "-m", "incluster.attempt", "--framework", spec.framework, "--world-size", str(world_size)]
    if keep is not None:
        wrapper += ["--keep", str(keep)]
    return shlex.join([*wrapper, "--", "sh", "-c", spec.entrypoint])


def submission_of(config: StackConfig, spec: TrainingSpec, attempt: int) -> dict:
    """Keyword arguments of JobSubmissionClient.submit_job for one attempt of `spec` (the attempt wrapper's
    modules are added as `py_modules` by incluster.run_submission at submission time, not here)."""
    first = {
        "entrypoint": attempt_entrypoint(spec, config.total_gpus, config.grpo.keep_checkpoints),
        "runtime_env": {
            "env_vars": dict(
                sorted({**spec.env_vars, **tracking_env(config, spec.run), "GRPO_RUN_DIR": spec.run_dir}.items())
            )
        },
        "metadata": {
            "stack": config.stack,
            "framework": spec.framework,
            "run": spec.run,
            **schedule_of(config),
            **budget_of(config),
        },
    }
    return for_attempt(first, attempt)


def tracking_env(config: StackConfig, run: str) -> dict[str, str]:
    """The W&B environment of every attempt when `grpo-gke:wandbApiKey` is set (the key itself reaches the
    pods from its Secret): the run id as the W&B group (WANDB_RUN_GROUP) of one W&B run per attempt
    (incluster/runs.py for_attempt sets WANDB_RUN_ID to the attempt's submission id; WANDB_RESUME=allow continues it
    if the same attempt ever starts twice), in `tracking.wandbProject` and, when set, `tracking.wandbEntity`.
    Not one W&B run resumed by every attempt: a resumed attempt redoes the steps after its checkpoint, which
    W&B drops below the run's current step, and neither framework passes W&B's rewind (`resume_from`).
    Outside the run's hash: a tracking change is not a new run."""
    if config.wandb_api_key is None:
        return {}
    env = {"WANDB_PROJECT": config.tracking.wandb_project, "WANDB_RESUME": "allow", "WANDB_RUN_GROUP": run}
    if config.tracking.wandb_entity is not None:
        env["WANDB_ENTITY"] = config.tracking.wandb_entity
    return env


def schedule_of(config: StackConfig) -> dict[str, str]:
    """The schedule an attempt asks for, as job metadata (Ray's metadata values are text; "" is no step limit), and
    its last step as the trainer counts it (`lastStep`, scheduled_steps; "" unknown), which the guardian's and
    `status`'s projected end read."""
    max_steps, last = config.grpo.max_steps, scheduled_steps(config)
    return {
        "maxSteps": "" if max_steps is None else str(max_steps),
        "epochs": str(config.grpo.epochs),
        "lastStep": "" if last is None else str(last),
    }


def scheduled_steps(config: StackConfig) -> int | None:
    """The run's last step (incluster/budget.py last_step): grpo.maxSteps, else grpo.epochs x the steps of an epoch of
    workload.dataset's training split (core/facts/job.py TRAIN_ROWS) at grpo.promptsPerStep; None for a data set of
    unknown size."""
    grpo = config.grpo
    rows = TRAIN_ROWS.get(config.workload.dataset)
    return budget.last_step(grpo.max_steps, grpo.epochs, rows, grpo.prompts_per_step)


def budget_of(config: StackConfig) -> dict[str, str]:
    """The run's budget as job metadata (incluster/budget.py limits_of reads it): `maxCost` and `maxGpuHours`, each
    only when set, so that a run without a budget keeps the metadata it had. Outside the run's hash like the
    schedule: a raised budget resumes the run (incluster/run_submission.py `raised`), it is not a new one."""
    limits = {"maxCost": config.job.max_cost, "maxGpuHours": config.job.max_gpu_hours}
    return {key: str(value) for key, value in limits.items() if value is not None}


def submission_for(config: StackConfig) -> dict:
    """Keyword arguments of JobSubmissionClient.submit_job for the first attempt of the stack's run."""
    return submission_of(config, training_spec(config), 1)


_ON_DATA_MOUNT = re.compile(rf"(?<![\w./-]){re.escape(DATA_MOUNT)}(?=[/\s'\",\]}}]|$)")
"""`/data` where it starts a path: not inside another path or word, followed by `/`, the end or a delimiter."""


def under_data_root(text: str, data_root: str) -> str:
    """`text` with every path under the shared storage's mount (`/data/x`) placed under `data_root` (`<data_root>/x`)."""
    root = data_root.rstrip("/")
    return _ON_DATA_MOUNT.sub(lambda _: root, text)


def on_data_root(submission: dict, data_root: str) -> dict:
    """`submission` for a run on this machine: every path under the shared storage's mount
    (`/data/x`, in the entrypoint and the environment) placed under `data_root` (`<data_root>/x`)."""
    env_vars = {key: under_data_root(value, data_root) for key, value in submission["runtime_env"]["env_vars"].items()}
    return {
        **submission,
        "entrypoint": under_data_root(submission["entrypoint"], data_root),
        "runtime_env": {**submission["runtime_env"], "env_vars": env_vars},
    }
