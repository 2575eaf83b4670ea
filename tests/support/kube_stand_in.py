"""A stand-in Kubernetes API server on 127.0.0.1 that answers the guardian's requests with Kubernetes' own object
shapes and records every (API group, resource, verb) it was asked, as the real one authorises them.

The verb of a request is the API server's: GET of a named object `get`, of a collection `list` (`watch` with
?watch=true), POST `create`, PUT `update`, PATCH `patch`, DELETE `delete` (kubernetes/apiserver v0.33.9, i.e.
Kubernetes 1.33.9, pkg/endpoints/request/requestinfo.go L176-189 and L224-244). Paths are `/api/v1/...` (core group
"") and `/apis/<group>/<version>/...`, namespaced under `namespaces/<ns>/`. The objects are what the pinned source
writes: a pod ended by the kubelet's graceful node shutdown (kubernetes/kubernetes pkg/kubelet/nodeshutdown/
nodeshutdown_manager.go, podManager.killPods: phase Failed, reason `Terminated`, the shutdown message and a
DisruptionTarget condition of reason TerminationByKubelet), one the scheduler preempted for a higher-priority pod
(pkg/scheduler/framework/preemption/preemption.go: DisruptionTarget of reason PreemptionByScheduler, "<scheduler>:
preempting to accommodate a higher priority pod"), a node's Ready condition (core/v1 NodeCondition), and the cluster
autoscaler's events on a pending pod (core/v1 Event with involvedObject, reason, message, first/lastTimestamp), in the
texts incluster/capacity_events.py quotes with their source lines: TriggeredScaleUp and NotTriggerScaleUp
(kubernetes/autoscaler cluster-autoscaler-1.33.6 processors/status/eventing_scale_up_processor.go L42-L53) and GKE's
FailedScaleUp. A list honours `labelSelector` (equality and existence) and `fieldSelector` (equality on the object's
dotted field path, e.g. `status.phase=Pending`, `involvedObject.kind=Pod`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from core import names
from incluster.endpoint import Endpoint

SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
"""The kubelet's status.message of a pod ended by graceful node shutdown (nodeshutdown_manager.go nodeShutdownMessage)."""


def stamp(seconds: float) -> str:
    """An API server time (RFC 3339, seconds, Z)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worker_pod(name: str, node: str, phase: str = "Running", **status: Any) -> dict[str, Any]:
    """A GPU worker pod of the stack's RayCluster (KubeRay's labels) with `status` fields over a running pod's."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "grpo", "labels": {"ray.io/cluster": "grpo", "ray.io/group": "gpu"}},
        "spec": {"nodeName": node},
        "status": {"phase": phase, "conditions": [], **status},
    }


def shut_down_pod(name: str, node: str, at: float) -> dict[str, Any]:
    """A worker pod as the kubelet leaves it after a graceful node shutdown (podManager.killPods)."""
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                 "message": SHUTDOWN_MESSAGE, "lastTransitionTime": stamp(at)}  # fmt: skip
    terminated = {"exitCode": 137, "reason": "Error", "finishedAt": stamp(at + 20)}
    return worker_pod(name, node, "Failed", reason="Terminated", message=SHUTDOWN_MESSAGE,
                      conditions=[condition, {"type": "Ready", "status": "False", "lastTransitionTime": stamp(at)}],
                      containerStatuses=[{"name": "ray-worker", "state": {"terminated": terminated}}])  # fmt: skip


def preempted_pod(name: str, node: str, at: float) -> dict[str, Any]:
    """A worker pod the scheduler marked for priority preemption (preemption.go PrepareCandidate), still running."""
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": "default-scheduler: preempting to accommodate a higher priority pod",
                 "lastTransitionTime": stamp(at)}  # fmt: skip
    return worker_pod(name, node, conditions=[condition])


