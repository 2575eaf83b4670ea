"""Scaling the GPU workers to zero and back: the guardian's exact patch, what KubeRay makes of it, that a later
plan with the patch applied to the live RayCluster changes nothing, and the bring-back request against a stand-in
API server on the loopback."""

from __future__ import annotations

import copy
import http.server
import json
import threading
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


class _ApiServer(http.server.BaseHTTPRequestHandler):
    """Answers GET of the RayCluster with `live` and records each PATCH (one stand-in API server per test)."""

    live: dict[str, Any] = {}
    status = 200
    patches: list[tuple[str, str, Any]] = []

    def do_GET(self) -> None:
        self._answer(self.status, self.live)

    def do_PATCH(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).patches.append((self.path, self.headers["Content-Type"], body))
        self._answer(200, apply_json_patch(self.live, body))

    def _answer(self, status: int, document: dict[str, Any]) -> None:
        payload = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_: Any) -> None:
        """Quiet."""


@pytest.fixture
def api_server() -> Iterator[tuple[str, type[_ApiServer]]]:
    handler = type("Handler", (_ApiServer,), {"patches": [], "status": 200})
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_bring_back_patches_a_scaled_down_cluster_and_leaves_a_full_one(api_server):
    server, handler = api_server
    manifest = render_manifest(combination_config())
    handler.live = apply_json_patch(manifest, scaling.worker_patch(0))
    lines: list[str] = []
    endpoint = Endpoint(service_proxy_url(server), headers={"Authorization": "Bearer t"})
    assert scaling.bring_back(endpoint, 1, lines.append) is True
    assert handler.patches == [
        (
            "/apis/ray.io/v1/namespaces/grpo/rayclusters/grpo?fieldManager=grpo-gke-guardian",
            "application/json-patch+json",
            scaling.worker_patch(names.WORKER_REPLICAS),
        ),
    ]
    assert lines == ["the GPU workers were scaled to zero: scaling them back to 1"]
    handler.live = manifest
    assert scaling.bring_back(endpoint, 1, lines.append) is False
    assert len(handler.patches) == 1


def test_bring_back_refused_names_the_permission(api_server):
    server, handler = api_server
    handler.status = 403
    with pytest.raises(JobError, match=f"get and patch on it.*{names.NAMESPACE}|namespace {names.NAMESPACE}"):
        scaling.bring_back(Endpoint(service_proxy_url(server)), 1, print)
    assert handler.patches == []
