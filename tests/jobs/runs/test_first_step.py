"""The measured time to each attempt's first step (jobs/runs/first_step.py) from a run's record and step lines: a
preempted and resumed run, a live attempt before its first step, an attempt the guardian submitted ahead of Ray's
start. Times are seconds after T0 (2026-12-01T10:00:00Z), as in test_observed.py."""

from __future__ import annotations

from incluster.record import parse
from jobs.runs.first_step import FirstStep, first_step_lines, first_steps, first_steps_json
from jobs.runs.observed import RayAttempt, goodput_attempts
from tests.jobs.runs.test_observed import RAY, RECORD, T0, record_line, view


def test_a_preempted_and_resumed_run_counts_from_the_submission_and_from_the_previous_attempts_end():
    # The record: attempt 1 submitted at 0 (Ray started it at 60), first step at 600; preempted, ended at 950;
    # attempt 2 submitted at 1000 (Ray: 1200), first step at 1500.
    run = view()
    found = first_steps(goodput_attempts(RAY, parse(RECORD), run.lines), run.steps(), now=T0 + 5000)
    assert found == [FirstStep(1, 600.0, None, None), FirstStep(2, 500.0, 1, 550.0)]
    assert first_step_lines(found) == [
        "attempt 1: 10m 00s from its submission to its first step line",
        "attempt 2: 9m 10s from attempt 1's end to its first step line (8m 20s from its submission)",
    ]
    assert first_steps_json(found)[1] == {
        "attempt": 2, "afterSubmissionS": 500.0, "previousAttempt": 1, "afterPreviousEndS": 550.0,
    }  # fmt: skip


def test_a_live_attempt_without_a_step_line_says_so_and_counts_nothing():
    ray = [RayAttempt(1, "FAILED", T0 + 60, T0 + 950), RayAttempt(2, "RUNNING", T0 + 1200, None)]
    run = view(files={"attempts.jsonl": record_line(0, 1, "submitted"), "logs/attempt-1.log": ""}, ray=ray)
    found = first_steps(goodput_attempts(ray, run.record, run.lines), run.steps(), now=T0 + 1300)
    assert found == [FirstStep(1, None, None, None), FirstStep(2, None, 1, None)]
    assert first_step_lines(found) == ["attempt 1: no step line yet", "attempt 2: no step line yet"]


def test_an_attempt_not_yet_started_is_left_out():
    assert first_steps(goodput_attempts([RayAttempt(1, "PENDING", None, None)], []), [], now=T0) == []
