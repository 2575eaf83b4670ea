"""The import contracts hold (pyproject.toml): the layers core <- incluster <- infra <- workloads <- jobs <- plan, the
in-cluster package's fence, core's pure modules, the concerns of jobs/; and each fails when broken on purpose."""

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")
PACKAGES = ("core", "infra", "workloads", "incluster", "jobs", "plan")


def _lint_imports(directory: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=directory, capture_output=True, text=True, timeout=120)


def _copy_of_the_packages(tmp_path: Path) -> Path:
    for package in PACKAGES:
        shutil.copytree(REPO_ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_tree_keeps_the_layering_contract():
    result = _lint_imports(REPO_ROOT)
    assert result.returncode == 0, result.stdout
    assert "4 kept, 0 broken" in result.stdout


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("core", "jobs.spec.training"),
        ("infra", "workloads.raycluster"),
        ("jobs", "plan.cli"),
        ("incluster", "pulumi"),
        ("incluster", "core.config.model"),
        ("core/facts", "pydantic"),
        ("jobs/guardian", "jobs.cli"),
        ("jobs/spec", "jobs.runs.goodput"),
    ],
)
def test_a_lower_layer_importing_a_higher_one_breaks_the_contract(tmp_path, lower, higher):
    copy = _copy_of_the_packages(tmp_path)
    (copy / lower / "upward.py").write_text(f'"""A deliberate violation."""\n\nimport {higher}  # noqa: F401\n')
    result = _lint_imports(copy)
    assert result.returncode == 1, result.stdout
    assert f"{lower.replace('/', '.')}.upward -> {higher}" in result.stdout
