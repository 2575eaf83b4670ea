"""Small files of a run directory on the shared storage, read from the CLI's machine or by `pulumi up`.

The shared storage is mounted only in the cluster (`/data` in the Ray pods), so `read_run_files`
reads it through a short Ray job on the head: its driver, a stdlib-only `python3 -c` script, prints
the files as one JSON line after a marker; the CLI reads that from the job's log and deletes the job.
Every request has DEADLINES.request and the whole read DEADLINES.run_files. `read_local_run_files`
reads a directory on this machine (`--data-root DIR`, a run placed under a local directory). A name ending in `/`
is a directory: its entries' names are read, one a line, sorted.

A run directory holds the run's record `attempts.jsonl` and each attempt's timestamped log
`logs/attempt-<N>.log`, one `<UTC ISO 8601 time with milliseconds and Z>\\t<line>` per output line, rolled into
`logs/attempt-<N>.<K>.log` parts (incluster/attempt.py ROLL_SECONDS): both readers return a `.log`'s parts joined in
order under its name.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

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
    "def parts(name):\n"
    "    yield name\n"
    "    part = 1\n"
    "    while name.endswith('.log') and os.path.isfile(os.path.join(root, f'{name[:-4]}.{part}.log')):\n"
    "        yield f'{name[:-4]}.{part}.log'\n"
    "        part += 1\n"
    "for name in names:\n"
    "    try:\n"
    "        if name.endswith('/'):\n"
    "            found[name] = ''.join(entry + '\\n' for entry in sorted(os.listdir(os.path.join(root, name))))\n"
    "            continue\n"
    "        text = []\n"
    "        for part in parts(name):\n"
    "            with open(os.path.join(root, part), encoding='utf-8', errors='replace') as handle:\n"
    "                text += [line for line in handle if keep is None or keep.search(line)]\n"
    "        found[name] = ''.join(text)\n"
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


def printed(log: str) -> dict[str, Any]:
    """The JSON object a reading job printed after MARKER; JobError when it printed none."""
    for line in reversed(log.splitlines()):
        if line.startswith(MARKER):
            return json.loads(line[len(MARKER) :])
    last = (log.strip().splitlines() or ["no output"])[-1][:200]
    raise JobError(f"the job reading the run's files printed none: {last}")


def parse_reader_log(log: str) -> dict[str, str | None]:
    """The files the reading job printed in its log; JobError when it printed none."""
    return {str(name): None if text is None else str(text) for name, text in printed(log).items()}


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
    found = _through_head(
        client, reader_entrypoint(run_dir, names, keep_lines), f"reading {len(names)} files of {run_dir}", report, poll
    )
    return {str(name): None if text is None else str(text) for name, text in found.items()}


def _through_head(
    client: JobSubmissionClient, entrypoint: str, what: str, report: Report | None, poll: float
) -> dict[str, Any]:
    """Run a reading job's `entrypoint` on the head (deleted once read) and parse what it printed after MARKER."""
    submission_id = f"grpo-gke-run-files-{uuid.uuid4().hex[:12]}"
    if report is not None:
        report(f"{what} through the Ray head (at most {job_client.DEADLINES.run_files:g} s)")
    _refused_as_job_error(
        lambda: client.submit_job(entrypoint=entrypoint, submission_id=submission_id, metadata=dict(READER_METADATA)),
        "start",
    )
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
        log = _refused_as_job_error(lambda: client.get_job_logs(submission_id), "read the log of")
    finally:
        _delete(client, submission_id)
    if status != "SUCCEEDED":
        last = (log.strip().splitlines() or ["no output"])[-1][:200]
        raise JobError(f"the job reading the run's files {status}: {last}")
    return printed(log)


_HOLDINGS = (
    "import json, os, sys\n"
    "data, checkpoints, exports, run = sys.argv[1:5]\n"
    "def dirs(root):\n"
    "    path = os.path.join(data, root.strip('/'))\n"
    "    return sorted(e.name for e in os.scandir(path) if e.is_dir()) if os.path.isdir(path) else None\n"
    "top = os.path.join(data, checkpoints.strip('/'), run)\n"
    "files = sorted(os.path.relpath(os.path.join(d, f), top) for d, _, found in os.walk(top) for f in found)\n"
    "print(MARKER + json.dumps({'runs': dirs(checkpoints) or [], 'exports': dirs(exports), 'runFiles': files}),"
    " flush=True)\n"
).replace("MARKER", repr(MARKER))
"""The holdings job's driver: the run directories, the exports directories (null without an exports root) and the
run's own files, of the instance mounted at the first argument; stdlib only."""


def read_holdings(
    client: JobSubmissionClient, data_root: str, checkpoints_root: str, exports_root: str, run: str,
    report: Report | None = None, poll: float = 0.5,
) -> dict[str, Any]:  # fmt: skip
    """What the shared storage mounted at `data_root` holds for a park (incluster/park.py Holdings' fields as
    `runs`, `exports`, `runFiles`), read by a short job on the head. JobError as read_run_files."""
    entrypoint = holdings_entrypoint(data_root, checkpoints_root, exports_root, run)
    return _through_head(client, entrypoint, f"listing the runs on {data_root}", report, poll)


def holdings_entrypoint(data_root: str, checkpoints_root: str, exports_root: str, run: str) -> str:
    """The holdings job's entrypoint."""
    return shlex.join(["python3", "-c", _HOLDINGS, data_root, checkpoints_root, exports_root, run])


def _delete(client: JobSubmissionClient, submission_id: str) -> None:
    """Delete the reading job once it has ended (a live one is stopped first, within DEADLINES.stop)."""
    deadline = time.monotonic() + job_client.DEADLINES.stop
    while status_of(client, submission_id) not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.2)
    _refused_as_job_error(lambda: client.delete_job(submission_id), "delete")


def _refused_as_job_error(call: Callable[[], Any], verb: str) -> Any:
    """`call()`'s result; JobError naming what Ray refused when the Jobs API answers anything but success (Ray's SDK
    raises RuntimeError for a status other than 200, the dashboard's answer in it: ray 2.60.0
    dashboard/modules/dashboard_sdk.py _raise_error), in one line: the first of the error's, which names the status."""
    try:
        return call()
    except JobError:
        raise
    except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
        first = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        raise JobError(f"Ray refused to {verb} the job reading the run's files: {first}") from None


def _parts(run_dir: Path, name: str) -> list[str]:
    """`name` and, for a `.log`, the parts rolled after it (incluster/attempt.py log_part: `<stem>.<K>.log`), in order."""
    found, part = [name], 1
    while name.endswith(".log") and (run_dir / f"{name[:-4]}.{part}.log").is_file():
        found.append(f"{name[:-4]}.{part}.log")
        part += 1
    return found


def read_local_run_files(run_dir: Path, names: Sequence[str], keep_lines: str | None = None) -> dict[str, str | None]:
    """The same as read_run_files for a run directory on this machine."""
    keep = re.compile(keep_lines) if keep_lines else None
    found: dict[str, str | None] = {}
    for name in _checked(names):
        try:
            if name.endswith("/"):
                found[name] = "".join(f"{entry}\n" for entry in sorted(os.listdir(run_dir / name)))
                continue
            text = "".join(
                (run_dir / part).read_text(encoding="utf-8", errors="replace") for part in _parts(run_dir, name)
            )
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
