"""The one validation entry point (jobs/load.py): the config's rules live in core's registry, the batch
arithmetic in the job layer's, and loading a stack runs both; `python -m plan` is the plan's command and
`python -m infra plan` its alias."""

import subprocess
import sys

import pytest

from core.config.load import parse_config
from core.config.problems import ConfigError
from core.config.rules import CONFIG_RULES
from jobs.defaults import derive_defaults
from jobs.load import load_config
from jobs.validate import JOB_RULES, grpo_problems
from plan.harness import REPO_ROOT
from tests.conftest import shipped_stack_file
from tests.core.test_config import raw_values

TOO_BIG_MINI_BATCH = {"grpo-gke:grpo": {"promptsPerStep": 64, "miniBatchSize": 128, "microBatchSizePerGpu": 1}}
"""A mini-batch larger than the prompts of a step: refused by the batch arithmetic only."""

MINI_BATCH_PROBLEM = "grpo-gke:grpo.miniBatchSize: must be at most grpo.promptsPerStep (64), got 128"


def test_the_batch_arithmetic_is_a_job_rule_that_reads_derived_defaults():
    assert [rule.check for rule in JOB_RULES] == [grpo_problems]
    assert all(rule.reads_derived for rule in JOB_RULES)
    assert grpo_problems not in [rule.check for rule in CONFIG_RULES]
    assert not any(rule.reads_derived for rule in CONFIG_RULES)


def test_loading_a_stack_runs_the_config_rules_and_the_job_rules():
    with pytest.raises(ConfigError) as refused:
        load_config(raw_values(TOO_BIG_MINI_BATCH), (), "dev")
    assert [str(problem) for problem in refused.value.problems] == [MINI_BATCH_PROBLEM]


def test_the_core_loader_runs_only_the_rules_it_is_given():
    loaded = parse_config(raw_values(TOO_BIG_MINI_BATCH), (), "dev", derive_defaults, CONFIG_RULES)
    assert loaded.config.grpo.mini_batch_size == 128


def _plan(tmp_path, *command: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / command[-1]
    return subprocess.run(
        [sys.executable, "-m", *command[:-1], "--config", str(shipped_stack_file("dev")), "--out", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_python_m_plan_and_its_alias_python_m_infra_plan_plan_alike(tmp_path):
    plan = _plan(tmp_path, "plan", "a")
    alias = _plan(tmp_path, "infra", "plan", "b")
    assert (plan.returncode, plan.stderr) == (0, alias.stderr) and alias.returncode == 0
    assert plan.stdout.replace(str(tmp_path / "a"), "OUT") == alias.stdout.replace(str(tmp_path / "b"), "OUT")
    assert sorted(path.name for path in (tmp_path / "a").iterdir()) == sorted(
        path.name for path in (tmp_path / "b").iterdir()
    )
    for path in (tmp_path / "a").iterdir():
        assert path.read_bytes() == (tmp_path / "b" / path.name).read_bytes(), path.name
