"""A run on a Ray cluster: whether it is settled, and the idempotent submission of its next attempt.

Ray refuses a reused submission id, so a run is submitted as attempts `<run>-1`, `<run>-2`, ...
Submitting a run with a live (PENDING/RUNNING) attempt does nothing, nor with a SUCCEEDED one
unless the schedule now asks for more (runs.extends: a raised `grpo.maxSteps` or `grpo.epochs`) or it
stopped at its deadline before its schedule's end (the wrapper's last line, `deadline_stop_of`; NeMo-RL exits 0
there); otherwise (FAILED, STOPPED, SUCCEEDED and extended or stopped at its deadline) it starts the next attempt, which resumes
from the run's newest complete checkpoint: its entrypoint is the attempt wrapper (incluster/attempt.py),
whose modules every submission carries as Ray `py_modules` (incluster/shipping.py).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from incluster import job_client, shipping
from incluster.attempt import deadline_stop_step
from incluster.job_client import LIVE, JobError
from incluster.runs import extends, for_attempt, schedule_done

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

DEADLINE_STOP_TAIL = 5
"""Log lines of a SUCCEEDED attempt read for its wrapper's deadline-stop line (its last)."""


@dataclass(frozen=True)
class Outcome:
    """What `ensure_run` did."""

    action: str
    """`submitted`, `extended` (submitted past a SUCCEEDED attempt's schedule), `resumed` (submitted after an
    attempt that stopped at its deadline before its schedule's end), `live` (an attempt
    is PENDING or RUNNING) or `succeeded` (the run is done)."""
    submission_id: str
    """The attempt submitted or found."""
    status: str
    """Its status when `ensure_run` returned."""

    def sentence(self) -> str:
        """What happened, for the user."""
        if self.action == "submitted":
            return f"submitted {self.submission_id}"
        if self.action == "extended":
            return f"submitted {self.submission_id}: the run SUCCEEDED on a shorter schedule and continues"
        if self.action == "resumed":
            return f"submitted {self.submission_id}: the previous attempt stopped at its deadline and the run resumes"
        if self.action == "live":
            return f"{self.submission_id} is already {self.status}; nothing submitted"
        return (
            f"{self.submission_id} already SUCCEEDED; nothing submitted"
            " (raise grpo.maxSteps to extend the run, or submit --fresh for a new one)"
        )


def deadline_stop_of(client: JobSubmissionClient, job: JobDetails) -> int | None:
    """The step a SUCCEEDED attempt saved before it stopped at its deadline (its wrapper's last line,
    incluster/attempt.py DEADLINE_STOP_LINE), or None: any other attempt, or one that ran to its schedule's end."""
    if job_client.status_text(job.status) != "SUCCEEDED" or not job.submission_id:
        return None
    return deadline_stop_step(job_client.last_lines(client, job.submission_id, DEADLINE_STOP_TAIL))


def settled(previous: list[JobDetails], submission: dict[str, Any], stopped_at: int | None = None) -> Outcome | None:
    """What `ensure_run` finds with the run's attempts `previous` when it submits nothing: `live` (the newest
    is PENDING or RUNNING) or `succeeded` (it SUCCEEDED, did not stop at its deadline before its schedule's end,
    `stopped_at` being the step it saved then, and the schedule asks for no more); else None."""
    if not previous:
        return None
    newest = previous[-1]
    status = job_client.status_text(newest.status)
    if status in LIVE:
        return Outcome("live", newest.submission_id, status)
    if stopped_at is not None and not schedule_done(newest.metadata or {}, stopped_at):
        return None
    if status == "SUCCEEDED" and not extends(newest.metadata or {}, submission["metadata"]):
        return Outcome("succeeded", newest.submission_id, status)
    return None


def wants_workers(client: JobSubmissionClient, submission: dict[str, Any]) -> bool:
    """Whether the run of `submission` needs the GPU workers: anything but a SUCCEEDED run with nothing more
    to do (whose workers the run guardian may have scaled to zero)."""
    previous = job_client.attempts(client, submission["metadata"]["run"])
    stopped_at = deadline_stop_of(client, previous[-1]) if previous else None
    kept = settled(previous, submission, stopped_at)
    return kept is None or kept.action != "succeeded"


def ensure_run(
    client: JobSubmissionClient,
    submission: dict[str, Any],
    stop_of: Callable[[JobDetails], int | None] | None = None,
    after: int = 0,
) -> Outcome:
    """Submit the run of `submission` (attempt-1 kwargs) unless an attempt is live, or the newest
    SUCCEEDED and the schedule asks for no more than it ran. An attempt that stopped at its deadline before
    its schedule's end (`stop_of`, default `deadline_stop_of` through Ray's logs) is `resumed`. The attempt's
    number follows the newest on the cluster and `after` (the newest the run's record knows: a new Ray head lists
    none of the run's attempts, and Ray refuses no id it has not seen, so attempt 1's id and log would be used
    again)."""
    run = submission["metadata"]["run"]
    previous = job_client.attempts(client, run)
    stopped_at = (stop_of or functools.partial(deadline_stop_of, client))(previous[-1]) if previous else None
    kept = settled(previous, submission, stopped_at)
    if kept is not None:
        return kept
    if stopped_at is not None:
        action = "resumed"
    elif previous and job_client.status_text(previous[-1].status) == "SUCCEEDED":
        action = "extended"
    else:
        action = "submitted"
    attempt = max(job_client.attempt_number(previous[-1]) if previous else 0, after) + 1
    kwargs = for_attempt(submission, attempt)
    try:
        with shipping.py_modules() as modules:
            submission_id = client.submit_job(
                **{**kwargs, "runtime_env": {**kwargs["runtime_env"], "py_modules": modules}}
            )
    except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
        raise JobError(f"Ray refused {kwargs['submission_id']}: {job_client.short_reason(error)}") from None
    return Outcome(action, submission_id, job_client.status_of(client, submission_id))
