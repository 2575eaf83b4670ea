"""A stockout names itself at the readiness gate (issue 22 item 5): the gate's progress line and refusal say which rung
of the capacity ladder GKE is trying, since when, and why the last scale-up failed, read from the autoscaler's events
on the pending GPU worker pods, read from the real API server of the test run (tests/conftest.py `control_plane`), in a
namespace of the test's own, through a proxy that counts the reads (tests/support/fault_proxy.py): GPU worker pods the
scheduler cannot place, and the autoscaler's own texts created as its events (tests/support/kube_objects.py): a
stockout, a quota failure, and a successful scale-up on the second rung."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from incluster import job_client, readiness
from incluster.endpoint import Endpoint
from tests.incluster.test_readiness import scripted_nodes
from tests.support import kube_objects as made
from tests.support.clock import Clock
from tests.support.control_plane import ControlPlane
from tests.support.fault_proxy import FaultProxy, fault_proxy

T0 = 1796126400.0
"""2026-12-01T12:00:00Z: when the first scale-up was triggered."""

CLUSTER = "grpo-dev"
SPOT_MIG = f"gke-{CLUSTER}-gpu-1a2b3c4d-grp"
"""The spot rung's pool (`gpu`: gpu.provisioning is spot) as GKE names its MIG."""
ON_DEMAND_MIG = f"gke-{CLUSTER}-gpu-on-demand-5e6f7a8b-grp"
"""The second rung's pool."""
GROUPS = {SPOT_MIG: "spot", ON_DEMAND_MIG: "on-demand"}
"""The two pools' MIGs by name, as the settings carry them (incluster/capacity_events.py group_rungs)."""

WORKERS = ("grpo-gpu-worker-a", "grpo-gpu-worker-b")


@dataclass
class Cluster:
    """The test's namespace on the real API server, and the proxy the code under test reaches it through."""

    plane: ControlPlane
    """The shared control plane (the test writes what the autoscaler and the kubelet would, straight to it)."""
    namespace: str
    """The namespace of the test's pods and events."""
    proxy: FaultProxy
    """The proxy in front of the API server, which records every request."""

    @property
    def endpoint(self) -> Endpoint:
        """The API server as the code under test reaches it."""
        return Endpoint(self.proxy.url, self.plane.headers())

    def lists(self, resource: str) -> int:
        """How many times the code under test listed `resource` in the namespace."""
        collection = f"/api/v1/namespaces/{self.namespace}/{resource}"
        return sum(1 for method, path, _ in self.proxy.seen if method == "GET" and path.split("?")[0] == collection)

    def pending(self, *pods: str) -> None:
        """GPU worker pods the scheduler cannot place."""
        for pod in pods:
            made.create_pending_worker(self.plane, self.namespace, pod)


@pytest.fixture
def kube(control_plane, kube_namespace):
    with fault_proxy(control_plane.address, str(control_plane.ca)) as proxy:
        yield Cluster(control_plane, kube_namespace, proxy)


def capacity(kube: Cluster) -> readiness.Capacity:
    return readiness.Capacity(kube.endpoint, groups=GROUPS, namespace=kube.namespace)


def refusal(kube: Cluster, monkeypatch) -> tuple[str, list[str]]:
    """The gate's lines and refusal after 60 s with no GPU node up."""
    monkeypatch.setattr(readiness, "time", Clock())
    scripted_nodes(monkeypatch, [0.0])
    lines: list[str] = []
    with pytest.raises(job_client.JobError) as refused:
        readiness.wait_for_gpus(
            Endpoint("http://ray"), 2, 60, lines.append, poll=30, capacity=capacity(kube), gpus_per_node=8
        )
    return str(refused.value), lines


def test_a_spot_stockout_names_the_rung_since_when_and_gce_out_of_resources(monkeypatch, kube):
    kube.pending(*WORKERS)
    made.triggered_scale_up(kube.plane, kube.namespace, WORKERS[0], SPOT_MIG, T0)
    made.failed_scale_up(kube.plane, kube.namespace, WORKERS[0], "GCE out of resources", T0 + 120)
    error, lines = refusal(kube, monkeypatch)
    said = (
        "0 of 2 Ray nodes with 8 GPUs are up; missing 2 (gpu.nodes=2; verl places one STRICT_PACK group of 8 GPUs"
        " per node); trying rung spot since 2026-12-01T12:00:00Z; last scale-up failed: GCE out of resources in"
        " us-central1-b"
    )
    assert lines == [f"waiting for GPU nodes: {said}; 60 s left", f"waiting for GPU nodes: {said}; 30 s left"]
    assert error.startswith(f"refused: the job can never be placed: {said} after 60 s.")
    assert kube.lists("events") == 3, "read at 0, 30 and 60 s (poll 30 s), not more often"


