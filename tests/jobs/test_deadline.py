"""Save before a known deadline: the earliest end of the GPU nodes' capacity and what each framework is told."""

from __future__ import annotations

from datetime import UTC, datetime

from core.facts.job import DEADLINE_SAVE_MARGIN_SECONDS
from jobs import deadline

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()


def node(name: str, created: str = "2026-12-01T10:00:00Z", **labels: str) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": dict(labels)}}


MAINTENANCE = "cloud.google.com/scheduled-maintenance-time"


def test_the_maintenance_label_and_flex_starts_seven_days_are_known_ends_earliest_first():
    soon = str(int(NOW) + 3600)
    nodes = [node("gpu-a", **{MAINTENANCE: soon}), node("gpu-b", created="2026-11-25T12:30:00Z")]
    found = deadline.node_deadlines(nodes, flex_start=True)
    assert [(item.node, item.at) for item in found] == [
        ("gpu-a", NOW + 3600),
        ("gpu-b", datetime(2026, 12, 2, 12, 30, tzinfo=UTC).timestamp()),
        ("gpu-a", datetime(2026, 12, 8, 10, 0, tzinfo=UTC).timestamp()),
    ]
    assert deadline.earliest_end(nodes, flex_start=True) == found[0]
    assert found[0].source == f"{MAINTENANCE}={soon}"


def test_spot_or_reserved_nodes_without_the_label_have_no_known_end():
    nodes = [node("gpu-a"), node("gpu-b", **{MAINTENANCE: "not-a-time"})]
    assert deadline.earliest_end(nodes, flex_start=False) is None
    assert deadline.attempt_env("verl", None) == {}
    assert deadline.attempt_overrides("nemo-rl", None, NOW) == []


def test_verl_gets_its_esi_timestamp_early_by_the_margin_and_nemo_rl_its_save_by_duration():
    end = deadline.Deadline("gpu-a", NOW + 2 * 86400 + 3 * 3600 + 4 * 60 + 5, "label")
    assert deadline.attempt_env("verl", end) == {
        "MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP": str(int(end.at - DEADLINE_SAVE_MARGIN_SECONDS))
    }
    assert deadline.attempt_overrides("verl", end, NOW) == []
    assert deadline.attempt_env("nemo-rl", end) == {}
    assert deadline.attempt_overrides("nemo-rl", end, NOW) == ["checkpointing.checkpoint_must_save_by=02:02:49:05"]


def test_a_deadline_already_inside_the_margin_asks_nemo_rl_to_save_at_once():
    end = deadline.Deadline("gpu-a", NOW + 60, "label")
    assert deadline.attempt_overrides("nemo-rl", end, NOW) == ["checkpointing.checkpoint_must_save_by=00:00:00:00"]
    assert deadline.duration_text(86400 * 10 + 1) == "10:00:00:01"
