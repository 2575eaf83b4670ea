"""The guardian's command: `python3 -m incluster.guardian --settings FILE --address URL` in the cluster, or, through
jobs/guardian/foreground.py, `python -m jobs guard --stack NAME`; its wiring to the cluster (the export and
scale-to-zero hooks, the Lease it holds while it acts)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import PurePosixPath
from typing import Any, NoReturn

from incluster import export_submission, guardian, job_client, lustre_transfer, record, scaling
from incluster.endpoint import AccessError, Endpoint
from incluster.export_run import for_step
from incluster.google_token import Credential, FreshBearer, metadata_credential
from incluster.guardian.cluster import api_endpoint
from incluster.guardian.loop import ExportDone, ExportRequest, Guardian, Hooks
from incluster.guardian.settings import GuardError, Settings, read_settings
from incluster.heartbeat import Heartbeat
from incluster.lease import (
    RENEW_INTERVAL_SECONDS,
    Lease,
    LeaseError,
    LeaseHeld,
    acquire_in_foreground,
    foreground_identity,
    in_cluster_identity,
)
from incluster.lustre_transfer import RestObjects, RestTransfers
from incluster.park import ParkRequest, holdings_of, mark_stale, park_run
from incluster.wandb_summary import target_from


def cluster_hooks(
    settings: Settings, endpoint: Endpoint, google_credential: Callable[[], Credential], report: Callable[[str], None]
) -> Hooks:
    """The stack's export (the settings' export submission, jobs/runs/export.py), scale to zero (the JSON patch
    of incluster/scaling.py through the API server), park (the settings' `park`: incluster/park.py park_run with
    the Google tokens of `google_credential`, of what the guardian's own mount of the instance holds: every run
    directory beside this run's and the exports root when it exists) and, with it, marking a parked marker stale
    before each submission; no scale to zero without an API server at hand."""
    export = settings.raw.get("export")
    api = api_endpoint(endpoint)
    target = settings.park

    def park(_: Settings) -> dict[str, Any]:
        assert target is not None
        # The run directory is `<the instance's root as mounted here><run_path>`: /data/checkpoints/<run>.
        data_root = settings.run_dir.parents[len(PurePosixPath(target.run_path).parts) - 2]
        roots = (str(PurePosixPath(target.run_path).parent), str(PurePosixPath(target.exports_path).parent))
        holdings = holdings_of(data_root, *roots, settings.run)
        attempt = max((int(entry.get("attempt") or 0) for entry in record.read(settings.run_dir)), default=0)
        request = ParkRequest(target.instance, target.bucket, settings.stack, settings.run, attempt,
                              settings.framework, settings.world_size)  # fmt: skip
        headers = FreshBearer(google_credential)
        return park_run(
            RestTransfers(headers), RestObjects(target.bucket, headers), request, holdings, target.deadline_seconds,
            report, poll=lustre_transfer.POLL_SECONDS,
        )  # fmt: skip

    def stale() -> str | None:
        assert target is not None
        return mark_stale(RestObjects(target.bucket, FreshBearer(google_credential)), "the run guardian")

    def submit_export(request: ExportRequest) -> ExportDone:
        # Pinned to the step, the export has its deterministic submission id: a second guardian's is followed.
        pinned = for_step(export, settings.run, request.step) if request.step is not None else export
        submission_id, already = export_submission.submit_export(job_client.connect(endpoint), pinned)
        what = f"exports the newest complete checkpoint (step {request.step})"
        line = f"{submission_id} (already submitted) {what}" if already else f"{submission_id} {what}"
        return ExportDone(submission_id, line)

    def scale_to_zero(_: Settings) -> str:
        assert api is not None
        scaling.scale_to(api, 0, report)
        return f"the GPU worker group {settings.raw.get('gpuWorkerGroup', '')} of {api.address} patched to 0 replicas"

    return Hooks(
        export=submit_export if export else None,
        scale_to_zero=scale_to_zero if api else None,
        park=park if target is not None else None,
        mark_stale=stale if target is not None else None,
    )


RUN_NOT_FINISHED_EXIT = 1
"""The foreground guardian's exit status when the run is over without reaching its schedule's end (not retried, given
up, stopped at its budget; incluster/guardian/policy.py ended_as); 0 when it succeeded."""


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise GuardError(message)


def _parser() -> argparse.ArgumentParser:
    top = _Parser(prog=".venv/bin/python -m jobs guard", description=(guardian.__doc__ or "").splitlines()[0])
    which = top.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", help="stack name: reads Pulumi.<stack>.yaml in --dir")
    which.add_argument("--settings", help="the guardian's settings JSON (the in-cluster form; always follows)")
    top.add_argument("--dir", default=".", help="directory of the stack files (default: .)")
    top.add_argument("--address", help="Ray dashboard URL; default: the stack's cluster via the kubeconfig")
    top.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    top.add_argument("--context", help="kubeconfig context (default: the stack's gke_<project>_<region>_<cluster>)")
    top.add_argument("--data-root", help="a local directory standing for the shared storage (/data)")
    top.add_argument(
        "--entrypoint", help="guard the run `python -m jobs submit --entrypoint CMD` made (a smoke test's run)"
    )
    top.add_argument(
        "--heartbeat", help="a file whose time every progress line sets (the in-cluster form's liveness probe reads it)"
    )
    top.add_argument("--follow", action="store_true", help="keep following after the run is over (until Ctrl-C)")
    top.add_argument(
        "--take-over",
        action="store_true",
        help="guard from here although another guardian (the in-cluster one) holds the Lease: take it from it",
    )
    return top


StackSettings = Callable[[argparse.Namespace], "tuple[Settings, Endpoint]"]
"""The foreground form's settings and endpoint from a stack file (jobs/guardian/foreground.py: the client side)."""


def hold_the_lease(settings: Settings, endpoint: Endpoint, in_cluster: bool, take_over: bool) -> Lease | None:
    """The Lease this guardian holds while it acts, renewed in a thread; None without an API server at hand (a
    Ray head on this machine: no in-cluster guardian can follow it). The in-cluster guardian tries once and
    otherwise waits for it in the loop; the foreground one holds it before it starts (incluster/lease.py
    acquire_in_foreground: LeaseHeld while another holds it, unless `take_over`)."""
    api = api_endpoint(endpoint)
    if api is None:
        return None
    if in_cluster:
        lease = Lease(api, in_cluster_identity())
        try:
            lease.try_acquire_or_renew()
        except LeaseError as error:
            _report(f"{settings.run}: {error}; trying again every {RENEW_INTERVAL_SECONDS:g} s")
    else:
        lease = Lease(api, foreground_identity())
        acquire_in_foreground(lease, settings.run, take_over, _report)
    lease.start_renewing()
    return lease


def main(
    argv: list[str] | None = None,
    from_stack: StackSettings | None = None,
    google_credential: Callable[[], Credential] = metadata_credential,
) -> int:
    """`python3 -m incluster.guardian --settings FILE --address URL` (in the cluster: Google tokens from the metadata
    server), or with `from_stack` and the user's `google_credential` the foreground `python -m jobs guard --stack
    NAME`; return the exit code."""

    try:
        args = _parser().parse_args(argv)
        if args.settings:
            if not args.address:
                raise GuardError("--settings needs --address http://<head service>:8265")
            if args.take_over:
                raise GuardError(
                    "--take-over is for the foreground guardian (--stack); the in-cluster one waits for the Lease"
                )
            if args.entrypoint is not None:
                raise GuardError("--entrypoint is for the foreground guardian (--stack); the settings name the run")
            settings, endpoint = read_settings(args.settings), job_client.endpoint_for_address(args.address)
            follow = True
        elif from_stack is None:
            raise GuardError("--stack is the foreground form: run it as .venv/bin/python -m jobs guard --stack NAME")
        else:
            settings, endpoint = from_stack(args)
            follow = args.follow
        report: Callable[[str], None] = _report
        if args.heartbeat:  # the liveness probe's file (incluster/heartbeat.py), beaten from the start
            Heartbeat(_report, args.heartbeat).beat()
        lease = hold_the_lease(settings, endpoint, in_cluster=bool(args.settings), take_over=args.take_over)
        if args.heartbeat:
            report = Heartbeat(_report, args.heartbeat, failure=lease.failure if lease is not None else lambda: None)
        try:
            hooks = cluster_hooks(settings, endpoint, google_credential, report)
            wandb = target_from(os.environ, settings.submission.get("runtime_env", {}).get("env_vars", {}))
            guardian = Guardian(
                settings, endpoint, hooks, report, lease=lease, wait_for_lease=bool(args.settings), wandb=wandb
            )
            last = guardian.run(follow=follow)
        finally:
            if lease is not None:
                lease.stop()
        return 0 if last.details.get("outcome") == "succeeded" else RUN_NOT_FINISHED_EXIT
    except (GuardError, AccessError, job_client.JobError, LeaseHeld, LeaseError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        print(f"error: cannot read or write the run's directory{where}: {error.strerror or error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the run's attempts keep running", file=sys.stderr)
        return 130
