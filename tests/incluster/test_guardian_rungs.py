"""The guardian records, once per attempt, the rungs its GPU nodes ran on (issue 22 item 6: status prices each
attempt by them): the Ready GPU nodes per rung when it first sees the attempt RUNNING, read from the real API server of the test run (tests/conftest.py `control_plane`) as the guardian's own
ServiceAccount (its rendered Role and ClusterRole bound) through a proxy that counts the reads: GPU nodes with GKE's `cloud.google.com/gke-nodepool` label, Ready ones run by kwok, others
whose Ready condition is written as the node lifecycle controller writes it (tests/support/kube_objects.py Nodes)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from types import SimpleNamespace

import pytest

from incluster import job_client, readiness, record
from incluster.endpoint import Endpoint
from incluster.guardian.cluster import gpu_rungs
from incluster.guardian.loop import Guardian, Hooks
from incluster.guardian.policy import AttemptView, State, decide
from incluster.guardian.settings import settings_from
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of
from tests.incluster.test_guardian_preflight import _with_run_dir
from tests.support import control_plane as cp
from tests.support.control_plane import ControlPlane
from tests.support.fault_proxy import fault_proxy
from tests.support.kube_objects import Nodes, stamp

T0 = 1796126400.0
"""When the attempt started."""

POOL = "cloud.google.com/gke-nodepool"


def on_pool(name: str, pool: str, ready: str = "True") -> dict:
    """A GPU node of GKE node pool `pool`, as the API server returns it (for the pure rule, no server)."""
    condition = {"type": "Ready", "status": ready, "reason": "KubeletReady", "lastTransitionTime": stamp(T0 - 300)}
    labels = {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb", POOL: pool}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels},
            "status": {"conditions": [condition]}}  # fmt: skip


LADDER_NODES = [
    on_pool("gke-grpo-dev-gpu-1a2b3c4d-k2x9", "gpu"),
    on_pool("gke-grpo-dev-gpu-on-demand-5e6f7a8b-p0q1", "gpu-on-demand"),
    on_pool("gke-grpo-dev-gpu-1a2b3c4d-gone", "gpu", ready="Unknown"),  # preempted, not yet deleted
    on_pool("gke-grpo-dev-l4-pool-0f0f0f0f-zzzz", "l4-pool"),  # another pool's GPU node
]
"""A spot stack with the ladder [spot, on-demand]: one Ready node on each rung, a spot node no longer Ready, and a
GPU node of a pool that is no rung's."""

STOPPED = ("NodeStatusUnknown", "Kubelet stopped posting node status.")
"""The Ready condition's reason and message the node lifecycle controller writes for a node whose kubelet stopped
(kubernetes/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go tryUpdateNodeHealth)."""


@pytest.fixture
def nodes(control_plane, stack_namespace) -> Iterator[Nodes]:
    """GPU nodes on the shared control plane, the cluster's only ones for the test (cluster_lock), deleted after it."""
    made = Nodes(control_plane)
    try:
        yield made
    finally:
        made.delete()


def make_ladder_nodes(nodes: Nodes) -> None:
    """LADDER_NODES on the API server."""
    for node in LADDER_NODES:
        name, labels = node["metadata"]["name"], {POOL: node["metadata"]["labels"][POOL]}
        if node["status"]["conditions"][0]["status"] == "True":
            nodes.ready(name, labels)
        else:
            nodes.without_kubelet(name, "Unknown", T0 - 300, *STOPPED, labels=labels)


def dashboard_through(plane: ControlPlane, address: str, token: str) -> Endpoint:
    """The Ray dashboard as the guardian is given it: the API server's service proxy at `address` (no dashboard is
    behind it here: the tests' Jobs client and Ray's node list are fakes), with the guardian's ServiceAccount's
    `token` (its rendered Role and ClusterRole bound: tests/support/control_plane.py guardian_in), so RBAC judges
    its reads of the nodes."""
    return Endpoint(
        f"{address}/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy", plane.headers(token), str(plane.ca)
    )


@pytest.fixture
def guardian_token(control_plane, stack_namespace) -> str:
    """The guardian's ServiceAccount's token in the stack's namespace, the stack's Role and ClusterRole bound."""
    return cp.guardian_in(control_plane, stack_namespace)


def ladder_settings(tmp_path, **gpu):
    config = config_of("dev", gpu={"nodes": 2, **gpu})
    settings = settings_from(guardian_settings(config), "test")
    return replace(settings, submission=_with_run_dir(settings.submission, tmp_path))


def test_the_ready_gpu_nodes_count_per_rung_and_another_pools_apart(tmp_path):
    ladder = ladder_settings(tmp_path, capacity=["spot", "on-demand"])
    assert gpu_rungs(LADDER_NODES, ladder) == {"rungs": {"spot": 1, "on-demand": 1}, "otherNodes": 1}
    # without a ladder every GPU node is gpu.provisioning's, whatever its pool (Autopilot's nodes are in none of ours)
    single = ladder_settings(tmp_path)
    assert gpu_rungs(LADDER_NODES, single) == {"rungs": {"spot": 3}, "otherNodes": 0}


