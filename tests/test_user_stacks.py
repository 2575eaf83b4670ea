"""A user's stack files are the user's: a stack of their own, or an edited shipped stack, in the
repository root leaves `make test` green, and `python -m plan --stack NAME` plans any of them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO_ROOT

STACK_DEPENDENT_TESTS = (
    "tests/core/test_shipped_stacks.py",
    "tests/plan/test_plan.py::test_plan_of_dev_matches_its_golden_file",
    "tests/plan/test_plan.py::test_every_shipped_stack_plans_cleanly",
    "tests/workloads/test_workloads_stack.py::test_rendered_k8s_yaml_matches_the_golden_file",
    "tests/jobs/spec/test_validate.py::test_every_shipped_stack_validates",
)
"""The tests that read the shipped stacks: goldens, shapes and validation."""


def user_checkout(tmp_path: Path) -> Path:
    """A copy of the repository in which the user added a stack of their own and a broken one, and
    pointed dev at their project."""
    checkout = tmp_path / "checkout"
    shutil.copytree(
        REPO_ROOT,
        checkout,
        symlinks=True,
        ignore=shutil.ignore_patterns(".git", ".venv", "build", "__pycache__", ".pytest_cache"),
    )
    dev = checkout / "Pulumi.dev.yaml"
    dev.write_text(dev.read_text().replace("gcp:project: ", "gcp:project: acme-research #", 1))
    (checkout / "Pulumi.mine.yaml").write_text(dev.read_text().replace("nodes: 1", "nodes: 2"))
    (checkout / "Pulumi.broken.yaml").write_text("config:\n  gcp:project: [unclosed\n")
    return checkout


def test_a_users_own_and_edited_stacks_leave_the_tests_green_and_plan(tmp_path):
    checkout = user_checkout(tmp_path)
    assert "gcp:project: acme-research" in (checkout / "Pulumi.dev.yaml").read_text()
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    tests = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", *STACK_DEPENDENT_TESTS],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert tests.returncode == 0, tests.stdout[-3000:] + tests.stderr[-3000:]
    assert "mine" not in tests.stdout and "broken" not in tests.stdout
    plan = subprocess.run(
        [sys.executable, "-m", "plan", "--stack", "mine"],
        cwd=checkout, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert plan.returncode == 0, plan.stderr
    assert "Plan of stack 'mine'" in plan.stdout and "a3-ultragpu-8g x 2 (spot)" in plan.stdout
    assert (checkout / "build" / "mine" / "plan.json").is_file()
