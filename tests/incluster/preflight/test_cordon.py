"""Cordoning the nodes of the Ray pods a failed preflight names, against the real API server of the test run as the guardian's
ServiceAccount (tests/incluster/preflight/conftest.py ApiServer), so its rendered Role decides."""

from __future__ import annotations

from incluster.preflight import cordon
from incluster.preflight.cordon import cordon_pods_nodes
from jobs.submit.access import api_server_from_kubeconfig
from tests.support import control_plane as cp


def test_each_pods_node_is_found_then_cordoned_with_kubectls_patch(api_server):
    token = cp.guardian_in(api_server.plane, api_server.namespace, cordon=True)  # job.cordonBadNodes's Role
    api = api_server_from_kubeconfig(api_server.kubeconfig(token))
    assert api.address == api_server.address
    node_a, node_b = api_server.pod("worker-a"), api_server.pod("worker-b")
    api_server.proxy.seen.clear()
    lines: list[str] = []
    assert cordon_pods_nodes(api, ["worker-a", "gone", "worker-b"], lines.append) == [node_a, node_b]
    assert api_server.requests == [
        ("GET", "/api/v1/namespaces/grpo/pods/worker-a"),
        ("PATCH", f"/api/v1/nodes/{node_a}"),
        ("GET", "/api/v1/namespaces/grpo/pods/gone"),
        ("GET", "/api/v1/namespaces/grpo/pods/worker-b"),
        ("PATCH", f"/api/v1/nodes/{node_b}"),
    ]
    assert api_server.cordoned(node_a) and api_server.cordoned(node_b)
    assert cordon.PATCH_TYPE == "application/strategic-merge-patch+json"  # kubectl cordon's
    assert lines == [
        f"grpo-gke preflight: cordoned node {node_a} (Ray pod worker-a): no new pod is scheduled there",
        "grpo-gke preflight: not cordoned gone: the API server refused GET /api/v1/namespaces/grpo/pods/gone:"
        " 404 Not Found",
        f"grpo-gke preflight: cordoned node {node_b} (Ray pod worker-b): no new pod is scheduled there",
    ]


def test_without_cordon_bad_nodes_the_guardians_role_is_refused_the_cordon(api_server):
    token = cp.guardian_in(api_server.plane, api_server.namespace)  # the Role without job.cordonBadNodes
    node = api_server.pod("worker-a")
    lines: list[str] = []
    assert cordon_pods_nodes(api_server_from_kubeconfig(api_server.kubeconfig(token)), ["worker-a"], lines.append) == []
    assert lines == [
        "grpo-gke preflight: not cordoned worker-a: the API server refused GET /api/v1/namespaces/grpo/pods/worker-a:"
        " 403 Forbidden"
    ]
    assert not api_server.cordoned(node)


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
