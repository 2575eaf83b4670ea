"""Shared fixtures: mocked runs of the real program, and config values built from stack files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from core.config.model import PROJECT_NAMESPACE
from core.stackfile import StackValues, read_stack_file, stack_file
from plan.harness import REPO_ROOT, Recording, run_values

SHARED = REPO_ROOT.parent / "shared"
"""The steering repo's shared/ folder (reference sheets, KubeRay schemas, NeMo-RL configs)."""

STACKS_DIR = Path(__file__).with_name("stacks")
"""The tests' own copies of the shipped stack files: a user's edits to `Pulumi.<stack>.yaml` in the
repository root, or a stack file of their own there, never change what the tests read (.ci/run checks
that the root copies are still these)."""

SHIPPED_STACKS = ("dev", "nemo-rl-standard-b200", "verl-autopilot-b200", "verl-standard-h200")
"""Every stack file shipped in the repository."""


def shipped_stack_file(stack: str) -> Path:
    """The tests' copy of the shipped `Pulumi.<stack>.yaml`."""
    return stack_file(STACKS_DIR, stack)


def stack_values(stack: str) -> StackValues:
    """The raw config values of a shipped stack."""
    return read_stack_file(shipped_stack_file(stack), PROJECT_NAMESPACE, stack)


def values_of(stack: str, **sections: dict) -> dict[str, str]:
    """Config values of a shipped stack with sections merged in: values_of("dev", gpu={"type": "b200"}).

    A section value of None removes that key from the section.
    """
    values = dict(stack_values(stack).values)
    for section, changes in sections.items():
        key = f"{PROJECT_NAMESPACE}:{section}"
        current = json.loads(values.get(key, "{}"))
        for name, value in changes.items():
            if value is None:
                current.pop(name, None)
            else:
                current[name] = value
        values[key] = json.dumps(current)
    return values


_PLANS: dict[str, Recording] = {}


@pytest.fixture(scope="session")
def plan_of() -> Callable[[str], Recording]:
    """A function from a shipped stack's name to its recorded mocked run (cached per session)."""

    def plan(stack: str) -> Recording:
        if stack not in _PLANS:
            values = stack_values(stack)
            _PLANS[stack] = run_values(values.values, values.secret_keys, stack)
        return _PLANS[stack]

    return plan


@pytest.fixture(scope="session", autouse=True)
def fresh_verl_check_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every session composes verl overrides for real: the composition cache starts empty in a temp dir."""
    import jobs.validate

    jobs.validate.VERL_CHECK_CACHE = tmp_path_factory.mktemp("verl-overrides")
    jobs.validate.verl_problems.cache_clear()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared, or a skip when this checkout has none beside it."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the KubeRay schemas and NeMo-RL configs live there")
    return SHARED


__all__ = ["SHIPPED_STACKS", "STACKS_DIR", "run_values", "shipped_stack_file", "stack_values", "values_of"]
