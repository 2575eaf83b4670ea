"""Validation before submit: verl overrides compose against verl's own Hydra config, NeMo-RL
overrides fit the typed model of each release's keys, which is checked against the releases' recipes."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import DictConfig, OmegaConf

from core.config.problems import ConfigError
from core.facts.job import NEMO_RL_RELEASE_FACTS
from core.facts.platform import NEMO_RL_RELEASES
from jobs.cli.main import main
from jobs.spec.training import nemo_rl_recipe, training_spec
from jobs.spec.validate import check, job_problems, nemo_rl_keys, nemo_rl_problems, verl_problems
from tests.conftest import SHIPPED_STACKS, STACKS_DIR, config_of
from tests.jobs.spec.test_training import nemo_rl

SHARED_RELEASES = {"v0.4.0": "v0.4.0", "v0.7.0": "main"}
"""Releases whose recipes ../shared/nemo-rl holds: v0.4.0, and main for v0.7.0's layout (both
without converter_type and with data.train/data.validation)."""

RECIPE_FILES = {"dtensor": "grpo_math_1B.yaml", "megatron": "grpo_math_70B_megatron.yaml"}


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_shipped_stack_validates(stack, capsys):
    assert job_problems(config_of(stack)) == []
    assert main(["validate", "--stack", stack, "--dir", str(STACKS_DIR)]) == 0
    assert "overrides fit" in capsys.readouterr().out


def test_verl_refuses_a_key_its_config_lacks_and_names_it():
    spec = training_spec(config_of("dev"))
    assert verl_problems(spec.overrides) == ()
    problems = verl_problems((*spec.overrides, "trainer.bogus_key=1", "actor_rollout_ref.actor.optimm.lr=1"))
    assert len(problems) == 2
    assert "'trainer.bogus_key=1': Could not override 'trainer.bogus_key'" in problems[0]
    assert "actor_rollout_ref.actor.optimm.lr" in problems[1]


def test_nemo_rl_megatron_recipe_must_fit_the_gpus():
    config = nemo_rl("v0.7.0", gpu={"nodes": 1}, grpo={"promptsPerStep": 16})
    with pytest.raises(
        ConfigError,
        match=r"grpo-gke:gpu.nodes: NeMo-RL's recipe .*grpo_math_70B_megatron.yaml splits one model over 16 GPUs",
    ):
        check(config)


def load_recipe(path: Path) -> DictConfig:
    """A NeMo-RL recipe with its `defaults:` parents merged in depth-first, as nemo_rl.utils.config does."""
    config = OmegaConf.load(path)
    parents = config.pop("defaults", [])
    merged = OmegaConf.create({})
    for parent in [parents] if isinstance(parents, str) else list(parents):
        merged = OmegaConf.merge(merged, load_recipe(path.parent / str(parent)))
    return OmegaConf.merge(merged, config)


def apply_overrides(recipe: DictConfig, overrides: list[str]) -> DictConfig:
    """Apply Hydra overrides in struct mode, as NeMo-RL's parse_hydra_overrides does."""
    from hydra._internal.config_loader_impl import ConfigLoaderImpl
    from hydra.core.override_parser.overrides_parser import OverridesParser

    OmegaConf.set_struct(recipe, True)
    ConfigLoaderImpl._apply_overrides_to_config(OverridesParser.create().parse_overrides(overrides), recipe)
    return recipe


def shared_recipe(shared_dir: Path, release: str, backend: str) -> DictConfig:
    return load_recipe(shared_dir / "nemo-rl" / SHARED_RELEASES[release] / RECIPE_FILES[backend])


@pytest.mark.parametrize("release", sorted(SHARED_RELEASES))
@pytest.mark.parametrize("backend", sorted(RECIPE_FILES))
def test_typed_model_matches_the_release_recipes(shared_dir, release, backend):
    recipe = shared_recipe(shared_dir, release, backend)
    for key, types in nemo_rl_keys(release, backend).items():
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(recipe, parent) if parent else recipe
        assert isinstance(node, DictConfig) and leaf in node, f"{release} {backend}: no {key}"
        value = OmegaConf.select(recipe, key)
        assert value is None or isinstance(value, types) or (float in types and isinstance(value, int)), (
            f"{release} {backend}: {key} is {value!r}, the model says {types}"
        )


@pytest.mark.parametrize("release", sorted(SHARED_RELEASES))
@pytest.mark.parametrize("model", ["Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-72B-Instruct"])
def test_spec_overrides_apply_in_struct_mode_to_the_release_recipe(shared_dir, release, model):
    config = nemo_rl(release, workload={"model": model}, gpu={"nodes": 2}, grpo={"promptsPerStep": 16})
    recipe_facts = nemo_rl_recipe(config)
    backend = "megatron" if recipe_facts.backend == "megatron" else "dtensor"
    spec = training_spec(config)
    assert nemo_rl_problems(spec.overrides, release, backend) == []
    applied = apply_overrides(shared_recipe(shared_dir, release, backend), list(spec.overrides))
    assert OmegaConf.select(applied, "checkpointing.checkpoint_dir") == spec.run_dir
    assert OmegaConf.select(applied, recipe_facts.learning_rate_key) == config.grpo.learning_rate


