"""The verl release validation reads is the one the jobs install (one fact, infra/facts.py)."""

from __future__ import annotations

import importlib.metadata

from infra import facts
from tests.conftest import REPO_ROOT


def test_the_verl_requirement_pins_the_release_the_jobs_run():
    pins = [line for line in (REPO_ROOT / "requirements-verl.txt").read_text().splitlines() if line.startswith("verl")]
    assert pins == [f"verl=={facts.VERL_VERSION}"]


def test_the_installed_verl_is_that_release():
    assert importlib.metadata.version("verl") == facts.VERL_VERSION
