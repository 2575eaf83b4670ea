"""`python -m jobs park --stack NAME`: park a Managed Lustre stack's run in its parked bucket before
`storage.parked: true` deletes the instance (docs/up-and-destroy.md, "Parking Managed Lustre").

It reads the run's record to learn whether the run has exports, exports the run's directory and its exports directory
with Managed Lustre's exportData, one after the other, waits for each with a progress line and a deadline, verifies
the bucket and writes the marker (incluster/park.py). The export runs here, not in `pulumi up`: it can take long, and
the instance must still exist while it runs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

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
from incluster.park import lustre_path, park_run
from incluster.record import RECORD_FILE, parse
from incluster.run_files import read_local_run_files, read_run_files
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


def _record_text(args: argparse.Namespace, config: StackConfig, run: str, run_dir: str) -> str | None:
    """The run's record, read through the Ray head (or from `--data-root`); UsageError while an attempt of the run is
    live (an export of files still being written would not be the run)."""
    if args.data_root:
        return read_local_run_files(Path(under_data_root(run_dir, args.data_root)), [RECORD_FILE])[RECORD_FILE]
    client = job_client.connect(endpoint_of(args, config))
    live = [job for job in job_client.attempts(client, run) if job_client.status_text(job.status) in LIVE]
    if live:
        raise UsageError(
            f"{live[0].submission_id} of the run is still {job_client.status_text(live[0].status)}: park a run once it"
            f" is over (python -m jobs stop --stack {config.stack} stops it)"
        )
    progress = ProgressLine()
    try:
        return read_run_files(client, run_dir, [RECORD_FILE], report=progress)[RECORD_FILE]
    finally:
        progress.close()


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
    record = _record_text(args, config, spec.run, spec.run_dir)
    if record is None:
        raise UsageError(f"the run {spec.run} has no record at {spec.run_dir}/{RECORD_FILE}: nothing to park")
    paths = [lustre_path(spec.run_dir)]
    if any(event.get("event") == "exported" for event in parse(record)):
        paths.append(lustre_path(exports_dir(spec.run)))
    instance = instance_name(config.project, config.zone, names.lustre_names(config.cluster_name).instance_id)
    bucket = config.parked_bucket_name
    print(f"parking {spec.run}: exporting {', '.join(paths)} to gs://{bucket}/{names.PARK_PREFIX}", file=sys.stderr)
    transfers, objects = transfer_clients(config)
    progress = ProgressLine()
    try:
        marker = park_run(
            transfers, objects, instance, bucket, spec.run, spec.framework, paths, args.deadline, progress,
            poll=lustre_transfer.POLL_SECONDS,
        )  # fmt: skip
    finally:
        progress.close()
    total = sum(item["objects"] for item in marker["exported"].values())
    step = "no checkpoint" if marker["step"] is None else f"step {marker['step']}"
    print(
        f"parked {spec.run} ({step}): {counted(total, 'object')} in gs://{bucket}/{names.PARK_PREFIX}; marker"
        f" gs://{bucket}/{names.PARK_MARKER}",
        file=sys.stderr,
    )
    print(
        "next: with grpo-gke:storage.keepOnDestroy false already applied by pulumi up, run"
        f" pulumi config set --path grpo-gke:storage.parked true --stack {config.stack} && pulumi up --stack"
        f" {config.stack} (deletes the Lustre instance and what mounts it)",
        file=sys.stderr,
    )
    print(json.dumps(marker, sort_keys=True))
    return 0
