"""Unparking: a Pulumi dynamic resource that imports a parked run into a fresh Managed Lustre instance during
`pulumi up`, before anything mounts the instance (the data volume waits for it, and the staging Job, the RayCluster,
the run guardian and the run's submission wait for the volume's claim).

create: read the parked bucket's marker; when it says parked, import the bucket's parked prefix into the instance's
root with importData, wait for the Operation (a deadline, a line per read on the provider's stderr, which `pulumi up`
shows) and mark the marker restored (incluster/park.py restore_run); without a marker, or one already restored, it
imports nothing. It runs once per instance: a new instance (its uid) replaces it; delete does nothing (the data is on
the instance, and the bucket keeps its copy). It is here and not a separate command so that the import comes before
the next attempt by the graph's own order: `storage.parked: false` and one `pulumi up` bring the run back.

It pickles as the post-deploy step's provider does (jobs/submit/provider.py: stdlib calls that import this module,
no bytecode).
"""

from __future__ import annotations

import importlib
import operator
import site
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider

from incluster import lustre_transfer
from incluster.google_token import FreshBearer
from incluster.lustre_transfer import TRANSFER_DEADLINE_SECONDS, RestObjects, RestTransfers
from incluster.park import restore_run
from jobs.submit.access import user_credential
from jobs.submit.provider import PROJECT_DIR, _Call

REPLACING_INPUTS = ("bucket", "instance", "instance_uid")
"""Inputs whose change makes a new import resource: another bucket or another instance."""


def _report(line: str) -> None:
    print(f"grpo-gke unpark: {line}", file=sys.stderr, flush=True)


class RestoreProvider(ResourceProvider):
    """Imports a parked run into the instance once; deleting it leaves the data alone."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """Pickle as stdlib calls that put the project on the path, import this module and make a RestoreProvider."""
        in_order = (_Call(site.addsitedir, PROJECT_DIR), _Call(importlib.import_module, __name__))
        module = _Call(operator.methodcaller("__getitem__", -1), in_order)
        return (operator.methodcaller(type(self).__name__), (module,))

    def create(self, props: dict[str, Any]) -> CreateResult:
        """Import the parked run when the marker says parked; record what the marker says afterwards."""
        headers = FreshBearer(lambda: user_credential({}))
        marker = restore_run(
            RestTransfers(headers),
            RestObjects(props["bucket"], headers),
            props["instance"],
            props["bucket"],
            float(props["deadline_seconds"]),
            _report,
            poll=lustre_transfer.POLL_SECONDS,
        )
        state = "nothing parked" if marker is None else str(marker.get("state"))
        _report(f"{props['instance']}: {state}")
        return CreateResult(id_=props["instance"], outs={**props, "marker_state": state})

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Replaced for another bucket or instance; nothing else changes it."""
        replaces = [key for key in REPLACING_INPUTS if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(replaces), replaces=replaces, delete_before_replace=True)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing: the run stays on the instance and in the bucket."""


@dataclass(frozen=True)
class RestoredRunArgs:
    """Inputs of the import."""

    bucket: pulumi.Input[str]
    """The parked bucket."""
    instance: pulumi.Input[str]
    """`projects/<p>/locations/<zone>/instances/<id>`."""
    instance_uid: pulumi.Input[str | None]
    """The instance's uid: a new instance imports again."""


class RestoredRun(pulumi.dynamic.Resource):
    """The parked run imported back into the instance (nothing when none is parked)."""

    marker_state: pulumi.Output[str]

    def __init__(self, name: str, args: RestoredRunArgs, opts: pulumi.ResourceOptions | None = None):
        props = {
            "bucket": args.bucket,
            "instance": args.instance,
            "instance_uid": args.instance_uid,
            "deadline_seconds": TRANSFER_DEADLINE_SECONDS,
            "marker_state": None,
        }
        super().__init__(RestoreProvider(), name, props, opts)
