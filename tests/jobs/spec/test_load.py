"""The one validation entry point (jobs/spec/load.py): the config's rules live in core's registry, the batch
arithmetic in the job layer's, and loading a stack runs both; `python -m plan` is the plan's command and
`python -m infra plan` its alias."""

import pytest

from core.config.load import parse_config
from core.config.problems import ConfigError
from core.config.rules import CONFIG_RULES
from jobs.spec.defaults import derive_defaults
from jobs.spec.load import load_config
from jobs.spec.memory import memory_problems
from jobs.spec.validate import JOB_RULES, grpo_problems, model_size_problems
from tests.core.test_config import raw_values

TOO_BIG_MINI_BATCH = {"grpo-gke:grpo": {"promptsPerStep": 64, "miniBatchSize": 128, "microBatchSizePerGpu": 1}}
"""A mini-batch larger than the prompts of a step: refused by the batch arithmetic only."""

MINI_BATCH_PROBLEM = "grpo-gke:grpo.miniBatchSize: must be at most grpo.promptsPerStep (64), got 128"


def test_the_batch_arithmetic_is_a_job_rule_that_reads_derived_defaults():
    assert [rule.check for rule in JOB_RULES] == [grpo_problems, model_size_problems, memory_problems]
    assert [rule.reads_derived for rule in JOB_RULES] == [True, False, False]
    assert grpo_problems not in [rule.check for rule in CONFIG_RULES]
    assert not any(rule.reads_derived for rule in CONFIG_RULES)


def test_loading_a_stack_runs_the_config_rules_and_the_job_rules():
    with pytest.raises(ConfigError) as refused:
        load_config(raw_values(TOO_BIG_MINI_BATCH), (), "dev")
    assert [str(problem) for problem in refused.value.problems] == [MINI_BATCH_PROBLEM]


def test_the_core_loader_runs_only_the_rules_it_is_given():
    loaded = parse_config(raw_values(TOO_BIG_MINI_BATCH), (), "dev", derive_defaults, CONFIG_RULES)
    assert loaded.config.grpo.mini_batch_size == 128


def test_python_m_plan_and_its_alias_python_m_infra_plan_plan_alike(shipped_plan_command):
    plan, alias = shipped_plan_command("dev", ("plan",)), shipped_plan_command("dev", ("infra", "plan"))
    assert (plan.result.returncode, plan.result.stderr) == (0, alias.result.stderr) and alias.result.returncode == 0
    assert plan.result.stdout.replace(str(plan.out), "OUT") == alias.result.stdout.replace(str(alias.out), "OUT")
    assert sorted(path.name for path in plan.out.iterdir()) == sorted(path.name for path in alias.out.iterdir())
    for path in plan.out.iterdir():
        assert path.read_bytes() == (alias.out / path.name).read_bytes(), path.name
