"""Every shipped stack's Kubernetes objects on a real control plane (tests/controlplane/conftest.py): applied as
pulumi-kubernetes applies them and accepted, the RayCluster's pods placed by the real scheduler on the nodes GKE
would make for the stack, KubeRay's operator reconciling it; then the guardian's scale to zero and back, and what a
second `up` does after it (docs/up-and-destroy.md, "What `pulumi up` changes")."""

from __future__ import annotations

from typing import Any

import pytest

from core import names
from incluster import scaling
from incluster.endpoint import Endpoint, bearer_headers
from tests.conftest import SHIPPED_STACKS

RAYCLUSTER = f"/apis/{names.RAY_API_VERSION}/namespaces/{names.NAMESPACE}/rayclusters/{names.RAY_CLUSTER}"
"""The stack's RayCluster on the API server."""


def pods_of(plane: Any, selector: str) -> list[dict[str, Any]]:
    """The namespace's pods matching a label selector."""
    path = f"/api/v1/namespaces/{names.NAMESPACE}/pods"
    return plane.ok("GET", path, params={"labelSelector": selector})["items"]


def running(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods that run and are not being deleted."""
    return [
        pod for pod in pods if pod["status"].get("phase") == "Running" and not pod["metadata"].get("deletionTimestamp")
    ]


def workers(plane: Any) -> list[dict[str, Any]]:
    """The GPU worker pods of the stack's RayCluster (KubeRay's labels)."""
    return pods_of(plane, f"ray.io/cluster={names.RAY_CLUSTER},ray.io/group={names.RAY_WORKER_GROUP}")


def guardian_api(plane: Any) -> Endpoint:
    """The API server as the guardian's ServiceAccount reaches it (its token from TokenRequest)."""
    token = plane.service_account_token(names.NAMESPACE, names.GUARDIAN)
    return Endpoint(plane.address, bearer_headers(token), str(plane.ca))


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_object_is_accepted_and_the_raycluster_is_scheduled_and_reconciled(control_plane, deploy, stack):
    deployed = deploy(stack)
    refused = [
        f"{obj['kind']}/{obj['metadata']['name']}: HTTP {answer.status_code} {answer.text[:300]}"
        for obj, answer in zip(deployed.documents, deployed.answers, strict=True)
        if answer.status_code >= 300
    ]
    assert not refused, refused
    # What the API server warns of (an unknown field it dropped, a deprecated API): pulumi up prints it.
    warned = {
        f"{obj['kind']}/{obj['metadata']['name']}": answer.headers["Warning"]
        for obj, answer in zip(deployed.documents, deployed.answers, strict=True)
        if "Warning" in answer.headers
    }
    assert not warned, warned
    group = deployed.raycluster()["spec"]["workerGroupSpecs"][0]
    nodes = {node["metadata"]["name"]: node for node in deployed.nodes}
    gpu_nodes = {name for name, node in nodes.items() if "nvidia.com/gpu" in node["status"]["capacity"]}

    def reconciled() -> Any:
        live = control_plane.get(RAYCLUSTER) or {}
        return (live.get("status") or {}).get("state") == "ready" and len(running(workers(control_plane))) == group[
            "maxReplicas"
        ]

    control_plane.wait_for(f"{stack}: the RayCluster ready with its GPU workers", reconciled, deadline=90)
    placed = {pod["metadata"]["name"]: pod["spec"]["nodeName"] for pod in running(workers(control_plane))}
    assert set(placed.values()) <= gpu_nodes and len(set(placed.values())) == len(placed), placed
    head = running(pods_of(control_plane, f"ray.io/cluster={names.RAY_CLUSTER},ray.io/node-type=head"))
    assert len(head) == 1 and head[0]["spec"]["nodeName"] not in gpu_nodes, head
    unscheduled = [
        pod["metadata"]["name"]
        for pod in pods_of(control_plane, "")
        if any(
            item["type"] == "PodScheduled" and item["status"] != "True" for item in pod["status"].get("conditions", [])
        )
    ]
    assert not unscheduled, unscheduled


def conflict_of(answer: Any) -> str:
    """The managers and fields a 409 apply answer names."""
    assert answer.status_code == 409, f"HTTP {answer.status_code} {answer.text[:500]}"
    return " ".join(
        cause.get("message", "") + " " + cause.get("field", "") for cause in answer.json()["details"]["causes"]
    )


