"""The measured time to each attempt's first training step (the plan estimates it: plan/startup.py).

The time from `pulumi up` is not knowable from the cluster: nothing in it records when `up` began. What the run's
record and step lines hold instead: each attempt's submission (its record's `submitted` event, else Ray's start;
jobs/runs/observed.py goodput_attempts) and its first step line (jobs/runs/goodput.py steps_done); and for an attempt
after another, the previous attempt's end, which is when a preemption or failure ended it. Pure: attempts and steps
in, figures and lines out.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from jobs.runs.goodput import Attempt, StepDone, duration

HEADING = (
    "time to the first step (measured; `up` itself is not visible from the cluster,"
    " so each attempt counts from its submission):"
)
"""The line above the attempts' figures in `status`."""


@dataclass(frozen=True)
class FirstStep:
    """One attempt's way to its first step."""

    attempt: int
    """The attempt's number."""
    after_submission_s: float | None
    """Seconds from its submission to its first step line; None before one."""
    previous: int | None
    """The attempt before it, when one ended before it started; else None."""
    after_previous_end_s: float | None
    """Seconds from that attempt's end to this one's first step line; None without either."""


def first_steps(attempts: Sequence[Attempt], steps: Sequence[StepDone], now: float) -> list[FirstStep]:
    """Each started attempt's time to its first step line, oldest first (a live attempt's steps until `now`)."""
    ordered = sorted((item for item in attempts if item.start is not None), key=lambda item: item.number)
    found = []
    for index, item in enumerate(ordered):
        end = now if item.end is None else item.end
        own = sorted(done.time for done in steps if item.start <= done.time <= end)
        first = own[0] if own else None
        before = ordered[index - 1] if index else None
        previous = before if before is not None and before.end is not None else None
        found.append(
            FirstStep(
                attempt=item.number,
                after_submission_s=None if first is None else first - item.submitted,
                previous=None if previous is None else previous.number,
                after_previous_end_s=None if first is None or previous is None else first - previous.end,
            )
        )
    return found


def first_step_lines(found: Sequence[FirstStep]) -> list[str]:
    """The lines `status` prints under HEADING, one per attempt."""
    lines = []
    for item in found:
        if item.after_submission_s is None:
            lines.append(f"attempt {item.attempt}: no step line yet")
        elif item.after_previous_end_s is None:
            lines.append(
                f"attempt {item.attempt}: {duration(item.after_submission_s)} from its submission to its first step line"
            )
        else:
            lines.append(
                f"attempt {item.attempt}: {duration(item.after_previous_end_s)} from attempt {item.previous}'s end to"
                f" its first step line ({duration(item.after_submission_s)} from its submission)"
            )
    return lines


def first_steps_json(found: Sequence[FirstStep]) -> list[dict[str, Any]]:
    """The figures as plain data for `status --json`."""
    return [
        {
            "attempt": item.attempt,
            "afterSubmissionS": item.after_submission_s,
            "previousAttempt": item.previous,
            "afterPreviousEndS": item.after_previous_end_s,
        }
        for item in found
    ]
