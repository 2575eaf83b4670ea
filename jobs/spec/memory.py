"""Does the run fit in GPU memory, training and rollout both? A pure model of a colocated GRPO step.

Both frameworks put vLLM and the trainer on the same GPUs and take turns: while vLLM generates, the trainer
keeps only what it does not offload; while the actor trains, vLLM sleeps, keeping neither weights nor KV
cache (core/facts/memory.py says where each framework does so). One GPU's peak is therefore the larger of the
two phases, not their sum:

- rollout: vLLM's share (`grpo.gpuMemoryUtilization` x GPU memory) + what the trainer leaves resident +
  the process reserve;
- training: the actor's weights, gradients and optimizer state as the backend splits them (FSDP over every
  GPU; Megatron's TP x PP shard plus the distributed optimizer over data parallel) + the reference model's
  share (none: both frameworks keep it in CPU memory) + an activation allowance + the process reserve.

`grpo.cpuOffload` applies each framework's own offload switches. A refused stack gets the cheapest change that
fits: the offload switch (no more $/h), else the fewest nodes, else the largest model that fits.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.config.model import PROJECT_NAMESPACE, GpuConfig, StackConfig
from core.config.problems import ConfigError, Problem
from core.facts.memory import (
    ACTIVATION_ALLOWANCE_GB,
    PROCESS_RESERVE_GB,
    REFERENCE_MODEL_GPU_BYTES,
    TRAINING_STATES,
    TrainingFamily,
)
from jobs.spec.training import model_size_b, training_family

MAX_NODES = next(rule.le for rule in GpuConfig.model_fields["nodes"].metadata if hasattr(rule, "le"))
"""The most GPU nodes a stack may have (`gpu.nodes`' upper bound): the largest count the advice proposes."""


@dataclass(frozen=True)
class MemoryLayout:
    """What one colocated GRPO run puts on each GPU: the inputs of the memory model."""

    family: TrainingFamily
    """The training backend."""
    model_size_b: float
    """Parameters of the actor in billions."""
    gpus: int
    """GPUs the run trains and generates on."""
    gpu_memory_gb: float
    """Memory of one GPU in GB."""
    gpu_memory_utilization: float
    """vLLM's share of each GPU."""
    offload: bool
    """True with the framework's offload switches on (`grpo.cpuOffload`)."""
    model_parallel_gpus: int = 1
    """GPUs one model replica spans in training (Megatron TP x PP; 1 for FSDP)."""


@dataclass(frozen=True)
class MemoryNeed:
    """GB one GPU needs in each phase of a step."""

    state_gb: float
    """The actor's weights, gradients and optimizer state on the GPU while it trains, and the reference's."""
    training_gb: float
    """The training phase: state, activation allowance and process reserve."""
    resident_gb: float
    """What the trainer leaves on the GPU while vLLM generates."""
    vllm_gb: float
    """vLLM's share of the GPU."""
    rollout_gb: float
    """The rollout phase: vLLM's share, what the trainer leaves and the process reserve."""

    @property
    def peak_gb(self) -> float:
        """The larger phase: the two take turns on the GPU."""
        return max(self.training_gb, self.rollout_gb)


def memory_need(layout: MemoryLayout) -> MemoryNeed:
    """GB one GPU needs while the actor trains and while vLLM generates."""
    state = TRAINING_STATES[layout.family]
    data_parallel = layout.gpus // layout.model_parallel_gpus
    shard_b = layout.model_size_b / layout.model_parallel_gpus
    sharded_gb = shard_b * state.sharded_bytes / data_parallel
    offloaded = layout.offload and state.offload_frees_in_training
    state_gb = (
        shard_b * state.model_parallel_bytes
        + (0 if offloaded else sharded_gb)
        + layout.model_size_b * REFERENCE_MODEL_GPU_BYTES / layout.gpus
    )
    resident_gb = 0 if layout.offload else shard_b * state.resident_in_rollout_bytes / data_parallel
    vllm_gb = layout.gpu_memory_gb * layout.gpu_memory_utilization
    return MemoryNeed(
        state_gb=state_gb,
        training_gb=state_gb + ACTIVATION_ALLOWANCE_GB + PROCESS_RESERVE_GB,
        resident_gb=resident_gb,
        vllm_gb=vllm_gb,
        rollout_gb=vllm_gb + resident_gb + PROCESS_RESERVE_GB,
    )


def fits(layout: MemoryLayout) -> bool:
    """True when both phases of a step fit in one GPU's memory."""
    return memory_need(layout).peak_gb <= layout.gpu_memory_gb


def layout_of(config: StackConfig) -> MemoryLayout | None:
    """The stack's memory layout, or None where another rule refuses it first (unknown size, GPUs that are
    not a whole number of Megatron model replicas)."""
    size_b = model_size_b(config.workload)
    if size_b is None:
        return None
    try:
        family, model_parallel = training_family(config)
    except ConfigError:
        return None
    if config.total_gpus % model_parallel:
        return None
    return MemoryLayout(
        family=family,
        model_size_b=size_b,
        gpus=config.total_gpus,
        gpu_memory_gb=config.gpu_machine.gpu_memory_gb,
        gpu_memory_utilization=config.grpo.gpu_memory_utilization,
        offload=config.grpo.cpu_offload,
        model_parallel_gpus=model_parallel,
    )


def cheapest_fit(layout: MemoryLayout, gpus_per_node: int) -> tuple[str, str]:
    """The cheapest change that makes `layout` fit, as (key, advice): the offload switch (same nodes), else
    the fewest nodes (with the switch where needed), else the largest whole-billion model that fits."""
    if not layout.offload and fits(replace(layout, offload=True)):
        return "grpo.cpuOffload", "set grpo.cpuOffload to true (same nodes, slower steps)"
    for nodes in range(layout.gpus // gpus_per_node + 1, MAX_NODES + 1):
        gpus = nodes * gpus_per_node
        if gpus % layout.model_parallel_gpus:
            continue
        for offload in dict.fromkeys((layout.offload, True)):
            if fits(replace(layout, gpus=gpus, offload=offload)):
                switch = " with grpo.cpuOffload true" if offload and not layout.offload else ""
                return "gpu.nodes", f"use gpu.nodes={nodes}{switch}"
    for size_b in range(int(layout.model_size_b) - 1, 0, -1):
        for offload in dict.fromkeys((layout.offload, True)):
            if fits(replace(layout, model_size_b=size_b, offload=offload)):
                switch = " with grpo.cpuOffload true" if offload and not layout.offload else ""
                return "workload.model", f"use a model of at most {size_b}B parameters{switch}"
    return "workload.model", "no model of 1B parameters or more fits these GPUs"


FAMILY_STATE = {
    "verl-fsdp": "fp32 weights, gradients and Adam state, FSDP over all {gpus} GPUs",
    "nemo-rl-dtensor": "fp32 weights, gradients and Adam state, FSDP over all {gpus} GPUs",
    "nemo-rl-megatron": "bf16 weights and gradients of a TP x PP shard of {model_parallel} GPUs,"
    " Adam state over a data-parallel size of {data_parallel}",
}
"""How each backend's state is split, for the refusal's figures."""


def memory_problems(config: StackConfig) -> list[Problem]:
    """The run must fit in GPU memory in both phases of a step, unless `workload.memoryCheck` is false."""
    if not config.workload.memory_check:
        return []
    layout = layout_of(config)
    if layout is None or fits(layout):
        return []
    need = memory_need(layout)
    key, advice = cheapest_fit(layout, config.gpus_per_node)
    split = FAMILY_STATE[layout.family].format(
        gpus=layout.gpus,
        model_parallel=layout.model_parallel_gpus,
        data_parallel=layout.gpus // layout.model_parallel_gpus,
    )
    gpu = f"{config.gpu.type.upper()} ({layout.gpu_memory_gb:g} GB)"
    offload = "on" if layout.offload else "off"
    message = (
        f"{config.workload.model} ({layout.model_size_b:g}B, {layout.family}, grpo.cpuOffload {offload}) needs"
        f" {need.peak_gb:.0f} GB a GPU, more than one {gpu}: training {need.training_gb:.0f} GB ({split}:"
        f" {need.state_gb:.0f} GB; activations {ACTIVATION_ALLOWANCE_GB} GB; reserve {PROCESS_RESERVE_GB} GB),"
        f" rollout {need.rollout_gb:.0f} GB (vLLM {layout.gpu_memory_utilization:g} x {layout.gpu_memory_gb:g} ="
        f" {need.vllm_gb:.0f} GB; trainer left resident {need.resident_gb:.0f} GB; reserve {PROCESS_RESERVE_GB} GB);"
        f" {advice}, or set workload.memoryCheck to false to plan it anyway"
    )
    return [Problem(f"{PROJECT_NAMESPACE}:{key}", message)]
