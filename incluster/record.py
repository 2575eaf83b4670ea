"""The run's record, `<run dir>/attempts.jsonl`: one JSON object per line (keys sorted) per decision
about the run's attempts, appended by whoever decides (the guardian), read by `status` and `list`.

Each line holds `time` (UTC, ISO 8601 with milliseconds and Z), `attempt` (int), `event` (EVENTS),
`reason` (one line, "" when none), `resumed_from_step` (int or null) and, when there are any,
`last_lines` (list of str) and `details` (object). A reader checks each line once when it parses it (`parse_checked`):
a line that cannot be used (not JSON, bytes damaged, a shape no writer of this version makes) is skipped and reported,
never raised, so a decision on the record never meets a missing key; an appender repairs a torn last line first
(`append`).

Pod-side (the in-cluster guardian and the attempt wrapper run it in the framework image; incluster/): stdlib
only.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

RECORD_FILE = "attempts.jsonl"
"""The record's file name in the run directory."""

EVENTS = (
    "submitted",
    "failed",
    "recovering",
    "not-retried",
    "gave-up",
    "succeeded",
    "scaled-to-zero",
    "export-submitted",
    "exported",
    "preflight-passed",
    "preflight-failed",
    "deadline-stop",
    "capacity",
    "gpu-rungs",
    "parked",
    "park-failed",
    "budget-stop",
)
"""Every event a record line may name. `deadline-stop`: the attempt stopped at a known end of its GPU capacity
after saving (`details.step`) before its schedule's end; the next attempt resumes from it (not a recovery).
`capacity`: the readiness gate before the next attempt waited on the capacity ladder: `details.rung` (the rung the
autoscaler last tried), `details.since`, `details.lastFailure` (why the last scale-up failed), read from the
autoscaler's events on the pending GPU workers (incluster/capacity_events.py); once per attempt.
`scaled-to-zero`: the guardian scaled the GPU workers to zero at the entry's `time`, from when the idle bill runs:
`details.idleHourly` ($/h of the parts that stay, as `pulumi up` priced them), `details.idleParts`,
`details.idleUnpriced` (those without a price) and `details.catalogDate`.
`gpu-rungs`: the Ready GPU nodes when the guardian first saw the attempt RUNNING, `details.rungs` (nodes per rung of
the capacity ladder, by each node's pool; without a ladder all on gpu.provisioning) and `details.otherNodes` (GPU
nodes of no rung's pool, not the run's); once per attempt. `python -m jobs status` prices the attempt's GPU hours by
it.
`succeeded`: `details.maxSteps` and `details.epochs`, the schedule the attempt ran (its job metadata), so that a
submitter on a Ray head that no longer lists it can tell whether a raised schedule extends the run (incluster/runs.py
schedule_of).
`exported`: the guardian saw the export job it submitted (`export-submitted`) SUCCEEDED on the Ray head:
`details.step`, `details.submission`.
`parked`: after the scale to zero the guardian exported what the instance holds to the parked bucket and wrote the
park marker (storage.parkWhenIdle; incluster/park.py): `details.bucket`, `details.step` (the newest complete step
exported, null without a checkpoint) and `details.objects`; the Lustre instance bills on until `storage.parked: true` and `pulumi up` delete
it. `park-failed`: that export failed (the reason); `python -m jobs park` parks by hand.
`budget-stop`: the guardian stops the attempt right after its newest checkpoint, `details.step` (null: it saved none
and the budget was crossed), because the next save would complete past the run's budget (incluster/budget.py):
`details.limit` (the key it would cross: `maxCost` or `maxGpuHours`), `details.maxCost` and `details.maxGpuHours` (the
budget then, null for no limit), `details.spent` ($) and `details.gpuHours` (used then). The run is over until a
`pulumi up` raises that limit (incluster/budget.py raised); the next attempt then resumes from the checkpoint."""

GPU_CAPACITY_LOST = "gpu-capacity-lost"
"""`details.cause` of a `failed` event whose attempt lost its GPU nodes (a preemption): the guardian writes it,
goodput counts the attempt's lost time as lost to preemption."""


