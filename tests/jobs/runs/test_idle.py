"""The idle bill as `status` shows it (jobs/runs/idle.py), one case at a time: a run not over, the countdown to the
scale to zero, one overdue, idleMinutes 0, the guardian's recorded rate, a part without a price, an entry from a
guardian that kept no rate, and a newer attempt after the scale to zero."""

from __future__ import annotations

from core.prices import IdleBill
from incluster import record
from jobs.runs.idle import idle_view
from jobs.runs.observed import RayAttempt
from tests.jobs.runs.test_observed import T0

END = T0 + 1800
"""When attempt 2 ended: 2026-12-01 10:30:00Z."""

PLANNED = IdleBill(hourly=0.9, unpriced=())
"""The plan's idle bill (core/prices.py idle_bill) for the cases: $0.90/h for every part of IDLE_PARTS."""

ATTEMPTS = (RayAttempt(1, "FAILED", T0, T0 + 900), RayAttempt(2, "SUCCEEDED", T0 + 1200, END))


def entry(offset: float, attempt: int, event: str, **extra) -> dict:
    """A record line as the guardian appends it, at END + offset."""
    return record.entry(END + offset, attempt, event, **extra)


SUCCEEDED = [entry(1, 1, "failed"), entry(2, 1, "recovering"), entry(3, 2, "submitted"), entry(5, 2, "succeeded")]
"""Attempt 1 lost its node, attempt 2 succeeded."""

SCALED = entry(900, 2, "scaled-to-zero", reason="...", details={"idleHourly": 0.83524, "idleParts": ["head", "storage"],
               "idleUnpriced": [], "catalogDate": "2026-12-01"})  # fmt: skip
"""The guardian's scale to zero at 10:45:00Z, with the rate its settings carried."""


def test_a_run_not_over_shows_nothing():
    live = (ATTEMPTS[0], RayAttempt(2, "RUNNING", T0 + 1200, None))
    assert idle_view(SUCCEEDED, live, 15, PLANNED, END + 60) is None
    assert idle_view(SUCCEEDED[:3], ATTEMPTS, 15, PLANNED, END + 60) is None  # ended, but the guardian has not said
    assert idle_view([], ATTEMPTS, 15, PLANNED, END + 60) is None  # no guardian follows the run
    assert idle_view([], (), 15, PLANNED, END + 60) is None


def test_the_countdown_says_when_the_scale_to_zero_is_due_and_what_bills_on_then():
    view = idle_view(SUCCEEDED, ATTEMPTS, 15, PLANNED, END + 125)
    assert view is not None and view.lines() == [
        "run over since 2026-12-01 10:30:00Z (attempt 2 ended): the GPU workers scale to zero at 2026-12-01 10:45:00Z"
        " (in 12m 55s, job.idleMinutes=15); then $0.90/h bills on for the head, storage, head boot disk, cluster fee"
        " and cloud nat"
    ]
    assert view.as_json()["scaleToZeroDue"] == "2026-12-01 10:45:00Z" and view.as_json()["idleSince"] is None


def test_an_overdue_scale_to_zero_says_why_it_may_not_have_happened():
    view = idle_view(SUCCEEDED, ATTEMPTS, 15, PLANNED, END + 1200)
    assert view is not None and view.lines() == [
        "run over since 2026-12-01 10:30:00Z (attempt 2 ended): the GPU workers were due to scale to zero at"
        " 2026-12-01 10:45:00Z (5m 00s ago, job.idleMinutes=15) and have not: a job is live on the cluster, or no"
        " guardian with the API server runs; then $0.90/h bills on for the head, storage, head boot disk, cluster fee"
        " and cloud nat"
    ]


def test_idle_minutes_0_keeps_the_gpu_workers_and_says_so():
    not_retried = [entry(1, 2, "failed"), entry(2, 2, "not-retried")]
    view = idle_view(not_retried, ATTEMPTS, 0, PLANNED, END + 7200)
    assert view is not None and view.due is None
    assert view.lines() == [
        "run over since 2026-12-01 10:30:00Z (attempt 2 ended): job.idleMinutes is 0, so the GPU workers stay"
    ]


