"""Skipped tests are visible: a checkout without ../shared beside it passes, and the summary of
the run lists every skip with its reason."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.conftest import REPO_ROOT

SHARED_TESTS = (
    "tests/workloads/test_raycluster_render.py::test_strict_schema_refuses_a_misspelt_field_and_an_int_node_selector",
    "tests/jobs/spec/test_validate.py::test_overrides_of_another_layout_fail_on_the_recipe_and_in_the_typed_model",
)
"""One test of each kind that reads ../shared (the KubeRay schema, the NeMo-RL recipes)."""


def test_a_checkout_without_shared_lists_each_skip_and_why(tmp_path):
    checkout = tmp_path / "clone"
    shutil.copytree(
        REPO_ROOT, checkout, symlinks=True, ignore=shutil.ignore_patterns(".git", ".venv", "build", "__pycache__")
    )
    assert not (tmp_path / "shared").exists()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *SHARED_TESTS],
        cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    skips = sorted(line for line in result.stdout.splitlines() if line.startswith("SKIPPED"))
    assert len(skips) == 2, result.stdout
    assert any("kuberay" in line and "is absent" in line for line in skips), skips
    assert any("NeMo-RL configs" in line and "is absent" in line for line in skips), skips
    assert "2 skipped" in result.stdout
