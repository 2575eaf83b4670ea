"""Objects that components which do not run here would write, created on the real API server of the test run
(tests/support/control_plane.py) through its ordinary API, in the shapes those components write:

- the cluster autoscaler's events on a pending pod: core/v1 Events (involvedObject, reason, message, type,
  source.component, first/lastTimestamp, count, as client-go's event recorder writes them), in the texts
  incluster/capacity_events.py quotes with their source lines: TriggeredScaleUp and NotTriggerScaleUp
  (kubernetes/autoscaler cluster-autoscaler-1.33.6 processors/status/eventing_scale_up_processor.go L42-L53) and
  GKE's FailedScaleUp; a node group named by its MIG's URL (cloudprovider/gce/gce_url.go L90-L95);
- GPU worker pods of the stack's RayCluster (KubeRay's labels ray.io/cluster and ray.io/group,
  ray-operator/controllers/ray/utils/constant.go L19-21, v1.7.0): one the real scheduler cannot place stays Pending
  (no node matches its selector), one a kubelet runs is given phase Running through the status subresource, as the
  kubelet writes it.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

from core import names
from tests.support.control_plane import ControlPlane

UNPLACEABLE = {"grpo-gke-tests/no-node-has-this": "true"}
"""A nodeSelector no node carries: the scheduler leaves the pod Pending (PodScheduled False, Unschedulable)."""

MIG = "https://www.googleapis.com/compute/v1/projects/my-grpo-project/zones/us-central1-b/instanceGroups/{name}"
"""A node group as the autoscaler prints it: the MIG's URL (cloudprovider/gce/gce_url.go L90-L95)."""


def stamp(seconds: float) -> str:
    """An API server time (RFC 3339, seconds, Z)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def worker_pod(namespace: str, name: str, node: str | None = None) -> dict[str, Any]:
    """A GPU worker pod of the stack's RayCluster: bound to `node`, else one no node can take."""
    spec: dict[str, Any] = {"containers": [{"name": "ray-worker", "image": "rayproject/ray:2.60.0"}]}
    spec.update({"nodeName": node} if node else {"nodeSelector": UNPLACEABLE})
    labels = {"ray.io/cluster": names.RAY_CLUSTER, "ray.io/group": names.RAY_WORKER_GROUP}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": spec}  # fmt: skip


def create_pending_worker(plane: ControlPlane, namespace: str, name: str) -> dict[str, Any]:
    """A GPU worker pod the scheduler cannot place (phase Pending)."""
    return plane.ok("POST", f"/api/v1/namespaces/{namespace}/pods", worker_pod(namespace, name))


def create_running_worker(plane: ControlPlane, namespace: str, name: str, node: str) -> dict[str, Any]:
    """A GPU worker pod bound to `node`, a node no kubelet runs here: its phase Running as the node's kubelet wrote it
    (status subresource) before it stopped."""
    path = f"/api/v1/namespaces/{namespace}/pods"
    plane.ok("POST", path, worker_pod(namespace, name, node))
    status = {"status": {"phase": "Running"}}
    return plane.ok("PATCH", f"{path}/{name}/status", status, content_type="application/merge-patch+json")


def create_raycluster(plane: ControlPlane, namespace: str, replicas: int = 1) -> dict[str, Any]:
    """The stack's RayCluster (names.RAY_CLUSTER) with a GPU worker group of `replicas` of at most 1, suspended (KubeRay
    makes no pods of a suspended RayCluster: ray-operator v1.6.1 raycluster_types.go `suspend`), as the scaling code
    reads and patches it."""
    template = {"spec": {"containers": [{"name": "ray", "image": "rayproject/ray:2.60.0"}]}}
    group = {"groupName": names.RAY_WORKER_GROUP, "replicas": replicas, "minReplicas": 0, "maxReplicas": 1,
             "rayStartParams": {}, "template": template}  # fmt: skip
    body = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": {"name": names.RAY_CLUSTER, "namespace": namespace},
        "spec": {"suspend": True, "headGroupSpec": {"rayStartParams": {}, "template": template},
                 "workerGroupSpecs": [group]},
    }  # fmt: skip
    return plane.ok("POST", f"/apis/ray.io/v1/namespaces/{namespace}/rayclusters", body)


