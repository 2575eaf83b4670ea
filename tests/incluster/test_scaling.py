"""Scaling the GPU workers to zero and back: the guardian's exact patch, what KubeRay makes of it, that a later
plan with the patch applied to the live RayCluster changes nothing, and the bring-back request against the real API
server of the test run (tests/conftest.py `control_plane`): the stack's rendered RayCluster, the guardian's scale to
zero as its own ServiceAccount, a refusal from RBAC itself."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest

from core import names
from incluster import scaling
from incluster.endpoint import Endpoint, service_proxy_url
from incluster.job_client import JobError
from plan.blast import blast_radius
from plan.writer import render_plan_json
from tests.conftest import combination_config
from tests.support import control_plane as cp
from tests.support.fault_proxy import fault_proxy
from tests.workloads.conftest import mocked_run
from workloads.raycluster import render_manifest

RAY = "kubernetes:ray.io/v1:RayCluster"


def apply_json_patch(document: dict[str, Any], patch: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 `test` and `replace` on a copy of `document`, as the API server applies them; AssertionError
    where a `test` fails (the API server answers 422 and changes nothing)."""
    result = copy.deepcopy(document)
    for operation in patch:
        *parents, last = operation["path"].lstrip("/").split("/")
        target: Any = result
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        key: Any = int(last) if isinstance(target, list) else last
        if operation["op"] == "test":
            assert target[key] == operation["value"], f"test of {operation['path']} failed"
        else:
            assert operation["op"] == "replace" and key in (range(len(target)) if isinstance(target, list) else target)
            target[key] = operation["value"]
    return result


def test_the_patch_sets_the_replicas_of_the_stacks_group_after_testing_its_name():
    assert scaling.worker_patch(0) == [
        {"op": "test", "path": "/spec/workerGroupSpecs/0/groupName", "value": "gpu"},
        {"op": "replace", "path": "/spec/workerGroupSpecs/0/replicas", "value": 0},
    ]
    request = scaling.scale_request(0)
    assert (request.method, request.path, request.content_type) == (
        "PATCH",
        "/apis/ray.io/v1/namespaces/grpo/rayclusters/grpo",
        "application/json-patch+json",
    )
    assert request.query == {"fieldManager": "grpo-gke-guardian"} and request.body == scaling.worker_patch(0)


@pytest.mark.parametrize("nodes", [1, 4])
def test_kuberay_keeps_no_worker_after_the_patch_and_the_rendered_count_after_scaling_back(nodes):
    """The guardian writes 0 or names.WORKER_REPLICAS, never a node count: scaled back, the RayCluster is the
    rendered one again, whose replicas a later `up` may keep on a replacement of any size."""
    manifest = render_manifest(combination_config(gpu={"nodes": nodes}, grpo={"promptsPerStep": 128}))
    assert scaling.desired_workers(manifest) == nodes
    down = apply_json_patch(manifest, scaling.worker_patch(0))
    assert scaling.desired_workers(down) == 0
    assert down["spec"]["workerGroupSpecs"][0]["maxReplicas"] == nodes
    assert apply_json_patch(down, scaling.worker_patch(names.WORKER_REPLICAS)) == manifest


def test_the_patch_refuses_another_worker_group():
    manifest = render_manifest(combination_config())
    manifest["spec"]["workerGroupSpecs"][0]["groupName"] = "other"
    with pytest.raises(AssertionError, match="groupName"):
        apply_json_patch(manifest, scaling.worker_patch(0))
    with pytest.raises(JobError, match="no worker group 'gpu'"):
        scaling.desired_workers(manifest)


def _with_live_ray_cluster(plan: dict[str, Any], patch: list[dict[str, Any]], ignore: bool = True) -> dict[str, Any]:
    """A plan whose RayCluster inputs are the live object after `patch` (what a refresh stores)."""
    plan = copy.deepcopy(plan)
    for resource in plan["resources"]:
        if resource["type"] == RAY:
            live = apply_json_patch({"spec": resource["inputs"]["spec"]}, patch)
            resource["inputs"]["spec"] = live["spec"]
            if not ignore:
                resource["ignoreChanges"] = []
    return plan


@pytest.mark.parametrize(("mode", "storage"), [("standard", "gcs"), ("autopilot", "lustre")])
def test_a_later_plan_after_the_guardian_scaled_to_zero_leaves_the_ray_cluster_alone(mode, storage):
    """The offline counterpart of `pulumi up --refresh` after the guardian's patch: the RayCluster's recorded
    ignoreChanges cover what the patch changes, so the blast radius (which honours ignoreChanges as the
    provider's Diff does) finds no change; without them the same drift would replace the RayCluster."""
    recording = mocked_run(mode, "h200", storage)
    ray = recording.one(RAY)
    assert ray.ignore_changes == ("spec.workerGroupSpecs[*].replicas",)
    plan = json.loads(render_plan_json(recording))
    blast = blast_radius(_with_live_ray_cluster(plan, scaling.worker_patch(0)), plan)
    assert [change for change in blast.changes if change.type == RAY] == []
    bare = _with_live_ray_cluster(plan, [], ignore=False)
    unguarded = blast_radius(_with_live_ray_cluster(plan, scaling.worker_patch(0), ignore=False), bare)
    assert [(change.type, change.action) for change in unguarded.changes if change.type == RAY] == [(RAY, "replace")]


