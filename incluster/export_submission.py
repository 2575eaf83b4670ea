"""The export's submission: an export job with the in-cluster package as its modules, tried again under the next
try's id after a try that failed or was stopped, and followed instead when it is already pending, running or done."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from incluster import job_client, shipping
from incluster.export_run import retry_id
from incluster.job_client import JobError

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

EXPORT_TRIES = 20
"""Most tries of one export (incluster/export_run.py retry_id) before giving up on one whose tries all failed."""

LIVE_OR_DONE = ("PENDING", "RUNNING", "SUCCEEDED")
"""Statuses of an export already submitted that a second submission follows instead of trying again."""


def submit_export(client: JobSubmissionClient, submission: dict[str, Any]) -> tuple[str, bool]:
    """Submit an export (jobs/runs/export.py export_submission) with its driver's modules: its submission id, and
    whether that export was already submitted (pending, running or succeeded: follow it, nothing submitted).

    Ray refuses a submission_id it already holds (ray 2.60.0 dashboard/modules/job/job_manager.py L549-556,
    ValueError "Job with submission_id ... already exists"; the job agent answers it as HTTP 400, job_agent.py
    L58-62, which the head passes on as HTTP 500, job_head.py L131-148 and L434-439, and sdk.py L265-268 with
    dashboard_sdk.py L304-307 raise that as RuntimeError); after a refusal the id's status says
    which case it is, so no error text is parsed. A try that ended FAILED or STOPPED is followed by the next try's id."""
    base = submission.get("submission_id")
    for retry in range(1, EXPORT_TRIES + 1 if base else 2):
        wanted = {**submission, "submission_id": retry_id(base, retry)} if base else submission
        try:
            with shipping.py_modules() as modules:
                runtime_env = {**wanted["runtime_env"], "py_modules": modules}
                return client.submit_job(**{**wanted, "runtime_env": runtime_env}), False
        except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
            refused = JobError(f"Ray refused the export: {job_client.short_reason(error)}")
        try:
            status = job_client.status_of(client, wanted["submission_id"]) if base else None
        except Exception:  # noqa: BLE001 - no such job (HTTP 404 as RuntimeError) or Ray unreachable
            status = None
        if status is None:
            raise refused from None
        if status in LIVE_OR_DONE:
            return wanted["submission_id"], True
    raise JobError(f"the export {base} failed or was stopped {EXPORT_TRIES} times; see `python -m jobs logs {base}`")