def test_the_guardians_scale_to_zero_and_back_and_what_a_second_up_does_after_it(control_plane, deploy, tmp_path):
    """docs/up-and-destroy.md: an in-place update of the RayCluster "would conflict with the guardian's scale to
    zero", so a change of its inputs recreates it; the new one starts with its workers, which the guardian scales to
    zero again. Every other object applies again without conflict."""
    from tests.conftest import plan_of_edited_stack
    from tests.controlplane.conftest import pulumi_field_manager

    deployed = deploy("verl-standard-h200")
    deployed.dirty = True
    raycluster = deployed.raycluster()
    nodes = raycluster["spec"]["workerGroupSpecs"][0]["maxReplicas"]
    control_plane.wait_for("the GPU workers running", lambda: len(running(workers(control_plane))) == nodes, 90)
    api = guardian_api(control_plane)
    assert scaling.gpu_workers(api) == nodes

    scaling.scale_to(api, 0)  # the guardian's scale to zero, as its own ServiceAccount
    control_plane.wait_for("KubeRay deleting the GPU workers", lambda: not workers(control_plane), 60)
    assert scaling.gpu_workers(api) == 0
    live = control_plane.get(RAYCLUSTER)
    owners = {item["manager"]: item["operation"] for item in live["metadata"]["managedFields"]}
    assert owners[scaling.FIELD_MANAGER] == "Update", owners

    # A second `up` of the same stack sends nothing for unchanged objects; were it to apply the RayCluster in place,
    # the API server would refuse it: the guardian's manager owns the atomic workerGroupSpecs list.
    again = control_plane.apply(raycluster, pulumi_field_manager(raycluster))
    assert scaling.FIELD_MANAGER in conflict_of(again) and ".spec.workerGroupSpecs" in conflict_of(again)
    others = [obj for obj in deployed.documents if obj["kind"] != "RayCluster"]
    answers = {
        f"{obj['kind']}/{obj['metadata']['name']}": control_plane.apply(obj, pulumi_field_manager(obj))
        for obj in others
    }
    assert all(answer.status_code == 200 for answer in answers.values()), {
        key: answer.text[:300] for key, answer in answers.items() if answer.status_code != 200
    }
    assert scaling.gpu_workers(api) == 0 and not workers(control_plane)

    scaling.scale_to(api, names.WORKER_REPLICAS)  # bring_back's patch
    control_plane.wait_for("the GPU workers back", lambda: len(running(workers(control_plane))) == nodes, 60)
    scaling.scale_to(api, 0)
    control_plane.wait_for("the GPU workers gone again", lambda: not workers(control_plane), 60)

    # A changed stack (gpu.nodes 2 -> 1): the RayCluster's in-place apply conflicts the same way; its replacement
    # (delete first: a fixed name) is a create the provider owns whole, and starts with its workers.
    edited = plan_of_edited_stack(tmp_path, "changed", ("nodes: 2", "nodes: 1"), base="verl-standard-h200")
    assert edited.returncode == 0, edited.stderr
    import yaml

    changed = [item for item in yaml.safe_load_all((tmp_path / "out" / "k8s.yaml").read_text()) if item]
    new_raycluster = next(item for item in changed if item["kind"] == "RayCluster")
    assert new_raycluster["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 1
    in_place = control_plane.apply(new_raycluster, pulumi_field_manager(new_raycluster))
    assert scaling.FIELD_MANAGER in conflict_of(in_place)
    old = {f"{obj['kind']}/{obj['metadata']['name']}": obj for obj in deployed.documents}
    # Changed in place: what the edit changed, less what Pulumi replaces (the RayCluster; the PersistentVolume and the
    # Job, whose changed fields the API server keeps immutable: the edited stack's own bucket, its template).
    replaced = ("RayCluster", "PersistentVolume", "Job")
    updated = [
        obj
        for obj in changed
        if obj["kind"] not in replaced and old.get(f"{obj['kind']}/{obj['metadata']['name']}") != obj
    ]
    answers = {
        f"{obj['kind']}/{obj['metadata']['name']}": control_plane.apply(obj, pulumi_field_manager(obj))
        for obj in updated
    }
    assert all(answer.status_code == 200 for answer in answers.values()), {
        key: answer.text[:300] for key, answer in answers.items() if answer.status_code != 200
    }
    control_plane.ok("DELETE", RAYCLUSTER)
    control_plane.wait_for("the old RayCluster gone", lambda: control_plane.get(RAYCLUSTER) is None, 60)
    created = control_plane.apply(new_raycluster, pulumi_field_manager(new_raycluster))
    assert created.status_code == 201, created.text[:500]
    control_plane.wait_for("the new RayCluster's worker running", lambda: len(running(workers(control_plane))) == 1, 60)
    assert scaling.gpu_workers(api) == 1
    scaling.scale_to(api, 0)  # what the guardian does once nothing is live (docs/up-and-destroy.md)
    control_plane.wait_for("the new RayCluster's worker gone", lambda: not workers(control_plane), 60)
