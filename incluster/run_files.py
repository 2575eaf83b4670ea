"""Small files of a run directory on the shared storage, read from the CLI's machine or by `pulumi up`.

The shared storage is mounted only in the cluster (`/data` in the Ray pods), so `read_run_files`
reads it through a short Ray job on the head: its driver, a stdlib-only `python3 -c` script, prints
the files as one JSON line after a marker; the CLI reads that from the job's log and deletes the job.
Every request has DEADLINES.request and the whole read DEADLINES.run_files. `read_local_run_files`
reads a directory on this machine (`--data-root DIR`, a run placed under a local directory). A name ending in `/`
is a directory: its entries' names are read, one a line, sorted.

A run directory holds the run's record `attempts.jsonl` and each attempt's timestamped log
`logs/attempt-<N>.log`, one `<UTC ISO 8601 time with milliseconds and Z>\\t<line>` per output line.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from incluster import job_client
from incluster.attempt import log_path
from incluster.job_client import TERMINAL, JobError, Report, status_of

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

READER_METADATA = {"grpo-gke": "run-files"}
"""Metadata of the reading job: no `stack` or `run`, so it is never taken for one of the stack's attempts."""

MARKER = "grpo-gke-run-files:"
"""What the reading job prints before its JSON line."""

_READER = (
    "import json, os, re, sys\n"
    "root, pattern, names = sys.argv[1], sys.argv[2], sys.argv[3:]\n"
    "keep = re.compile(pattern) if pattern else None\n"
    "found = {}\n"
    "for name in names:\n"
    "    try:\n"
    "        if name.endswith('/'):\n"
    "            found[name] = ''.join(entry + '\\n' for entry in sorted(os.listdir(os.path.join(root, name))))\n"
    "            continue\n"
    "        with open(os.path.join(root, name), encoding='utf-8', errors='replace') as handle:\n"
    "            found[name] = ''.join(line for line in handle if keep is None or keep.search(line))\n"
    "    except OSError:\n"
    "        found[name] = None\n"
    "print(MARKER + json.dumps(found, sort_keys=True), flush=True)\n"
).replace("MARKER", repr(MARKER))
"""The reading job's driver: stdlib only, for the framework image's python3 (3.10 or later)."""


def attempt_log(attempt: int) -> str:
    """The timestamped log of attempt `attempt` (incluster/attempt.py log_path), relative to the run directory."""
    return log_path(Path(), attempt).as_posix()


def _checked(names: Sequence[str]) -> list[str]:
    for name in names:
        path = PurePosixPath(name)
        if path.is_absolute() or ".." in path.parts or not name:
            raise ValueError(f"a run file name is relative to the run directory, without '..', got {name!r}")
    return list(names)


def reader_entrypoint(run_dir: str, names: Sequence[str], keep_lines: str | None = None) -> str:
    """The reading job's entrypoint: the files `names` of `run_dir`, only the lines matching `keep_lines`."""
    return shlex.join(["python3", "-c", _READER, run_dir, keep_lines or "", *_checked(names)])


def parse_reader_log(log: str) -> dict[str, str | None]:
    """The files the reading job printed in its log; JobError when it printed none."""
    for line in reversed(log.splitlines()):
        if line.startswith(MARKER):
            found = json.loads(line[len(MARKER) :])
            return {str(name): None if text is None else str(text) for name, text in found.items()}
    last = (log.strip().splitlines() or ["no output"])[-1][:200]
    raise JobError(f"the job reading the run's files printed none: {last}")


def read_run_files(
    client: JobSubmissionClient,
    run_dir: str,
    names: Sequence[str],
    keep_lines: str | None = None,
    report: Report | None = None,
    poll: float = 0.5,
) -> dict[str, str | None]:
    """The text of each of `names` (relative to `run_dir` on the shared storage; a directory's entries for a name
    ending in `/`), None for a file that is missing or unreadable, read by a short Ray job on the head that is
    deleted once read; only the lines matching the regular expression `keep_lines` when it is given. JobError when the read fails or takes
    longer than DEADLINES.run_files."""
    entrypoint = reader_entrypoint(run_dir, names, keep_lines)
    submission_id = f"grpo-gke-run-files-{uuid.uuid4().hex[:12]}"
    if report is not None:
        report(
            f"reading {len(names)} files of {run_dir} through the Ray head"
            f" (at most {job_client.DEADLINES.run_files:g} s)"
        )
    try:
        client.submit_job(entrypoint=entrypoint, submission_id=submission_id, metadata=dict(READER_METADATA))
    except JobError:
        raise
    except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
        raise JobError(f"Ray refused the job reading the run's files: {str(error).strip()[:200]}") from None
    deadline = time.monotonic() + job_client.DEADLINES.run_files
    try:
        while (status := status_of(client, submission_id)) not in TERMINAL:
            if time.monotonic() > deadline:
                client.stop_job(submission_id)
                raise JobError(
                    "reading the run's files through the Ray head took longer than"
                    f" {job_client.DEADLINES.run_files:g} s"
                )
            time.sleep(poll)
        log = client.get_job_logs(submission_id)
    finally:
        _delete(client, submission_id)
    if status != "SUCCEEDED":
        last = (log.strip().splitlines() or ["no output"])[-1][:200]
        raise JobError(f"the job reading the run's files {status}: {last}")
    return parse_reader_log(log)


def _delete(client: JobSubmissionClient, submission_id: str) -> None:
    """Delete the reading job once it has ended (a live one is stopped first, within DEADLINES.stop)."""
    deadline = time.monotonic() + job_client.DEADLINES.stop
    while status_of(client, submission_id) not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.2)
    client.delete_job(submission_id)


def read_local_run_files(run_dir: Path, names: Sequence[str], keep_lines: str | None = None) -> dict[str, str | None]:
    """The same as read_run_files for a run directory on this machine."""
    keep = re.compile(keep_lines) if keep_lines else None
    found: dict[str, str | None] = {}
    for name in _checked(names):
        try:
            if name.endswith("/"):
                found[name] = "".join(f"{entry}\n" for entry in sorted(os.listdir(run_dir / name)))
                continue
            text = (run_dir / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            found[name] = None
            continue
        found[name] = text if keep is None else "".join(line for line in text.splitlines(True) if keep.search(line))
    return found


def timed_lines(text: str) -> list[tuple[float, str]]:
    """The `(seconds since the epoch, line)` pairs of a timestamped attempt log; a line without a time is skipped."""
    found = []
    for line in text.splitlines():
        stamp, tab, rest = line.partition("\t")
        if not tab:
            continue
        try:
            moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        except ValueError:
            continue
        if moment.tzinfo is None:
            continue
        found.append((moment.timestamp(), rest))
    return found
