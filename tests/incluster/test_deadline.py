"""Save before a known deadline: the earliest end of the GPU nodes' capacity and what each framework is told."""

from __future__ import annotations

from datetime import UTC, datetime

from core.facts.job import DEADLINE_SAVE_MARGIN_SECONDS, NEMO_RL_SETUP_BOUND_SECONDS
from incluster import deadline

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC).timestamp()


def node(name: str, created: str = "2026-12-01T10:00:00Z", **labels: str) -> dict:
    return {"metadata": {"name": name, "creationTimestamp": created, "labels": dict(labels)}}


MAINTENANCE = "cloud.google.com/scheduled-maintenance-time"


def test_the_maintenance_label_and_flex_starts_seven_days_are_known_ends_earliest_first():
    soon = str(int(NOW) + 3600)
    nodes = [node("gpu-a", **{MAINTENANCE: soon}), node("gpu-b", created="2026-11-25T12:30:00Z")]
    found = deadline.node_deadlines(nodes, "flex-start", ladder=False)
    assert [(item.node, item.at) for item in found] == [
        ("gpu-a", NOW + 3600),
        ("gpu-b", datetime(2026, 12, 2, 12, 30, tzinfo=UTC).timestamp()),
        ("gpu-a", datetime(2026, 12, 8, 10, 0, tzinfo=UTC).timestamp()),
    ]
    assert deadline.earliest_end(nodes, "flex-start", ladder=False) == found[0]
    assert found[0].source == f"{MAINTENANCE}={soon}"


def test_spot_or_reserved_nodes_without_the_label_have_no_known_end():
    nodes = [node("gpu-a"), node("gpu-b", **{MAINTENANCE: "not-a-time"})]
    assert deadline.earliest_end(nodes, "spot", ladder=False) is None
    assert deadline.earliest_end(nodes, "reservation", ladder=False) is None
    assert deadline.attempt_overrides("nemo-rl", None, NOW) == []


POOL = "cloud.google.com/gke-nodepool"


def test_with_a_ladder_only_a_flex_start_node_has_the_seven_day_end_and_a_maintenance_label_counts_on_either():
    """issue 22 items 4-5: one attempt's nodes may come from two rungs; each node's rung is its pool's (the ladder
    [spot, flex-start] of a spot stack: pool `gpu` is spot, `gpu-flex-start` flex-start, core/names.py)."""
    created = "2026-11-25T12:30:00Z"
    seven_days = datetime(2026, 12, 2, 12, 30, tzinfo=UTC).timestamp()
    flex, spot = node("gpu-flex", created, **{POOL: "gpu-flex-start"}), node("gpu-spot", created, **{POOL: "gpu"})
    assert [(item.node, item.at) for item in deadline.node_deadlines([spot, flex], "spot", ladder=True)] == [
        ("gpu-flex", seven_days)
    ]
    # the same two nodes in a flex-start stack with a spot rung: the pool names swap, the rule follows each node
    flex_first = [node("gpu-spot", created, **{POOL: "gpu-spot"}), node("gpu-flex", created, **{POOL: "gpu"})]
    assert [item.node for item in deadline.node_deadlines(flex_first, "flex-start", ladder=True)] == ["gpu-flex"]
    soon = str(int(NOW) + 3600)
    for labelled in ("gpu-spot", "gpu-flex"):
        nodes = [node(n, created, **{POOL: p, **({MAINTENANCE: soon} if n == labelled else {})})
                 for n, p in (("gpu-spot", "gpu"), ("gpu-flex", "gpu-flex-start"))]  # fmt: skip
        assert deadline.earliest_end(nodes, "spot", ladder=True) == deadline.Deadline(
            labelled, NOW + 3600, f"{MAINTENANCE}={soon}"
        )


def test_a_node_of_no_ladder_pool_has_no_flex_start_end_and_without_a_ladder_every_node_is_the_stacks():
    created = "2026-11-25T12:30:00Z"
    other = node("l4-a", created, **{POOL: "l4-pool"})
    assert deadline.earliest_end([other], "flex-start", ladder=True) is None
    # no ladder: a flex-start stack's nodes all end after 7 days, whatever their pool (Autopilot has none of ours)
    assert deadline.earliest_end([other], "flex-start", ladder=False).node == "l4-a"