def utc_stamp(seconds: float) -> str:
    """`seconds` since the epoch as UTC ISO 8601 with milliseconds and Z (`2026-12-01T11:50:03.042Z`)."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def stamp_seconds(stamp: Any) -> float | None:
    """The seconds since the epoch of a record's `utc_stamp` text (any ISO 8601 time with a zone); None for anything
    else (not text, unreadable, or without a zone)."""
    if not isinstance(stamp, str):
        return None
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


def entry(
    seconds: float,
    attempt: int,
    event: str,
    reason: str = "",
    resumed_from_step: int | None = None,
    last_lines: list[str] | None = None,
    details: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One record line as plain data; ValueError for an unknown event or a reason of more than one line."""
    if event not in EVENTS:
        raise ValueError(f"unknown record event {event!r} (known: {', '.join(EVENTS)})")
    if "\n" in reason:
        raise ValueError(f"a record reason is one line, got {reason!r}")
    line: dict[str, Any] = {
        "time": utc_stamp(seconds),
        "attempt": attempt,
        "event": event,
        "reason": reason,
        "resumed_from_step": resumed_from_step,
    }
    if last_lines:
        line["last_lines"] = list(last_lines)
    if details:
        line["details"] = dict(details)
    return line


def record_path(run_dir: Path) -> Path:
    """The record of the run in `run_dir`."""
    return run_dir / RECORD_FILE


TORN_SUFFIX = ".torn"
"""Beside the record, `attempts.jsonl.torn` keeps the bytes of every torn last line `append` cut off the record
before it appended, each piece followed by a newline. The idea is etcd's WAL repair (etcd-io/etcd @047302be
server/storage/wal/repair.go `Repair`, read 2026-12-07): on an unexpected EOF in the last WAL file it copies that file
to `<name>.broken`, truncates it after the last whole record and fdatasyncs it; here only the torn bytes are kept."""


def torn_path(run_dir: Path) -> Path:
    """The file beside the record holding the torn tails `append` cut off it."""
    return run_dir / (RECORD_FILE + TORN_SUFFIX)


