"""The shipped stacks deployed on the test run's one real control plane (tests/conftest.py `control_plane`)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from core import names
from tests import conftest as root
from tests.support import control_plane as cp


def pulumi_field_manager(obj: dict[str, Any]) -> str:
    """The field manager pulumi-kubernetes gives a resource under Server-Side Apply: "pulumi-kubernetes-" and 8
    characters of [0-9a-f], random per resource and kept in its state (provider/pkg/provider/provider.go
    fieldManagerName L2883-2909, v4.32.0, the newest tag stored (4.34.2, the pin, is not); pulumi
    sdk/go/common/resource/names.go NewUniqueName: 8 hex characters by default). Here a hash of the object's kind and
    name stands for the random seed, so one object keeps one manager across applies, as its state does."""
    key = f"{obj['apiVersion']}/{obj['kind']}/{obj['metadata'].get('namespace', '')}/{obj['metadata']['name']}"
    return f"pulumi-kubernetes-{hashlib.sha256(key.encode()).hexdigest()[:8]}"


@dataclass
class Deployed:
    """A shipped stack's Kubernetes objects applied to the control plane, and its nodes."""

    stack: str
    """The stack's name."""
    documents: list[dict[str, Any]]
    """k8s.yaml's objects, in its order (the plan's apply order)."""
    plan: dict[str, Any]
    """plan.json."""
    nodes: list[dict[str, Any]]
    """The nodes GKE would make for it (created before the objects)."""
    answers: list[Any]
    """The API server's answer to each object's apply, in order."""
    dirty: bool = False
    """A test changed it: the next test that asks for the stack deploys it anew."""

    def raycluster(self) -> dict[str, Any]:
        """The stack's RayCluster as rendered."""
        return next(item for item in self.documents if item["kind"] == "RayCluster")


def _nodes_for(stack: str, plan: dict[str, Any], documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    nodes = cp.standard_nodes(plan)
    if nodes:
        return nodes
    from core.facts.platform import GPU_MACHINES

    raycluster = next(item for item in documents if item["kind"] == "RayCluster")
    accelerator = raycluster["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"][
        "cloud.google.com/gke-accelerator"
    ]
    machine = next(item.machine_type for item in GPU_MACHINES.values() if item.accelerator == accelerator)
    return cp.autopilot_nodes(raycluster, machine)


def _remove(plane: cp.ControlPlane, deployed: Deployed) -> None:
    """Delete a deployed stack's objects (its namespace last waited for) and its nodes."""
    for obj in reversed(deployed.documents):
        if obj["kind"] != "Namespace":
            plane.request("DELETE", plane.path_of(obj), {"propagationPolicy": "Background"})
    plane.request("DELETE", f"/api/v1/namespaces/{names.NAMESPACE}")
    plane.wait_for(
        f"namespace {names.NAMESPACE} deleted", lambda: plane.get(f"/api/v1/namespaces/{names.NAMESPACE}") is None, 90
    )
    for node in deployed.nodes:
        plane.request("DELETE", f"/api/v1/nodes/{node['metadata']['name']}")


@pytest.fixture(scope="session")
def deploy(
    control_plane: cp.ControlPlane,
    shipped_plan_command: Callable[..., Any],
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Callable[..., Deployed]]:
    """A function stack -> Deployed: removes the stack deployed before (one namespace, one set of nodes at a time),
    makes the stack's nodes, then applies every object of its k8s.yaml in order, as pulumi-kubernetes applies it:
    Server-Side Apply, its field manager, no force (await.go patchForce L1031-1057, v4.32.0: force only with the
    pulumi.com/patchForce annotation or enablePatchForce, neither of which the stack sets). The stack's namespace and
    the nodes are the test process's from the first deploy (tests/conftest.py cluster_lock) until after the last test
    that deploys, when the last stack is removed."""
    current: list[Deployed] = []
    held = ExitStack()
    locked: list[bool] = []

    def release() -> None:
        if current:
            _remove(control_plane, current.pop())
        held.close()
        locked.clear()

    once = root.stop_after_last_use(request, release)

    def run(stack: str) -> Deployed:
        if not locked:
            held.enter_context(root.cluster_lock(tmp_path_factory))
            locked.append(True)
        if current and current[0].stack == stack and not current[0].dirty:
            return current[0]
        if current:
            _remove(control_plane, current.pop())
        command = shipped_plan_command(stack)
        assert command.result.returncode == 0, command.result.stderr
        documents = [item for item in yaml.safe_load_all((command.out / "k8s.yaml").read_text()) if item]
        plan = json.loads((command.out / "plan.json").read_text())
        nodes = _nodes_for(stack, plan, documents)
        for node in nodes:
            control_plane.ok("POST", "/api/v1/nodes", node)
        answers = [control_plane.apply(obj, pulumi_field_manager(obj)) for obj in documents]
        current.append(Deployed(stack, documents, plan, nodes, answers))
        return current[0]

    yield run
    once()
