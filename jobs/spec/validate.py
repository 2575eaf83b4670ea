"""Check a job's overrides before it is submitted.

verl overrides are composed against the pinned verl release's own Hydra config in struct mode
(verl is installed `--no-deps`; only its config files are read). NeMo-RL overrides are checked
against a typed model of the keys of each supported release, per training backend.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
from pathlib import Path
from typing import Any

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.config.problems import ConfigError, Problem
from core.config.rules import CrossRule
from core.facts.job import NEMO_RL_RELEASE_FACTS, VERL_CONFIG_NAME
from core.facts.platform import BF16_BYTES_PER_PARAMETER, VERL_VERSION
from jobs.spec.memory import memory_problems
from jobs.spec.training import model_size_b, nemo_rl_recipe, training_spec

_NUMBER = (int, float)
_OPTIONAL_TEXT = (str, type(None))

NEMO_RL_COMMON_KEYS: dict[str, tuple[type, ...]] = {
    "policy.model_name": (str,),
    "grpo.num_prompts_per_step": (int,),
    "grpo.num_generations_per_prompt": (int,),
    "grpo.max_num_epochs": (int,),
    "grpo.max_num_steps": (int,),
    "grpo.val_period": (int,),
    "loss_fn.reference_policy_kl_penalty": _NUMBER,
    "policy.train_global_batch_size": (int,),
    "policy.train_micro_batch_size": (int,),
    "policy.max_total_sequence_length": (int,),
    "policy.generation.vllm_cfg.tensor_parallel_size": (int,),
    "policy.generation.vllm_cfg.gpu_memory_utilization": _NUMBER,
    "data.max_input_seq_length": (int,),
    "cluster.num_nodes": (int,),
    "cluster.gpus_per_node": (int,),
    "checkpointing.enabled": (bool,),
    "checkpointing.checkpoint_dir": (str,),
    "checkpointing.save_period": (int,),
    "checkpointing.keep_top_k": (int,),
    "checkpointing.metric_name": _OPTIONAL_TEXT,
    "logger.log_dir": (str,),
    "logger.tensorboard_enabled": (bool,),
    "logger.wandb_enabled": (bool,),
    "logger.wandb.project": (str,),
    "logger.wandb.name": (str,),
}
"""Keys every supported release's GRPO recipes have (grpo_math_1B.yaml and its children, v0.4.0 to v0.7.0)."""

NEMO_RL_BACKEND_KEYS: dict[str, dict[str, tuple[type, ...]]] = {
    "dtensor": {
        "policy.optimizer.kwargs.lr": _NUMBER,
        "checkpointing.model_save_format": _OPTIONAL_TEXT,
        "policy.dtensor_cfg.cpu_offload": (bool,),
    },
    "megatron": {
        "policy.megatron_cfg.optimizer.lr": _NUMBER,
        "policy.megatron_cfg.optimizer.optimizer_cpu_offload": (bool,),
        "policy.megatron_cfg.optimizer.optimizer_offload_fraction": _NUMBER,
    },
}
"""Where the learning rate and the offload switches live: DTensor recipes keep the torch optimizer, Megatron ones
null it; the offload keys are in grpo_math_1B.yaml, which every recipe inherits, v0.4.0 to v0.7.0. And the DTensor
recipes' checkpoint format, which the export sets (examples/configs/grpo_math_1B.yaml `model_save_format`: L60 at
v0.4.0, L66 v0.5.0, L80 v0.6.0, L97 v0.7.0)."""

NEMO_RL_LAYOUT_KEYS: dict[str, dict[str, tuple[type, ...]]] = {
    "flat": {"data.dataset_name": (str,)},
    "split": {"data.train.dataset_name": (str,), "data.validation": (dict, type(None))},
}
"""Data set keys: flat up to v0.5.0, train/validation from v0.6.0."""

NEMO_RL_CONVERTER_KEYS: dict[str, tuple[type, ...]] = {"policy.megatron_cfg.converter_type": (str,)}
"""Present in the Megatron recipes of releases whose recipes carry converter_type."""


