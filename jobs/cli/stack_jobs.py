"""The stack's jobs as the CLI's commands pick and show them: the job a command names (else the stack's newest
attempt), one line per job, the run a job belongs to, and the run's record (attempts.jsonl)."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from incluster import job_client, record
from incluster.run_files import read_run_files
from jobs.runs.export import export_of
from jobs.spec.training import run_directory, under_data_root
from jobs.submit.target import UsageError, job_command

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient


def job_line(job: JobDetails) -> str:
    """One job as `list` and `status` show it: an attempt with its run and number, an export with the run and step."""
    meta = job.metadata or {}
    started = (
        datetime.fromtimestamp(job.start_time / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ") if job.start_time else "-"
    )
    exported = export_of(meta)
    if exported is not None:
        what = f"export of run={exported}  step={meta.get('step', '-')}"
    else:
        what = f"run={meta.get('run', '-')}  attempt={meta.get('attempt', '-')}"
    return f"{job.submission_id}  {job_client.status_text(job.status)}  {what}  started={started}"


def run_of(job: JobDetails) -> str | None:
    """The run a job belongs to: an attempt's `run`, an export's run (jobs/runs/export.py export_of); None for others."""
    meta = job.metadata or {}
    return meta.get("run") or export_of(meta)


def pick_job(client: JobSubmissionClient, stack: str, job_id: str | None) -> JobDetails:
    """The job `job_id` of the stack (refused when another stack, or no stack, submitted it), else the stack's
    newest attempt: an export or another helper job is never the run's newest job."""
    if job_id:
        try:
            job = client.get_job_info(job_id)
        except Exception:  # noqa: BLE001 - the Jobs API answers an unknown id with an HTTP error
            raise UsageError(f"no job {job_id!r} on the cluster") from None
        owner = (job.metadata or {}).get("stack")
        if owner != stack:
            if owner:
                raise UsageError(
                    f"job {job_id} belongs to stack {owner!r}, not {stack!r}; name its stack: --stack {owner}"
                )
            raise UsageError(f"job {job_id} belongs to no grpo-gke stack (its metadata names none), not to {stack!r}")
        return job
    attempts = [job for job in job_client.stack_jobs(client, stack) if (job.metadata or {}).get("run")]
    if not attempts:
        raise UsageError(f"stack {stack!r} has no attempt on the cluster; {job_command('submit', stack)}")
    return attempts[-1]


def record_where(args: argparse.Namespace, run: str) -> str:
    """Where the run's record lies: under `--data-root`, else on the shared storage."""
    where = f"{run_directory(run)}/{record.RECORD_FILE}"
    return under_data_root(where, args.data_root) if args.data_root else where


def print_records(args: argparse.Namespace, client: JobSubmissionClient, runs: list[str]) -> None:
    """Each run's record (attempts.jsonl): under `--data-root`, else read through the Ray head (incluster/run_files.py,
    one short job per run); nothing for a run without a record."""
    for run in dict.fromkeys(runs):
        if args.data_root:
            events = record.read(Path(under_data_root(run_directory(run), args.data_root)))
        else:
            found = read_run_files(client, run_directory(run), [record.RECORD_FILE])
            events = record.parse(found[record.RECORD_FILE] or "")
        lines = record.record_lines(events)
        if lines:
            print(f"record of {run} ({record_where(args, run)}):")
        for line in lines:
            print(f"  {line}")
