"""Derived defaults: rolloutTensorParallel and microBatchSizePerGpu follow the model, the GPU and the
node count when unset, keep the batch rules, and an explicit value is only ever checked."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.config.load import DerivedValue
from core.config.problems import ConfigError
from core.facts.platform import GPU_MACHINES
from jobs.spec.defaults import derived_rollout_tensor_parallel, preflight_mode
from jobs.spec.load import load_config
from jobs.spec.training import submission_for, training_spec
from jobs.spec.validate import job_problems
from plan.harness import REPO_ROOT
from tests.conftest import shipped_stack_file, stack_values, values_of

UNSET = {"rolloutTensorParallel": None, "microBatchSizePerGpu": None}
"""The two derivable keys removed from a shipped stack."""


def loaded_of(base: str, **sections: dict):
    """load_config of a shipped stack with sections changed (None removes a key)."""
    return load_config(values_of(base, **sections), stack_values(base).secret_keys, base)


def derived_of(base: str, **sections: dict) -> dict[str, DerivedValue]:
    return {value.key: value for value in loaded_of(base, **sections).derived}


def test_the_tensor_parallel_size_is_the_smallest_that_holds_the_weights_with_headroom():
    # 32B on H200 at 0.5: 64 GB of weights fit one GPU's 70.5 GB, but not with 10 GB to spare for vLLM.
    derived = derived_of("verl-standard-h200", grpo={**UNSET, "gpuMemoryUtilization": 0.5})
    assert derived["grpo.rolloutTensorParallel"] == DerivedValue(
        "grpo.rolloutTensorParallel",
        2,
        "Qwen/Qwen2.5-32B-Instruct needs 64 GB in bf16, 2 x H200 hold it with 10 GB a GPU to spare",
    )
    # At 0.6 one GPU's 84.6 GB holds 64 + 10 GB.
    assert derived_of("verl-standard-h200", grpo=UNSET)["grpo.rolloutTensorParallel"].value == 1


def test_a_model_too_large_for_a_node_derives_the_whole_node_and_is_still_refused():
    # memoryCheck false: the training side of 700B on one node is refused at load (jobs/spec/memory.py, tested there).
    loaded = loaded_of("dev", grpo=UNSET, workload={"model": "org/giant-700B", "memoryCheck": False})
    assert loaded.config.grpo.rollout_tensor_parallel == GPU_MACHINES["h200"].gpus == loaded.config.gpus_per_node
    assert [value.reason for value in loaded.derived if value.key == "grpo.rolloutTensorParallel"] == [
        "org/giant-700B needs 1400 GB in bf16, more than 8 x H200 hold with 10 GB a GPU to spare"
    ]
    assert [problem.path for problem in job_problems(loaded.config)] == ["grpo-gke:grpo.rolloutTensorParallel"]


def test_a_model_of_unknown_size_keeps_one_gpu_and_says_why():
    # The config then refuses the stack (jobs/spec/validate.py model_size_problems), naming workload.modelSizeB.
    dev = loaded_of("dev", grpo=UNSET).config
    unsized = dev.model_copy(update={"workload": dev.workload.model_copy(update={"model": "org/mystery"})})
    assert derived_rollout_tensor_parallel(unsized) == (
        1,
        "the size of org/mystery is unknown; set workload.modelSizeB to derive it",
    )
    with pytest.raises(ConfigError, match="grpo-gke:workload.modelSizeB: is required"):
        loaded_of("dev", grpo=UNSET, workload={"model": "org/mystery"})


def test_nemo_rl_takes_the_recipes_tensor_parallel_size_when_it_is_larger():
    loaded = loaded_of("nemo-rl-standard-b200", grpo=UNSET)
    assert loaded.config.grpo.rollout_tensor_parallel == 8
    assert str(dict((v.key, v) for v in loaded.derived)["grpo.rolloutTensorParallel"]) == (
        "grpo.rolloutTensorParallel=8 (Qwen/Qwen2.5-72B-Instruct needs 144 GB in bf16, 2 x B200 hold it"
        " with 10 GB a GPU to spare; recipe grpo_math_70B_megatron uses 8)"
    )
    assert job_problems(loaded.config) == []


def test_nemo_rl_keeps_the_memory_size_when_the_recipes_is_smaller():
    # The 8B recipe uses 1; a 14B model at 0.2 of a B200 (36 GB a GPU) needs 2 GPUs for 28 + 2 x 10 GB.
    derived = derived_of(
        "nemo-rl-standard-b200",
        grpo={**UNSET, "gpuMemoryUtilization": 0.2},
        workload={"model": "Qwen/Qwen2.5-14B-Instruct"},
        gpu={"nodes": 1},
    )
    assert derived["grpo.rolloutTensorParallel"].value == 2
    assert "recipe" not in derived["grpo.rolloutTensorParallel"].reason


def test_an_explicit_tensor_parallel_size_is_never_changed_only_checked():
    loaded = loaded_of("nemo-rl-standard-b200", grpo={"rolloutTensorParallel": 4})
    assert loaded.config.grpo.rollout_tensor_parallel == 4
    assert loaded.derived == ()
    too_small = loaded_of("nemo-rl-standard-b200", grpo={"rolloutTensorParallel": 1})
    assert too_small.config.grpo.rollout_tensor_parallel == 1
    assert [str(problem) for problem in job_problems(too_small.config)] == [
        "grpo-gke:grpo.rolloutTensorParallel: Qwen/Qwen2.5-72B-Instruct has about 72B parameters (144 GB in bf16),"
        " more than vLLM's 1 x 180 GB x gpuMemoryUtilization 0.6 = 108 GB; use at least 2, got 1"
    ]


def test_the_micro_batch_is_the_most_full_length_samples_a_gpus_token_budget_holds():
    derived = derived_of("dev", grpo={**UNSET, "maxPromptLength": 1024, "maxResponseLength": 3072})
    assert derived["grpo.microBatchSizePerGpu"] == DerivedValue(
        "grpo.microBatchSizePerGpu", 4, "16384 tokens a GPU hold 4 samples of 4096 tokens"
    )
    longest = derived_of("dev", grpo={**UNSET, "maxPromptLength": 4096, "maxResponseLength": 12288})
    assert longest["grpo.microBatchSizePerGpu"] == DerivedValue(
        "grpo.microBatchSizePerGpu", 1, "16384 tokens a GPU hold 1 samples of 16384 tokens"
    )
    # One token over the budget derived 1 before (max(1, ...)); issue 34 item 4: refused, on the response's key.
    with pytest.raises(ConfigError) as refused:
        derived_of("dev", grpo={**UNSET, "maxPromptLength": 4096, "maxResponseLength": 12289})
    assert [problem.path for problem in refused.value.problems] == ["grpo-gke:grpo.maxResponseLength"]


def test_the_derived_micro_batch_divides_each_gpus_share_of_a_mini_batch():
    # 12 prompts x 8 on 8 GPUs: 12 samples a GPU; 10 would fit the tokens, 6 is the largest divisor.
    loaded = loaded_of("dev", grpo={**UNSET, "promptsPerStep": 12, "miniBatchSize": None})
    assert loaded.config.grpo.micro_batch_size_per_gpu == 6
    assert dict((v.key, v.reason) for v in loaded.derived)["grpo.microBatchSizePerGpu"] == (
        "16384 tokens a GPU hold 10 samples of 1536 tokens; 6 is the largest that divides the batch"
    )


def test_a_batch_no_micro_batch_can_fix_is_refused_on_its_own_key():
    with pytest.raises(ConfigError) as refused:
        loaded_of("dev", grpo={**UNSET, "promptsPerStep": 3, "generationsPerPrompt": 2, "miniBatchSize": None})
    assert [problem.path for problem in refused.value.problems] == ["grpo-gke:grpo.promptsPerStep"]


def test_nemo_rl_caps_the_micro_batch_at_the_recipes_and_keeps_its_batch_rule():
    derived = derived_of("nemo-rl-standard-b200", grpo=UNSET)
    assert derived["grpo.microBatchSizePerGpu"] == DerivedValue(
        "grpo.microBatchSizePerGpu",
        1,
        "16384 tokens a GPU hold 4 samples of 4096 tokens; recipe grpo_math_70B_megatron uses 1",
    )
    # 1.5B picks the 1B recipe (4); 18 x 8 samples on 8 GPUs split into whole micro-batches of 3, not 4.
    small = loaded_of(
        "nemo-rl-standard-b200",
        grpo={**UNSET, "promptsPerStep": 18, "maxPromptLength": 512, "maxResponseLength": 1024},
        workload={"model": "Qwen/Qwen2.5-1.5B-Instruct"},
        gpu={"nodes": 1},
    )
    assert small.config.grpo.micro_batch_size_per_gpu == 3


def test_an_explicit_micro_batch_that_breaks_the_batch_is_still_refused():
    with pytest.raises(ConfigError, match=r"grpo-gke:grpo.microBatchSizePerGpu: must divide each GPU's share"):
        loaded_of("dev", grpo={"promptsPerStep": 12, "miniBatchSize": None, "microBatchSizePerGpu": 8})


@pytest.mark.parametrize("stack", ["nemo-rl-standard-b200", "dev"])
def test_a_derived_value_is_the_same_run_as_the_value_set_explicitly(stack):
    explicit = loaded_of(stack)
    derived = loaded_of(stack, grpo=UNSET)
    assert derived.derived, "something was derived"
    values = {value.key.split(".")[1]: value.value for value in derived.derived}
    assert explicit.derived == ()
    same = loaded_of(stack, grpo=values).config
    assert training_spec(same).run == training_spec(derived.config).run
    assert submission_for(same) == submission_for(derived.config)


def _plan(path, out) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "plan", "--config", str(path), "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _codelab_without(tmp_path, *keys: str):
    lines = shipped_stack_file("nemo-rl-standard-b200").read_text().splitlines(keepends=True)
    path = tmp_path / "Pulumi.codelab.yaml"
    path.write_text("".join(line for line in lines if line.strip().split(":")[0] not in keys))
    return path


def test_the_72b_nemo_rl_stack_without_a_tensor_parallel_size_plans_and_says_what_was_derived(tmp_path):
    path = _codelab_without(tmp_path, "rolloutTensorParallel", "microBatchSizePerGpu")
    result = _plan(path, tmp_path / "out")
    assert (result.returncode, result.stderr) == (0, "")  # the warning is in the Security block, once
    derived = [line for line in result.stdout.splitlines() if "derived" in line]
    assert derived == [
        "  derived: grpo.microBatchSizePerGpu=1 (16384 tokens a GPU hold 4 samples of 4096 tokens; recipe"
        " grpo_math_70B_megatron uses 1), grpo.rolloutTensorParallel=8 (Qwen/Qwen2.5-72B-Instruct needs 144 GB"
        " in bf16, 2 x B200 hold it with 10 GB a GPU to spare; recipe grpo_math_70B_megatron uses 8)"
    ]


def test_a_plan_that_derives_nothing_says_nothing_and_a_too_small_value_exits_2(tmp_path, shipped_plan_command):
    shipped = shipped_plan_command("nemo-rl-standard-b200").result
    assert shipped.returncode == 0
    assert "derived" not in shipped.stdout
    path = _codelab_without(tmp_path, "rolloutTensorParallel")
    path.write_text(path.read_text().replace("    learningRate:", "    rolloutTensorParallel: 1\n    learningRate:"))
    refused = _plan(path, tmp_path / "refused")
    assert refused.returncode == 2
    assert refused.stderr.splitlines()[1:] == [
        "  grpo-gke:grpo.rolloutTensorParallel: Qwen/Qwen2.5-72B-Instruct has about 72B parameters (144 GB in"
        " bf16), more than vLLM's 1 x 180 GB x gpuMemoryUtilization 0.6 = 108 GB; use at least 2, got 1"
    ]
    assert not (tmp_path / "refused").exists()


@pytest.mark.parametrize(
    ("nodes", "preflight", "mode"),
    [(1, None, "gpu"), (2, None, "full"), (8, None, "full"), (4, "gpu", "gpu"), (1, "off", "off")],
)
def test_the_preflight_is_full_on_several_nodes_gpu_on_one_unless_set(nodes, preflight, mode):
    job = {} if preflight is None else {"preflight": preflight}
    config = loaded_of("dev", gpu={"nodes": nodes}, job=job).config
    assert preflight_mode(config)[0] == mode
    assert config.job.preflight == preflight


@pytest.mark.parametrize(("nodes", "mode"), [(1, "gpu"), (2, "gpu")])
def test_the_preflight_is_gpu_on_a_machine_without_rdma_nics_however_many_nodes(nodes, mode):
    """An L4 machine has no gIB fabric to test (core/facts/platform.py GpuMachine.rdma_nics 0)."""
    config = loaded_of("first-run", gpu={"nodes": nodes}, cluster={"headMachineType": "c2-standard-16"}).config
    assert preflight_mode(config) == (mode, "g2-standard-8 has no RDMA NICs: no gIB fabric between nodes to test")
