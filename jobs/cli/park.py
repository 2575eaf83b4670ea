"""`python -m jobs park --stack NAME`: park a Managed Lustre stack's run in its parked bucket before
`storage.parked: true` deletes the instance (docs/up-and-destroy.md, "Parking Managed Lustre").

It reads what the instance holds (every run directory, the exports root when there is one, the run's own files) and
the run's record (its newest attempt) through a short job on the Ray head (or from `--data-root`), then parks all of it
as incluster/park.py park_run does: the `parking` marker, one exportData per root with a progress line and a deadline,
each transfer checked against its counters, the bucket checked, then the `parked` marker. The export runs here, not in
`pulumi up`: it can take long, and the instance must still exist while it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path, PurePosixPath

from core import names
from core.config.model import StackConfig
from incluster import job_client, lustre_transfer
from incluster.google_token import FreshBearer
from incluster.job_client import LIVE
from incluster.lustre_transfer import (
    Objects,
    RestObjects,
    RestTransfers,
    Transfers,
    instance_name,
)
from incluster.park import Holdings, ParkRequest, holdings_of, lustre_path, park_run
from incluster.record import RECORD_FILE, parse
from incluster.run_files import read_holdings, read_local_run_files, read_run_files
from jobs.cli.lines import ProgressLine, counted
from jobs.runs.export import exports_dir
from jobs.spec.training import training_spec, under_data_root
from jobs.submit import access
from jobs.submit.target import UsageError, endpoint_of


def transfer_clients(config: StackConfig) -> tuple[Transfers, Objects]:
    """Managed Lustre's transfers and the parked bucket's objects, with the caller's Google access token
    (`gcloud auth print-access-token`), fetched again before it ends (incluster/google_token.py FreshBearer)."""
    headers = FreshBearer(lambda: access.user_credential({}))
    return RestTransfers(headers), RestObjects(config.parked_bucket_name, headers)


def _on_instance(args: argparse.Namespace, config: StackConfig, run: str, run_dir: str) -> tuple[str | None, Holdings]:
    """The run's record and what the instance holds, read through the Ray head (or from `--data-root`); UsageError
    while an attempt of the run is live (an export of files still being written would not be the run)."""
    checkpoints_root = str(PurePosixPath(lustre_path(run_dir)).parent)
    exports_root = str(PurePosixPath(lustre_path(exports_dir(run))).parent)
    if args.data_root:
        local = Path(args.data_root)
        record = read_local_run_files(Path(under_data_root(run_dir, args.data_root)), [RECORD_FILE])[RECORD_FILE]
        return record, holdings_of(local, checkpoints_root, exports_root, run)
    client = job_client.connect(endpoint_of(args, config))
    live = [job for job in job_client.attempts(client, run) if job_client.status_text(job.status) in LIVE]
    if live:
        raise UsageError(
            f"{live[0].submission_id} of the run is still {job_client.status_text(live[0].status)}: park a run once it"
            f" is over (python -m jobs stop --stack {config.stack} stops it)"
        )
    progress = ProgressLine()
    try:
        record = read_run_files(client, run_dir, [RECORD_FILE], report=progress)[RECORD_FILE]
        found = read_holdings(client, names.DATA_MOUNT, checkpoints_root, exports_root, run, report=progress)
    finally:
        progress.close()
    exports = found.get("exports")
    holdings = Holdings(
        checkpoints_root, exports_root, tuple(found.get("runs") or ()), None if exports is None else tuple(exports),
        tuple(found.get("runFiles") or ()),
    )  # fmt: skip
    return record, holdings


def cmd_park(args: argparse.Namespace, config: StackConfig) -> int:
    """Export the run from Managed Lustre to the stack's parked bucket and mark it parked (then storage.parked)."""
    if config.storage.type != "lustre":
        raise UsageError(
            f"grpo-gke:storage.type is {config.storage.type!r}: only a Managed Lustre stack parks its run"
            " (a bucket bills only what it holds)"
        )
    if config.storage.parked:
        raise UsageError(
            "grpo-gke:storage.parked is already true: the instance is gone and the run lies in"
            f" gs://{config.parked_bucket_name}/; set it false and run pulumi up to bring the run back"
        )
    if args.deadline <= 0:
        raise UsageError(f"--deadline must be a number of seconds above 0, got {args.deadline:g}")
    spec = training_spec(config)
    record, holdings = _on_instance(args, config, spec.run, spec.run_dir)
    if record is None:
        raise UsageError(f"the run {spec.run} has no record at {spec.run_dir}/{RECORD_FILE}: nothing to park")
    attempt = max((int(entry.get("attempt") or 0) for entry in parse(record)), default=0)
    instance = instance_name(config.project, config.zone, names.lustre_names(config.cluster_name).instance_id)
    bucket = config.parked_bucket_name
    roots = [holdings.checkpoints_root, *([holdings.exports_root] if holdings.exports is not None else [])]
    others = [run for run in holdings.runs if run != spec.run]
    beside = f" and {counted(len(others), 'other run')} ({', '.join(others)})" if others else ""
    print(
        f"parking {spec.run}{beside}: exporting {', '.join(roots)} to gs://{bucket}/{names.PARK_PREFIX}",
        file=sys.stderr,
    )
    transfers, objects = transfer_clients(config)
    request = ParkRequest(instance, bucket, config.stack, spec.run, attempt, spec.framework, config.total_gpus)
    progress = ProgressLine()
    try:
        marker = park_run(
            transfers, objects, request, holdings, args.deadline, progress, poll=lustre_transfer.POLL_SECONDS
        )
    finally:
        progress.close()
    total = sum(marker["objects"].values())
    step = "no checkpoint" if marker["step"] is None else f"step {marker['step']}"
    print(
        f"parked {spec.run} ({step}): {counted(total, 'object')} in gs://{bucket}/{marker['prefix']}; marker"
        f" gs://{bucket}/{names.PARK_MARKER}",
        file=sys.stderr,
    )
    print(
        "next: with grpo-gke:storage.keepOnDestroy false already applied by pulumi up, run"
        f" pulumi config set --path grpo-gke:storage.parked true --stack {config.stack} && pulumi up --stack"
        f" {config.stack} (deletes the Lustre instance and what mounts it)",
        file=sys.stderr,
    )
    print(
        f"then: once storage.parked false and pulumi up bring the run back, set grpo-gke:storage.keepOnDestroy true"
        f" again (pulumi config set --path grpo-gke:storage.keepOnDestroy true --stack {config.stack}); until the run"
        f" is parked anew, {names.PARK_GUARD} refuses pulumi destroy and any edit that replaces the instance",
        file=sys.stderr,
    )
    print(json.dumps(marker, sort_keys=True))
    return 0
