"""Cordoning the nodes of the Ray pods a failed preflight names, against a recording stand-in API server."""

from __future__ import annotations

from incluster.preflight import cordon
from incluster.preflight.cordon import cordon_pods_nodes
from jobs.submit.access import api_server_from_kubeconfig


def test_each_pods_node_is_found_then_cordoned_with_kubectls_patch(api_server):
    api = api_server_from_kubeconfig(api_server.kubeconfig())
    assert api.address == api_server.address
    lines: list[str] = []
    assert cordon_pods_nodes(api, ["worker-a", "gone", "worker-b"], lines.append) == [
        "node-of-worker-a",
        "node-of-worker-b",
    ]
    patch = ("Bearer test-token", cordon.PATCH_TYPE, {"spec": {"unschedulable": True}})
    assert api_server.requests == [
        ("GET", "/api/v1/namespaces/grpo/pods/worker-a", "Bearer test-token", "", None),
        ("PATCH", "/api/v1/nodes/node-of-worker-a", *patch),
        ("GET", "/api/v1/namespaces/grpo/pods/gone", "Bearer test-token", "", None),
        ("GET", "/api/v1/namespaces/grpo/pods/worker-b", "Bearer test-token", "", None),
        ("PATCH", "/api/v1/nodes/node-of-worker-b", *patch),
    ]
    assert lines == [
        "grpo-gke preflight: cordoned node node-of-worker-a (Ray pod worker-a): no new pod is scheduled there",
        "grpo-gke preflight: not cordoned gone: the API server refused GET /api/v1/namespaces/grpo/pods/gone:"
        " 404 Not Found",
        "grpo-gke preflight: cordoned node node-of-worker-b (Ray pod worker-b): no new pod is scheduled there",
    ]


def test_an_api_server_that_does_not_answer_is_one_line_within_the_deadline():
    from incluster.endpoint import Endpoint
    from jobs.submit.local_head import refusing_address

    lines: list[str] = []
    with refusing_address() as address:
        assert cordon_pods_nodes(Endpoint(address=address), ["worker-a"], lines.append) == []
    assert lines == [
        f"grpo-gke preflight: not cordoned worker-a: the API server at {address} did not answer"
        " GET /api/v1/namespaces/grpo/pods/worker-a: ConnectionError"
    ]
