"""Parking a Managed Lustre stack's runs in its parked bucket, and bringing them back.

What is parked is decided by what the instance holds, never by a record line (`Holdings`, read by the parker from
the file system: the guardian's mount, or a short job on the Ray head for `python -m jobs park`): every run directory
under the checkpoints root (`/checkpoints/<run>`: the record `attempts.jsonl`, the attempt logs, every checkpoint kept)
and, when it exists, the whole exports root (`/exports/<run>/step-<N>/`, the exported models). `park_run` refuses
when the run it was asked to park is not there.

Two phases, one marker (core/names.py PARK_MARKER), every write conditional on the generation read before it (Cloud
Storage `ifGenerationMatch`, cloud.google.com/storage/docs/request-preconditions: a mismatch is HTTP 412, so a stale
writer never overwrites a newer marker):
1. `parking`: the stack, the run, its newest attempt (from the record) and newest complete step (from the files),
   every run directory and exports directory the instance holds, the park's own prefix, and the generation of the
   marker it replaces; written before the first transfer.
2. each root is exported with exportData, one after the other (one transfer per instance at a time), and each
   finished Operation is checked against its v1 TransferCounters (lustre_transfer.transfer_faults: nothing failed,
   no error summarised, every object found copied); the bucket is then listed: every run and exports directory holds
   objects, the run's record is there, and the newest complete step in the bucket is the one on the instance.
3. `parked`, only then, over the `parking` marker's generation.
Any submitter of an attempt (the guardian, `python -m jobs submit`, the post-deploy step) marks a `parking` or
`parked` marker `stale` first (`mark_stale`): the instance is then newer than the bucket, and infra/storage.py
park_refusal refuses to delete it.

A fresh prefix per park (`parked/data/<park id>/`, the id from the park's start time; a try again of a park of the
same run and attempt that failed, its marker still `parking`, reuses that try's prefix: nothing was pruned in
between, the run being over, and the export the failed try left running is picked up): Managed Lustre's transfers
are incremental and never delete at the destination (managed-lustre/docs/transfer-data), so into one fixed prefix a
step deleted on the instance after one park (grpo.keepCheckpoints' pruning) would stay in the bucket, come back at
the next unpark and be resumed from. Each park therefore copies the whole of what the instance holds (its time is
the bytes over the instance's transfer throughput; nothing is skipped as already there), and each park's prefix
bills its bytes until deleted: the older prefixes are kept (nothing holding data is deleted unless asked; the marker
names the one to keep). The alternatives: a manifest could not be honoured by importData, which takes a whole
prefix; bucket versioning keeps every deleted object's bytes and still brings them back with the prefix.

`restore_run` imports the marker's prefix into a fresh instance's root, checks the finished import against its
counters (every object of the prefix found or skipped, none failed) and that the run's record and its newest
complete step are under the prefix where the run reads them (`<prefix>checkpoints/<run>/` lands at
`/checkpoints/<run>/`, the pod's `/data/checkpoints/<run>`), then marks the marker restored. Paths: `/data/<x>` in a
pod is `/<x>` on the instance (the PersistentVolume mounts the file system's root, workloads/storage.py).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath
from typing import Any

from core import names
from incluster.checkpoints import step_lacks, step_of
from incluster.lustre_transfer import (
    POLL_SECONDS,
    Objects,
    PreconditionFailed,
    Stored,
    TransferError,
    Transfers,
    gcs_uri,
    transfer_faults,
    transfer_metadata,
    wait_for,
)
from incluster.record import RECORD_FILE

PARKING = "parking"
"""Marker state: a park has begun; the bucket is not yet the run."""

PARKED = "parked"
"""Marker state: every run the instance held lies in the bucket, verified; the instance may be deleted."""

STALE = "stale"
"""Marker state: an attempt was submitted after the park; the instance is newer than the bucket."""

RESTORED = "restored"
"""Marker state: the run was imported back into the instance the marker names."""

MARK_TRIES = 3
"""Reads and conditional writes `mark_stale` makes before it gives up on a marker that keeps changing."""


def lustre_path(pod_path: str) -> str:
    """The instance's path of a pod's `/data/<x>`: `/<x>`."""
    relative = PurePosixPath(pod_path).relative_to(names.DATA_MOUNT)
    return f"/{relative.as_posix()}"


def park_id(started: str) -> str:
    """A park's id from its start time (`2026-12-02T01:00:00Z` -> `2026-12-02T010000Z`)."""
    return started.replace(":", "")