def test_overrides_of_another_layout_fail_on_the_recipe_and_in_the_typed_model(shared_dir):
    newer = training_spec(nemo_rl("v0.7.0"))
    with pytest.raises(Exception, match="data.train.dataset_name"):
        apply_overrides(shared_recipe(shared_dir, "v0.4.0", "megatron"), list(newer.overrides))
    assert any(
        "has no key 'data.train.dataset_name'" in p for p in nemo_rl_problems(newer.overrides, "v0.4.0", "megatron")
    )
    older = training_spec(nemo_rl("v0.4.0"))
    with pytest.raises(Exception, match="converter_type|dataset_name"):
        apply_overrides(shared_recipe(shared_dir, "v0.7.0", "megatron"), list(older.overrides))
    problems = nemo_rl_problems(older.overrides, "v0.7.0", "megatron")
    assert any("'policy.megatron_cfg.converter_type'" in p for p in problems)
    assert any("'data.dataset_name'" in p for p in problems)


def test_typed_model_refuses_wrong_types_and_dtensor_keys_on_megatron():
    assert nemo_rl_problems(["grpo.val_period=often"], "v0.7.0", "megatron") == [
        "grpo.val_period must be int, got 'often'"
    ]
    assert nemo_rl_problems(["checkpointing.enabled=1"], "v0.7.0", "megatron") == [
        "checkpointing.enabled must be bool, got 1"
    ]
    assert nemo_rl_problems(["policy.optimizer.kwargs.lr=1e-6"], "v0.7.0", "megatron") == [
        "NeMo-RL v0.7.0 (megatron recipes) has no key 'policy.optimizer.kwargs.lr'"
    ]
    assert nemo_rl_problems(["policy.optimizer.kwargs.lr=1e-6"], "v0.7.0", "dtensor") == []


def test_every_release_has_launch_facts():
    assert set(NEMO_RL_RELEASE_FACTS) == set(NEMO_RL_RELEASES)


@pytest.mark.parametrize(
    ("stack", "grpo", "workload", "expected"),
    [
        ("verl-standard-h200", {"rolloutTensorParallel": 1}, {},
         "grpo-gke:grpo.rolloutTensorParallel: Qwen/Qwen2.5-32B-Instruct has about 32B parameters (64 GB in bf16),"
         " more than vLLM's 1 x 141 GB x gpuMemoryUtilization 0.4 = 56 GB; use at least 2, got 1"),
        ("nemo-rl-standard-b200", {"rolloutTensorParallel": 1}, {},
         "grpo-gke:grpo.rolloutTensorParallel: Qwen/Qwen2.5-72B-Instruct has about 72B parameters (144 GB in bf16),"
         " more than vLLM's 1 x 180 GB x gpuMemoryUtilization 0.4 = 72 GB; use at least 2, got 1"),
        # The training side of 700B on one node is refused too (jobs/spec/memory.py); memoryCheck false isolates this rule.
        ("dev", {"rolloutTensorParallel": 8}, {"model": "org/giant-700B", "memoryCheck": False},
         "grpo-gke:grpo.rolloutTensorParallel: org/giant-700B has about 700B parameters (1400 GB in bf16),"
         " more than vLLM's 8 x 141 GB x gpuMemoryUtilization 0.4 = 451 GB; even 8 GPUs are too few: raise"
         " grpo.gpuMemoryUtilization or use a smaller model, got 8"),
    ],
)  # fmt: skip
def test_rollout_must_hold_the_models_weights(stack, grpo, workload, expected):
    from jobs.spec.validate import rollout_memory_problems

    refused = config_of(stack, grpo={**grpo, "gpuMemoryUtilization": 0.4}, workload=workload)
    assert [str(problem) for problem in rollout_memory_problems(refused)] == [expected]
    fits = config_of(stack, grpo={"rolloutTensorParallel": 8, "gpuMemoryUtilization": 0.4})
    assert rollout_memory_problems(fits) == []


def test_a_model_of_unknown_size_is_not_refused_for_rollout_memory():
    from jobs.spec.validate import rollout_memory_problems

    # The config refuses such a model (model_size_problems); this rule alone has nothing to judge.
    dev = config_of("dev")
    unsized = dev.model_copy(update={"workload": dev.workload.model_copy(update={"model": "org/mystery-model"})})
    assert rollout_memory_problems(unsized) == []


def test_a_verl_composition_is_cached_by_overrides_and_config_files(monkeypatch, tmp_path):
    import jobs.spec.validate as validate

    monkeypatch.setattr(validate, "VERL_CHECK_CACHE", tmp_path / "cache")
    overrides = ("trainer.bogus_key=1",)
    validate.verl_problems.cache_clear()
    first = validate.verl_problems(overrides)
    assert first and "trainer.bogus_key" in first[0]
    assert len(list((tmp_path / "cache").glob("*.json"))) == 1

    def no_composition(*_):
        raise AssertionError("the cached result should have been used")

    monkeypatch.setattr(validate, "_composition_problems", no_composition)
    validate.verl_problems.cache_clear()
    assert validate.verl_problems(overrides) == first

    next(iter((tmp_path / "cache").glob("*.json"))).write_text("not json")
    monkeypatch.undo()
    monkeypatch.setattr(validate, "VERL_CHECK_CACHE", tmp_path / "cache")
    validate.verl_problems.cache_clear()
    assert validate.verl_problems(overrides) == first, "a damaged entry is composed again"
    validate.verl_problems.cache_clear()


def test_the_cache_key_follows_the_content_of_verls_config_files(tmp_path):
    from jobs.spec.validate import verl_config_fingerprint

    (tmp_path / "trainer").mkdir()
    config = tmp_path / "trainer" / "ppo_trainer.yaml"
    config.write_text("a: 1\n")
    before = verl_config_fingerprint(tmp_path)
    config.write_text("a: 2\n")
    assert verl_config_fingerprint(tmp_path) != before
