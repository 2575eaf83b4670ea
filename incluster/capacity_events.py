"""Which rung of the capacity ladder GKE is trying, since when, and why the last one did not scale up: read
from the events the cluster autoscaler writes on the pending GPU worker pods. Pure (events in, a verdict out),
stdlib only, in the in-cluster package so that the readiness gate and the guardian may import it.

Event texts, as their sources write them:
- NotTriggerScaleUp: `pod didn't trigger scale-up: <count> <reason>, ...` (kubernetes/autoscaler
  cluster-autoscaler-1.33.6 cluster-autoscaler/processors/status/eventing_scale_up_processor.go L42-L44;
  a reason such as `max node group size reached`, core/scaleup/orchestrator/skippedreasons.go L43).
- TriggeredScaleUp: `pod triggered scale-up: [{<MIG URL> <from>-><to> (max: <max>)} ...]` (same file L51-L53;
  processors/nodegroupset/nodegroup_set_processor.go L42-L44 prints each group; the group id is the MIG URL
  `.../projects/<p>/zones/<z>/instanceGroups/<name>`, cloudprovider/gce/gce_url.go L90-L95).
- FailedScaleUp (GKE's own autoscaler, a Warning): `Node scale up in zones <zones> associated with this pod
  failed: <reasons>. Pod is at risk of not being scheduled.`, cut at 250 characters; reasons such as
  `GCE quota exceeded`, `GCE out of resources`, `Reservation not found or incorrectly shared`,
  `Reservation capacity exceeded`, `Internal error` for any other (GKE cluster-autoscaler source,
  k8s.io/gke-autoscaling cluster-autoscaler events package, failed scale-up event logger; a stored copy whose
  repository the index does not name, read 2026-12-01).
A FailedScaleUp names zones, not node pools: the failed rung is the one the last TriggeredScaleUp named.
GKE names a pool's MIG `gke-<cluster>-<pool>-<8 hex>-grp` and shortens long cluster and pool names in it (seen in
stored `kubectl describe` output: `instanceGroups/gke-data-analysis-cl-n1-standard-4-no-86ad6e2d-grp`; the rule of
the cut is not published in any source read), so the rung is not read from the name: each GPU pool's MIGs are
known by name from the node pool's `instanceGroupUrls` ("The resource URLs of the managed instance groups
associated with this node pool. During the node pool blue-green upgrade operation, the URLs contain both blue and
green resources. Output only.": GKE API container/v1 NodePool, as the googleapis Dart client 13.1.0 generated from
its discovery document says it, pub.dev, read 2026-12-07; Google's own reference of the message
google.container.v1.NodePool, cloud.google.com/php/docs/reference/cloud-container/latest/V1.NodePool, names the
field, read 2026-12-07; pulumi-gcp 10.2.0 container NodePool output `instance_group_urls`), which the stack passes to whoever reads the events
(group_rungs) through a ConfigMap read at run time (workloads/instance_groups.py). Those URLs name the
instance group managers (`.../zones/<z>/instanceGroupManagers/<name>`: the Terraform Google provider's
flattenNodePool, "InstanceGroupUrls are actually URLs for InstanceGroupManagers", a stored copy whose repository
the index does not name), and a MIG's instance group has its manager's name (a GKE instance group read back:
"This instance group is controlled by Instance Group Manager 'gke-moon-cluster-cli-default-pool-9e3e8e7a-grp'",
name `gke-moon-cluster-cli-default-pool-9e3e8e7a-grp`, winterash2/cicd-monitoring-poc): the last path segment of
either URL is the group's name. A group of no GPU pool of the stack gives no rung.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.facts.capacity import RUNGS
from core.names import gpu_pool_name

NODE_POOL_LABEL = "cloud.google.com/gke-nodepool"
"""The label GKE gives every node with its pool's name (GKE "About node pools", docs/concepts/node-pools: "Each node
in the pool has a Kubernetes node label, `cloud.google.com/gke-nodepool`, which has the node pool's name", read
2026-12-01); a ladder's pool names carry the rung (core/names.py gpu_pool_name), so this one label names each GPU
node's rung."""

TRIGGERED, NOT_TRIGGERED, FAILED = "TriggeredScaleUp", "NotTriggerScaleUp", "FailedScaleUp"
"""The reasons of the autoscaler's events on a pending pod (sources in the module docstring)."""

_SCALE_UP_GROUP = re.compile(r"\{(?P<group>\S+) (?P<before>\d+)->(?P<after>\d+) \(max: (?P<max>\d+)\)\}")
_FAILED = re.compile(r"Node scale up in zones (?P<zones>.*?) associated with this pod failed: (?P<reasons>.*)")

DETAIL_IN_LOGS = (
    "cause unknown: the autoscaler's event says only 'Internal error'; the detail is in its visibility logs in"
    " Cloud Logging (logName cluster-autoscaler-visibility), which the guardian does not read"
)
"""What to say when the event does not carry the cause."""


def rung_of_pool(provisioning: str, pool: str) -> str | None:
    """The rung whose pool is `pool` (today's `gpu` is gpu.provisioning's rung), or None for another pool."""
    for rung in RUNGS:
        if gpu_pool_name(provisioning, rung) == pool:
            return rung
    return None