def test_a_quota_failure_on_the_on_demand_rung_names_the_quota(monkeypatch, kube):
    kube.pending(*WORKERS)
    made.triggered_scale_up(kube.plane, kube.namespace, WORKERS[1], ON_DEMAND_MIG, T0)
    made.failed_scale_up(kube.plane, kube.namespace, WORKERS[1], "GCE quota exceeded", T0 + 60)
    error, lines = refusal(kube, monkeypatch)
    assert lines[0].endswith(
        "; trying rung on-demand since 2026-12-01T12:00:00Z; last scale-up failed: GCE quota exceeded in"
        " us-central1-b; 60 s left"
    )
    assert "last scale-up failed: GCE quota exceeded in us-central1-b after 60 s." in error


def test_a_stockout_on_the_first_rung_then_a_scale_up_on_the_second_is_each_a_line(monkeypatch, kube):
    kube.pending(*WORKERS)
    plane, namespace = kube.plane, kube.namespace

    def stockout() -> None:
        made.triggered_scale_up(plane, namespace, WORKERS[0], SPOT_MIG, T0)
        made.failed_scale_up(plane, namespace, WORKERS[0], "GCE out of resources", T0 + 120)

    def second_rung() -> None:
        made.triggered_scale_up(plane, namespace, WORKERS[0], ON_DEMAND_MIG, T0 + 300)

    def nodes_up() -> None:  # the nodes came up: the workers run there, no pod is pending
        made.delete_all(plane, namespace, "pods")
        for index, name in enumerate(WORKERS):
            made.create_running_worker(plane, namespace, name, f"gke-{ON_DEMAND_MIG}-{index}")

    steps = iter([(None, [0.0]), (stockout, [0.0]), (second_rung, [0.0]), (nodes_up, [8.0, 8.0, 0.0])])

    def gpu_nodes(_endpoint: Endpoint) -> list[float]:
        change, nodes = next(steps)
        if change is not None:
            change()
        return nodes

    monkeypatch.setattr(readiness, "gpu_nodes", gpu_nodes)
    monkeypatch.setattr(readiness, "time", Clock())
    lines: list[str] = []
    poll = readiness.LADDER_READ_SECONDS  # the events are read again at each poll
    readiness.wait_for_gpus(
        Endpoint("http://ray"), 2, 600, lines.append, poll=poll, capacity=capacity(kube), gpus_per_node=8
    )
    assert [line.split(" per node)", 1)[1].rsplit("; ", 1)[0] for line in lines] == [
        "",
        "; trying rung spot since 2026-12-01T12:00:00Z; last scale-up failed: GCE out of resources in us-central1-b",
        "; trying rung on-demand since 2026-12-01T12:05:00Z",
    ]


def test_events_of_other_pods_and_an_api_server_that_refuses_do_not_stop_the_gate(monkeypatch, kube):
    made.autoscaler_event(kube.plane, kube.namespace, "grpo-guardian-x", "FailedScaleUp", "Node scale up in zones"
                          " us-central1-b associated with this pod failed: GCE quota exceeded. Pod is at risk of not"
                          " being scheduled.", T0, kind="Warning")  # fmt: skip
    kube.pending(WORKERS[0])
    _, lines = refusal(kube, monkeypatch)
    assert lines[0].endswith(" per node); 60 s left")
    refusing = readiness.Capacity(Endpoint("http://127.0.0.1:9"), groups=GROUPS)
    assert readiness.ladder_line(refusing).startswith(
        "rung unknown (the API server at http://127.0.0.1:9 did not answer"
    )
    assert readiness.ladder_line(None) == ""