def _tail_start(descriptor: int, size: int) -> int:
    """The offset just after the record's last newline (0 when it has none), reading back from its end."""
    end = size
    while end > 0:
        start = max(0, end - 65536)
        chunk = os.pread(descriptor, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            return start + newline + 1
        end = start
    return 0


def _repair_tail(descriptor: int, run_dir: Path) -> None:
    """Make the record end with a whole line: a last line without its newline that is a JSON object gets the newline;
    any other unterminated tail (a short write cut it) is kept aside in `torn_path` and cut off the record."""
    size = os.fstat(descriptor).st_size
    start = _tail_start(descriptor, size)
    if start == size:
        return
    tail = os.pread(descriptor, size - start, start)
    try:
        whole = isinstance(json.loads(tail), dict)
    except ValueError:
        whole = False
    if whole:
        _write_whole(descriptor, b"\n", record_path(run_dir))
        return
    aside = os.open(torn_path(run_dir), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _write_whole(aside, tail + b"\n", torn_path(run_dir))
        os.fsync(aside)
    finally:
        os.close(aside)
    os.ftruncate(descriptor, start)
    os.fsync(descriptor)


def _write_whole(descriptor: int, data: bytes, path: Path) -> None:
    """One write of `data`; OSError when it wrote less (a full or failing disk), never a second write."""
    written = os.write(descriptor, data)
    if written != len(data):
        raise OSError(errno.EIO, f"short write: {written} of {len(data)} bytes reached the disk", str(path))


def _lock(descriptor: int) -> None:
    """Hold an exclusive flock(2) on the record until it is closed, so a writer's line still being written is never
    taken for a torn tail by another writer on this machine; where the file system has no flock (it raises ENOLCK,
    EOPNOTSUPP or ENOSYS) the append goes on unlocked: across pods, only the guardian holding the Lease appends."""
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
    except OSError as error:
        if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
            raise


def append(run_dir: Path, line: dict[str, Any]) -> None:
    """Append one line to the run's record with a single O_APPEND write (no reader sees half a line
    from a second writer); the run directory is created when missing. A torn last line left by an earlier short
    write is repaired first (`_repair_tail`); OSError when this write is short: its torn bytes are repaired by the next
    append. Writers on one machine take turns (`_lock`)."""
    data = (json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n").encode()
    run_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(record_path(run_dir), os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        _lock(descriptor)
        _repair_tail(descriptor, run_dir)
        _write_whole(descriptor, data, record_path(run_dir))
    finally:
        os.close(descriptor)


_STEP_DETAILS = {"deadline-stop": "step"}
"""Events whose `details` must hold this key as an int (the guardian resumes from it)."""

_NUMBER_DETAILS = {"recovering": "backoff_s"}
"""Events whose `details` must hold this key as a number (the guardian waits it out)."""


def _checked(item: object) -> tuple[dict[str, Any] | None, str]:
    """One parsed line as the readers use it, and "" ; or None and why it cannot be used. Optional keys missing or
    null are made what `entry` writes (reason "", resumed_from_step null, no details or last_lines)."""
    if not isinstance(item, dict):
        return None, "not a JSON object"
    if not isinstance(item.get("time"), str):
        return None, "no time"
    if type(item.get("attempt")) is not int:
        return None, "no attempt number"
    if item.get("event") not in EVENTS:
        return None, f"unknown event {item.get('event')!r}"
    found = dict(item)
    for key, default in (("reason", ""), ("resumed_from_step", None)):
        if found.get(key) is None:
            found[key] = default
    for key in ("details", "last_lines"):
        if found.get(key) is None:
            found.pop(key, None)
    details = found.get("details", {})
    if not isinstance(found["reason"], str) or not isinstance(details, dict):
        return None, "a reason that is not text or details that are not an object"
    if found["resumed_from_step"] is not None and type(found["resumed_from_step"]) is not int:
        return None, "a resumed_from_step that is not a step"
    lines = found.get("last_lines", [])
    if not isinstance(lines, list) or not all(isinstance(text, str) for text in lines):
        return None, "last_lines that are not lines of text"
    key = _STEP_DETAILS.get(found["event"])
    if key is not None and type(details.get(key)) is not int:
        return None, f"details.{key} that is not a step"
    key = _NUMBER_DETAILS.get(found["event"])
    if key is not None and (type(details.get(key)) not in (int, float)):
        return None, f"details.{key} that is not a number"
    if found["event"] == "budget-stop":
        return _budget_checked(found, details)
    return found, ""


def _budget_checked(found: dict[str, Any], details: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    """A `budget-stop` line as `_checked` returns it: a step or null, the limit crossed, and the budget's numbers."""
    if details.get("step") is not None and type(details.get("step")) is not int:
        return None, "details.step that is not a step"
    if details.get("limit") not in ("maxCost", "maxGpuHours"):
        return None, "details.limit that is neither maxCost nor maxGpuHours"
    for key in ("maxCost", "maxGpuHours", "spent", "gpuHours"):
        value = details.get(key)
        if value is not None and type(value) not in (int, float):
            return None, f"details.{key} that is not a number"
    return found, ""


def parse_checked(text: str) -> tuple[list[dict[str, Any]], list[str]]:
    """The record's usable lines from its text, oldest first, each checked once (`_checked`), and one line per line
    skipped (`line N: why`); a last line cut short (no newline, no JSON) is left out without a word."""
    found, skipped = [], []
    lines = text.split("\n")
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            if number < len(lines):
                skipped.append(f"line {number}: not JSON; skipped")
            continue
        usable, why = _checked(item)
        if usable is None:
            skipped.append(f"line {number}: {why}; skipped")
        else:
            found.append(usable)
    return found, skipped


def parse(text: str) -> list[dict[str, Any]]:
    """The record's usable lines from its text, oldest first (`parse_checked` without the skipped lines)."""
    return parse_checked(text)[0]


def read(run_dir: Path, report: Callable[[str], None] | None = None) -> list[dict[str, Any]]:
    """The run's record, oldest first; empty when it has none. Bytes that are not UTF-8 read as U+FFFD; each line
    that cannot be used is skipped and, with `report`, reported (`<record path> line N: why; skipped`)."""
    path = record_path(run_dir)
    if not path.is_file():
        return []
    found, skipped = parse_checked(path.read_bytes().decode(errors="replace"))
    for problem in skipped if report is not None else ():
        report(f"{path} {problem}")
    return found


def record_lines(events: list[dict[str, Any]]) -> list[str]:
    """The record as lines for `status` and `list`: time, attempt, event, the step resumed from, the reason."""
    lines = []
    for item in events:
        resumed = item.get("resumed_from_step")
        parts = [str(item.get("time", "-")), f"attempt {item.get('attempt', '-')}", str(item.get("event", "-"))]
        if resumed is not None:
            parts.append(f"from step {resumed}")
        text = "  ".join(parts)
        lines.append(f"{text}: {item['reason']}" if item.get("reason") else text)
    return lines
