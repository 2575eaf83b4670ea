"""The order the engine creates a recorded stack in: what each resource waits for, everything upstream
of it, and the critical path through creation times."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from plan.monitor import Recorded


def waits_for(resources: Iterable[Recorded]) -> dict[str, set[str]]:
    """URN -> the URNs the engine waits for before creating it: its dependencies, its provider and, for a
    component, its children (a component is done when they are)."""
    resources = list(resources)
    known = {resource.urn for resource in resources}
    waits: dict[str, set[str]] = {resource.urn: set(resource.depends_on) & known for resource in resources}
    for resource in resources:
        if resource.provider in known:
            waits[resource.urn].add(resource.provider)
        if resource.parent in known:
            waits[resource.parent].add(resource.urn)
    return waits


def upstream(waits: Mapping[str, Iterable[str]], urn: str) -> set[str]:
    """Every URN that `urn` waits for, directly or through others."""
    seen: set[str] = set()
    todo = list(waits.get(urn, ()))
    while todo:
        current = todo.pop()
        if current not in seen:
            seen.add(current)
            todo.extend(waits.get(current, ()))
    return seen


@dataclass(frozen=True)
class CriticalPath:
    """The longest chain of creations, and what creating one thing after another would take."""

    seconds: float
    """Time until the last resource exists when everything starts as soon as what it waits for exists."""
    chain: tuple[str, ...]
    """The nodes of that longest chain, first created first."""
    serial_seconds: float
    """The sum of every creation time: one resource after another."""


def critical_path(seconds: Mapping[str, float], waits: Mapping[str, Iterable[str]]) -> CriticalPath:
    """The critical path of a dependency graph whose node `n` takes `seconds[n]` (missing: 0) once every
    node in `waits[n]` is done. Ties go to the first node in sorted order (deterministic)."""
    finish: dict[str, float] = {}
    previous: dict[str, str | None] = {}

    def done(node: str, visiting: frozenset[str]) -> float:
        if node in finish:
            return finish[node]
        if node in visiting:
            raise ValueError(f"dependency cycle through {node}")
        before = [(done(dependency, visiting | {node}), dependency) for dependency in sorted(waits.get(node, ()))]
        start, last = max(before, key=lambda item: item[0], default=(0.0, None))
        finish[node], previous[node] = start + seconds.get(node, 0.0), last
        return finish[node]

    nodes = sorted(set(seconds) | set(waits) | {d for deps in waits.values() for d in deps})
    for node in nodes:
        done(node, frozenset())
    end = max(nodes, key=lambda node: finish[node], default=None)
    chain: list[str] = []
    while end is not None:
        chain.append(end)
        end = previous[end]
    return CriticalPath(
        seconds=max(finish.values(), default=0.0),
        chain=tuple(reversed(chain)),
        serial_seconds=sum(seconds.get(node, 0.0) for node in nodes),
    )