def nemo_rl_keys(release: str, backend: str) -> dict[str, tuple[type, ...]]:
    """The typed model of the override keys of `release`'s recipes for `backend`: key -> accepted types."""
    facts_of = NEMO_RL_RELEASE_FACTS[release]
    keys = {**NEMO_RL_COMMON_KEYS, **NEMO_RL_BACKEND_KEYS[backend], **NEMO_RL_LAYOUT_KEYS[facts_of.dataset_layout]}
    if backend == "megatron" and facts_of.recipes_carry_converter_type:
        keys.update(NEMO_RL_CONVERTER_KEYS)
    return keys


def parse_override(text: str) -> tuple[str, Any]:
    """Split a Hydra override `key=value` into its key and the value Hydra's grammar gives it."""
    # hydra: +0.4 s (python -X importtime) that only the job checks need, not `status`, `logs` or `list`
    from hydra.core.override_parser.overrides_parser import OverridesParser

    override = OverridesParser.create().parse_override(text)
    return override.key_or_group, override.value()


def nemo_rl_problems(overrides: list[str] | tuple[str, ...], release: str, backend: str) -> list[str]:
    """What is wrong with NeMo-RL `overrides` for `release` and `backend`; empty when they fit."""
    keys = nemo_rl_keys(release, backend)
    problems = []
    for text in overrides:
        try:
            key, value = parse_override(text)
        except Exception as error:  # noqa: BLE001 - Hydra raises several parse error types
            problems.append(f"{text!r} is not a valid override: {error}")
            continue
        if key not in keys:
            problems.append(f"NeMo-RL {release} ({backend} recipes) has no key {key!r}")
        elif isinstance(value, bool) and bool not in keys[key]:
            problems.append(f"{key} must be {_type_names(keys[key])}, got {value!r}")
        elif not isinstance(value, keys[key]):
            problems.append(f"{key} must be {_type_names(keys[key])}, got {value!r}")
    return problems


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join("null" if kind is type(None) else kind.__name__ for kind in types)


def verl_config_dir() -> Path:
    """verl's Hydra config directory in the installed (pinned, `--no-deps`) verl, without importing verl."""
    spec = importlib.util.find_spec("verl")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"verl is not installed: pip install --no-deps verl=={VERL_VERSION}")
    installed = importlib.metadata.version("verl")
    if installed != VERL_VERSION:
        raise FileNotFoundError(
            f"verl {installed} is installed, the job runs {VERL_VERSION}: pip install --no-deps verl=={VERL_VERSION}"
        )
    return Path(spec.submodule_search_locations[0]) / "trainer" / "config"


VERL_CHECK_CACHE = Path(__file__).resolve().parents[2] / "build" / ".cache" / "verl-overrides"
"""Results of composing verl overrides, keyed by the overrides and the content of verl's config files."""


