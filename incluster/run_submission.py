"""A run on a Ray cluster: whether it is settled, and the idempotent submission of its next attempt.

Ray refuses a reused submission id, so a run is submitted as attempts `<run>-1`, `<run>-2`, ...
Submitting a run with a live (PENDING/RUNNING) attempt does nothing, nor with a SUCCEEDED one
unless the schedule now asks for more (runs.extends: a raised `grpo.maxSteps` or `grpo.epochs`) or it
stopped at its deadline before its schedule's end (the wrapper's last line, `deadline_stop_of`; NeMo-RL exits 0
there), nor with one the run's record says ended the run (runs.OVER_EVENTS: `succeeded`, `not-retried`, `gave-up`),
nor with one the guardian stopped at the run's budget (`budget-stop`) unless the submission raises that budget;
otherwise (FAILED, STOPPED, SUCCEEDED and extended or stopped at its deadline, or gone with its Ray head) it starts
the next attempt, which resumes from the run's newest complete checkpoint: its entrypoint is the attempt wrapper
(incluster/attempt.py), whose modules every submission carries as Ray `py_modules` (incluster/shipping.py).

Every submitter (the run guardian, `pulumi up`'s post-deploy step, `python -m jobs submit`, the demo) numbers the
next attempt here, one past runs.newest_attempt over Ray's table, the run's record and its attempt logs (a RunDirView:
read in place by the guardian, through the Ray head by the client, or under `--data-root`). Two submitters at the
same moment therefore compute the same id, and Ray refuses the second (ray 2.60.0
python/ray/dashboard/modules/job/job_manager.py L549-556: `put_info(..., overwrite=False)`, else ValueError "Job with
submission_id ... already exists"): the id is the fence, which leader election is not (kubernetes/client-go
tools/leaderelection/leaderelection.go L17-20, the package comment, read at 9a8caafa, the stored copy: "This
implementation does not guarantee that only one client is acting as a leader (a.k.a. fencing)"). The one refused
says so and submits nothing.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from incluster import budget, job_client, shipping
from incluster.attempt import deadline_stop_step
from incluster.job_client import LIVE, JobError, Report
from incluster.record import RECORD_FILE, parse
from incluster.run_files import read_local_run_files, read_run_files
from incluster.runs import (
    attempt_id,
    extends,
    for_attempt,
    logged_attempts,
    newest_attempt,
    over_entry,
    schedule_done,
)

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

DEADLINE_STOP_TAIL = 5
"""Log lines of a SUCCEEDED attempt read for its wrapper's deadline-stop line (its last)."""


RUN_DIR_NAMES = (RECORD_FILE, "logs/")
"""What a submitter reads of the run's directory: its record and the names in `logs/` (incluster/run_files.py)."""

SUBMITTING = ("submitted", "extended", "resumed", "continued", "raised")
"""The Outcome actions that submit the next attempt."""

DONE = ("succeeded", "over")
"""The Outcome actions of a run with nothing more to do: no GPU worker is needed for it."""


@dataclass(frozen=True)
class RunDirView:
    """What the run's directory knows of its attempts, read before the next attempt is numbered."""

    entries: tuple[dict[str, Any], ...] = ()
    """The run's record (incluster/record.py), oldest first."""
    logged: tuple[int, ...] = ()
    """The numbers of its attempt logs, `logs/attempt-N.log` (every attempt's wrapper writes one)."""


def view_of(files: Mapping[str, str | None]) -> RunDirView:
    """The RunDirView of RUN_DIR_NAMES as incluster/run_files.py reads them (None: missing)."""
    names = (files.get("logs/") or "").splitlines()
    return RunDirView(tuple(parse(files.get(RECORD_FILE) or "")), tuple(logged_attempts(names)))


def local_view(run_dir: Path) -> RunDirView:
    """The RunDirView of a run directory this process reaches (the guardian's `/data`, `--data-root`)."""
    return view_of(read_local_run_files(run_dir, RUN_DIR_NAMES))