def nemo_rl_seconds(text: str) -> int:
    """`DD:HH:MM:SS` in seconds as NeMo-RL v0.7.0 reads it (nemo_rl/utils/timer.py convert_to_seconds L251-261)."""
    days, hours, minutes, seconds = map(int, text.split(":"))
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def test_nemo_rl_is_told_a_duration_from_its_training_start_so_the_setup_is_not_counted_against_it():
    """NeMo-RL v0.7.0's TimeoutChecker counts from grpo_train's start (nemo_rl/utils/timer.py L278, grpo.py L2147),
    after the setup: the duration from the submission is shortened by the setup bound, so the save is not late."""
    end = deadline.Deadline("gpu-a", NOW + 2 * 86400 + 3 * 3600 + 4 * 60 + 5, "label")
    told = NOW + nemo_rl_seconds(deadline.attempt_overrides("nemo-rl", end, NOW)[0].split("=", 1)[1])
    assert told == end.at - DEADLINE_SAVE_MARGIN_SECONDS - NEMO_RL_SETUP_BOUND_SECONDS
    assert deadline.attempt_overrides("nemo-rl", end, NOW) == ["checkpointing.checkpoint_must_save_by=02:02:04:05"]


def test_verl_is_told_nothing_that_nothing_reads():
    """verl 0.9.1's default V1 trainer never calls should_save_ckpt_esi (verl/trainer/main_ppo.py L183-184,
    trainer/ppo/v1/trainer_base.py L481-482): no MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP, no override."""
    from incluster.guardian.cluster import with_deadline
    from tests.incluster.test_run_submission import first_attempt

    end = deadline.Deadline("gpu-a", NOW + 86400, "label")
    submission = first_attempt(10)
    assert deadline.attempt_overrides("verl", end, NOW) == []
    assert with_deadline(submission, "verl", end, NOW) == submission


def test_a_deadline_already_inside_the_margin_asks_nemo_rl_to_save_at_once():
    end = deadline.Deadline("gpu-a", NOW + 60, "label")
    assert deadline.attempt_overrides("nemo-rl", end, NOW) == ["checkpointing.checkpoint_must_save_by=00:00:00:00"]
    assert deadline.duration_text(86400 * 10 + 1) == "10:00:00:01"


def test_verl_stops_after_the_last_checkpoint_that_completes_before_the_save_by_time():
    saved = deadline.Saved
    start = NOW
    assert deadline.stop_due([], start, NOW + 1000) is None
    assert deadline.stop_due([saved(2, start - 50)], start, NOW + 1000) is None
    # first save 300 s after the start: the next, about 300 s later, still fits before NOW + 1000
    assert deadline.stop_due([saved(4, start + 300)], start, NOW + 1000) is None
    # two saves 400 s apart: the next would complete at NOW + 1200, after the save-by time
    due = deadline.stop_due([saved(4, start + 400), saved(6, start + 800)], start, NOW + 1000)
    assert due == saved(6, start + 800)
    assert deadline.stop_due([saved(6, start + 1100)], start, NOW + 1000) == saved(6, start + 1100)


def test_verl_saves_are_the_complete_steps_with_the_time_of_their_data_pt(tmp_path):
    import os

    from tests.incluster.test_attempt import WORLD, verl_step

    verl_step(tmp_path, 2)
    verl_step(tmp_path, 4, complete=False)
    os.utime(tmp_path / "global_step_2" / "data.pt", (NOW, NOW))
    assert deadline.verl_saves(tmp_path, WORLD) == [deadline.Saved(2, NOW)]


def test_after_a_deadline_stop_the_next_attempt_waits_for_the_capacity_that_ends_to_go():
    end = deadline.Deadline("gpu-a", NOW + 1800, "label")
    assert deadline.next_capacity_in(end, NOW) == 1800
    assert deadline.next_capacity_in(end, NOW + 1900) == 0
    later = deadline.Deadline("gpu-b", NOW + DEADLINE_SAVE_MARGIN_SECONDS + NEMO_RL_SETUP_BOUND_SECONDS + 1, "label")
    assert deadline.next_capacity_in(later, NOW) == 0 and deadline.next_capacity_in(None, NOW) == 0