def parked_prefix(prefix: str, path: str) -> str:
    """The bucket prefix an instance path is exported to under a park's prefix: `<prefix><path>/`."""
    return f"{prefix}{path.strip('/')}/"


def complete_steps(files: Iterable[str], framework: str, world_size: int) -> list[int]:
    """The steps whose directory holds every file the framework resumes from, by the files' names (relative to the
    run directory), by incluster/checkpoints.py's one rule of a complete step (step_lacks), sorted."""
    by_dir: dict[str, set[str]] = {}
    for name in files:
        first, _, rest = name.partition("/")
        if rest:
            by_dir.setdefault(first, set()).add(rest)
    return sorted(
        {
            step
            for first, held in by_dir.items()
            if (step := step_of(first, framework)) is not None
            and not step_lacks(first, framework, world_size, _held_in(held))
        }
    )


def _held_in(held: set[str]) -> Callable[[str], bool]:
    """`step_lacks`'s `held` for the names of a step directory's files: a name, or a prefix for one ending in `/`."""
    return lambda path: any(item.startswith(path) for item in held) if path.endswith("/") else path in held


def newest_complete_step(files: Iterable[str], framework: str, world_size: int) -> int | None:
    """The highest of `complete_steps`; None without any."""
    return max(complete_steps(files, framework, world_size), default=None)


@dataclass(frozen=True)
class Holdings:
    """What the instance holds that a park keeps, read from its file system before the first transfer."""

    checkpoints_root: str
    """The instance path of the run directories (`/checkpoints`)."""
    exports_root: str
    """The instance path of the exports directories (`/exports`)."""
    runs: tuple[str, ...]
    """Every run directory under the checkpoints root."""
    exports: tuple[str, ...] | None
    """Every directory under the exports root; None when there is no exports root."""
    run_files: tuple[str, ...]
    """The files of the parked run's directory, relative to it."""


def holdings_of(data_root: Path, checkpoints_root: str, exports_root: str, run: str) -> Holdings:
    """The Holdings of the file system mounted at `data_root` (the instance's `/`)."""

    def dirs(root: str) -> tuple[str, ...] | None:
        path = data_root / root.strip("/")
        return tuple(sorted(item.name for item in path.iterdir() if item.is_dir())) if path.is_dir() else None

    run_dir = data_root / checkpoints_root.strip("/") / run
    files = sorted(
        (Path(top) / name).relative_to(run_dir).as_posix() for top, _, found in os.walk(run_dir) for name in found
    )
    return Holdings(checkpoints_root, exports_root, dirs(checkpoints_root) or (), dirs(exports_root), tuple(files))


@dataclass(frozen=True)
class ParkRequest:
    """Where and what to park."""

    instance: str
    """The Lustre instance as the API names it."""
    bucket: str
    """The parked bucket."""
    stack: str
    """The stack's name (infra/storage.py park_refusal compares it)."""
    run: str
    """The run the parker was asked to park (infra/storage.py park_refusal asks for the config's run exactly)."""
    attempt: int
    """The run's newest attempt in its record (0: none)."""
    framework: str
    """verl or nemo-rl: how a complete step is named."""
    world_size: int
    """The GPUs of one attempt: verl's shards per step."""


