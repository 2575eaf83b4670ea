"""The run's record, `<run dir>/attempts.jsonl`: one JSON object per line (keys sorted) per decision
about the run's attempts, appended by whoever decides (the guardian), read by `status` and `list`.

Each line holds `time` (UTC, ISO 8601 with milliseconds and Z), `attempt` (int), `event` (EVENTS),
`reason` (one line, "" when none), `resumed_from_step` (int or null) and, when there are any,
`last_lines` (list of str) and `details` (object).

Pod-side (the in-cluster guardian and the attempt wrapper run it in the framework image; incluster/): stdlib
only.
"""

from __future__ import annotations

import json
import os
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
`parked`: after the scale to zero the guardian exported the run to the parked bucket and wrote the park marker
(storage.parkWhenIdle; incluster/park.py): `details.bucket`, `details.step` (the newest step exported, null without a
checkpoint) and `details.objects`; the Lustre instance bills on until `storage.parked: true` and `pulumi up` delete
it. `park-failed`: that export failed (the reason); `python -m jobs park` parks by hand."""

GPU_CAPACITY_LOST = "gpu-capacity-lost"
"""`details.cause` of a `failed` event whose attempt lost its GPU nodes (a preemption): the guardian writes it,
goodput counts the attempt's lost time as lost to preemption."""


def utc_stamp(seconds: float) -> str:
    """`seconds` since the epoch as UTC ISO 8601 with milliseconds and Z (`2026-12-01T11:50:03.042Z`)."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


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


def append(run_dir: Path, line: dict[str, Any]) -> None:
    """Append one line to the run's record with a single O_APPEND write (no reader sees half a line
    from a second writer); the run directory is created when missing."""
    data = (json.dumps(line, sort_keys=True, ensure_ascii=False) + "\n").encode()
    run_dir.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(record_path(run_dir), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(descriptor, data)
    finally:
        os.close(descriptor)


def parse(text: str) -> list[dict[str, Any]]:
    """The record's lines from its text, oldest first; a last line cut short (no newline, no JSON) is left out."""
    found = []
    for line in text.splitlines():
        try:
            item = json.loads(line)
        except ValueError:
            continue
        if isinstance(item, dict):
            found.append(item)
    return found


def read(run_dir: Path) -> list[dict[str, Any]]:
    """The run's record, oldest first; empty when it has none."""
    path = record_path(run_dir)
    return parse(path.read_text(errors="replace")) if path.is_file() else []


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
