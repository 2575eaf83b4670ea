"""Defaults derived from the model, the GPU and the node count: one pure function, run once at load.

`derive_defaults` fills each `grpo-gke:grpo` key the user left unset and says why; a key the user
set is never changed (the checks refuse it instead). The derived config is what every reader sees,
so a derived value and the same value set explicitly give the same job and the same run hash.
"""

from __future__ import annotations

from pathlib import PurePosixPath

from core.config.load import DerivedValue
from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.config.problems import ConfigError, Problem
from core.facts.job import NemoRlRecipe
from core.facts.platform import (
    BF16_BYTES_PER_PARAMETER,
    MICRO_BATCH_TOKENS_PER_GPU,
    VLLM_HEADROOM_PER_GPU_GB,
)
from jobs.spec.training import model_size_b, recipe_for_size
from jobs.spec.validate import grpo_problems, rollout_capacity_gb


def _recipe(config: StackConfig) -> NemoRlRecipe | None:
    """The NeMo-RL recipe of the stack, or None for verl or a model of unknown size."""
    size_b = model_size_b(config.workload)
    if config.workload.framework != "nemo-rl" or size_b is None:
        return None
    return recipe_for_size(size_b)


def _recipe_name(recipe: NemoRlRecipe) -> str:
    return PurePosixPath(recipe.config).stem


def derived_rollout_tensor_parallel(config: StackConfig) -> tuple[int, str]:
    """The smallest tensor parallel size whose GPUs hold the bf16 weights with VLLM_HEADROOM_PER_GPU_GB
    each to spare, or the NeMo-RL recipe's own size when that is larger; and why."""
    size_b = model_size_b(config.workload)
    if size_b is None:
        return 1, f"the size of {config.workload.model} is unknown; set workload.modelSizeB to derive it"
    weights_gb = size_b * BF16_BYTES_PER_PARAMETER
    headroom = VLLM_HEADROOM_PER_GPU_GB
    holding = [
        size
        for size in config.gpu_machine.tensor_parallel_sizes
        if weights_gb + size * headroom <= rollout_capacity_gb(config, size)
    ]
    smallest = holding[0] if holding else config.gpus_per_node
    group = f"{smallest} x {config.gpu.type.upper()}"
    fit = f"{group} hold it" if holding else f"more than {group} hold"
    reason = f"{config.workload.model} needs {weights_gb:.0f} GB in bf16, {fit} with {headroom} GB a GPU to spare"
    recipe = _recipe(config)
    if recipe is not None and recipe.rollout_tensor_parallel > smallest:
        recipe_size = recipe.rollout_tensor_parallel
        return recipe_size, f"{reason}; recipe {_recipe_name(recipe)} uses {recipe_size}"
    return smallest, reason


def derived_micro_batch_size(config: StackConfig) -> tuple[int, str]:
    """The largest samples per GPU per pass within MICRO_BATCH_TOKENS_PER_GPU of full-length samples
    (and the NeMo-RL recipe's own micro-batch) that keeps the batch-divisibility rules; and why."""
    grpo = config.grpo
    sample_tokens = grpo.max_prompt_length + grpo.max_response_length
    budget = MICRO_BATCH_TOKENS_PER_GPU
    limit = budget // sample_tokens
    if limit == 0:
        raise ConfigError(
            [
                Problem(
                    f"{PROJECT_NAMESPACE}:grpo.maxResponseLength",
                    f"maxPromptLength + maxResponseLength ({grpo.max_prompt_length} + {grpo.max_response_length} ="
                    f" {sample_tokens} tokens) is more than the {budget} tokens a GPU takes per pass, so no"
                    " microBatchSizePerGpu can be derived; shorten them, or set grpo.microBatchSizePerGpu: 1 to run one"
                    " such sample per pass (the memory check then judges it)",
                )
            ]
        )
    reason = f"{budget} tokens a GPU hold {limit} samples of {sample_tokens} tokens"
    recipe = _recipe(config)
    if recipe is not None and recipe.train_micro_batch_size < limit:
        limit = recipe.train_micro_batch_size
        reason += f"; recipe {_recipe_name(recipe)} uses {limit}"

    def problems_with(micro: int) -> int:
        return len(grpo_problems(_with_grpo(config, micro_batch_size_per_gpu=micro)))

    # The largest size with the fewest batch problems: none, unless a rule fails whatever the micro-batch.
    chosen = min(range(limit, 0, -1), key=problems_with)
    if chosen < limit:
        reason += f"; {chosen} is the largest that divides the batch"
    return chosen, reason


def derive_defaults(config: StackConfig) -> tuple[StackConfig, tuple[DerivedValue, ...]]:
    """`config` with every derivable `grpo-gke:grpo` key it leaves unset filled in, and what was derived."""
    derived: list[DerivedValue] = []
    if config.grpo.rollout_tensor_parallel is None:
        value, reason = derived_rollout_tensor_parallel(config)
        config = _with_grpo(config, rollout_tensor_parallel=value)
        derived.append(DerivedValue("grpo.rolloutTensorParallel", value, reason))
    if config.grpo.micro_batch_size_per_gpu is None:
        value, reason = derived_micro_batch_size(config)
        config = _with_grpo(config, micro_batch_size_per_gpu=value)
        derived.append(DerivedValue("grpo.microBatchSizePerGpu", value, reason))
    return config, tuple(sorted(derived, key=lambda item: item.key))


def _with_grpo(config: StackConfig, **values: int) -> StackConfig:
    return config.model_copy(update={"grpo": config.grpo.model_copy(update=values)})


def preflight_mode(config: StackConfig) -> tuple[str, str]:
    """`job.preflight` as set, else `full` on 2 or more GPU nodes of a machine with RDMA NICs and `gpu` otherwise (no
    fabric between nodes to test); and why. Kept out of the derived config, so it never touches the run's hash or the plan's summary."""
    if config.job.preflight is not None:
        return config.job.preflight, "job.preflight is set"
    if not config.gpu_machine.rdma:
        return "gpu", f"{config.gpu_machine.machine_type} has no RDMA NICs: no gIB fabric between nodes to test"
    if config.gpu.nodes >= 2:
        return "full", f"{config.gpu.nodes} GPU nodes: their GPUs and the fabric between them"
    return "gpu", "one GPU node: no fabric between nodes to test"
