"""The run as its directory alone tells it (jobs/runs/observe.py directory_attempts): the attempts, their times and
how each ended, from the record and the attempt logs, without Ray's job list. Pure: the record's entries are made by
incluster/record.py entry, the writer the guardian uses."""

from __future__ import annotations

from incluster.record import entry
from jobs.runs.observe import UNRECORDED, directory_attempts
from jobs.runs.observed import RayAttempt

T0 = 1796126400.0


def test_each_attempt_starts_at_its_submission_or_first_log_line_and_ends_at_its_last_log_line():
    record = [
        entry(T0 + 100, 1, "failed", "gpu-capacity-lost: node lost"),
        entry(T0 + 101, 1, "recovering", "recovery 1 of 20"),
        entry(T0 + 130, 2, "submitted", "attempt 2 after lost GPU capacity", resumed_from_step=4),
        entry(T0 + 200, 2, "succeeded"),
    ]
    logs = {1: [(T0 + 5, "start"), (T0 + 60, "step:5 - ...")], 2: [(T0 + 140, "start"), (T0 + 190, "step:8 - ...")]}
    assert directory_attempts(record, logs) == [
        RayAttempt(1, "FAILED", T0 + 5, T0 + 60),
        RayAttempt(2, "SUCCEEDED", T0 + 130, T0 + 190),
    ]


def test_an_attempt_the_record_does_not_end_is_unrecorded_and_stops_are_stopped():
    record = [entry(T0 + 50, 1, "deadline-stop", "saved step 4", details={"step": 4}), entry(T0 + 60, 3, "budget-stop")]
    logs = {1: [(T0, "a"), (T0 + 40, "b")], 2: [(T0 + 70, "c")]}
    assert directory_attempts(record, logs) == [
        RayAttempt(1, "STOPPED", T0, T0 + 40),
        RayAttempt(2, UNRECORDED, T0 + 70, T0 + 70),
        RayAttempt(3, "STOPPED", T0 + 60, T0 + 60),  # no log: its record's times
    ]
