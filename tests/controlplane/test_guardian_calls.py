"""The guardian's Kubernetes calls against the real API server, as its own ServiceAccount (a token from
TokenRequest) with the Role and ClusterRole the stack renders (jobs/guardian/objects.py): what they allow works,
what they do not is refused by RBAC; two guardians contend for a real Lease; a GPU node that stops reporting or is
deleted, and an evicted GPU worker pod, are seen as the API server records them."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from core import names
from incluster import readiness, scaling
from incluster.guardian import cluster
from incluster.guardian.settings import settings_from
from incluster.job_client import JobError
from incluster.lease import Lease
from tests.controlplane.test_stack_objects import guardian_api, running, workers
from tests.support.control_plane import KWOK_ANNOTATION

LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{names.NAMESPACE}/leases/{names.GUARDIAN}"
"""The guardian's Lease on the API server."""

STACK = "dev"
"""The stack these tests deploy: one GPU node, the smallest."""


def settings_of(deployed: Any) -> Any:
    """The guardian's settings as the stack renders them (its settings ConfigMap)."""
    config_map = next(
        item
        for item in deployed.documents
        if item["kind"] == "ConfigMap" and item["metadata"]["name"] == names.GUARDIAN_SETTINGS_CONFIG_MAP
    )
    return settings_from(json.loads(next(iter(config_map["data"].values()))), "the settings ConfigMap")


@pytest.fixture
def dev(control_plane, deploy):
    """The dev stack deployed with its GPU worker running; left changed (the next user deploys it anew)."""
    deployed = deploy(STACK)
    deployed.dirty = True
    nodes = deployed.raycluster()["spec"]["workerGroupSpecs"][0]["maxReplicas"]
    control_plane.wait_for("the GPU worker running", lambda: len(running(workers(control_plane))) == nodes, 90)
    return deployed


def test_the_guardians_calls_work_and_a_call_its_roles_do_not_allow_is_refused(control_plane, dev):
    api = guardian_api(control_plane)
    settings = settings_of(dev)
    gpu_nodes = cluster.gpu_nodes_of(api)
    assert [node["metadata"]["name"] for node in gpu_nodes] == ["gpu-0"]
    assert (
        cluster.gpu_rungs(gpu_nodes, settings)["otherNodes"]
        + sum(cluster.gpu_rungs(gpu_nodes, settings)["rungs"].values())
        == 1
    )
    pods = cluster.worker_pods_of(api, settings)
    assert [cluster.pod_view(pod).phase for pod in pods] == ["Running"]
    assert scaling.gpu_workers(api) == 1
    readiness.api_items(api, f"/api/v1/namespaces/{names.NAMESPACE}/events", {}, "the events")

    # Refused by RBAC, not by us: another namespace's pods, a Secret, the nodes' deletion, another RayCluster.
    with pytest.raises(JobError, match="HTTP 403"):
        readiness.api_items(api, "/api/v1/namespaces/kube-system/pods", {}, "kube-system's pods")
    with pytest.raises(JobError, match="HTTP 403"):
        readiness.api_items(api, f"/api/v1/namespaces/{names.NAMESPACE}/secrets", {}, "the secrets")
    # RBAC judges a request before the object is looked up: another RayCluster's name is refused, existing or not.
    other = scaling.raycluster_path().rsplit("/", 1)[0] + "/other"
    headers = {**api.headers, "Content-Type": scaling.JSON_PATCH}
    patch = json.dumps(scaling.worker_patch(0))
    refused = requests.patch(f"{api.address}{other}", data=patch, headers=headers, verify=api.verify, timeout=10)
    assert refused.status_code == 403 and refused.json()["message"].startswith(
        'rayclusters.ray.io "other" is forbidden'
    ), refused.text
    deleted = requests.delete(f"{api.address}/api/v1/nodes/gpu-0", headers=api.headers, verify=api.verify, timeout=10)
    assert deleted.status_code == 403, deleted.text


