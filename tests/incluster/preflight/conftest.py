"""Preflight fixtures: what nvidia-smi printed on a real H200 and the reports measured there."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from incluster.preflight import run
from jobs.preflight import settings as settings_module
from plan.harness import REPO_ROOT

DATA = Path(__file__).with_name("data")
"""nvidia-smi's output on an H200 (driver 580.159.04), recorded by benchmarks/preflight_device.py on 2026-12-01,
and NCCL's INFO log on an H200 without RDMA (h200-nccl-socket.log, benchmarks/fabric_nccl_log_device.py, same day)."""

RESULTS = REPO_ROOT / "benchmarks" / "results" / "preflight-h200"
"""The device runs' results: measure_node() reports of healthy and slowed H200s."""


def recorded(name: str) -> str:
    """A recorded nvidia-smi output file."""
    return (DATA / name).read_text()


def device_run(name: str) -> dict:
    """One device run's result file (run1-preflight.json, run2-preflight.json)."""
    return json.loads((RESULTS / name).read_text())


STAMP = "20261201T120000.000Z"
"""The preflight's fixed time, so its file name and job id are known."""

LOCAL = {
    "gpus_per_node": 1,
    "strategy": "PACK",
    "measure": "tests.incluster.preflight.stand_in_measure:measure_node",
}
"""The local head is one Ray node with 8 declared GPUs: a bundle of one GPU stands for each GPU node."""

GLOO = {"backend": "gloo", "device": "cpu", "min_bytes": 1 << 10, "max_bytes": 1 << 16, "warmups": 1, "iterations": 2}
"""The fabric over gloo on loopback, a short sweep."""

FLOOR_GBPS = 1e-6
"""A floor any loopback run reaches."""

POLL_S = 0.5
"""How often the tests' preflight asks for its job's status (run.POLL_SECONDS, 2 s, is a cluster's pace)."""


def on_local_head_settings(made: dict) -> dict:
    """Preflight settings made for the local head: a one-GPU bundle per stand-in node, the stand-in measurement,
    gloo on lo with a short sweep and FLOOR_GBPS."""
    made = {**made, **LOCAL}
    measure = {**made["fabric"]["measure"], **GLOO, "floor_gbps": FLOOR_GBPS}
    made["fabric"] = {**made["fabric"], "measure": measure, "env": {"GLOO_SOCKET_IFNAME": "lo"}}
    return made


@pytest.fixture
def on_local_head(monkeypatch):
    """The preflight's settings and submission made for the local head (the venv's Python, the checkout on
    PYTHONPATH for the stand-in, gloo on lo), its time fixed and its status polled every POLL_S."""
    settings_of, submission_of = settings_module.preflight_settings, run.preflight_submission

    def settings(*args, **kwargs):
        return on_local_head_settings(settings_of(*args, **kwargs))

    def submission(settings):
        made = submission_of(settings)
        return {**made, "runtime_env": {"env_vars": {"PYTHONPATH": str(REPO_ROOT)}}}

    monkeypatch.setattr(settings_module, "preflight_settings", settings)
    monkeypatch.setattr(run, "preflight_submission", submission)
    monkeypatch.setattr(run, "POD_PYTHON", sys.executable)
    monkeypatch.setattr(run, "stamp_now", lambda: STAMP)
    monkeypatch.setattr(run, "run_preflight", functools.partial(run.run_preflight, poll=POLL_S))


class ApiServer:
    """The real API server of the test run (tests/conftest.py `control_plane`) behind a proxy that records every request
    and moves the stack's namespace (which the cordon always uses) to the test's own (tests/support/fault_proxy.py);
    the Ray pods and the nodes they run on are made by the test (`pod`), each node without a GPU label, so no other
    test's GPU node list sees it, and deleted after it."""

    def __init__(self, plane: Any, namespace: str, proxy: Any) -> None:
        self.plane, self.namespace, self.proxy = plane, namespace, proxy
        self.address = proxy.url
        """The proxy's base URL, where the code under test reaches the API server."""
        self.nodes: list[str] = []
        """The nodes the test made."""

    @property
    def requests(self) -> list[tuple[str, str]]:
        """(method, path) of every request the code under test sent, in order."""
        return [(method, path) for method, path, _ in self.proxy.seen]

    def pod(self, name: str) -> str:
        """A pod `name` of the stack's namespace, bound (spec.nodeName) to a new node of the test's own; that node's
        name."""
        node = f"{self.namespace}-{len(self.nodes)}"
        self.plane.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
        self.nodes.append(node)
        spec = {"nodeName": node, "containers": [{"name": "ray", "image": "rayproject/ray:2.60.0"}]}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": spec,
        }
        self.plane.ok("POST", f"/api/v1/namespaces/{self.namespace}/pods", body)
        return node

    def cordoned(self, node: str) -> bool:
        """Whether the API server holds `node` as unschedulable."""
        return self.plane.get(f"/api/v1/nodes/{node}")["spec"].get("unschedulable", False)

    def kubeconfig(self, token: str | None = None) -> str:
        """A kubeconfig whose current context is the proxy with a bearer `token` (the admin's: a user's by default)."""
        from tests.support.control_plane import ADMIN_TOKEN

        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "clusters": [{"name": "test-run", "cluster": {"server": self.address}}],
                "contexts": [{"name": "test-run", "context": {"cluster": "test-run", "user": "u"}}],
                "current-context": "test-run",
                "users": [{"name": "u", "user": {"token": token or ADMIN_TOKEN}}],
            }
        )


@pytest.fixture
def api_server(control_plane, kube_namespace):
    """An ApiServer for the test in a namespace of its own; its nodes deleted after it."""
    from core import names
    from tests.support.fault_proxy import fault_proxy

    with fault_proxy(control_plane.address, str(control_plane.ca), (names.NAMESPACE, kube_namespace)) as proxy:
        server = ApiServer(control_plane, kube_namespace, proxy)
        try:
            yield server
        finally:
            for node in server.nodes:
                control_plane.request("DELETE", f"/api/v1/nodes/{node}")
