"""The memory model: training and rollout both must fit a GPU, per framework and recipe family, checked
against the published runs (core/facts/memory.py PUBLISHED_RUNS), and refused the way the user meets it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from core.config.problems import ConfigError
from core.facts.memory import PUBLISHED_GPU_MEMORY_GB, PUBLISHED_RUNS, PublishedRun
from core.facts.platform import GPU_MACHINES
from jobs.spec.load import load_config
from jobs.spec.memory import MemoryLayout, cheapest_fit, fits, layout_of, memory_need, memory_problems
from jobs.spec.training import training_spec
from jobs.spec.validate import nemo_rl_problems, verl_problems
from plan.cli import EXIT_BAD_INPUT
from tests.conftest import REPO_ROOT, config_of, stack_values, values_of

GPUS_H200 = GPU_MACHINES["h200"].gpus
"""GPUs of one A3 Ultra node, the layouts' machine (141 GB GPUs)."""

LLAMA_405B = "meta-llama/Llama-3.1-405B-Instruct"


def published_layout(run: PublishedRun, gpus: int | None = None) -> MemoryLayout:
    """The layout of a published run, on `gpus` GPUs instead of its own when given."""
    return MemoryLayout(
        family=run.family,
        model_size_b=run.model_size_b,
        gpus=gpus or run.gpus,
        gpu_memory_gb=PUBLISHED_GPU_MEMORY_GB[run.gpu],
        gpu_memory_utilization=run.gpu_memory_utilization,
        offload=run.offload,
        model_parallel_gpus=run.model_parallel_gpus,
    )


@pytest.mark.parametrize("run", PUBLISHED_RUNS, ids=lambda run: run.source.split(": ")[0].split(", ")[-1])
def test_every_published_run_fits(run):
    assert fits(published_layout(run)), memory_need(published_layout(run))