def test_decide_records_a_running_attempts_rungs_once_and_a_deadline_stop_comes_first(tmp_path):
    settings = ladder_settings(tmp_path, capacity=["spot", "on-demand"])
    running = AttemptView(1, "RUNNING", start=T0)
    read = {"rungs": {"spot": 1, "on-demand": 1}, "otherNodes": 1}
    state = State(now=T0 + 10, settings=settings, newest=running, gpu_rungs=read)
    action = decide(state)
    assert (action.kind, action.event, action.details) == ("record", "gpu-rungs", read)
    assert action.reason == "GPU nodes by rung: 1 spot, 1 on-demand; 1 of another pool"
    assert decide(replace(state, recorded={"gpu-rungs": {}})).kind == "wait"
    assert decide(replace(state, gpu_rungs=None)).kind == "wait"
    assert decide(replace(state, newest=replace(running, status="PENDING"))).kind == "wait"
    stopping = replace(state, recorded={"deadline-stop": {"details": {"step": 4}}})
    assert decide(stopping).kind == "stop"


class RunningHead:
    """A stand-in Jobs API client whose one job is the run's attempt 1, RUNNING since T0."""

    def __init__(self, run: str) -> None:
        metadata = {"stack": "dev", "run": run, "attempt": "1"}
        self.jobs = [SimpleNamespace(submission_id=f"{run}-1", status="RUNNING", metadata=metadata,
                                     start_time=int(T0 * 1000), end_time=None, message="")]  # fmt: skip

    def list_jobs(self) -> list[SimpleNamespace]:
        return list(self.jobs)


def test_the_guardian_reads_the_nodes_once_records_the_rungs_once_and_says_when_it_cannot(
    tmp_path, monkeypatch, control_plane, nodes, guardian_token
):
    settings = ladder_settings(tmp_path, capacity=["spot", "on-demand"])
    monkeypatch.setattr(job_client, "connect", lambda endpoint: RunningHead(settings.run))
    monkeypatch.setattr(readiness, "ray_nodes", lambda endpoint: [])
    make_ladder_nodes(nodes)
    reports: list[str] = []
    with fault_proxy(control_plane.address, str(control_plane.ca)) as api:
        dashboard = dashboard_through(control_plane, api.url, guardian_token)
        guard = Guardian(settings, dashboard, Hooks(), reports.append, clock=lambda: T0 + 10)
        for _ in range(3):
            action = decide(guard.observe())
            if action.kind == "record":
                guard.apply(action)
        node_reads = [path for method, path, _ in api.seen if path.startswith("/api/v1/nodes")]
    (entry,) = record.read(settings.run_dir)
    assert (entry["attempt"], entry["event"]) == (1, "gpu-rungs")
    assert entry["details"] == {"rungs": {"spot": 1, "on-demand": 1}, "otherNodes": 1}
    # two reads on the first look, none after: the rungs' and the verl attempt's known end (refreshed every 5 min)
    assert action.kind == "wait" and len(node_reads) == 2
    assert reports == [
        f"{settings.run}: attempt 1 gpu-rungs: GPU nodes by rung: 1 spot, 1 on-demand; 1 of another pool"
    ]

    # an API server that is gone: one progress line, nothing recorded, no second read for the same attempt
    other = ladder_settings(tmp_path / "other", capacity=["spot", "on-demand"])
    reports.clear()
    guard = Guardian(other, dashboard, Hooks(), reports.append, clock=lambda: T0 + 10)
    assert decide(guard.observe()).kind == "wait" and decide(guard.observe()).kind == "wait"
    assert record.read(other.run_dir) == []
    (said,) = [line for line in reports if "rungs" in line]  # beside the deadline's own line
    assert said.startswith(f"{other.run}: no rungs recorded for attempt 1: the API server at ")


def test_no_ready_gpu_node_is_nothing_to_record(tmp_path, monkeypatch, control_plane, nodes, guardian_token):
    settings = ladder_settings(tmp_path, capacity=["spot", "on-demand"])
    monkeypatch.setattr(job_client, "connect", lambda endpoint: RunningHead(settings.run))
    monkeypatch.setattr(readiness, "ray_nodes", lambda endpoint: [])
    nodes.without_kubelet("gke-grpo-dev-gpu-1a2b3c4d-gone", "False", T0 - 300, "KubeletNotReady", "container runtime is down",
                    labels={POOL: "gpu"})  # fmt: skip
    guard = Guardian(settings, dashboard_through(control_plane, control_plane.address, guardian_token), Hooks(),
                     lambda line: None,
                     clock=lambda: T0 + 10)  # fmt: skip
    assert guard.observe().gpu_rungs is None
    assert record.read(settings.run_dir) == []
