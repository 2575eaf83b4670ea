"""The namespace's NetworkPolicies and every container's securityContext, as a mocked run records them:
schema-checked against Kubernetes 1.33 (strict), and the policies evaluated by a small model of
NetworkPolicy ingress semantics that answers "may pod A reach port P of pod B"."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from core.facts.pods import RAY_PORTS
from tests.conftest import COMBINATIONS
from tests.workloads.conftest import k8s_schema_errors, mocked_run
from workloads import policies

POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
RAY = "kubernetes:ray.io/v1:RayCluster"
JOB = "kubernetes:batch/v1:Job"

HEAD = {"ray.io/cluster": "grpo", "ray.io/node-type": "head", "ray.io/group": "headgroup", "ray.io/is-ray-node": "yes"}
"""Labels KubeRay puts on the head pod of RayCluster `grpo` (constant.go, common/pod.go)."""
WORKER = {"ray.io/cluster": "grpo", "ray.io/node-type": "worker", "ray.io/group": "gpu", "ray.io/is-ray-node": "yes"}
"""Labels KubeRay puts on a worker pod of the `gpu` group."""
STAGING = {"app.kubernetes.io/part-of": "grpo-gke", "app.kubernetes.io/component": "staging"}
"""Labels of the staging Job's pod (plus the Job controller's own)."""
RANDOM_RAY_PORT = 41234
"""A port Ray may pick for the node manager, object manager or runtime env agent (random by default)."""
EXPECTED_CONTEXT = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "privileged": False,
    "seccompProfile": {"type": "RuntimeDefault"},
}


@dataclass(frozen=True)
class Pod:
    """A pod as NetworkPolicy sees it: its namespace and labels."""

    namespace: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def namespace_labels(self) -> dict[str, str]:
        """The labels the API server puts on every namespace."""
        return {"kubernetes.io/metadata.name": self.namespace}


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    if set(selector) - {"matchLabels"}:
        raise AssertionError(f"the model knows only matchLabels, got {sorted(selector)}")
    return all(labels.get(key) == value for key, value in selector.get("matchLabels", {}).items())


def _peer_admits(peer: dict[str, Any], policy_namespace: str, source: Pod) -> bool:
    if set(peer) - {"podSelector", "namespaceSelector"}:
        raise AssertionError(f"the model knows no ipBlock peers, got {sorted(peer)}")
    if "namespaceSelector" in peer:
        in_namespaces = _selects(peer["namespaceSelector"], source.namespace_labels)
    else:
        in_namespaces = source.namespace == policy_namespace
    return in_namespaces and _selects(peer.get("podSelector", {}), source.labels)


def _port_admits(entry: dict[str, Any], port: int, protocol: str) -> bool:
    if not isinstance(entry.get("port"), int):
        raise AssertionError(f"the model knows only numeric ports, got {entry}")
    return entry.get("protocol", "TCP") == protocol and entry["port"] <= port <= entry.get("endPort", entry["port"])


def may_reach(recorded: list[dict[str, Any]], source: Pod, target: Pod, port: int, protocol: str = "TCP") -> bool:
    """Whether `source` may open a connection to `port` of `target` under the recorded policies:
    a pod no ingress policy selects admits everything; a selected pod admits what one rule of one
    selecting policy admits (peers and ports each OR-ed, an absent list meaning all)."""
    selecting = [
        policy
        for policy in recorded
        if policy["metadata"]["namespace"] == target.namespace
        and "Ingress" in policy["spec"]["policyTypes"]
        and _selects(policy["spec"]["podSelector"], target.labels)
    ]
    if not selecting:
        return True
    for policy in selecting:
        for rule in policy["spec"].get("ingress", []):
            peers = rule.get("from")
            ports = rule.get("ports")
            peer_ok = not peers or any(_peer_admits(peer, policy["metadata"]["namespace"], source) for peer in peers)
            port_ok = not ports or any(_port_admits(entry, port, protocol) for entry in ports)
            if peer_ok and port_ok:
                return True
    return False


def _recorded_policies(mode: str = "standard", gpu: str = "h200", storage: str = "gcs") -> list[dict[str, Any]]:
    return [resource.inputs for resource in mocked_run(mode, gpu, storage).by_type(POLICY)]


RAY_PORTS = sorted({*RAY_PORTS.values(), RANDOM_RAY_PORT, 15000})
HEAD_POD = Pod("grpo", HEAD)


def test_the_model_admits_everything_without_policies_and_refuses_under_a_deny():
    deny = {"metadata": {"namespace": "grpo"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}
    stranger = Pod("default", {"app": "x"})
    assert may_reach([], stranger, HEAD_POD, 8265)
    assert not may_reach([deny], stranger, HEAD_POD, 8265)
    assert may_reach([deny], stranger, Pod("other", HEAD), 8265)


@pytest.mark.parametrize("port", RAY_PORTS)
def test_a_ray_worker_reaches_the_head_and_the_other_workers_on_every_ray_port(port):
    recorded = _recorded_policies()
    worker = Pod("grpo", WORKER)
    assert may_reach(recorded, worker, HEAD_POD, port)
    assert may_reach(recorded, worker, Pod("grpo", WORKER), port)
    assert may_reach(recorded, HEAD_POD, worker, port)


@pytest.mark.parametrize("port", RAY_PORTS)
def test_a_pod_of_another_namespace_reaches_no_ray_port_even_with_the_ray_labels(port):
    recorded = _recorded_policies()
    for source in (Pod("default", WORKER), Pod("default", {"app": "anything"}), Pod("kube-system", HEAD)):
        assert not may_reach(recorded, source, HEAD_POD, port)
        assert not may_reach(recorded, source, Pod("grpo", WORKER), port)


@pytest.mark.parametrize("port", RAY_PORTS)
def test_a_pod_of_the_namespace_without_the_ray_labels_reaches_no_ray_port(port):
    recorded = _recorded_policies()
    for labels in (STAGING, {"ray.io/node-type": "worker"}, {"ray.io/cluster": "other"}):
        assert not may_reach(recorded, Pod("grpo", labels), HEAD_POD, port)
        assert not may_reach(recorded, Pod("grpo", labels), Pod("grpo", WORKER), port)


def test_the_guardian_reaches_the_dashboard_and_nothing_else():
    recorded = _recorded_policies()
    guardian = Pod("grpo", {"app.kubernetes.io/name": "grpo-guardian"})
    assert may_reach(recorded, guardian, HEAD_POD, 8265)
    assert not may_reach(recorded, guardian, HEAD_POD, 8265, protocol="UDP")
    for port in (6379, 10001, 52365, RANDOM_RAY_PORT):
        assert not may_reach(recorded, guardian, HEAD_POD, port)
    assert not may_reach(recorded, guardian, Pod("grpo", WORKER), 8265)
    assert not may_reach(recorded, Pod("default", {"app.kubernetes.io/name": "grpo-guardian"}), HEAD_POD, 8265)


def test_the_api_servers_service_proxy_reaches_the_dashboard_only():
    """GKE's control plane reaches pods through the konnectivity agents in kube-system."""
    recorded = _recorded_policies()
    agent = Pod("kube-system", {"k8s-app": "konnectivity-agent"})
    assert may_reach(recorded, agent, HEAD_POD, 8265)
    for port in (6379, 10001, RANDOM_RAY_PORT):
        assert not may_reach(recorded, agent, HEAD_POD, port)
    assert not may_reach(recorded, agent, Pod("grpo", WORKER), 8265)
    assert not may_reach(recorded, Pod("default", {"k8s-app": "konnectivity-agent"}), HEAD_POD, 8265)
    assert not may_reach(recorded, Pod("kube-system", {"k8s-app": "kube-dns"}), HEAD_POD, 8265)