@pytest.mark.parametrize(
    "run", [run for run in PUBLISHED_RUNS if run.gpu == "H800"], ids=lambda run: run.source.split(", ")[-1]
)
def test_verl_minimum_rows_on_80_gb_do_not_fit_on_half_their_gpus(run):
    # device_tuning.rst's MIN rows are the fewest GPUs verl's authors ran the model on with every memory
    # optimisation on; on 80 GB GPUs half of them is refused. (The 32 x H20 row is not: 16 x 96 GB hold the
    # 72 GB of state and the 11 GB allowance. The row shows 32 H20 run, not that 16 fail; it is the same 4
    # nodes as the 80 GB H800 row, and the 7B row bounds the allowance below what refusing 16 x 96 GB needs.)
    assert not fits(published_layout(run, gpus=run.gpus // 2)), memory_need(published_layout(run, run.gpus // 2))


def test_the_h20_row_on_half_its_gpus_is_accepted_by_a_margin_the_7b_row_fixes():
    h20 = next(run for run in PUBLISHED_RUNS if run.gpu == "H20")
    half = memory_need(published_layout(h20, gpus=16))
    seven_b = memory_need(published_layout(PUBLISHED_RUNS[0]))
    assert 96 - half.training_gb == 80 - seven_b.training_gb == 13


def test_the_verl_rows_scale_by_gpu_memory():
    # Qwen2-7B needs 2 x 80 GB with offload on; one 141 GB H200 holds its 112 GB of training state, one 80 GB does not.
    seven_b = replace(published_layout(PUBLISHED_RUNS[0], gpus=1))
    assert not fits(seven_b)
    assert fits(replace(seven_b, gpu_memory_gb=141))
    # Qwen2-72B needs 32 x 80 GB; on H200 two nodes (16 GPUs) hold it, one node does not.
    seventy_two = published_layout(PUBLISHED_RUNS[3])
    assert fits(replace(seventy_two, gpus=16, gpu_memory_gb=141))
    assert not fits(replace(seventy_two, gpus=8, gpu_memory_gb=141))


def test_nemo_rl_dtensor_recipe_fits_its_node_and_not_one_gpu():
    # grpo_math_8B.yaml: Llama-3.1-8B on one node of 8 x 80 GB; on one GPU its 128 GB of fp32 state does not fit.
    recipe = next(run for run in PUBLISHED_RUNS if run.family == "nemo-rl-dtensor")
    assert fits(published_layout(recipe))
    alone = published_layout(recipe, gpus=1)
    assert memory_need(alone).state_gb == 128
    assert not fits(alone)
    assert fits(replace(alone, offload=True))  # policy.dtensor_cfg.cpu_offload keeps the state in CPU memory


def test_nemo_rl_megatron_recipe_fits_its_nodes_and_not_one_replica():
    # grpo_math_70B_megatron.yaml: TP 4 x PP 4 on 8 nodes of 8 x 80 GB (data parallel 4). On one replica of
    # 16 GPUs the distributed optimizer has no data-parallel ranks to share: 70/16 x (4 + 16) = 87.5 GB.
    recipe = next(run for run in PUBLISHED_RUNS if run.family == "nemo-rl-megatron")
    assert memory_need(published_layout(recipe)).state_gb == pytest.approx(70 / 16 * (4 + 16 / 4))
    assert fits(published_layout(recipe))
    one_replica = published_layout(recipe, gpus=16)
    assert memory_need(one_replica).state_gb == pytest.approx(87.5)
    assert not fits(one_replica)
    assert fits(replace(one_replica, offload=True))  # optimizer_cpu_offload leaves the bf16 shard: 17.5 GB


def test_the_peak_is_the_larger_phase_not_the_sum():
    # verl keeps the actor's fp32 weights and Adam state (12 B a parameter) through rollout unless offloaded.
    layout = MemoryLayout("verl-fsdp", 32, 16, 141, 0.6, offload=False)
    need = memory_need(layout)
    assert need.resident_gb == 32 * 12 / 16
    assert need.rollout_gb == pytest.approx(141 * 0.6 + 24 + 3)
    assert need.training_gb == 32 * 16 / 16 + 8 + 3
    assert need.peak_gb == need.rollout_gb < need.rollout_gb + need.training_gb - 3
    # verl's offload empties the rollout phase only: train mode loads everything back (base.py L314-335).
    offloaded = memory_need(replace(layout, offload=True))
    assert offloaded.resident_gb == 0 and offloaded.training_gb == need.training_gb


def test_the_cheapest_change_is_offload_then_nodes_then_a_smaller_model():
    rollout_bound = MemoryLayout("verl-fsdp", 72, 16, 141, 0.6, offload=False)
    assert cheapest_fit(rollout_bound, GPUS_H200) == (
        "grpo.cpuOffload",
        "set grpo.cpuOffload to true (same nodes, slower steps)",
    )
    training_bound = MemoryLayout("verl-fsdp", 72, 8, 141, 0.6, offload=False)
    assert cheapest_fit(training_bound, GPUS_H200) == ("gpu.nodes", "use gpu.nodes=2 with grpo.cpuOffload true")
    megatron = MemoryLayout("nemo-rl-megatron", 405, 16, 141, 0.6, offload=False, model_parallel_gpus=16)
    assert cheapest_fit(megatron, GPUS_H200)[0] == "grpo.cpuOffload"
    # Megatron's bf16 weights and gradients of a 405B TP 4 x PP 4 shard are 405/16 x 4 = 101 GB on each GPU
    # however many nodes and wherever the optimizer goes: on 80 GB GPUs only a smaller model fits.
    assert cheapest_fit(replace(megatron, gpu_memory_gb=80), GPUS_H200) == (
        "workload.model",
        "use a model of at most 276B parameters with grpo.cpuOffload true",
    )
    # 9000B would need 138 H200 nodes; on one node 65B trains in 65 x 16 / 8 + 11 = 141 GB with offload.
    too_big = MemoryLayout("verl-fsdp", 9000, 8, 141, 0.6, offload=False)
    assert cheapest_fit(too_big, GPUS_H200) == (
        "workload.model",
        "use a model of at most 65B parameters with grpo.cpuOffload true",
    )


@pytest.mark.parametrize("stack", ["dev", "verl-standard-h200", "verl-autopilot-b200", "nemo-rl-standard-b200"])
def test_the_seed_runs_are_accepted(stack):
    # verl-on-GKE's Qwen2.5-32B on 2 x 8 GPUs with verl's default offload (off), and NeMo-RL's 70B Megatron
    # recipe (TP 4 x PP 4, 8 nodes) with Qwen2.5-72B on 8 B200 nodes.
    assert memory_problems(config_of(stack)) == []


def refusal(base: str, **sections: dict) -> list[str]:
    """The problems load_config (the config's and the job's rules) finds in `base` with `sections` merged."""
    with pytest.raises(ConfigError) as error:
        load_config(values_of(base, **sections), stack_values(base).secret_keys, base)
    return [str(problem) for problem in error.value.problems]


def test_verl_405b_on_two_h200_nodes_is_refused_with_the_figures_and_the_change():
    assert refusal("verl-standard-h200", workload={"model": LLAMA_405B}, grpo={"gpuMemoryUtilization": 0.95}) == [
        "grpo-gke:gpu.nodes: meta-llama/Llama-3.1-405B-Instruct (405B, verl-fsdp, grpo.cpuOffload off) needs 441 GB"
        " a GPU, more than one H200 (141 GB): training 416 GB (fp32 weights, gradients and Adam state, FSDP over all"
        " 16 GPUs: 405 GB; activations 8 GB; reserve 3 GB), rollout 441 GB (vLLM 0.95 x 141 = 134 GB; trainer left"
        " resident 304 GB; reserve 3 GB); use gpu.nodes=7 with grpo.cpuOffload true, or set workload.memoryCheck to"
        " false to plan it anyway"
    ]


def test_a_full_72b_fine_tune_on_one_h200_node_is_refused():
    problems = refusal("verl-standard-h200", workload={"model": "Qwen/Qwen2.5-72B-Instruct"}, gpu={"nodes": 1})
    assert len(problems) == 1
    assert problems[0].startswith("grpo-gke:gpu.nodes: Qwen/Qwen2.5-72B-Instruct (72B, verl-fsdp, grpo.cpuOffload off)")
    assert "use gpu.nodes=2 with grpo.cpuOffload true" in problems[0]
    fixed = config_of(
        "verl-standard-h200",
        workload={"model": "Qwen/Qwen2.5-72B-Instruct"},
        gpu={"nodes": 2},
        grpo={"cpuOffload": True},
    )
    assert memory_problems(fixed) == []


def test_nemo_rl_megatron_405b_on_two_h200_nodes_needs_the_optimizer_offload():
    sections = {"workload": {"model": LLAMA_405B}, "gpu": {"type": "h200", "nodes": 2}}
    (problem,) = refusal("nemo-rl-standard-b200", **sections)
    assert problem.startswith(
        "grpo-gke:grpo.cpuOffload: meta-llama/Llama-3.1-405B-Instruct (405B, nemo-rl-megatron, grpo.cpuOffload off)"
        " needs 517 GB a GPU, more than one H200 (141 GB): training 517 GB (bf16 weights and gradients of a TP x PP"
        " shard of 16 GPUs, Adam state over a data-parallel size of 1: 506 GB;"
    )
    offloaded = config_of("nemo-rl-standard-b200", **sections, grpo={"cpuOffload": True})
    assert memory_problems(offloaded) == []
    overrides = training_spec(offloaded).overrides
    assert overrides[-2:] == (
        "policy.megatron_cfg.optimizer.optimizer_cpu_offload=true",
        "policy.megatron_cfg.optimizer.optimizer_offload_fraction=1.0",
    )
    assert nemo_rl_problems(overrides, "v0.7.0", "megatron") == []


def test_the_offload_switches_are_the_frameworks_own_keys():
    verl = training_spec(config_of("dev", grpo={"cpuOffload": True})).overrides
    assert verl[-2:] == (
        "actor_rollout_ref.actor.fsdp_config.param_offload=true",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=true",
    )
    assert verl_problems(verl) == ()  # they compose against verl 0.9.1's own Hydra config
    dtensor = config_of(
        "nemo-rl-standard-b200", workload={"model": "meta-llama/Llama-3.1-8B-Instruct"}, grpo={"cpuOffload": True}
    )
    overrides = training_spec(dtensor).overrides
    assert overrides[-1] == "policy.dtensor_cfg.cpu_offload=true"
    assert nemo_rl_problems(overrides, "v0.7.0", "dtensor") == []
    # Off, nothing is added: a stack without offload keeps its overrides and its run id.
    assert not any("offload" in item for item in training_spec(config_of("dev")).overrides)


def test_memory_check_false_plans_a_stack_that_cannot_fit():
    config = config_of("verl-standard-h200", workload={"model": LLAMA_405B, "memoryCheck": False})
    assert memory_problems(config) == []
    assert memory_problems(
        config.model_copy(update={"workload": config.workload.model_copy(update={"memory_check": True})})
    )


def test_the_plan_command_refuses_a_stack_that_cannot_train(tmp_path):
    text = (REPO_ROOT / "tests" / "stacks" / "Pulumi.verl-standard-h200.yaml").read_text()
    text = text.replace("Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-72B-Instruct").replace("nodes: 2", "nodes: 1")
    (tmp_path / "Pulumi.big.yaml").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "plan", "--config", "Pulumi.big.yaml"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == EXIT_BAD_INPUT
    assert result.stdout == ""
    assert result.stderr == (
        "error: the config of stack 'big' (Pulumi.big.yaml) was refused:\n"
        "  grpo-gke:gpu.nodes: Qwen/Qwen2.5-72B-Instruct (72B, verl-fsdp, grpo.cpuOffload off) needs 196 GB a GPU,"
        " more than one H200 (141 GB): training 155 GB (fp32 weights, gradients and Adam state, FSDP over all 8 GPUs:"
        " 144 GB; activations 8 GB; reserve 3 GB), rollout 196 GB (vLLM 0.6 x 141 = 85 GB; trainer left resident"
        " 108 GB; reserve 3 GB); use gpu.nodes=2 with grpo.cpuOffload true, or set workload.memoryCheck to false to"
        " plan it anyway\n"
    )
    assert not (tmp_path / "build").exists()


def test_the_pinned_verl_source_still_does_what_the_model_assumes():
    """verl 0.9.1 (installed --no-deps, read as text): the reference is always CPU-offloaded, so its
    `param_offload` switch changes nothing; train mode brings offloaded weights and optimizer back to the GPU."""
    verl_dir = Path(importlib.util.find_spec("verl").submodule_search_locations[0])
    engine = (verl_dir / "workers" / "engine" / "fsdp" / "transformer_impl.py").read_text().splitlines()
    assert engine[458].strip() == "if self.engine_config.offload_policy or self.engine_config.forward_only:"
    assert [line.strip() for line in engine[459:461]] == [
        "self._is_offload_param = False",
        "self._is_offload_optimizer = False",
    ]
    base = (verl_dir / "workers" / "engine" / "base.py").read_text().splitlines()
    assert [line.strip() for line in base[321:327]] == [
        'elif self.mode == "train":',
        "self.engine.to(",
        "device=device,",
        "model=self.engine.is_param_offload_enabled,",
        "optimizer=self.engine.is_optimizer_offload_enabled,",
        "grad=self.engine.is_param_offload_enabled,",
    ]


def test_the_first_run_stack_fits_one_l4_in_the_memory_model_with_room():
    """verl's quickstart asks for 24 GB; the memory model agrees for Qwen2.5-0.5B on one L4: 23.4 GB at vLLM's
    default share 0.6, and first-run's 0.5 leaves 3 GB (the rollout phase is the larger: 14.4 or 12 GB of vLLM,
    6 GB of trainer left resident, 3 GB of reserve)."""
    config = config_of("first-run")
    layout = layout_of(config)
    assert (layout.gpus, layout.gpu_memory_gb, layout.gpu_memory_utilization) == (1, 24, 0.5)
    assert memory_need(layout).peak_gb == pytest.approx(21.0)
    assert memory_need(replace(layout, gpu_memory_utilization=0.6)).peak_gb == pytest.approx(23.4)
    assert memory_problems(config) == []