def utc_now() -> str:
    """Now as UTC ISO 8601 with seconds and Z."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _dump(marker: dict[str, Any]) -> str:
    return json.dumps(marker, indent=2, sort_keys=True) + "\n"


def _write(objects: Objects, marker: dict[str, Any], generation: int, why: str) -> int:
    """Write the marker over `generation`; TransferError naming `why` when another writer changed it meanwhile."""
    try:
        return objects.write_text(names.PARK_MARKER, _dump(marker), if_generation=generation)
    except PreconditionFailed:
        raise TransferError(
            f"the park marker changed while {why} (another park, or a submission marked it stale); nothing marked"
            f" {marker['state']}: run the park again once the run is over"
        ) from None


def _transfer(
    transfers: Transfers, operation: dict[str, Any], what: str, deadline: float, report: Callable[[str], None],
    poll: float,
) -> dict[str, Any]:  # fmt: skip
    """Wait for a transfer, read its finished Operation once more (its metadata holds the final counters) and check
    it is whole; that Operation. TransferError otherwise."""
    wait_for(transfers, operation, what, deadline, report, poll)
    done = transfers.get_operation(operation.get("name", ""))
    fault = transfer_faults(done, what)
    if fault is not None:
        raise TransferError(fault)
    return done


def _unfinished_prefix(current: Stored | None, request: ParkRequest) -> str | None:
    """The prefix of a park of this very run and attempt into this instance that began and failed (the marker still
    `parking`): a try again exports into it, so that the export it left running is picked up
    (lustre_transfer.RestTransfers._start matches a running transfer by its paths) and what it copied is skipped
    (transfers are incremental); None otherwise."""
    try:
        marker = json.loads(current.text) if current else None
    except ValueError:
        return None
    if not isinstance(marker, dict) or marker.get("state") != PARKING or not isinstance(marker.get("prefix"), str):
        return None
    same = (marker.get("run"), marker.get("attempt"), marker.get("instance"))
    return marker["prefix"] if same == (request.run, request.attempt, request.instance) else None


def park_run(
    transfers: Transfers,
    objects: Objects,
    request: ParkRequest,
    holdings: Holdings,
    deadline_seconds: float,
    report: Callable[[str], None],
    now: Callable[[], str] = utc_now,
    poll: float = POLL_SECONDS,
) -> dict[str, Any]:
    """Park everything the instance holds (module docstring); the `parked` marker. TransferError when the run is not
    on the instance, a transfer fails or is not whole, the bucket lacks what was exported, or the marker changed."""
    run = request.run
    if run not in holdings.runs:
        raise TransferError(f"the instance holds no {holdings.checkpoints_root}/{run}: nothing of the run to park")
    step = newest_complete_step(holdings.run_files, request.framework, request.world_size)
    current = objects.read(names.PARK_MARKER)
    started = now()
    prefix = _unfinished_prefix(current, request) or f"{names.PARK_PREFIX}{park_id(started)}/"
    roots = [holdings.checkpoints_root, *([holdings.exports_root] if holdings.exports is not None else [])]
    parking = {
        "state": PARKING,
        "stack": request.stack,
        "run": run,
        "attempt": request.attempt,
        "step": step,
        "framework": request.framework,
        "worldSize": request.world_size,
        "runs": list(holdings.runs),
        "exports": None if holdings.exports is None else list(holdings.exports),
        "instance": request.instance,
        "prefix": prefix,
        "roots": roots,
        "replaces": current.generation if current else 0,
        "startedAt": started,
    }
    generation = _write(objects, parking, current.generation if current else 0, "parking began")
    counts: dict[str, int] = {}
    for root in roots:
        operation = transfers.export_data(request.instance, root, gcs_uri(request.bucket, parked_prefix(prefix, root)))
        done = _transfer(transfers, operation, f"exporting {root}", deadline_seconds, report, poll)
        counts[root] = int((transfer_metadata(done).get("counters") or {}).get("foundObjectsCount") or 0)
    listed = objects.names(prefix)
    checks = [(holdings.checkpoints_root, item) for item in holdings.runs]
    checks += [(holdings.exports_root, item) for item in holdings.exports or ()]
    for root, item in checks:
        if not any(name.startswith(parked_prefix(prefix, f"{root}/{item}")) for name in listed):
            raise TransferError(
                f"the export of {root} ended, but gs://{request.bucket}/{prefix} holds nothing of {item}"
            )
    run_prefix = parked_prefix(prefix, f"{holdings.checkpoints_root}/{run}")
    if f"{run_prefix}{RECORD_FILE}" not in listed:
        raise TransferError(f"gs://{request.bucket}/{run_prefix} lacks the run's record {RECORD_FILE}; not parked")
    in_bucket = [name[len(run_prefix) :] for name in listed if name.startswith(run_prefix)]
    parked_step = newest_complete_step(in_bucket, request.framework, request.world_size)
    if parked_step != step:
        raise TransferError(
            f"the instance's newest complete step is {step} but gs://{request.bucket}/{run_prefix} holds {parked_step};"
            " not parked"
        )
    parked = {**parking, "state": PARKED, "objects": counts, "parkedAt": now()}
    _write(objects, parked, generation, "exporting")
    return parked


def read_marker(objects: Objects) -> dict[str, Any] | None:
    """The parked bucket's marker; None when there is none."""
    stored = objects.read(names.PARK_MARKER)
    return None if stored is None else json.loads(stored.text)


