"""The readiness gate: the Ray nodes and the GPUs each shows, what is missing for the run's GPU nodes, and, through
the Kubernetes API server, which rung of the capacity ladder GKE is trying and why the last scale-up failed."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from core import names
from core.facts.job import RAY_JOB_START_TIMEOUT_SECONDS
from core.facts.platform import GPUS_PER_NODE
from incluster import job_client
from incluster.capacity_events import LadderState, groups_from_text, ladder_state
from incluster.endpoint import Endpoint
from incluster.job_client import JobError, Report, Unreachable

REPORT_EVERY_SECONDS = 30.0
"""How often an unchanged progress line of the readiness gate is repeated."""

LADDER_READ_SECONDS = 10.0
"""How often the readiness gate reads the autoscaler's events (two API requests) while it polls Ray every few seconds."""


def ray_nodes(endpoint: Endpoint) -> list[dict[str, Any]]:
    """Every Ray node the head knows, dead ones included, from the dashboard's state API (`/api/v0/nodes`,
    entries with `node_id`, `state`, `resources_total`, `end_time_ms`), within DEADLINES.request."""
    import requests  # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms (measured)

    url = f"{endpoint.address}/api/v0/nodes?detail=1"
    try:
        response = requests.get(
            url, headers=dict(endpoint.headers), verify=endpoint.verify, timeout=job_client.DEADLINES.request
        )
        response.raise_for_status()
        nodes = response.json()["data"]["result"]["result"]
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as error:
        raise job_client.unreachable(endpoint.address, error) from None
    except requests.exceptions.HTTPError as error:
        raise Unreachable(
            f"cannot read the Ray nodes at {endpoint.address}: {job_client.short_reason(error)}"
        ) from None
    except (ValueError, KeyError, TypeError):
        raise JobError(f"the Ray dashboard at {endpoint.address} returned no node list") from None
    except requests.exceptions.RequestException as error:  # a cut answer: ChunkedEncodingError and the like
        raise Unreachable(
            f"the Ray dashboard at {endpoint.address} cut its node list short: {type(error).__name__}"
        ) from None
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise JobError(f"the Ray dashboard at {endpoint.address} returned no node list")
    return nodes


def node_gpus(node: dict[str, Any]) -> float:
    """GPUs a state API node entry declared."""
    return float((node.get("resources_total") or {}).get("GPU", 0))


def gpu_nodes(endpoint: Endpoint) -> list[float]:
    """GPUs of each ALIVE Ray node, from the dashboard's state API, within DEADLINES.request."""
    return [node_gpus(node) for node in ray_nodes(endpoint) if node.get("state") == "ALIVE"]


def readiness(gpus_by_node: list[float], nodes: int) -> str | None:
    """What is missing for `nodes` Ray nodes with 8 GPUs each, or None when they are there."""
    full = sum(1 for gpus in gpus_by_node if gpus >= GPUS_PER_NODE)
    if full >= nodes:
        return None
    partial = sorted(int(gpus) for gpus in gpus_by_node if 0 < gpus < GPUS_PER_NODE)
    detail = f" (and nodes with only {', '.join(map(str, partial))} GPUs)" if partial else ""
    return (
        f"{full} of {nodes} Ray nodes with {GPUS_PER_NODE} GPUs are up{detail}; missing {nodes - full}"
        f" (gpu.nodes={nodes}; verl places one STRICT_PACK group of {GPUS_PER_NODE} GPUs per node)"
    )


@dataclass(frozen=True)
class Capacity:
    """Where the readiness gate reads which rung of the capacity ladder GKE is trying: the API server and what maps
    the autoscaler's node groups to rungs (incluster/capacity_events.py)."""

    api: Endpoint
    """The Kubernetes API server (not the dashboard's proxy)."""
    groups: Mapping[str, str]
    """The GPU pools' MIGs by name, each to its pool's rung (incluster/capacity_events.py group_rungs)."""
    namespace: str = names.NAMESPACE
    """The namespace of the GPU worker pods and their events."""


def api_items(api: Endpoint, path: str, params: dict[str, str], what: str) -> list[dict[str, Any]]:
    """The `items` of a list request to the API server within DEADLINES.request; JobError (Unreachable when silent)
    names `what` when it refuses."""
    import requests  # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms (measured)

    try:
        answer = requests.get(
            f"{api.address}{path}",
            params=params,
            headers=dict(api.headers),
            verify=api.verify,
            timeout=job_client.DEADLINES.request,
        )
    except requests.exceptions.RequestException:  # no connection, no answer in time, or a cut answer
        raise Unreachable(f"the API server at {api.address} did not answer listing {what}") from None
    if answer.status_code >= 400:
        raise JobError(f"the API server answered HTTP {answer.status_code} listing {what}")
    try:
        return list(answer.json().get("items") or [])
    except (ValueError, AttributeError):
        raise JobError(f"the API server returned no list of {what}") from None