def test_the_guardian_records_once_which_rung_its_gate_waited_on_and_why(tmp_path, kube):
    """The settings and the GPU pools' instance groups are the ones the program renders for a ladder stack (the
    guardian's settings ConfigMap; the groups' ConfigMap, from the pools' instanceGroupUrls as plan/mocks.py answers
    them, here the file the guardian's pod mounts); the autoscaler's event names the on-demand pool's MIG. The file
    is read each time the guardian asks: a pool's new groups reach it without a new pod."""
    import json
    from dataclasses import replace

    from incluster import record
    from incluster.capacity_events import ladder_state
    from incluster.guardian.loop import Guardian
    from incluster.guardian.settings import settings_from
    from incluster.readiness import ladder_line_of
    from tests.conftest import run_values
    from tests.workloads.conftest import combination_values

    recording = run_values(*combination_values("standard", "b200", "gcs", gpu={"capacity": ["spot", "on-demand"]}))
    (config_map,) = [r for r in recording.by_type("kubernetes:core/v1:ConfigMap") if r.name == "grpo-guardian-settings"]
    settings = settings_from(json.loads(config_map.inputs["data"]["settings.json"]), "test")
    assert settings.raw["namespace"] == "grpo"  # the guardian's namespace, as rendered; here the test's own
    settings = replace(settings, raw={**settings.raw, "namespace": kube.namespace})
    env = {**settings.submission["runtime_env"]["env_vars"], "GRPO_RUN_DIR": str(tmp_path / "run")}
    settings = replace(settings, submission={**settings.submission, "runtime_env": {
        **settings.submission["runtime_env"], "env_vars": env}})  # fmt: skip
    (groups_map,) = [
        r for r in recording.by_type("kubernetes:core/v1:ConfigMap") if r.name == "grpo-gpu-instance-groups"
    ]
    groups_file = tmp_path / "groups.json"
    groups_file.write_text(groups_map.inputs["data"]["groups.json"])
    groups = json.loads(groups_file.read_text())
    (mig,) = [name for name, rung in groups.items() if rung == "on-demand"]
    kube.pending(*WORKERS)
    made.triggered_scale_up(kube.plane, kube.namespace, WORKERS[0], mig, T0)
    made.failed_scale_up(kube.plane, kube.namespace, WORKERS[0], "GCE out of resources", T0 + 60)
    guard = object.__new__(Guardian)
    reports: list[str] = []
    guard.settings, guard.clock, guard.report, guard.lease = settings, lambda: T0 + 120, reports.append, None
    api = kube.endpoint
    assert Guardian.capacity_of(settings, api, tmp_path / "none.json").groups == {}  # Autopilot
    groups_file.write_text("{}\n")  # the pool's groups not yet known: no rung named, nothing recorded of it
    unknown = Guardian.capacity_of(settings, api, groups_file)
    assert ladder_line_of(ladder_state(readiness.scale_up_events(unknown), unknown.groups)).startswith(
        "last scale-up failed"
    )
    groups_file.write_text(groups_map.inputs["data"]["groups.json"])  # the kubelet brings the pools' groups
    capacity = Guardian.capacity_of(settings, api, groups_file)
    assert (capacity.groups, capacity.namespace) == (groups, kube.namespace)
    guard.record_capacity(1, capacity)
    guard.record_capacity(1, capacity)
    [entry] = record.read(settings.run_dir)
    rung = "on-demand"
    assert (entry["attempt"], entry["event"]) == (1, "capacity")
    assert entry["details"] == {
        "rung": rung,
        "since": "2026-12-01T12:00:00Z",
        "lastFailure": "GCE out of resources in us-central1-b",
    }
    assert entry["reason"] == (
        f"trying rung {rung} since 2026-12-01T12:00:00Z; last scale-up failed: GCE out of resources in us-central1-b"
    )
    guard.record_capacity(2, None)  # no API server at hand: nothing to record
    assert len(record.read(settings.run_dir)) == 1


def test_the_gate_polls_ray_every_2_s_but_reads_the_events_every_10_s(monkeypatch, kube):
    kube.pending(WORKERS[0])
    made.triggered_scale_up(kube.plane, kube.namespace, WORKERS[0], SPOT_MIG, T0)
    monkeypatch.setattr(readiness, "time", Clock())
    polls = scripted_nodes(monkeypatch, [0.0])
    with pytest.raises(job_client.JobError):
        readiness.wait_for_gpus(
            Endpoint("http://ray"), 1, 30, lambda _: None, poll=2, capacity=capacity(kube), gpus_per_node=8
        )
    assert polls[0] == 16  # at 0, 2, ..., 30 s
    assert kube.lists("events") == 4  # at 0, 10, 20, 30 s


def test_status_reads_the_gpu_pools_instance_groups_from_their_configmap_by_name(kube):
    """`status` (jobs/cli/runs.py gpu_node_rungs) reaches the API server with the user's credentials and reads the
    groups from the ConfigMap the program renders (workloads/instance_groups.py), listed by metadata.name; a cluster
    without it (Autopilot) has none, and a long cluster name's shortened MIG still names its rung."""
    from workloads.instance_groups import groups_text

    shortened = "gke-grpo-a-very-long-cluster-n-gpu-on-demand-5e6f7a8b-grp"  # GKE's cut of a long cluster name
    data = {"groups.json": groups_text({SPOT_MIG: "spot", shortened: "on-demand"})}
    config_maps = f"/api/v1/namespaces/{kube.namespace}/configmaps"
    other = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"x": "{}"},
             "metadata": {"name": "grpo-guardian-settings", "namespace": kube.namespace}}  # fmt: skip
    kube.plane.ok("POST", config_maps, other)
    kube.plane.ok("POST", config_maps, {**other, "metadata": {**other["metadata"], "name": "grpo-gpu-instance-groups"},
                                        "data": data})  # fmt: skip
    kube.pending(WORKERS[0])
    made.triggered_scale_up(kube.plane, kube.namespace, WORKERS[0], shortened, T0)
    groups = readiness.instance_groups_of(kube.endpoint, kube.namespace)
    assert groups == {SPOT_MIG: "spot", shortened: "on-demand"}
    line = readiness.ladder_line(readiness.Capacity(kube.endpoint, groups, kube.namespace))
    assert line == "trying rung on-demand since 2026-12-01T12:00:00Z"
    kube.plane.ok("DELETE", f"{config_maps}/grpo-gpu-instance-groups")
    assert readiness.instance_groups_of(kube.endpoint, kube.namespace) == {}
    assert kube.lists("configmaps") == 2
    with pytest.raises(job_client.JobError, match="instance groups"):
        readiness.instance_groups_of(Endpoint("http://127.0.0.1:9"))
