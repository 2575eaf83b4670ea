"""GPU memory of a colocated GRPO run: the bytes per parameter each training backend keeps on a GPU, what the
rollout and the training phase leave resident for each other, the allowances a step needs beyond the model
state, and the published runs the memory model (jobs/spec/memory.py) is checked against.

Read on 2026-12-01 from the pinned sources: verl 0.9.1 as installed (`pip install --no-deps verl==0.9.1`),
NVIDIA-NeMo/RL tag v0.7.0 (81aa43d), Megatron-LM's distributed-optimizer guide (@50b073c), and
verl-project/verl's docs/perf/device_tuning.rst at tag v0.9.0 (483b8a0; the stored copy has no v0.9.1 tag,
and the file is unchanged from v0.9.0 to the newest stored commit 1dda039 of 2026-08-22)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TrainingFamily = Literal["verl-fsdp", "nemo-rl-dtensor", "nemo-rl-megatron"]
"""The training backends a stack can run: verl's FSDP2 actor, NeMo-RL's DTensor (FSDP2) and Megatron policies."""


@dataclass(frozen=True)
class TrainingState:
    """Bytes per parameter one training backend keeps on the GPUs, split as the backend splits them."""

    model_parallel_bytes: float
    """Bytes per parameter of each model-parallel shard on every data-parallel rank (Megatron's bf16 weights and
    gradient buffer); 0 where everything is sharded over all GPUs (FSDP)."""
    sharded_bytes: float
    """Bytes per parameter split over every data-parallel rank (FSDP's whole state; Megatron's distributed
    optimizer: fp32 main weights, main gradients and Adam's two moments)."""
    resident_in_rollout_bytes: float
    """Of the sharded bytes, what stays on the GPU while vLLM generates, offload off."""
    offload_frees_in_training: bool
    """True when `grpo.cpuOffload` keeps the sharded bytes in CPU memory through the training step too; False
    when the framework moves them back to the GPU to train (offload then frees the rollout phase only)."""
    offload_overrides: tuple[tuple[str, bool | float], ...]
    """The framework's own keys and values `grpo.cpuOffload: true` sets, in order."""


TRAINING_STATES: dict[TrainingFamily, TrainingState] = {
    # verl 0.9.1: the actor is loaded in fp32 (trainer/config/engine/fsdp.yaml L33 `model_dtype: fp32`;
    # workers/engine/fsdp/transformer_impl.py L258-264), gradients reduce in fp32 (transformer_impl.py L391-398,
    # reduce_dtype fp32 by default), AdamW keeps two fp32 moments: 4 + 4 + 8 bytes, sharded by FSDP2 over every
    # GPU (fsdp.yaml L26 `fsdp_size: -1`). Between phases the gradients are freed (transformer_impl.py
    # L1135-1139 zero_grad on leaving train mode; workers/engine/base.py L312) and weights + Adam stay unless
    # offloaded (12 bytes). param_offload and
    # optimizer_offload move them to the CPU between phases only: train mode brings model, gradients and
    # optimizer back to the GPU (workers/engine/base.py L314-335).
    "verl-fsdp": TrainingState(
        model_parallel_bytes=0,
        sharded_bytes=16,
        resident_in_rollout_bytes=12,
        offload_frees_in_training=False,
        offload_overrides=(
            ("actor_rollout_ref.actor.fsdp_config.param_offload", True),
            ("actor_rollout_ref.actor.fsdp_config.optimizer_offload", True),
        ),
    ),
    # NeMo-RL v0.7.0 DTensor (FSDP2): fp32 master weights (nemo_rl/models/automodel/setup.py L330), fp32
    # gradient reduction (L486), torch AdamW: 16 bytes sharded over the data-parallel mesh. Colocated, the
    # policy moves weights and optimizer to the CPU after each refit (nemo_rl/models/policy/workers/
    # dtensor_policy_worker_v2.py L1250-1260), so nothing of it stays through generation.
    # `policy.dtensor_cfg.cpu_offload` (examples/configs/grpo_math_1B.yaml L119) trains with FSDP2's
    # CPUOffloadPolicy (setup.py L489): weights, gradients and optimizer in CPU memory through the step.
    "nemo-rl-dtensor": TrainingState(
        model_parallel_bytes=0,
        sharded_bytes=16,
        resident_in_rollout_bytes=0,
        offload_frees_in_training=True,
        offload_overrides=(("policy.dtensor_cfg.cpu_offload", True),),
    ),
    # NeMo-RL v0.7.0 Megatron: bf16 weights and, with `grad_reduce_in_fp32: false` (examples/configs/
    # grpo_math_1B_megatron.yaml L166), bf16 gradient buffers: 2 + 2 bytes per parameter of each TP x PP
    # shard; `use_distributed_optimizer: true` (L151) shards the fp32 main weights, main gradients and Adam
    # moments over data parallel: Megatron-LM docs/source/api-guide/dist_optimizer.md (@50b073c), "float16
    # param, float16 grads: 4 + 16/d". offload_after_refit moves the model and its buffers to the CPU before
    # generation (nemo_rl/models/policy/workers/megatron_policy_worker.py L1578-1586).
    # `optimizer_cpu_offload` needs `optimizer_offload_fraction: 1.0` (nemo_rl/models/megatron/setup.py
    # L882-891); both keys are in grpo_math_1B.yaml L233-234, which the Megatron recipes inherit.
    "nemo-rl-megatron": TrainingState(
        model_parallel_bytes=4,
        sharded_bytes=16,
        resident_in_rollout_bytes=0,
        offload_frees_in_training=True,
        offload_overrides=(
            ("policy.megatron_cfg.optimizer.optimizer_cpu_offload", True),
            ("policy.megatron_cfg.optimizer.optimizer_offload_fraction", 1.0),
        ),
    ),
}
"""What each training backend keeps on the GPUs, per parameter of the actor (policy)."""

REFERENCE_MODEL_GPU_BYTES = 0
"""Bytes per parameter the reference model holds on the GPUs between its forward passes: none in either
framework. verl 0.9.1 wraps the reference (a forward-only engine) in FSDP2's CPUOffloadPolicy whatever its
param_offload says (workers/engine/fsdp/transformer_impl.py L453-463: `forward_only` sets _is_offload_param
False and offloads by policy; FSDP1 likewise, L429-436), so `actor_rollout_ref.ref.fsdp_config.param_offload` changes nothing there.
NeMo-RL v0.7.0 keeps the reference weights as a pinned CPU state dict (nemo_rl/models/automodel/setup.py
L413-432, nemo_rl/models/policy/workers/megatron_policy_worker.py L393-396) and swaps them into the policy's own tensors for the reference pass
(megatron_policy_worker.py L1027-1045)."""

ACTIVATION_ALLOWANCE_GB = 8
"""GB a GPU needs in the training step beyond the model state: checkpointed activations, the logits of a
micro-batch and the all-gathered layer. A floor, not a measurement: the check refuses what cannot fit even
with this little, and a stack it accepts may still run out of memory with long samples or without
activation checkpointing (NeMo-RL's Megatron recipes leave it off, grpo_math_1B_megatron.yaml L88). Bounded
by the published runs (PUBLISHED_RUNS): verl's Qwen2-7B on 2 x 80 GB and Qwen2-14B on 4 x 80 GB hold 56 GB
of state a GPU, so the allowance plus PROCESS_RESERVE_GB is at most 24 GB; the 72B run on half its 32 x 80 GB
would hold 72 GB, which is refused only when allowance and reserve pass 8 GB. 8 GB (11 with the reserve)
lies inside both bounds."""

PROCESS_RESERVE_GB = 3
"""GB a GPU keeps for the process that is not in its phase: CUDA contexts, NCCL buffers, and vLLM's CUDA
graphs, which sleep does not free (verl 0.9.1 trainer/config/rollout/rollout.yaml L54-56: "cudagraph in
inference engine can not be offloaded during update policy"). vLLM asleep keeps no weights and no KV cache:
verl's hybrid engine sleeps at level 2 when not LoRA or MTP (workers/rollout/vllm_rollout/
vllm_async_server.py L1289-1305, L1307-1317; with `free_cache_engine: True`, rollout.yaml L61), NeMo-RL at
level 1, which moves the weights to CPU memory (nemo_rl/models/generation/vllm/vllm_worker.py L1009). A
project allowance."""

PUBLISHED_GPU_MEMORY_GB: dict[str, int] = {
    # NVIDIA's data sheets: H100 SXM 80 GB, H800 SXM 80 GB, H20 96 GB HBM3.
    "H100": 80,
    "H800": 80,
    "H20": 96,
}
"""GPU memory of the GPUs the published runs used, in GB, so that their rows scale to B200 and H200."""


@dataclass(frozen=True)
class PublishedRun:
    """A published GRPO run that fits, with what it ran on."""

    family: TrainingFamily
    """The training backend it ran."""
    model_size_b: float
    """Parameters of its model in billions, as its model id names them."""
    gpus: int
    """GPUs it ran on."""
    gpu: str
    """The GPU, a key of PUBLISHED_GPU_MEMORY_GB."""
    offload: bool
    """True when it ran with the framework's offload switches on."""
    gpu_memory_utilization: float
    """vLLM's share of each GPU."""
    model_parallel_gpus: int
    """GPUs one model replica spans in training (Megatron TP x PP; 1 for FSDP)."""
    source: str
    """Where it is published: repository, commit, file and row."""


PUBLISHED_RUNS: tuple[PublishedRun, ...] = (
    # verl docs/perf/device_tuning.rst (v0.9.0 483b8a0), the MIN rows of full GRPO (not GRPO-LoRA) with the
    # fsdp backend: "a script that can run after applying all memory optimization techniques (e.g., offload,
    # gradient checkpointing)" (L17-21). Their scripts (examples/tuning at 2239fd0) set param_offload and
    # optimizer_offload true and gpu_memory_utilization 0.6. The "Qwen2-70B" rows run Qwen/Qwen2-72B-Instruct
    # (their model_path).
    PublishedRun(
        "verl-fsdp",
        7,
        2,
        "H800",
        True,
        0.6,
        1,
        "verl v0.9.0 docs/perf/device_tuning.rst L126-134, MIN Qwen2-7B GRPO 2*H800 fsdp",
    ),
    PublishedRun(
        "verl-fsdp",
        14,
        4,
        "H800",
        True,
        0.6,
        1,
        "verl v0.9.0 docs/perf/device_tuning.rst L161-169, MIN Qwen2-14B GRPO 4*H800 fsdp",
    ),
    PublishedRun(
        "verl-fsdp",
        72,
        32,
        "H20",
        True,
        0.6,
        1,
        "verl v0.9.0 docs/perf/device_tuning.rst L231-239, MIN Qwen2-70B GRPO 32*H20 fsdp",
    ),
    PublishedRun(
        "verl-fsdp",
        72,
        32,
        "H800",
        True,
        0.6,
        1,
        "verl v0.9.0 docs/perf/device_tuning.rst L240-248, MIN Qwen2-70B GRPO 32*H800 fsdp",
    ),
    # NeMo-RL v0.7.0 recipes, run as written (offload off, gpu_memory_utilization 0.6), on the 80 GB H100 nodes
    # NeMo-RL's guides run on (docs/guides/grpo-deepscaler.md L22 "a single 8XH100 80GB node").
    PublishedRun(
        "nemo-rl-dtensor",
        8,
        8,
        "H100",
        False,
        0.6,
        1,
        "NeMo-RL v0.7.0 examples/configs/grpo_math_8B.yaml: Llama-3.1-8B, cluster.num_nodes 1 x gpus_per_node 8",
    ),
    PublishedRun(
        "nemo-rl-megatron",
        70,
        64,
        "H100",
        False,
        0.6,
        16,
        "NeMo-RL v0.7.0 examples/configs/grpo_math_70B_megatron.yaml: Llama-3.3-70B, TP 4 x PP 4, cluster.num_nodes 8 x gpus_per_node 8",
    ),
)
"""Published runs the memory model must accept (tests/jobs/spec/test_memory.py; it also refuses verl's 80 GB MIN rows
on half their GPUs, and NeMo-RL's recipes on one GPU and on one Megatron replica)."""