WORKER_SELECTOR = f"ray.io/cluster={names.RAY_CLUSTER},ray.io/group={names.RAY_WORKER_GROUP}"
"""The GPU worker pods of the stack's RayCluster (KubeRay's labels ray.io/cluster and ray.io/group,
ray-operator/controllers/ray/utils/constant.go L19-21, v1.7.0)."""


def scale_up_events(capacity: Capacity) -> list[dict[str, Any]]:
    """The events on the pending GPU worker pods: the Pending worker pods (fieldSelector status.phase, a field
    selector every pod supports), then the namespace's Pod events (Events are namespaced; fieldSelector
    involvedObject.kind=Pod: kubernetes/kubernetes pkg/registry/core/event/strategy.go EventToSelectableFields,
    read at commit 00b2d95, the stored copy; the field set is the same in v1.33) of those pods alone."""
    base = f"/api/v1/namespaces/{capacity.namespace}"
    pods = api_items(
        capacity.api,
        f"{base}/pods",
        {"labelSelector": WORKER_SELECTOR, "fieldSelector": "status.phase=Pending"},
        "the pending GPU worker pods",
    )
    pending = {str((pod.get("metadata") or {}).get("name", "")) for pod in pods}
    if not pending:
        return []
    events = api_items(capacity.api, f"{base}/events", {"fieldSelector": "involvedObject.kind=Pod"}, "the pods' events")
    return [event for event in events if (event.get("involvedObject") or {}).get("name") in pending]


def instance_groups_of(api: Endpoint, namespace: str = names.NAMESPACE) -> dict[str, str]:
    """The GPU pools' MIGs by name, each to its rung, from the ConfigMap names.GPU_INSTANCE_GROUPS_CONFIG_MAP
    (workloads/instance_groups.py) listed by name (fieldSelector metadata.name, which every object supports); {} when
    there is none (Autopilot). JobError (Unreachable when silent) when the API server refuses."""
    items = api_items(
        api,
        f"/api/v1/namespaces/{namespace}/configmaps",
        {"fieldSelector": f"metadata.name={names.GPU_INSTANCE_GROUPS_CONFIG_MAP}"},
        "the GPU pools' instance groups",
    )
    texts = [str((item.get("data") or {}).get(names.GPU_INSTANCE_GROUPS_FILE, "")) for item in items]
    return groups_from_text(texts[0]) if texts else {}


def ladder_line(capacity: Capacity | None) -> str:
    """Which rung is being tried, since when, and why the last scale-up did not happen, for the gate's progress
    line; "" without an API server or before the autoscaler wrote anything; one clause when it cannot be read."""
    if capacity is None:
        return ""
    try:
        state = ladder_state(scale_up_events(capacity), capacity.groups)
    except JobError as error:
        return f"rung unknown ({error})"
    return ladder_line_of(state)


def ladder_line_of(state: LadderState) -> str:
    """`trying rung R since T; last scale-up failed: WHY`, the parts the state knows; "" when it knows none."""
    parts = []
    if state.rung is not None:
        parts.append(f"trying rung {state.rung} since {state.since}")
    if state.last_failure is not None:
        parts.append(f"last scale-up failed: {state.last_failure}")
    return "; ".join(parts)


def wait_for_gpus(
    endpoint: Endpoint,
    nodes: int,
    timeout: float,
    report: Report,
    poll: float = 2.0,
    capacity: Capacity | None = None,
) -> None:
    """Wait, at most `timeout` seconds, until `nodes` Ray nodes show 8 GPUs; JobError says what is missing.

    The progress line is reported when what is missing (or the ladder's rung and last failure, read from the
    autoscaler's events when `capacity` gives an API server) changes, else every REPORT_EVERY_SECONDS (`pulumi up`
    prints every line the provider writes).
    """
    deadline = time.monotonic() + timeout
    reported, reported_at = "", 0.0
    ladder, ladder_at = "", float("-inf")
    while True:
        missing = readiness(gpu_nodes(endpoint), nodes)
        if missing is None:
            return
        now = time.monotonic()
        if now - ladder_at >= LADDER_READ_SECONDS:
            ladder, ladder_at = ladder_line(capacity), now
        missing_now = f"{missing}; {ladder}" if ladder else missing
        left = deadline - now
        if left <= 0:
            raise JobError(
                f"refused: the job can never be placed: {missing_now} after {timeout:.0f} s."
                f" Ray would keep it PENDING for {RAY_JOB_START_TIMEOUT_SECONDS} s; check the GPU node pool"
                f" (kubectl -n {names.NAMESPACE} get pods) and job.readyTimeoutSeconds"
            )
        if missing_now != reported or now - reported_at >= REPORT_EVERY_SECONDS:
            report(f"waiting for GPU nodes: {missing_now}; {left:.0f} s left")
            reported, reported_at = missing_now, now
        time.sleep(min(poll, max(left, 0.1)))
