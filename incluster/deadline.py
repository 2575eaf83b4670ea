"""Save before a known deadline: the earliest known end of the GPU nodes' capacity, and what each framework is
told so it checkpoints first. Pure: node objects (the Kubernetes API's JSON) and times in, plain data out.

Known ends: a node's `cloud.google.com/scheduled-maintenance-time` label (coming host maintenance), and for a
flex-start node at most 7 days from its creation (core/facts/job.py). The rule is per node: with a capacity ladder
one attempt's nodes may come from several rungs (incluster/capacity_events.py rungs_of_nodes), and only a node whose
rung is flex-start (its pool label, rung_of_gpu_node) has the 7-day end; without a ladder every GPU node is the
stack's single gpu.provisioning. What each framework gets, each
aiming DEADLINE_SAVE_MARGIN_SECONDS before the end:
- NeMo-RL v0.7.0 offers only a duration counted from grpo_train's start (core/facts/job.py NEMO_RL_SAVE_BY_KEY), not
  from the submission: the guardian appends `checkpointing.checkpoint_must_save_by` counted from the submission less
  NEMO_RL_SETUP_BOUND_SECONDS, so the save comes before the end whatever the setup took up to that bound. NeMo-RL
  saves, stops and exits 0; the guardian resumes the run on the next capacity (incluster/guardian/policy.py).
- verl 0.9.1's default (V1) trainer reads no deadline (core/facts/job.py VERL_DEADLINE_READER), and its legacy
  trainer, which does, is deprecated and keeps training after its forced save; so verl is told nothing, and the
  guardian stops the attempt itself right after the last checkpoint that completes before the save-by time
  (`stop_due`), then resumes it on the next capacity.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.facts.job import (
    DEADLINE_SAVE_MARGIN_SECONDS,
    FLEX_START_MAX_SECONDS,
    NEMO_RL_SAVE_BY_KEY,
    NEMO_RL_SETUP_BOUND_SECONDS,
    SCHEDULED_MAINTENANCE_LABEL,
)
from incluster.capacity_events import rung_of_gpu_node
from incluster.checkpoints import step_dirs


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


def node_deadlines(nodes: list[dict[str, Any]], provisioning: str, ladder: bool) -> list[Deadline]:
    """Every known end of the GPU nodes `nodes`, earliest first: each node's maintenance label, and flex-start's 7 days
    for each node whose rung is flex-start (rung_of_gpu_node: by its pool with a ladder, else `provisioning`)."""
    found = []
    for node in nodes:
        metadata = node.get("metadata", {})
        name = metadata.get("name", "")
        labels = metadata.get("labels") or {}
        label = labels.get(SCHEDULED_MAINTENANCE_LABEL, "")
        if label.isdigit():
            found.append(Deadline(name, float(label), f"{SCHEDULED_MAINTENANCE_LABEL}={label}"))
        created = _created(node)
        if created is not None and rung_of_gpu_node(labels, provisioning, ladder) == "flex-start":
            found.append(
                Deadline(
                    name, created + FLEX_START_MAX_SECONDS, "flex-start capacity ends 7 days after the node came up"
                )
            )
    return sorted(found, key=lambda item: (item.at, item.node, item.source))


def earliest_end(nodes: list[dict[str, Any]], provisioning: str, ladder: bool) -> Deadline | None:
    """The earliest known end among the GPU nodes (node_deadlines), or None when none is known."""
    found = node_deadlines(nodes, provisioning, ladder)
    return found[0] if found else None


def save_by(deadline: Deadline) -> float:
    """When the framework should have saved: the end less DEADLINE_SAVE_MARGIN_SECONDS."""
    return deadline.at - DEADLINE_SAVE_MARGIN_SECONDS


def duration_text(seconds: float) -> str:
    """`DD:HH:MM:SS` of a non-negative duration, NeMo-RL's format (negative counts as 0)."""
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{days:02d}:{hours:02d}:{minutes:02d}:{secs:02d}"


def attempt_overrides(framework: str, deadline: Deadline | None, now: float) -> list[str]:
    """Config overrides for an attempt submitted at `now`: NeMo-RL's save-by duration, which its TimeoutChecker
    counts from grpo_train's start, counted here from the submission less NEMO_RL_SETUP_BOUND_SECONDS; none for
    verl (nothing of its default trainer reads a deadline)."""
    if deadline is None or framework != "nemo-rl":
        return []
    return [f"{NEMO_RL_SAVE_BY_KEY}={duration_text(save_by(deadline) - now - NEMO_RL_SETUP_BOUND_SECONDS)}"]


def next_capacity_in(ends: Deadline | None, now: float) -> float:
    """After a deadline stop: seconds to wait before the next attempt, whose setup alone may take
    NEMO_RL_SETUP_BOUND_SECONDS: while the earliest known end `ends` of the GPU nodes leaves less than that before
    its save-by time, until that end (the nodes then go, or come back without it); 0 when the next attempt may go."""
    if ends is None or save_by(ends) - now > NEMO_RL_SETUP_BOUND_SECONDS:
        return 0.0
    return max(0.0, ends.at - now)


@dataclass(frozen=True)
class Saved:
    """One complete checkpoint of the run and when it became complete."""

    step: int
    """Its step."""
    at: float
    """When it was complete (Unix seconds)."""


def stop_due(saves: list[Saved], started: float, save_by_at: float) -> Saved | None:
    """The checkpoint after which a verl attempt started at `started` stops, being the last to complete before
    `save_by_at`: the newest saved since `started`, when the next one, as far apart as the last two (or as the
    first from the attempt's start), would complete after `save_by_at`; None while the next one still fits, or
    before the attempt saved anything."""
    mine = sorted((item for item in saves if item.at >= started), key=lambda item: item.at)
    if not mine:
        return None
    newest = mine[-1]
    since = mine[-2].at if len(mine) > 1 else started
    return newest if newest.at + (newest.at - since) > save_by_at else None


def verl_saves(run_dir: Path, world_size: int) -> list[Saved]:
    """The run's complete verl checkpoints and when each became complete: its `data.pt`, which verl 0.9.1 writes
    after the actor's shards (verl/trainer/ppo/v1/trainer_base.py `_save_checkpoint` L948-1000)."""
    return [
        Saved(item.step, (item.path / "data.pt").stat().st_mtime)
        for item in step_dirs(run_dir, "verl", world_size)
        if item.complete
    ]