def head_view(client: JobSubmissionClient, run_dir: str, report: Report | None = None) -> RunDirView:
    """The RunDirView of a run directory on the shared storage, read through the Ray head (a short job, at most
    DEADLINES.run_files); JobError when that read fails."""
    return view_of(read_run_files(client, run_dir, RUN_DIR_NAMES, report=report))


@dataclass(frozen=True)
class Outcome:
    """What `ensure_run` did (or, from `next_step`, would do)."""

    action: str
    """`submitted`, `extended` (submitted past a SUCCEEDED attempt's schedule), `resumed` (submitted after an
    attempt that stopped at its deadline before its schedule's end), `continued` (submitted after an attempt the Ray
    head no longer lists: a new head), `raised` (submitted after an attempt the guardian stopped at the run's budget,
    which the submission's job.maxCost or job.maxGpuHours now raises), `live` (an attempt is PENDING or RUNNING), `succeeded` (the run is done),
    `over` (the run's record says the run ended at that attempt, or the guardian stopped it at a budget not raised
    since: status `budget-stop`) or `taken` (another submitter's attempt took the id
    first)."""
    submission_id: str
    """The attempt submitted or found."""
    status: str
    """Its status when `ensure_run` returned; for `over`, the record's event."""
    reason: str = ""
    """For `over`: the record entry's reason."""

    def sentence(self) -> str:
        """What happened, in one line for the user."""
        if self.action == "submitted":
            return f"submitted {self.submission_id}"
        if self.action == "extended":
            return f"submitted {self.submission_id}: the run SUCCEEDED on a shorter schedule and continues"
        if self.action == "resumed":
            return f"submitted {self.submission_id}: the previous attempt stopped at its deadline and the run resumes"
        if self.action == "continued":
            return (
                f"submitted {self.submission_id}: the run's directory knows attempt {number_of(self.submission_id) - 1},"
                " which this Ray head does not list (a new head), and the run continues from its checkpoints"
            )
        if self.action == "raised":
            return (
                f"submitted {self.submission_id}: the run's budget was raised and the run resumes from its checkpoint"
            )
        if self.action == "over" and self.status == "budget-stop":
            return (
                f"the run is over: the run guardian stopped {self.submission_id} at the run's budget"
                f"{': ' + self.reason if self.reason else ''}; nothing submitted (raise job.maxCost or job.maxGpuHours"
                " and pulumi up to resume it)"
            )
        if self.action == "live":
            return f"{self.submission_id} is already {self.status}; nothing submitted"
        if self.action == "taken":
            return f"{self.submission_id} was submitted by another submitter first ({self.status}); nothing submitted"
        if self.action == "over" and self.status != "succeeded":
            return (
                f"the run is over: the run guardian recorded {self.submission_id} {self.status}"
                f"{': ' + self.reason if self.reason else ''}; nothing submitted (submit --fresh for a new run)"
            )
        return (
            f"{self.submission_id} already SUCCEEDED; nothing submitted"
            " (raise grpo.maxSteps to extend the run, or submit --fresh for a new one)"
        )


def number_of(submission_id: str) -> int:
    """The attempt number of an attempt's submission id (`<run>-<N>`, runs.attempt_id)."""
    return int(submission_id.rsplit("-", 1)[1])


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