def test_only_a_service_proxy_endpoint_has_an_api_server():
    server = "https://203.0.113.9"
    proxy = Endpoint(service_proxy_url(server), {"Authorization": "Bearer t"}, "/ca.crt")
    assert scaling.api_of(proxy) == Endpoint(server, {"Authorization": "Bearer t"}, "/ca.crt")
    assert scaling.api_of(Endpoint("http://127.0.0.1:8265")) is None
    assert scaling.bring_back(Endpoint("http://127.0.0.1:8265"), 1, print) is False


@pytest.fixture
def live(control_plane, kube_namespace) -> Iterator[tuple[Any, dict[str, Any], Any]]:
    """The stack's RayCluster as the dev stack renders it (workloads/raycluster.py render_manifest), suspended (KubeRay
    makes no pods of a suspended RayCluster: ray-operator v1.6.1 raycluster_types.go `suspend`, so nothing of it
    reaches another test's nodes), on the real API server of the test run in a namespace of the test's own; a proxy in
    front of it moves the stack's namespace, which the scaling code always uses, there (tests/support/fault_proxy.py).
    (The proxy, the rendered manifest, the RayCluster's API path in the test's namespace.)"""
    manifest = render_manifest(combination_config())
    body = copy.deepcopy(manifest)
    body["metadata"]["namespace"] = kube_namespace
    body["spec"]["suspend"] = True
    path = control_plane.path_of(body)
    control_plane.ok("POST", control_plane.path_of(body, ""), body)
    with fault_proxy(control_plane.address, str(control_plane.ca), (names.NAMESPACE, kube_namespace)) as proxy:
        yield proxy, manifest, path


def _workers(control_plane, path: str) -> int:
    """The replicas of the live RayCluster's GPU worker group."""
    return scaling.desired_workers(control_plane.get(path))


def test_bring_back_patches_a_scaled_down_cluster_and_leaves_a_full_one(control_plane, kube_namespace, live):
    proxy, manifest, path = live
    guardian = Endpoint(proxy.url, control_plane.headers(cp.guardian_in(control_plane, kube_namespace)))
    scaling.scale_to(guardian, 0)  # the guardian's scale to zero, as its own ServiceAccount
    assert _workers(control_plane, path) == 0
    proxy.seen.clear()
    lines: list[str] = []
    endpoint = Endpoint(service_proxy_url(proxy.url), control_plane.headers())  # the user's credentials (the admin)
    assert scaling.bring_back(endpoint, 1, lines.append) is True
    patch = "/apis/ray.io/v1/namespaces/grpo/rayclusters/grpo?fieldManager=grpo-gke-guardian"
    assert [(method, seen) for method, seen, _ in proxy.seen if method == "PATCH"] == [("PATCH", patch)]
    assert lines == ["the GPU workers were scaled to zero: scaling them back to 1"]
    (back,), (rendered,) = control_plane.get(path)["spec"]["workerGroupSpecs"], manifest["spec"]["workerGroupSpecs"]
    fields = ("groupName", "replicas", "minReplicas", "maxReplicas")
    assert [back[field] for field in fields] == [rendered[field] for field in fields]
    assert _workers(control_plane, path) == 1
    assert scaling.bring_back(endpoint, 1, lines.append) is False
    assert [method for method, *_ in proxy.seen].count("PATCH") == 1


def test_bring_back_refused_names_the_permission(control_plane, kube_namespace, live):
    """A user whose Role reads the RayCluster but may not patch it: the real API server's RBAC refuses the patch."""
    proxy, _, path = live
    scaling.scale_to(Endpoint(proxy.url, control_plane.headers()), 0)
    reader = [{"apiGroups": ["ray.io"], "resources": ["rayclusters"], "verbs": ["get"]}]
    token = cp.account_with_role(control_plane, kube_namespace, "reader", reader)
    proxy.seen.clear()
    with pytest.raises(
        JobError, match=f"refused to patch .*get and patch on it.*{names.NAMESPACE}|namespace {names.NAMESPACE}"
    ):
        scaling.bring_back(Endpoint(service_proxy_url(proxy.url), control_plane.headers(token)), 1, print)
    assert [method for method, *_ in proxy.seen] == ["GET", "PATCH"]
    assert _workers(control_plane, path) == 0