def autoscaler_event(
    plane: ControlPlane, namespace: str, pod: str, reason: str, message: str, at: float, kind: str = "Normal"
) -> dict[str, Any]:
    """A core/v1 Event the cluster autoscaler writes on pod `pod` of `namespace`."""
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": pod, "apiVersion": "v1"},
        "reason": reason,
        "message": message,
        "type": kind,
        "source": {"component": "cluster-autoscaler"},
        "firstTimestamp": stamp(at),
        "lastTimestamp": stamp(at),
        "count": 1,
    }
    return plane.ok("POST", f"/api/v1/namespaces/{namespace}/events", event)


def triggered_scale_up(
    plane: ControlPlane, namespace: str, pod: str, mig: str, at: float, before: int = 0, after: int = 2
) -> dict[str, Any]:
    """TriggeredScaleUp: `pod triggered scale-up: %v` of each group's `{%v %v->%v (max: %v)}`."""
    message = f"pod triggered scale-up: [{{{MIG.format(name=mig)} {before}->{after} (max: 2)}}]"
    return autoscaler_event(plane, namespace, pod, "TriggeredScaleUp", message, at)


def failed_scale_up(plane: ControlPlane, namespace: str, pod: str, reasons: str, at: float) -> dict[str, Any]:
    """GKE's FailedScaleUp Warning: `Node scale up in zones %v associated with this pod failed: %v. Pod is at risk
    of not being scheduled.`"""
    message = (
        f"Node scale up in zones us-central1-b associated with this pod failed: {reasons}."
        " Pod is at risk of not being scheduled."
    )
    return autoscaler_event(plane, namespace, pod, "FailedScaleUp", message, at, kind="Warning")


def delete_all(plane: ControlPlane, namespace: str, resource: str) -> None:
    """Delete every object of a namespaced core/v1 `resource` at once (no grace period)."""
    plane.ok("DELETE", f"/api/v1/namespaces/{namespace}/{resource}", params={"gracePeriodSeconds": "0"})


GPU_ACCELERATOR = "nvidia-h200-141gb"
"""The `cloud.google.com/gke-accelerator` label of the GPU nodes made here (an a3-ultragpu-8g's H200s)."""

GPU_MACHINE = "a3-ultragpu-8g"
"""Their machine type: its capacity and allocatable as core/facts states them (control_plane.node_status)."""


