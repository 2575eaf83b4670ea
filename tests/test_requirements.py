"""The verl release validation reads is the one the jobs install (one fact, core/facts/platform.py)."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess

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
    readme = (REPO_ROOT / "docs" / "configuration.md").read_text()
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


def _fake_venv(tmp_path, uv_installs: bool):
    """A venv whose python and uv only log their arguments; `pip install uv==...` fails unless uv_installs."""
    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    log = tmp_path / "calls.log"
    fail_uv = "" if uv_installs else 'case "$*" in *uv==*) exit 1;; esac\n'
    (bin_dir / "python").write_text(f'#!/bin/sh\necho "python $*" >> {log}\n{fail_uv}exit 0\n')
    (bin_dir / "uv").write_text(f'#!/bin/sh\necho "uv $*" >> {log}\n')
    for tool in ("python", "uv"):
        (bin_dir / tool).chmod(0o755)
    return tmp_path / "venv", log


def _make_install(tmp_path, uv_installs: bool) -> tuple[subprocess.CompletedProcess, list[str]]:
    venv, log = _fake_venv(tmp_path, uv_installs)
    run = subprocess.run(
        ["make", "--no-print-directory", f"VENV={venv}", f"{venv}/.installed"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return run, log.read_text().splitlines()


def test_make_installs_the_pins_with_uv_from_pypi_when_it_can(tmp_path):
    run, calls = _make_install(tmp_path, uv_installs=True)
    assert run.returncode == 0, run.stderr
    venv = tmp_path / "venv"
    uv_pin = re.search(r"^UV_VERSION := (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.M).group(1)
    assert re.fullmatch(r"\d+\.\d+\.\d+", uv_pin)
    assert calls == [
        f"python -m pip install --quiet --disable-pip-version-check uv=={uv_pin}",
        f"uv pip install --quiet --python {venv}/bin/python -r requirements.txt",
        f"uv pip install --quiet --python {venv}/bin/python --no-deps -r requirements-verl.txt",
    ]
    assert (venv / ".installed").is_file()


def test_make_falls_back_to_pip_when_uv_cannot_be_installed(tmp_path):
    run, calls = _make_install(tmp_path, uv_installs=False)
    assert run.returncode == 0, run.stderr
    assert "uv could not install the pins: installing them with pip" in run.stdout
    assert [call for call in calls if call.startswith("uv ")] == []
    assert calls[1:] == [
        "python -m pip install --quiet --disable-pip-version-check -r requirements.txt",
        "python -m pip install --quiet --disable-pip-version-check --no-deps -r requirements-verl.txt",
    ]


def test_every_pointer_in_the_requirements_files_leads_to_a_file_name_and_heading_that_exist():
    """Issue 34 item 5: a path named in a requirements file's comments exists; `path NAME` names something that file
    defines; `path "## Heading"` a heading of that page."""
    pointers = 0
    for name in ("requirements.txt", "requirements-verl.txt", "requirements-test.txt"):
        comments = "\n".join(line for line in (REPO_ROOT / name).read_text().splitlines() if line.startswith("#"))
        for path, after in re.findall(r"([\w./-]+\.(?:py|md|txt))( \"## [^\"]+\"| [A-Z_]{3,})?", comments):
            target = REPO_ROOT / path
            assert target.is_file(), f"{name} points to {path}, which does not exist"
            after = after.strip().strip('"')
            if after.startswith("## "):
                assert f"\n{after}\n" in target.read_text(), f"{name}: {path} has no heading {after}"
            elif after:
                assert re.search(rf"^{after}\b", target.read_text(), flags=re.M), f"{name}: {path} has no {after}"
            pointers += 1
    assert pointers >= 3