def gpu_node(name: str, ready: str = "True", since: float = 0.0, reason: str = "KubeletReady") -> dict[str, Any]:
    """A GKE GPU node with its Ready condition."""
    condition = {"type": "Ready", "status": ready, "reason": reason, "message": f"kubelet {reason}",
                 "lastTransitionTime": stamp(since)}  # fmt: skip
    labels = {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [condition]}}  # fmt: skip


def pending_worker_pod(name: str) -> dict[str, Any]:
    """A GPU worker pod the scheduler cannot place yet (phase Pending, condition PodScheduled False Unschedulable)."""
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    pod = worker_pod(name, "", "Pending", conditions=[condition])
    pod["spec"] = {}
    return pod


MIG = "https://www.googleapis.com/compute/v1/projects/my-grpo-project/zones/us-central1-b/instanceGroups/{name}"
"""A node group as the autoscaler prints it: the MIG's URL (cloudprovider/gce/gce_url.go L90-L95)."""


def autoscaler_event(pod: str, reason: str, message: str, at: float, kind: str = "Normal") -> dict[str, Any]:
    """A core/v1 Event the cluster autoscaler writes on pod `pod` of the namespace."""
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{pod}.{int(at)}", "namespace": "grpo"},
            "involvedObject": {"kind": "Pod", "namespace": "grpo", "name": pod, "apiVersion": "v1"},
            "reason": reason, "message": message, "type": kind, "source": {"component": "cluster-autoscaler"},
            "firstTimestamp": stamp(at), "lastTimestamp": stamp(at), "count": 1}  # fmt: skip


def triggered_scale_up(pod: str, mig: str, at: float, before: int = 0, after: int = 2) -> dict[str, Any]:
    """TriggeredScaleUp: `pod triggered scale-up: %v` of each group's `{%v %v->%v (max: %v)}`."""
    message = f"pod triggered scale-up: [{{{MIG.format(name=mig)} {before}->{after} (max: 2)}}]"
    return autoscaler_event(pod, "TriggeredScaleUp", message, at)


def failed_scale_up(pod: str, reasons: str, at: float) -> dict[str, Any]:
    """GKE's FailedScaleUp Warning: `Node scale up in zones %v associated with this pod failed: %v. Pod is at risk
    of not being scheduled.`"""
    message = (
        f"Node scale up in zones us-central1-b associated with this pod failed: {reasons}."
        " Pod is at risk of not being scheduled."
    )
    return autoscaler_event(pod, "FailedScaleUp", message, at, kind="Warning")


def _pairs(selector: str) -> list[tuple[str, str]]:
    return [tuple(item.split("=", 1)) for item in selector.split(",") if "=" in item]  # type: ignore[misc]


def _field(item: dict[str, Any], path: str) -> str:
    value: Any = item
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return "" if value is None else str(value)


