"""Mocked runs of the infrastructure graph for every mode x GPU x storage combination."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from plan.harness import Recording
from plan.monitor import Recorded
from tests.conftest import combination_values, run_values

_RUNS: dict[str, Recording] = {}


@pytest.fixture(scope="session")
def infra_run() -> Callable[..., Recording]:
    """A function (mode, gpu, storage, **sections) -> the recorded mocked run (cached per session)."""

    def run(mode: str, gpu: str, storage: str, /, **sections: dict) -> Recording:
        values = combination_values(mode, gpu, storage, **sections)
        key = json.dumps(values, sort_keys=True)
        if key not in _RUNS:
            _RUNS[key] = run_values(values)
        return _RUNS[key]

    return run


def names_of(recording: Recording, urns: tuple[str, ...] | list[str]) -> set[str]:
    """Logical names of the resources with these URNs."""
    return {recording.by_urn(urn).name for urn in urns}


def depends_on(recording: Recording, resource: Recorded) -> set[str]:
    """Logical names of what `resource` waits for (explicit and property dependencies)."""
    return names_of(recording, resource.depends_on)


def all_dependencies(recording: Recording, resource: Recorded) -> set[str]:
    """URNs `resource` waits for, directly or through others."""
    seen: set[str] = set()
    stack = list(resource.depends_on)
    while stack:
        urn = stack.pop()
        if urn not in seen:
            seen.add(urn)
            stack.extend(recording.by_urn(urn).depends_on)
    return seen
