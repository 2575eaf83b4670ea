"""Job-layer fixtures: one real local Ray head for the session, and stack files made for a test."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import shipped_stack_file

STAND_IN = Path(__file__).with_name("stand_in.py")
"""Prints verl-style metric lines in place of the trainer, then exits with the code it is given."""


@pytest.fixture(scope="session")
def ray_head() -> Iterator[str]:
    """Dashboard URL of a local Ray head (4 CPUs, 8 declared GPUs: one full 8-GPU node)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed: pip install 'ray[default]' (requirements.txt) for the job tests")
    from jobs import local_head

    head = local_head.start(num_cpus=4, num_gpus=8)
    try:
        yield head.dashboard_url
    finally:
        head.stop()


@pytest.fixture
def make_stack(tmp_path: Path) -> Callable[..., tuple[str, Path]]:
    """Write Pulumi.<name>.yaml from a shipped stack with sections changed; return (name, directory)."""

    def make(name: str, base: str = "dev", **sections: dict) -> tuple[str, Path]:
        document = yaml.safe_load(shipped_stack_file(base).read_text())
        for section, changes in sections.items():
            document["config"].setdefault(f"grpo-gke:{section}", {}).update(changes)
        (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(document))
        return name, tmp_path

    return make


def stand_in(exit_code: int = 0, steps: int = 3) -> str:
    """Entrypoint of the stand-in trainer."""
    return f"{sys.executable} {STAND_IN} {exit_code} {steps}"