def test_two_guardians_contend_for_one_real_lease(control_plane, dev):
    api = guardian_api(control_plane)
    first, second = Lease(api, "guardian-a"), Lease(api, "guardian-b")
    assert first.try_acquire_or_renew()
    assert not second.try_acquire_or_renew() and second.observed.holder == "guardian-a"
    live = control_plane.get(LEASE)
    assert live["spec"]["holderIdentity"] == "guardian-a" and live["spec"]["leaseDurationSeconds"] == 15

    # A take-over (`--take-over`): the second holds it, with one more transition; the first's next try sees it.
    stale = live
    taken = second.take()
    assert taken is not None and taken.holder == "guardian-a"
    assert not first.try_acquire_or_renew() and first.observed.holder == "guardian-b"
    now = control_plane.get(LEASE)
    assert now["spec"]["holderIdentity"] == "guardian-b"
    assert now["spec"]["leaseTransitions"] == live["spec"].get("leaseTransitions", 0) + 1
    # An update carrying the resourceVersion read before another holder wrote is refused (lease.py's premise).
    answer = control_plane.request("PUT", LEASE, stale, token=api.headers["Authorization"].split()[1])
    assert answer.status_code == 409, answer.text


def test_a_gpu_node_that_stops_reporting_then_is_deleted_is_seen_as_the_api_server_shows_it(control_plane, dev):
    """kwok stops being the node's kubelet (its annotation removed): the node lifecycle controller of the real
    kube-controller-manager marks it Ready Unknown once its grace period passes; then the node is deleted."""
    api = guardian_api(control_plane)
    settings = settings_of(dev)
    removed = [{"op": "remove", "path": "/metadata/annotations/" + KWOK_ANNOTATION.replace("/", "~1")}]
    control_plane.ok("PATCH", "/api/v1/nodes/gpu-0", removed, content_type=scaling.JSON_PATCH)

    def not_ready() -> Any:
        views = [cluster.kube_node_view(node) for node in cluster.gpu_nodes_of(api)]
        return views if views and views[0].ready == "Unknown" else None

    view = control_plane.wait_for("the node's Ready condition Unknown", not_ready, deadline=60)[0]
    assert view.name == "gpu-0" and view.why == "NodeStatusUnknown: Kubelet stopped posting node status."
    assert view.since is not None
    assert sum(cluster.gpu_rungs(cluster.gpu_nodes_of(api), settings)["rungs"].values()) == 0

    control_plane.ok("DELETE", "/api/v1/nodes/gpu-0")
    control_plane.wait_for("the node gone", lambda: cluster.gpu_nodes_of(api) == [], 30)


def test_an_evicted_gpu_worker_pod_is_seen_with_the_reason_and_conditions_the_api_server_records(control_plane, dev):
    """An eviction through the Eviction API (as a drain or the cluster autoscaler asks one): the API server writes
    the pod's DisruptionTarget condition before it deletes the pod; a watch sees each version it stores."""
    api = guardian_api(control_plane)
    settings = settings_of(dev)
    pod = cluster.worker_pods_of(api, settings)[0]
    name = pod["metadata"]["name"]
    path = f"/api/v1/namespaces/{names.NAMESPACE}/pods"
    watch = requests.get(
        f"{control_plane.address}{path}",
        params={"watch": "true", "fieldSelector": f"metadata.name={name}", "resourceVersion": pod["metadata"]["resourceVersion"]},
        headers=control_plane.headers(), verify=str(control_plane.ca), stream=True, timeout=30,
    )  # fmt: skip
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name, "namespace": names.NAMESPACE}}
    control_plane.ok("POST", f"{path}/{name}/eviction", eviction)
    seen = []
    for line in watch.iter_lines():
        event = json.loads(line)
        seen.append(event["object"])
        view = cluster.pod_view(event["object"])
        if view.disruption or event["type"] == "DELETED":
            break
    watch.close()
    view = cluster.pod_view(seen[-1])
    assert view.name == name and view.disruption == "EvictionByEvictionAPI", seen[-1]["status"]
    assert view.since is not None
    control_plane.wait_for(
        "KubeRay's new worker pod running",
        lambda: [p for p in running(workers(control_plane)) if p["metadata"]["name"] != name],
        deadline=60,
    )