def rung_of_node(labels: Mapping[str, str], provisioning: str) -> str | None:
    """A GPU node's rung, from its `cloud.google.com/gke-nodepool` label; None when it is not a ladder pool's."""
    return rung_of_pool(provisioning, labels.get(NODE_POOL_LABEL, ""))


def rung_of_gpu_node(labels: Mapping[str, str], provisioning: str, ladder: bool) -> str | None:
    """A GPU node's rung in a stack with a ladder (`gpu.capacity` set): its pool label's (rung_of_node), None for a
    pool of no rung; without one, the stack's single `gpu.provisioning` (every GPU node is, on Standard and on
    Autopilot, whose nodes have no pool of ours). Every rung's pool name counts, not only the ladder's today, so a
    rung just taken off the ladder still names its nodes' rung while they drain."""
    return rung_of_node(labels, provisioning) if ladder else provisioning


def rungs_of_nodes(node_labels: Iterable[Mapping[str, str]], provisioning: str, ladder: bool = True) -> dict[str, int]:
    """GPU nodes per rung, in RUNGS' order, from each node's labels (rung_of_gpu_node; nodes of no ladder pool are
    left out). One attempt may hold nodes of several rungs: the ladder lets the autoscaler mix them node by node
    (issue 22 item 4's choice, docs/before-first-up.md "Capacity ladder")."""
    counts = {rung: 0 for rung in RUNGS}
    for labels in node_labels:
        rung = rung_of_gpu_node(labels, provisioning, ladder)
        if rung is not None:
            counts[rung] += 1
    return {rung: count for rung, count in counts.items() if count}


def group_name(url: str) -> str:
    """A MIG's name from its URL, of its instance group or of its manager (the last path segment)."""
    return url.rstrip("/").rsplit("/", 1)[-1]


def group_rungs(urls_by_rung: Mapping[str, Iterable[str]]) -> dict[str, str]:
    """Each GPU pool's MIGs by name, to the pool's rung, from each rung's pool's `instanceGroupUrls`."""
    return {group_name(url): rung for rung, urls in urls_by_rung.items() for url in urls or ()}


def groups_from_text(text: str) -> dict[str, str]:
    """The MIG-to-rung map of the instance groups file (workloads/instance_groups.py groups_text); {} for a text
    that is not a JSON object of strings (the gate then names no rung, as before the pools' groups were known)."""
    try:
        values = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(values, dict):
        return {}
    return {str(name): rung for name, rung in values.items() if isinstance(rung, str)}


def rungs_scaled(message: str, groups: Mapping[str, str]) -> list[str]:
    """The rungs a TriggeredScaleUp message scales, in its order, by the MIG names `groups` maps to rungs
    (group_rungs); a MIG of another cluster or pool names none."""
    rungs = []
    for group in _SCALE_UP_GROUP.finditer(message):
        rung = groups.get(group_name(group.group("group")))
        if rung is not None and rung not in rungs:
            rungs.append(rung)
    return rungs


def failure_reasons(message: str) -> str:
    """Why a FailedScaleUp failed, in the autoscaler's words, or DETAIL_IN_LOGS for its 'Internal error'."""
    match = _FAILED.search(message)
    if match is None:
        return message
    reasons = match.group("reasons").removesuffix(". Pod is at risk of not being scheduled.")
    if reasons.strip() in ("Internal error", "Internal error."):
        return DETAIL_IN_LOGS
    return f"{reasons} in {match.group('zones')}"


@dataclass(frozen=True)
class LadderState:
    """Where a ladder's scale-up stands, from the events on the pending workers."""

    rung: str | None
    """The rung the autoscaler last tried to scale (its last TriggeredScaleUp), or None before any."""
    since: str | None
    """When it first tried that rung (the event's firstTimestamp), or None."""
    last_failure: str | None
    """Why the last scale-up did not happen (FailedScaleUp or NotTriggerScaleUp), or None when none failed."""


def _time(event: Mapping[str, Any], key: str) -> str:
    return str(event.get(key) or event.get("eventTime") or "")


def ladder_state(events: Iterable[Mapping[str, Any]], groups: Mapping[str, str]) -> LadderState:
    """The rung being tried, since when, and why the last attempt failed, from core/v1 Events (as the API
    returns them) on the pending GPU worker pods and the GPU pools' MIGs by name (group_rungs); events of other
    reasons are ignored."""
    ordered = sorted(
        (e for e in events if e.get("reason") in (TRIGGERED, NOT_TRIGGERED, FAILED)),
        key=lambda e: _time(e, "lastTimestamp"),
    )
    rung = since = failure = None
    for event in ordered:
        reason, message = event["reason"], str(event.get("message", ""))
        if reason == TRIGGERED:
            scaled = rungs_scaled(message, groups)
            if scaled and scaled[-1] != rung:
                rung, since = scaled[-1], _time(event, "firstTimestamp")
        elif reason == FAILED:
            failure = failure_reasons(message)
        else:
            failure = message.removeprefix("pod didn't trigger scale-up: ") or "no reason given"
    if ordered and ordered[-1]["reason"] == TRIGGERED:
        failure = None
    return LadderState(rung=rung, since=since, last_failure=failure)