def verl_config_fingerprint(config_dir: Path) -> str:
    """A digest of every file of verl's Hydra config: a cached result is reused only for the same files."""
    digest = hashlib.sha256()
    for path in sorted(config_dir.rglob("*.yaml")):
        digest.update(str(path.relative_to(config_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=32)
def verl_problems(overrides: tuple[str, ...]) -> tuple[str, ...]:
    """What is wrong with verl `overrides` when composed in struct mode; empty when they compose.

    Hydra's composition costs about half a second, so its result is kept in VERL_CHECK_CACHE
    under a key made of the overrides and verl's config files (a read-only checkout just skips it).
    """
    try:
        config_dir = verl_config_dir()
    except FileNotFoundError as error:
        return (str(error),)
    key = hashlib.sha256(json.dumps([verl_config_fingerprint(config_dir), list(overrides)]).encode()).hexdigest()
    cached = VERL_CHECK_CACHE / f"{key}.json"
    try:
        return tuple(json.loads(cached.read_text()))
    except (OSError, ValueError):
        pass
    problems = _composition_problems(config_dir, overrides)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_suffix(f".{os.getpid()}.tmp")
        partial.write_text(json.dumps(list(problems)))
        partial.replace(cached)
    except OSError:
        pass
    return problems


def _composition_problems(config_dir: Path, overrides: tuple[str, ...]) -> tuple[str, ...]:
    """Compose `overrides` against verl's config in struct mode; name every override that fails."""
    # hydra and omegaconf: +0.4 s that only a composition needs (a cached verdict skips it; see parse_override)
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    problems = []
    remaining = list(overrides)
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        while True:
            try:
                compose(VERL_CONFIG_NAME, overrides=remaining)
                break
            except (HydraException, OmegaConfBaseException) as error:
                # Name the offender, drop it and compose again, so every bad override is reported.
                message = _first_line(error)
                quoted = set(re.findall(r"'([^']+)'", message))
                offender = next((item for item in remaining if item.split("=", 1)[0].lstrip("+~") in quoted), None)
                if offender is None:
                    problems.append(message)
                    break
                problems.append(f"{offender!r}: {message}")
                remaining.remove(offender)
    return tuple(problems)


def _first_line(error: Exception) -> str:
    return str(error).strip().splitlines()[0]


def grpo_problems(cfg: StackConfig) -> list[Problem]:
    """The batch-divisibility rules of `grpo-gke:grpo` (derived defaults are chosen to keep them)."""
    ns = PROJECT_NAMESPACE
    problems = []
    grpo = cfg.grpo
    gpus = cfg.total_gpus
    samples = grpo.prompts_per_step * grpo.generations_per_prompt
    mini = grpo.effective_mini_batch()

    def add(key: str, message: str) -> None:
        problems.append(Problem(f"{ns}:grpo.{key}", message))

    if mini > grpo.prompts_per_step:
        add("miniBatchSize", f"must be at most grpo.promptsPerStep ({grpo.prompts_per_step}), got {mini}")
    elif grpo.prompts_per_step % mini:
        add("miniBatchSize", f"must divide grpo.promptsPerStep ({grpo.prompts_per_step}), got {mini}")

    if cfg.workload.framework == "verl":
        # verl validate_config: the real batch (prompts x n) divides across all GPUs, and each
        # GPU's share of a mini-batch is a whole number of micro-batches (jobs-and-frameworks.md §1).
        if samples % gpus:
            add(
                "promptsPerStep",
                f"promptsPerStep x generationsPerPrompt ({grpo.prompts_per_step} x {grpo.generations_per_prompt}"
                f" = {samples}) must be divisible by the {gpus} GPUs of gpu.nodes={cfg.gpu.nodes}",
            )
        elif (mini * grpo.generations_per_prompt) % gpus:
            add(
                "miniBatchSize",
                f"miniBatchSize x generationsPerPrompt ({mini * grpo.generations_per_prompt}) must be divisible"
                f" by the {gpus} GPUs",
            )
        elif (mini * grpo.generations_per_prompt // gpus) % grpo.micro_batch_size_per_gpu:
            add(
                "microBatchSizePerGpu",
                f"must divide each GPU's share of a mini-batch ({mini * grpo.generations_per_prompt // gpus}),"
                f" got {grpo.micro_batch_size_per_gpu}",
            )
    else:
        # NeMo-RL: train_global_batch_size = prompts x generations must split into whole
        # micro-batches on every data-parallel rank (nemo_rl/algorithms/grpo.py setup checks).
        if samples % (gpus * grpo.micro_batch_size_per_gpu):
            add(
                "promptsPerStep",
                f"promptsPerStep x generationsPerPrompt ({samples}) must be divisible by the {gpus} GPUs"
                f" x microBatchSizePerGpu ({grpo.micro_batch_size_per_gpu})",
            )
    return problems


def model_size_problems(cfg: StackConfig) -> list[Problem]:
    """The model's size must be known (named in its id, such as `-7B-`, or `workload.modelSizeB`): the rollout's
    tensor parallel size, the memory checks, NeMo-RL's recipe and the storage estimate all start from it."""
    if model_size_b(cfg.workload) is not None:
        return []
    return [
        Problem(
            f"{PROJECT_NAMESPACE}:workload.modelSizeB",
            f"is required: the model id {cfg.workload.model!r} names no size such as 7B; set the parameters in"
            " billions (pulumi config set --path grpo-gke:workload.modelSizeB <N>)",
        )
    ]


JOB_RULES = (
    CrossRule(grpo_problems, reads_derived=True),
    CrossRule(model_size_problems),
    CrossRule(memory_problems),
)
"""The job layer's cross-rules, run with the config's (core.config.rules.CONFIG_RULES) by jobs/spec/load.py."""


def rollout_capacity_gb(config: StackConfig, tensor_parallel: int) -> float:
    """GB of GPU memory vLLM may use in a rollout group of `tensor_parallel` GPUs (gpuMemoryUtilization of each)."""
    return tensor_parallel * config.gpu_machine.gpu_memory_gb * config.grpo.gpu_memory_utilization


def rollout_memory_problems(config: StackConfig) -> list[Problem]:
    """vLLM must at least hold the model's bf16 weights in its share of the rollout group's GPU memory."""
    size_b = model_size_b(config.workload)
    if size_b is None:
        return []
    machine, grpo = config.gpu_machine, config.grpo
    weights_gb = size_b * BF16_BYTES_PER_PARAMETER

    def capacity(tensor_parallel: int) -> float:
        return rollout_capacity_gb(config, tensor_parallel)

    if weights_gb <= capacity(grpo.rollout_tensor_parallel):
        return []
    enough = [tp for tp in machine.tensor_parallel_sizes if capacity(tp) >= weights_gb]
    advice = (
        f"use at least {enough[0]}"
        if enough
        else f"even {machine.gpus} GPUs are too few: raise grpo.gpuMemoryUtilization or use a smaller model"
    )
    return [
        Problem(
            f"{PROJECT_NAMESPACE}:grpo.rolloutTensorParallel",
            f"{config.workload.model} has about {size_b:g}B parameters ({weights_gb:.0f} GB in bf16), more than vLLM's"
            f" {grpo.rollout_tensor_parallel} x {machine.gpu_memory_gb} GB x gpuMemoryUtilization"
            f" {grpo.gpu_memory_utilization:g} = {capacity(grpo.rollout_tensor_parallel):.0f} GB; {advice},"
            f" got {grpo.rollout_tensor_parallel}",
        )
    ]


def job_problems(config: StackConfig) -> list[Problem]:
    """Every reason the stack's job would be refused, each naming the key to change."""
    ns = PROJECT_NAMESPACE
    try:
        spec = training_spec(config)
    except ConfigError as error:
        return list(error.problems)
    problems = rollout_memory_problems(config)
    if spec.framework == "verl":
        found = verl_problems(spec.overrides)
        label = f"verl {spec.release} override"
        return problems + [Problem(f"{ns}:grpo", f"{label} {problem}") for problem in found]
    recipe = nemo_rl_recipe(config)
    problems += [
        Problem(f"{ns}:workload.nemoRlRelease", f"NeMo-RL override: {problem}")
        for problem in nemo_rl_problems(spec.overrides, spec.release, recipe.backend)
    ]
    if config.total_gpus % recipe.model_parallel_gpus:
        problems.append(
            Problem(
                f"{ns}:gpu.nodes",
                f"NeMo-RL's recipe {recipe.config} splits one model over {recipe.model_parallel_gpus} GPUs;"
                f" the {config.total_gpus} GPUs of gpu.nodes={config.gpu.nodes} are not a multiple of that",
            )
        )
    return problems


def check(config: StackConfig) -> None:
    """Raise ConfigError when the stack's job would be refused."""
    problems = job_problems(config)
    if problems:
        raise ConfigError(problems)