class Nodes:
    """GPU nodes a test makes on the shared control plane (under tests/conftest.py cluster_lock) and deletes after:
    a Ready one run by kwok (its kubelet: the Ready condition and heartbeats are kwok's), or one no kubelet runs whose
    Ready condition the test writes through the status subresource, as the node lifecycle controller writes it for a
    node whose kubelet stopped (Unknown, NodeStatusUnknown) or a kubelet for one that is not ready (False)."""

    def __init__(self, plane: ControlPlane) -> None:
        self.plane = plane
        self.names: list[str] = []

    def _create(self, name: str, labels: dict[str, str], kubelet: bool) -> None:
        from tests.support.control_plane import KWOK_ANNOTATION, node_object, node_status

        node = node_object(name, {"cloud.google.com/gke-accelerator": GPU_ACCELERATOR,
                                  "node.kubernetes.io/instance-type": GPU_MACHINE, **labels}, [],
                           node_status(GPU_MACHINE, 8))  # fmt: skip
        if not kubelet:
            del node["metadata"]["annotations"][KWOK_ANNOTATION]
        self.plane.ok("POST", "/api/v1/nodes", node)
        self.names.append(name)

    def ready(self, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        """A GPU node kwok runs, once Ready."""
        self._create(name, labels or {}, kubelet=True)

        def is_ready() -> dict[str, Any] | None:
            node = self.plane.get(f"/api/v1/nodes/{name}") or {}
            conditions = (node.get("status") or {}).get("conditions") or []
            return node if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None

        return self.plane.wait_for(f"node {name} Ready", is_ready, deadline=30, every=0.05)

    def without_kubelet(
        self, name: str, status: str, since: float, reason: str, message: str, labels: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """A GPU node no kubelet runs, its Ready condition `status` since `since` with `reason` and `message` (one left
        True becomes Unknown once the node lifecycle controller's grace period passes: 4 s here)."""
        self._create(name, labels or {}, kubelet=False)
        condition = {"type": "Ready", "status": status, "reason": reason, "message": message,
                     "lastTransitionTime": stamp(since), "lastHeartbeatTime": stamp(since)}  # fmt: skip
        return self.plane.ok("PATCH", f"/api/v1/nodes/{name}/status", {"status": {"conditions": [condition]}},
                             content_type="application/strategic-merge-patch+json")  # fmt: skip

    def delete(self) -> None:
        """Delete every node made here."""
        for name in self.names:
            self.plane.request("DELETE", f"/api/v1/nodes/{name}")
        self.names.clear()


SHUTDOWN_MESSAGE = "Pod was terminated in response to imminent node shutdown."
"""The kubelet's status.message of a pod ended by graceful node shutdown (kubernetes/kubernetes
pkg/kubelet/nodeshutdown/nodeshutdown_manager.go nodeShutdownMessage)."""

STATUS_PATCH = "application/strategic-merge-patch+json"
"""How the kubelet and the scheduler patch a pod's status (conditions merged by their type)."""


def patch_pod_status(plane: ControlPlane, namespace: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
    """A pod's status changed through its status subresource, as the kubelet or the scheduler writes it."""
    path = f"/api/v1/namespaces/{namespace}/pods/{name}/status"
    return plane.ok("PATCH", path, {"status": status}, content_type=STATUS_PATCH)


def shut_down_worker(plane: ControlPlane, namespace: str, name: str, node: str, at: float) -> dict[str, Any]:
    """A GPU worker pod on `node` as the kubelet leaves it after a graceful node shutdown (nodeshutdown_manager.go,
    podManager.killPods: phase Failed, reason `Terminated`, the shutdown message, a DisruptionTarget condition of
    reason TerminationByKubelet; its container ended)."""
    plane.ok("POST", f"/api/v1/namespaces/{namespace}/pods", worker_pod(namespace, name, node))
    disrupted = {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet",
                 "message": SHUTDOWN_MESSAGE, "lastTransitionTime": stamp(at)}  # fmt: skip
    terminated = {"exitCode": 137, "reason": "Error", "startedAt": stamp(at - 600), "finishedAt": stamp(at + 20)}
    container = {"name": "ray-worker", "image": "rayproject/ray:2.60.0", "imageID": "", "ready": False,
                 "restartCount": 0, "state": {"terminated": terminated}}  # fmt: skip
    return patch_pod_status(plane, namespace, name, {
        "phase": "Failed", "reason": "Terminated", "message": SHUTDOWN_MESSAGE, "containerStatuses": [container],
        "conditions": [disrupted, {"type": "Ready", "status": "False", "lastTransitionTime": stamp(at)}],
    })  # fmt: skip


def preempt(plane: ControlPlane, namespace: str, name: str, at: float) -> dict[str, Any]:
    """A victim of priority preemption as the scheduler leaves it (pkg/scheduler/framework/preemption/preemption.go
    PrepareCandidate): the DisruptionTarget condition of reason PreemptionByScheduler, "<scheduler>: preempting to
    accommodate a higher priority pod", and its deletion (the pod's grace period: on a node no kubelet runs it stays
    terminating). Deleted first here: the disruption controller sets a DisruptionTarget condition older than 2 minutes
    on a pod not being deleted back to False (pkg/controller/disruption/disruption.go, stalePodDisruptionTimeout), and
    `at` is in the past."""
    plane.ok("DELETE", f"/api/v1/namespaces/{namespace}/pods/{name}")
    condition = {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": "default-scheduler: preempting to accommodate a higher priority pod",
                 "lastTransitionTime": stamp(at)}  # fmt: skip
    return patch_pod_status(plane, namespace, name, {"conditions": [condition]})


VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
"""The API server's verb of a request method (GET: `get` of a named object, `list` of a collection, `watch` with
?watch=true; kubernetes/apiserver v0.33.9 pkg/endpoints/request/requestinfo.go L176-189, L224-244)."""


def api_call(method: str, path: str) -> tuple[str, str, str]:
    """(API group, resource, verb) of a request, as the API server's authorizer sees it (requestinfo.go): paths are
    `/api/v1/...` (core group "") and `/apis/<group>/<version>/...`, namespaced under `namespaces/<ns>/`; a
    subresource is `<resource>/<subresource>`."""
    bare, _, query = path.partition("?")
    parts = [part for part in bare.split("/") if part]
    group, rest = ("", parts[2:]) if parts[:2] == ["api", "v1"] else (parts[1], parts[3:])
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource = "/".join([rest[0], *rest[2:3]])
    watch = "watch=true" in query or "watch=1" in query
    verb = VERBS.get(method) or ("get" if len(rest) > 1 else "watch" if watch else "list")
    return group, resource, verb
