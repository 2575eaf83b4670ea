"""Parking a Managed Lustre stack's run in its parked bucket, and bringing it back.

`park_run` exports the run's directory (its record `attempts.jsonl`, its attempt logs and every checkpoint the run
keeps, the newest complete one among them: grpo.keepCheckpoints bounds how many) and, once the record says it has
any, its exports directory, one transfer after the other (one per instance at a time); it waits for each Operation,
verifies that the bucket holds the record and something under every exported path, and writes the marker
(core/names.py PARK_MARKER): what was exported, when, the newest step directory exported. `restore_run` imports the
whole parked prefix back into a fresh instance's root and marks the marker restored. Paths: `/data/<x>` in a pod is
`/<x>` on the instance (the PersistentVolume mounts the file system's root, workloads/storage.py) and
`parked/data/<x>/` in the bucket (core/names.py PARK_PREFIX).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Any

from core import names
from incluster.checkpoints import step_of
from incluster.lustre_transfer import POLL_SECONDS, Objects, TransferError, Transfers, gcs_uri, wait_for
from incluster.record import RECORD_FILE

PARKED = "parked"
"""Marker state: the run lies in the bucket; the instance may be deleted."""

RESTORED = "restored"
"""Marker state: the run was imported back into the instance the marker names."""


def lustre_path(pod_path: str) -> str:
    """The instance's path of a pod's `/data/<x>`: `/<x>`."""
    relative = PurePosixPath(pod_path).relative_to(names.DATA_MOUNT)
    return f"/{relative.as_posix()}"


def parked_prefix(path: str) -> str:
    """The bucket prefix an instance path is exported to: `parked/data/<path>/`."""
    return f"{names.PARK_PREFIX}{path.strip('/')}/"


def newest_step(object_names: Sequence[str], run_prefix: str, framework: str) -> int | None:
    """The highest step among the step directories directly under `run_prefix` (NeMo-RL's `tmp_step_<N>`, never
    complete, left out); None without any."""
    steps = set()
    for name in object_names:
        if not name.startswith(run_prefix):
            continue
        first = name[len(run_prefix) :].split("/", 1)[0]
        step = None if first.startswith("tmp_") else step_of(first, framework)
        if step is not None:
            steps.add(step)
    return max(steps, default=None)


def utc_now() -> str:
    """Now as UTC ISO 8601 with seconds and Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def park_run(
    transfers: Transfers,
    objects: Objects,
    instance: str,
    bucket: str,
    run: str,
    framework: str,
    paths: Sequence[str],
    deadline_seconds: float,
    report: Callable[[str], None],
    now: Callable[[], str] = utc_now,
    poll: float = POLL_SECONDS,
) -> dict[str, Any]:
    """Export `paths` (instance paths; the run directory first) to the parked bucket, verify and write the marker;
    the marker. TransferError when a transfer fails or the bucket lacks what was exported."""
    run_dir = paths[0]
    for path in paths:
        operation = transfers.export_data(instance, path, gcs_uri(bucket, parked_prefix(path)))
        wait_for(transfers, operation, f"exporting {path}", deadline_seconds, report, poll)
    counts = {}
    for path in paths:
        found = objects.names(parked_prefix(path))
        if not found:
            raise TransferError(f"the export of {path} ended, but gs://{bucket}/{parked_prefix(path)} holds nothing")
        counts[path] = len(found)
    run_prefix = parked_prefix(run_dir)
    listed = objects.names(run_prefix)
    if f"{run_prefix}{RECORD_FILE}" not in listed:
        raise TransferError(f"gs://{bucket}/{run_prefix} lacks the run's record {RECORD_FILE}; nothing marked parked")
    marker = {
        "state": PARKED,
        "run": run,
        "instance": instance,
        "exported": {path: {"uri": gcs_uri(bucket, parked_prefix(path)), "objects": counts[path]} for path in paths},
        "step": newest_step(listed, run_prefix, framework),
        "parkedAt": now(),
    }
    objects.write_text(names.PARK_MARKER, json.dumps(marker, indent=2, sort_keys=True) + "\n")
    return marker


def read_marker(objects: Objects) -> dict[str, Any] | None:
    """The parked bucket's marker; None when there is none."""
    text = objects.read_text(names.PARK_MARKER)
    return None if text is None else json.loads(text)


def restore_run(
    transfers: Transfers,
    objects: Objects,
    instance: str,
    bucket: str,
    deadline_seconds: float,
    report: Callable[[str], None],
    now: Callable[[], str] = utc_now,
    poll: float = POLL_SECONDS,
) -> dict[str, Any] | None:
    """Import a parked run into `instance` (its root: the only path an import may target that surely exists) and mark
    the marker restored; the marker (unchanged when it is not parked); None when nothing was ever parked."""
    marker = read_marker(objects)
    if marker is None or marker.get("state") != PARKED:
        return marker
    operation = transfers.import_data(instance, gcs_uri(bucket, names.PARK_PREFIX), "/")
    wait_for(transfers, operation, f"importing {marker['run']}", deadline_seconds, report, poll)
    restored = {**marker, "state": RESTORED, "restoredAt": now(), "restoredInto": instance}
    objects.write_text(names.PARK_MARKER, json.dumps(restored, indent=2, sort_keys=True) + "\n")
    return restored
