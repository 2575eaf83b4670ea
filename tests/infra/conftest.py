"""Helpers for the infrastructure tests: what a recorded resource waits for."""

from __future__ import annotations

from plan.harness import Recording
from plan.monitor import Recorded


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
