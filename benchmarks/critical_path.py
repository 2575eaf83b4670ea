"""`make bench`: the estimated time from `pulumi up` to the submitted job of each shipped stack, along its
critical path (everything starts as soon as what it waits for exists) beside the serial sum, from the
typical creation times below and the dependency graph of the stack's mocked run."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root (put on sys.path for the imports below)."""
sys.path.insert(0, str(REPO))

from core.names import GPU_NODE_POOL  # noqa: E402
from plan.graph import critical_path, waits_for  # noqa: E402
from plan.harness import run_stack  # noqa: E402
from plan.monitor import Recorded  # noqa: E402

SHIPPED_STACKS = ("dev", "nemo-rl-standard-b200", "verl-autopilot-b200", "verl-standard-h200")
"""The stack files beside Pulumi.yaml."""

ESTIMATE = "engineering estimate"

TYPICAL_SECONDS: dict[str, tuple[float, str]] = {
    "gpu-node-pool": (
        35 * 60,
        "NVIDIA/aicr#2065: one GPU node pool took about 35 min (day-two sheet, Time to first step)",
    ),
    "cluster": (10 * 60, f"{ESTIMATE}; Cluster Toolkit: a deployment takes 10-20 minutes or more (day-two sheet)"),
    "cpu-node-pool": (4 * 60, ESTIMATE),
    "gcp:lustre/instance:Instance": (20 * 60, ESTIMATE),
    "gcp:servicenetworking/connection:Connection": (2 * 60, ESTIMATE),
    "gcp:projects/service:Service": (60, ESTIMATE),
    "network": (30, ESTIMATE),
    "kubernetes:batch/v1:Job": (15 * 60, f"{ESTIMATE}: the model, data and verl download of the staging Job"),
    "kubernetes:ray.io/v1:RayCluster": (10 * 60, f"{ESTIMATE}: Ray pods ready, a multi-GB image pulled on fresh nodes"),
    "pulumi-python:dynamic:Resource": (60, f"{ESTIMATE}: the GPU readiness gate and the submission"),
    "restored-run": (
        5,
        f"{ESTIMATE}: the import of a parked run reads the parked bucket's marker; nothing is parked on a first up"
        " (an import after parking takes as long as its bytes at the instance's throughput)",
    ),
    "other": (5, ESTIMATE),
}
"""Typical creation time and its source per kind of resource (see kind_of)."""

NETWORK_TYPES = ("gcp:compute/",)
"""Type prefixes created in about half a minute (networks, subnets, firewalls, routers, NAT, addresses)."""


def kind_of(resource: Recorded) -> str:
    """The TYPICAL_SECONDS key of a custom resource."""
    if resource.type == "gcp:container/nodePool:NodePool":
        return "gpu-node-pool" if resource.inputs.get("name") == GPU_NODE_POOL else "cpu-node-pool"
    if resource.type == "gcp:container/cluster:Cluster":
        return "cluster"
    if resource.type.startswith(NETWORK_TYPES):
        return "network"
    if resource.type == "pulumi-python:dynamic:Resource" and resource.name == "restored-run":
        return "restored-run"
    return resource.type if resource.type in TYPICAL_SECONDS else "other"


def estimate(stack: str) -> str:
    """One line: the stack's critical path beside its serial sum, and the chain of kinds along it."""
    recording = run_stack(stack)
    by_urn = {resource.urn: resource for resource in recording.resources}
    seconds = {r.urn: TYPICAL_SECONDS[kind_of(r)][0] for r in recording.resources if r.custom}
    path = critical_path(seconds, waits_for(recording.resources))
    chain = " -> ".join(kind_of(by_urn[urn]) for urn in path.chain if by_urn[urn].custom)
    return (
        f"{stack}: critical path {path.seconds / 60:.0f} min beside {path.serial_seconds / 60:.0f} min one after"
        f" another ({chain})"
    )


def main() -> int:
    """Print the estimate of every shipped stack and where each creation time comes from."""
    print("time to the submitted job, estimated from typical creation times:")
    for stack in SHIPPED_STACKS:
        print(f"  {estimate(stack)}")
    for kind, (seconds, source) in TYPICAL_SECONDS.items():
        print(f"    {kind}: {seconds / 60:.1f} min ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