def test_the_staging_pod_admits_no_one():
    recorded = _recorded_policies()
    for source in (Pod("grpo", WORKER), HEAD_POD, Pod("kube-system", {"k8s-app": "konnectivity-agent"})):
        assert not may_reach(recorded, source, Pod("grpo", STAGING), 8080)


@pytest.mark.parametrize(("mode", "gpu", "storage"), COMBINATIONS)
def test_policies_and_security_contexts_per_combination(mode, gpu, storage):
    recording = mocked_run(mode, gpu, storage)
    recorded = recording.by_type(POLICY)
    assert sorted(r.inputs["metadata"]["name"] for r in recorded) == [
        "default-deny-ingress",
        "ray-cluster-internal",
        "ray-head-dashboard",
    ]
    assert [k8s_schema_errors(r.inputs) for r in recorded] == [[], [], []]
    assert [r.inputs for r in recorded] == _recorded_policies()
    namespace = next(
        r.urn for r in recording.by_type("kubernetes:core/v1:Namespace") if r.inputs["metadata"]["name"] == "grpo"
    )
    assert all(namespace in r.depends_on for r in recorded)
    assert {r.urn for r in recorded} <= set(recording.one(RAY).depends_on)
    assert {r.urn for r in recorded} <= set(recording.one(JOB).depends_on)
    parents = {r.urn: r.type for r in recording.resources}
    assert {parents[r.parent] for r in recorded} == {"grpo-gke:workloads:NetworkPolicies"}
    spec = recording.one(RAY).inputs["spec"]
    containers = [
        *spec["headGroupSpec"]["template"]["spec"]["containers"],
        *(c for group in spec["workerGroupSpecs"] for c in group["template"]["spec"]["containers"]),
    ]
    job = recording.one(JOB).inputs
    containers += job["spec"]["template"]["spec"]["containers"]
    assert [c["securityContext"] for c in containers] == [EXPECTED_CONTEXT] * 3
    assert k8s_schema_errors(job) == []


def test_the_schema_check_refuses_a_misspelt_security_context():
    job = mocked_run("standard", "h200", "gcs").one(JOB).inputs
    context = job["spec"]["template"]["spec"]["containers"][0]["securityContext"]
    context = {**context, "allowPrivilegeEscalaton": False}
    broken = {
        **job,
        "spec": {
            **job["spec"],
            "template": {
                **job["spec"]["template"],
                "spec": {
                    **job["spec"]["template"]["spec"],
                    "containers": [{**job["spec"]["template"]["spec"]["containers"][0], "securityContext": context}],
                },
            },
        },
    }
    assert any("allowPrivilegeEscalaton" in error for error in k8s_schema_errors(broken))


def test_the_renderers_are_the_recorded_policies():
    names = [policy.metadata.name for policy in policies.render_policies()]
    assert names == [policies.DEFAULT_DENY, policies.RAY_INTERNAL, policies.HEAD_DASHBOARD]
    assert policies.ray_head_labels().items() <= HEAD.items()
    assert policies.ray_pod_labels().items() <= WORKER.items()
