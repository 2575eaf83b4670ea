"""The verl release validation reads is the one the jobs install (one fact, core/facts/platform.py)."""

from __future__ import annotations

import importlib.metadata

from core.facts.platform import VERL_VERSION
from tests.conftest import REPO_ROOT


def test_the_verl_requirement_pins_the_release_the_jobs_run():
    pins = [line for line in (REPO_ROOT / "requirements-verl.txt").read_text().splitlines() if line.startswith("verl")]
    assert pins == [f"verl=={VERL_VERSION}"]


def test_the_installed_verl_is_that_release():
    assert importlib.metadata.version("verl") == VERL_VERSION


def _pins(name: str) -> dict[str, str]:
    lines = (REPO_ROOT / name).read_text().splitlines()
    return dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))


def test_torch_is_pinned_for_the_tests_only():
    torch = _pins("requirements-test.txt")
    assert list(torch) == ["torch"]
    assert "torch" not in _pins("requirements.txt") and "torch" not in _pins("requirements-verl.txt")
    readme = (REPO_ROOT / "README.md").read_text()
    assert f"| {torch['torch']} | `requirements-test.txt` |" in readme


def _make_rules() -> dict[str, tuple[list[str], str]]:
    """Makefile target -> (its prerequisites, its recipe)."""
    rules: dict[str, tuple[list[str], str]] = {}
    target = None
    for line in (REPO_ROOT / "Makefile").read_text().splitlines():
        if line.startswith("\t") and target:
            rules[target][1].append(line.strip())
        elif ":" in line and ":=" not in line and not line.startswith(("#", " ", ".")):
            target, prerequisites = line.split(":", 1)
            rules[target] = (prerequisites.split("##")[0].split(), [])
        else:
            target = None
    return {name: (prerequisites, "\n".join(recipe)) for name, (prerequisites, recipe) in rules.items()}


def test_make_plan_never_installs_the_test_requirements_and_make_test_does():
    rules = _make_rules()
    assert rules["plan"][0] == ["$(INSTALLED)"] and "requirements-test" not in rules["$(INSTALLED)"][1]
    assert rules["test"][0] == ["$(INSTALLED_TEST)"]
    assert rules["$(INSTALLED_TEST)"][0] == ["$(INSTALLED)", "requirements-test.txt"]
    assert "pip install --quiet --disable-pip-version-check -r requirements-test.txt" in rules["$(INSTALLED_TEST)"][1]