def test_after_the_scale_to_zero_the_guardians_recorded_rate_counts_from_its_entry():
    view = idle_view([*SUCCEEDED, SCALED], ATTEMPTS, 15, PLANNED, END + 900 + 2 * 3600 + 30)
    assert view is not None and view.lines() == [
        "idle since 2026-12-01 10:45:00Z (2h 00m), about $1.68 at $0.84/h for the head and storage"
    ]
    assert view.dollars == 0.83524 * (2 * 3600 + 30) / 3600
    assert view.as_json()["dollarsSoFar"] == 1.68


def test_a_part_without_a_price_makes_it_at_least_and_is_named():
    autopilot = {**SCALED, "details": {**SCALED["details"], "idleHourly": 0.00073, "idleUnpriced": ["head"]}}
    view = idle_view([*SUCCEEDED, autopilot], ATTEMPTS, 15, PLANNED, END + 900 + 3600)
    assert view is not None and view.lines() == [
        "idle since 2026-12-01 10:45:00Z (1h 00m), at least $0.00 at $0.00/h for the head and storage (without the"
        " head: no price)"
    ]


def test_an_entry_that_kept_no_rate_uses_the_plans_and_says_so():
    older = {key: value for key, value in SCALED.items() if key != "details"}
    view = idle_view([*SUCCEEDED, older], ATTEMPTS, 15, PLANNED, END + 900 + 3600)
    assert view is not None and view.lines() == [
        "idle since 2026-12-01 10:45:00Z (1h 00m), about $0.90 at $0.90/h for the head, storage, head boot disk, cluster"
        " fee and cloud nat (the plan's rate: the guardian's entry keeps none)"
    ]


def test_a_newer_attempt_after_the_scale_to_zero_ends_the_idle_and_an_attempt_ray_lost_counts_from_the_record():
    resumed = [*SUCCEEDED, SCALED, entry(3600, 3, "submitted")]
    assert idle_view(resumed, ATTEMPTS, 15, PLANNED, END + 4000) is None  # Ray lists it on a new head only later
    over = [*resumed, entry(7200, 3, "failed"), entry(7260, 3, "not-retried")]
    view = idle_view(over, ATTEMPTS, 15, PLANNED, END + 7300)
    assert view is not None and view.attempt == 3 and view.over_since == END + 7200


def test_after_the_scale_to_zero_a_parked_run_says_what_stops_the_lustre_bill_and_a_failed_park_why():
    parked = entry(960, 2, "parked", reason="57 objects (step 6) in gs://b/; ...",
                   details={"bucket": "grpo-dev-parked-1234abcd", "step": 6, "objects": 57})  # fmt: skip
    view = idle_view([*SUCCEEDED, SCALED, parked], ATTEMPTS, 15, PLANNED, END + 900 + 3600)
    assert view is not None and view.lines() == [
        "idle since 2026-12-01 10:45:00Z (1h 00m), about $0.84 at $0.84/h for the head and storage",
        "parked at 2026-12-01 10:46:00Z in gs://grpo-dev-parked-1234abcd/ (step 6): set grpo-gke:storage.parked true"
        " and run pulumi up to delete the Lustre instance and stop its bill",
    ]
    assert view.as_json()["park"] == {"event": "parked", "time": parked["time"], "reason": parked["reason"]}
    failed = entry(960, 2, "park-failed", reason="exporting /checkpoints/r failed (code 7): denied")
    view = idle_view([*SUCCEEDED, SCALED, failed], ATTEMPTS, 15, PLANNED, END + 900 + 3600)
    assert view is not None and view.lines()[1:] == [
        "parking failed at 2026-12-01 10:46:00Z: exporting /checkpoints/r failed (code 7): denied"
    ]
    assert idle_view([*SUCCEEDED, SCALED], ATTEMPTS, 15, PLANNED, END + 3600).as_json()["park"] is None


def test_a_run_the_guardian_stopped_at_its_budget_is_over_and_idles_like_one_that_succeeded():
    stopped = (ATTEMPTS[0], RayAttempt(2, "STOPPED", T0 + 1200, END))
    budget_stop = entry(-5, 2, "budget-stop", details={"step": 4, "limit": "maxCost", "maxCost": 40.0})
    view = idle_view([*SUCCEEDED[:3], budget_stop, SCALED], stopped, 15, PLANNED, END + 1800)
    assert view is not None and view.lines()[0].startswith("idle since 2026-12-01 10:45:00Z (15m 00s), about $0.21")
