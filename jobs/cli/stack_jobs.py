"""The stack's jobs as the CLI's commands pick and show them: the job a command names (else the stack's newest
attempt), one line per job, the run a job belongs to, and the run's record (attempts.jsonl); and where `status`,
`plot` and `logs` read a run when no Ray head has it: its directory (reach_or_read)."""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from core.config.model import StackConfig, sanitize_name
from incluster import job_client, record
from incluster.endpoint import AccessError
from incluster.run_files import read_run_files
from incluster.runs import logged_attempts
from jobs.cli.lines import first_line
from jobs.runs.export import export_of
from jobs.runs.observed import RayAttempt
from jobs.spec.training import run_directory, training_spec, under_data_root
from jobs.submit.target import UsageError, endpoint_of, job_command

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


class NotOnCluster(UsageError):
    """The Ray head answers but lists no attempt of the stack, or not the job named (a new head, a new cluster)."""


def pick_job(client: JobSubmissionClient, stack: str, job_id: str | None) -> JobDetails:
    """The job `job_id` of the stack (refused when another stack, or no stack, submitted it), else the stack's
    newest attempt: an export or another helper job is never the run's newest job."""
    if job_id:
        try:
            job = client.get_job_info(job_id)
        except Exception:  # noqa: BLE001 - the Jobs API answers an unknown id with an HTTP error
            raise NotOnCluster(f"no job {job_id!r} on the cluster") from None
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
        raise NotOnCluster(f"stack {stack!r} has no attempt on the cluster; {job_command('submit', stack)}")
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


@dataclass(frozen=True)
class RunDirectory:
    """A run read from its directory on this machine, no Ray head asked: `--run-dir`, or `--data-root` when no Ray
    head has the run."""

    run: str
    """The run id."""
    path: Path
    """The run directory (its record, `logs/`, its checkpoints)."""
    attempt: int
    """The attempt a command acts on: the one named, else the newest the directory knows."""


ATTEMPT_ID = re.compile(r"(?P<run>.+)-(?P<attempt>[0-9]+)")
"""An attempt's submission id: `<run>-<N>` (incluster/runs.py)."""


def reach_or_read(
    args: argparse.Namespace, config: StackConfig
) -> tuple[JobSubmissionClient, JobDetails] | RunDirectory:
    """The Ray head's client and the job a command acts on (pick_job); or, with `--run-dir`, that run directory; or,
    with `--data-root` when no Ray head answers (a kubeconfig without the cluster, an address that does not answer)
    or the head lists no attempt of the stack or not the job named, the run's directory under it. Either way
    without the head, one line on stderr says where the run is read from."""
    if getattr(args, "run_dir", None):
        found = directory_run(args, config, Path(args.run_dir))
        print(f"reading run {found.run} from its directory {found.path} (no Ray head asked)", file=sys.stderr)
        return found
    try:
        endpoint = endpoint_of(args, config)
    except (UsageError, AccessError) as error:
        if args.address or not args.data_root:  # a malformed --address is bad input, not a cluster gone
            raise
        return _instead(args, config, error)
    try:
        client = job_client.connect(endpoint)
        return client, pick_job(client, config.stack, args.job)
    except (NotOnCluster, job_client.Unreachable) as error:
        if not args.data_root:
            raise
        return _instead(args, config, error)


def _instead(args: argparse.Namespace, config: StackConfig, error: Exception) -> RunDirectory:
    """The run's directory under `--data-root`, read because of `error` (no Ray head has the run), said in one line;
    UsageError, one line, saying both when the directory holds no such run either."""
    reason = first_line(error).split("; ")[0]
    try:
        found = directory_run(args, config, None)
    except UsageError as problem:
        raise UsageError(f"{reason}; {problem}") from None
    print(f"{reason}; reading run {found.run} from its directory {found.path} instead", file=sys.stderr)
    return found


def directory_run(args: argparse.Namespace, config: StackConfig, path: Path | None) -> RunDirectory:
    """The run `path` holds (`--run-dir`), else the run the job id names (`<run>-<N>`), else the stack's run, under
    `--data-root`; the attempt the job id names, else the directory's newest. UsageError, one line, for a job id of
    another run or stack, or a directory that holds no run (saying which runs of the stack it holds)."""
    prefix = f"{sanitize_name(config.stack, 40)}-"
    named = ATTEMPT_ID.fullmatch(args.job) if args.job else None
    if args.job and (named is None or not named["run"].startswith(prefix)):
        raise UsageError(
            f"{args.job!r} is no attempt of stack {config.stack!r}: an attempt's id is <run>-<N>, its run {prefix}<hash>"
        )
    if path is not None:
        path = path.resolve()
        run = path.name
        if named is not None and named["run"] != run:
            raise UsageError(
                f"{args.job} is an attempt of run {named['run']}, not of {run}, the run --run-dir {path} holds"
            )
    else:
        run = named["run"] if named is not None else training_spec(config).run
        path = Path(under_data_root(run_directory(run), args.data_root))
    known = _attempts_in(path)
    if not known:
        runs = {item.name: _attempts_in(item) for item in sorted(path.parent.glob(f"{prefix}*"))}
        held = [f"{name}-{max(numbers)}" for name, numbers in runs.items() if numbers]
        held_text = f"; {path.parent} holds the newest attempts {', '.join(held)}: name one" if held else ""
        raise UsageError(f"{path}: no run directory (no {record.RECORD_FILE} nor logs/attempt-<N>.log){held_text}")
    attempt = int(named["attempt"]) if named is not None else max(known)
    if attempt not in known:
        raise UsageError(
            f"{path} knows no attempt {attempt} of run {run} (it knows {', '.join(map(str, sorted(known)))})"
        )
    return RunDirectory(run, path, attempt)


def _attempts_in(path: Path) -> set[int]:
    """The attempts a run directory's record and attempt logs know; empty for no run directory."""
    try:
        logged = logged_attempts(item.name for item in (path / "logs").iterdir())
    except OSError:
        logged = []
    recorded = {item.get("attempt") for item in record.read(path, lambda problem: None)} if path.is_dir() else set()
    return {number for number in (*logged, *recorded) if isinstance(number, int) and number > 0}


def directory_job_line(run: str, attempt: RayAttempt) -> str:
    """One attempt read from the run directory, as job_line shows a job; its status the record's (UNRECORDED when the
    record does not say)."""
    started = datetime.fromtimestamp(attempt.start, UTC).strftime("%Y-%m-%d %H:%M:%SZ") if attempt.start else "-"
    return f"{run}-{attempt.number}  {attempt.status}  run={run}  attempt={attempt.number}  started={started}"