def next_step(
    client: JobSubmissionClient,
    submission: dict[str, Any],
    known: Callable[[], RunDirView],
    stop_of: Callable[[JobDetails], int | None] | None = None,
    after: int = 0,
) -> Outcome:
    """What `ensure_run` does now for the run of `submission`, without doing it: for an action of SUBMITTING, the id
    of the next attempt, one past runs.newest_attempt of Ray's table, the run's directory (`known`, read only when no
    attempt is live) and `after` (the newest attempt the caller saw). `stop_of` (default `deadline_stop_of` through
    Ray's logs) gives the step a SUCCEEDED attempt saved before it stopped at its deadline."""
    run = submission["metadata"]["run"]
    previous = job_client.attempts(client, run)
    listed = previous[-1] if previous else None
    if listed is not None and job_client.status_text(listed.status) in LIVE:
        return Outcome("live", listed.submission_id, job_client.status_text(listed.status))
    view = known()
    listed_number = job_client.attempt_number(listed) if listed is not None else 0
    newest = newest_attempt((listed_number, after), view.entries, view.logged)
    over = over_entry(view.entries, newest)
    following = attempt_id(run, newest + 1)
    if listed is not None and listed_number == newest:
        stopped_at = (stop_of or functools.partial(deadline_stop_of, client))(listed)
        kept = settled(previous, submission, stopped_at)
        if kept is not None:
            return kept
        if over is not None and over.get("event") != "succeeded":
            return Outcome("over", listed.submission_id, str(over.get("event")), str(over.get("reason") or ""))
        paused = _budget_outcome(view.entries, newest, submission, listed.submission_id, following)
        if paused is not None:
            return paused
        if stopped_at is not None:
            return Outcome("resumed", following, "")
        if job_client.status_text(listed.status) == "SUCCEEDED":
            return Outcome("extended", following, "")
        return Outcome("submitted", following, "")
    if newest == 0:
        return Outcome("submitted", following, "")
    if over is not None:
        done = over.get("details") if over.get("event") == "succeeded" else None
        if not isinstance(done, dict) or not extends(done, submission["metadata"]):
            return Outcome("over", attempt_id(run, newest), str(over.get("event")), str(over.get("reason") or ""))
        return Outcome("extended", following, "")
    paused = _budget_outcome(view.entries, newest, submission, attempt_id(run, newest), following)
    return paused or Outcome("continued", following, "")


def _budget_outcome(
    entries: tuple[dict[str, Any], ...], newest: int, submission: dict[str, Any], stopped: str, following: str
) -> Outcome | None:
    """After the guardian stopped the newest attempt at the run's budget (its `budget-stop` entry): `raised` (the next
    attempt, `following`) when the submission's budget lets the run go on (incluster/budget.py raised), else `over`;
    None without such an entry."""
    entry = budget.stop_entry(entries, newest)
    if entry is None:
        return None
    if budget.raised(entry.get("details") or {}, submission["metadata"]):
        return Outcome("raised", following, "")
    return Outcome("over", stopped, "budget-stop", str(entry.get("reason") or ""))


def wants_workers(client: JobSubmissionClient, submission: dict[str, Any], known: Callable[[], RunDirView]) -> bool:
    """Whether the run of `submission` needs the GPU workers: anything but a run with nothing more to do (SUCCEEDED,
    or over by its record), whose workers the run guardian may have scaled to zero."""
    return next_step(client, submission, known).action not in DONE


def ensure_run(
    client: JobSubmissionClient,
    submission: dict[str, Any],
    known: Callable[[], RunDirView],
    stop_of: Callable[[JobDetails], int | None] | None = None,
    after: int = 0,
) -> Outcome:
    """Submit the run of `submission` (attempt-1 kwargs) as `next_step` numbers it, unless an attempt is live, the
    newest SUCCEEDED and the schedule asks for no more than it ran, or the run's record says the run is over. A
    refused id that Ray holds is another submitter's attempt (`taken`); any other refusal is a JobError."""
    planned = next_step(client, submission, known, stop_of, after)
    if planned.action not in SUBMITTING:
        return planned
    kwargs = for_attempt(submission, number_of(planned.submission_id))
    try:
        with shipping.py_modules() as modules:
            submission_id = client.submit_job(
                **{**kwargs, "runtime_env": {**kwargs["runtime_env"], "py_modules": modules}}
            )
    except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
        refused = JobError(f"Ray refused {kwargs['submission_id']}: {job_client.short_reason(error)}")
        try:
            status = job_client.status_of(client, kwargs["submission_id"])
        except Exception:  # noqa: BLE001 - no such job (HTTP 404 as RuntimeError) or Ray unreachable
            raise refused from None
        return Outcome("taken", kwargs["submission_id"], status)
    return Outcome(planned.action, submission_id, job_client.status_of(client, submission_id))