def mark_stale(objects: Objects, submitter: str, now: Callable[[], str] = utc_now) -> str | None:
    """Before a submission: mark a `parking` or `parked` marker `stale` (conditional on its generation, read again
    when another writer changed it); a line saying so, or None when there was nothing to mark. TransferError when it
    keeps changing or cannot be written (the caller must not submit)."""
    for _ in range(MARK_TRIES):
        stored = objects.read(names.PARK_MARKER)
        marker = None if stored is None else json.loads(stored.text)
        if stored is None or marker.get("state") not in (PARKING, PARKED):
            return None
        stale = {**marker, "state": STALE, "staleAt": now(), "staleBecause": f"{submitter} submitted an attempt"}
        try:
            objects.write_text(names.PARK_MARKER, _dump(stale), if_generation=stored.generation)
        except PreconditionFailed:
            continue
        return f"the park marker of {marker.get('run')} is stale now: the run goes on, park it again before deleting"
    raise TransferError(f"the park marker kept changing over {MARK_TRIES} tries; not submitting")


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
    """Import a parked run's prefix into `instance` (its root: the only path an import may target that surely
    exists), check it (module docstring) and mark the marker restored; the marker (unchanged when it is not parked);
    None when nothing was ever parked."""
    stored = objects.read(names.PARK_MARKER)
    if stored is None:
        return None
    marker = json.loads(stored.text)
    if marker.get("state") != PARKED:
        return marker
    prefix = str(marker.get("prefix") or names.PARK_PREFIX)
    listed = objects.names(prefix)
    run_prefix = parked_prefix(prefix, f"{marker.get('roots', ['/checkpoints'])[0]}/{marker['run']}")
    if f"{run_prefix}{RECORD_FILE}" not in listed:
        raise TransferError(f"gs://{bucket}/{run_prefix} lacks the run's record {RECORD_FILE}: nothing imported")
    in_bucket = [name[len(run_prefix) :] for name in listed if name.startswith(run_prefix)]
    # A marker of the earlier one-prefix parks names no framework: its step was never checked for completeness.
    framework, world_size = marker.get("framework"), int(marker.get("worldSize") or 0)
    step = newest_complete_step(in_bucket, str(framework), world_size) if framework else marker.get("step")
    if step != marker.get("step"):
        raise TransferError(
            f"the marker says step {marker.get('step')} but gs://{bucket}/{run_prefix} holds {step} complete:"
            " nothing imported"
        )
    operation = transfers.import_data(instance, gcs_uri(bucket, prefix), "/")
    done = _transfer(transfers, operation, f"importing {marker['run']}", deadline_seconds, report, poll)
    counters = transfer_metadata(done).get("counters") or {}
    landed = sum(int(counters.get(key) or 0) for key in ("foundObjectsCount", "objectsSkippedCount"))
    if landed != len(listed):
        raise TransferError(
            f"importing {marker['run']} saw {landed} of the {len(listed)} objects of gs://{bucket}/{prefix}; not restored"
        )
    restored = {**marker, "state": RESTORED, "restoredAt": now(), "restoredInto": instance}
    _write(objects, restored, stored.generation, "importing")
    return restored