@dataclass
class StandInApiServer:
    """What the stand-in serves and what it was asked."""

    pods: list[dict[str, Any]] = field(default_factory=list)
    """The namespace's pods."""
    nodes: list[dict[str, Any]] = field(default_factory=list)
    """The cluster's nodes."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """The namespace's Events."""
    config_maps: list[dict[str, Any]] = field(default_factory=list)
    """The namespace's ConfigMaps (core/v1 ConfigMap: metadata and `data`, string to string)."""
    leases: list[dict[str, Any]] = field(default_factory=list)
    """The namespace's Leases: create (201) and update (200) store the body with the next resourceVersion; a create of
    an existing name or an update of an old resourceVersion is a 409 Conflict (the API server's optimistic
    concurrency)."""
    gpu_workers: int = 1
    """The `replicas` of the stack's RayCluster's GPU worker group (workloads/raycluster.py renders minReplicas 0 and
    maxReplicas gpu.nodes, here 1); a JSON patch that replaces it sets it."""
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    """Every (API group, resource, verb) asked, in order."""
    address: str = ""
    """Its base URL once started."""

    @property
    def endpoint(self) -> Endpoint:
        """The API server as the guardian's helpers take it."""
        return Endpoint(self.address, {"Authorization": "Bearer stand-in"}, True)

    def answer(self, method: str, url: str, body: Any = None) -> tuple[int, dict[str, Any]]:
        """Record the request's (group, resource, verb) and return (status, body)."""
        parsed = urlparse(url)
        parts = [part for part in parsed.path.split("/") if part]
        group, rest = ("", parts[2:]) if parts[:2] == ["api", "v1"] else (parts[1], parts[3:])
        if rest[:1] == ["namespaces"] and len(rest) > 2:
            rest = rest[2:]
        resource, name = rest[0], (rest[1] if len(rest) > 1 else "")
        watch = parse_qs(parsed.query).get("watch", ["false"])[0] in ("1", "true")
        verbs = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
        verb = verbs.get(method) or ("get" if name else "watch" if watch else "list")
        self.calls.append((group, resource, verb))
        selector = parse_qs(parsed.query).get("labelSelector", [""])[0]
        fields = parse_qs(parsed.query).get("fieldSelector", [""])[0]
        objects = {
            "pods": self.pods,
            "nodes": self.nodes,
            "events": self.events,
            "leases": self.leases,
            "configmaps": self.config_maps,
        }.get(resource, [])
        if resource == "leases" and verb in ("create", "update") and isinstance(body, dict):
            return self._write_lease(verb, body)
        if verb == "list":
            wanted = dict(item.split("=", 1) for item in selector.split(",") if "=" in item)
            keys = [item for item in selector.split(",") if item and "=" not in item]
            items = [
                item
                for item in objects
                if all(item["metadata"].get("labels", {}).get(key) == value for key, value in wanted.items())
                and all(key in item["metadata"].get("labels", {}) for key in keys)
                and all(_field(item, path) == value for path, value in _pairs(fields))
            ]
            return 200, {"kind": f"{resource.title()}List", "apiVersion": "v1", "items": items}
        found = next((item for item in objects if item["metadata"]["name"] == name), None)
        if resource == "rayclusters":
            for op in body if verb == "patch" and isinstance(body, list) else []:
                if op.get("op") == "replace" and op.get("path", "").endswith("/replicas"):
                    self.gpu_workers = int(op["value"])
            group_spec = {"groupName": names.RAY_WORKER_GROUP, "replicas": self.gpu_workers, "minReplicas": 0,
                          "maxReplicas": 1}  # fmt: skip
            return 200, {"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": name},
                         "spec": {"workerGroupSpecs": [group_spec]}}  # fmt: skip
        return (200, found) if found is not None else (404, {"kind": "Status", "code": 404, "reason": "NotFound"})

    def _write_lease(self, verb: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = body["metadata"]["name"]
        current = next((item for item in self.leases if item["metadata"]["name"] == name), None)
        conflict = {"kind": "Status", "code": 409, "reason": "AlreadyExists" if verb == "create" else "Conflict"}
        if verb == "create" and current is not None:
            return 409, conflict
        if verb == "update" and (
            current is None or current["metadata"]["resourceVersion"] != body["metadata"].get("resourceVersion")
        ):
            return 409, conflict
        version = str(int(current["metadata"]["resourceVersion"]) + 1) if current else "1"
        stored = {**body, "metadata": {**body["metadata"], "resourceVersion": version}}
        self.leases[:] = [item for item in self.leases if item["metadata"]["name"] != name] + [stored]
        return (201 if verb == "create" else 200), stored


@contextmanager
def stand_in_api_server(server: StandInApiServer) -> Iterator[StandInApiServer]:
    """`server` answering on 127.0.0.1 (a free port) for the block."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            sent = json.loads(self.rfile.read(length)) if length else None
            status, body = server.answer(self.command, self.path, sent)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _reply

        def log_message(self, *_: Any) -> None:
            pass

    http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.address = f"http://127.0.0.1:{http.server_address[1]}"
    thread = threading.Thread(target=http.serve_forever, name="stand-in-api-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        http.shutdown()
        http.server_close()
        thread.join(10)
