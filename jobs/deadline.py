"""Save before a known deadline: the earliest known end of the GPU nodes' capacity, and what each framework is
told so it checkpoints first. Pure: node objects (the Kubernetes API's JSON) and times in, plain data out.

Known ends: a node's `cloud.google.com/scheduled-maintenance-time` label (coming host maintenance), and for
flex-start capacity at most 7 days from the node's creation (core/facts/job.py). The guardian passes the
result into each attempt it submits: verl reads an expiration timestamp from its environment
(`should_save_ckpt_esi`); NeMo-RL offers a save-by duration in its checkpointing config, given as an override.
Both are told DEADLINE_SAVE_MARGIN_SECONDS early.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from core.facts.job import (
    DEADLINE_SAVE_MARGIN_SECONDS,
    FLEX_START_MAX_SECONDS,
    NEMO_RL_SAVE_BY_KEY,
    SCHEDULED_MAINTENANCE_LABEL,
    VERL_ESI_ENV,
)


@dataclass(frozen=True)
class Deadline:
    """When one node's capacity ends, and how that is known."""

    node: str
    """The node's name."""
    at: float
    """The end, in Unix seconds."""
    source: str
    """What says so: the maintenance label, or flex-start's 7 days."""


def _created(node: dict[str, Any]) -> float | None:
    stamp = node.get("metadata", {}).get("creationTimestamp")
    if not stamp:
        return None
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def node_deadlines(nodes: list[dict[str, Any]], flex_start: bool) -> list[Deadline]:
    """Every known end of the GPU nodes `nodes` (flex_start: their pool is flex-start capacity), earliest first."""
    found = []
    for node in nodes:
        metadata = node.get("metadata", {})
        name = metadata.get("name", "")
        label = (metadata.get("labels") or {}).get(SCHEDULED_MAINTENANCE_LABEL, "")
        if label.isdigit():
            found.append(Deadline(name, float(label), f"{SCHEDULED_MAINTENANCE_LABEL}={label}"))
        created = _created(node)
        if flex_start and created is not None:
            found.append(
                Deadline(
                    name, created + FLEX_START_MAX_SECONDS, "flex-start capacity ends 7 days after the node came up"
                )
            )
    return sorted(found, key=lambda item: (item.at, item.node, item.source))


def earliest_end(nodes: list[dict[str, Any]], flex_start: bool) -> Deadline | None:
    """The earliest known end among the GPU nodes, or None when none is known."""
    found = node_deadlines(nodes, flex_start)
    return found[0] if found else None


def save_by(deadline: Deadline) -> float:
    """When the framework should have saved: the end less DEADLINE_SAVE_MARGIN_SECONDS."""
    return deadline.at - DEADLINE_SAVE_MARGIN_SECONDS


def attempt_env(framework: str, deadline: Deadline | None) -> dict[str, str]:
    """Environment for the attempt's driver: verl's expiration timestamp (whole Unix seconds); none for NeMo-RL."""
    if deadline is None or framework != "verl":
        return {}
    return {VERL_ESI_ENV: str(int(save_by(deadline)))}


def duration_text(seconds: float) -> str:
    """`DD:HH:MM:SS` of a non-negative duration, NeMo-RL's format (negative counts as 0)."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days:02d}:{hours:02d}:{minutes:02d}:{secs:02d}"


def attempt_overrides(framework: str, deadline: Deadline | None, now: float) -> list[str]:
    """Config overrides for an attempt submitted at `now`: NeMo-RL's save-by duration, counted from the
    submission (training starts later, so it saves early rather than late); none for verl."""
    if deadline is None or framework != "nemo-rl":
        return []
    return [f"{NEMO_RL_SAVE_BY_KEY}={duration_text(save_by(deadline) - now)}"]
