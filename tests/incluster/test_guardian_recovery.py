"""The guardian's recovery judgement from facts (issue 19 items 6, 7, 8, 11): lost capacity judged from what Ray and
Kubernetes record (the real API server of the test run, tests/conftest.py `control_plane`: pods' disruption states
written through their status subresource as the kubelet and the scheduler write them, nodes run by kwok or whose Ready
condition is written as the node lifecycle controller writes it, tests/support/kube_objects.py), not from words a trainer logs; an
attempt lost with the Ray head; a failed attempt's lines read from the end of its log whatever its size; the guardian's
RBAC equal to the calls its code makes."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from incluster import job_client, readiness, record, run_submission, scaling
from incluster.attempt import log_path
from incluster.endpoint import Endpoint
from incluster.guardian.cluster import failure_lines, gpu_nodes_of, kube_node_view, pod_view, worker_pods_of
from incluster.guardian.loop import Guardian, Hooks
from incluster.guardian.policy import Action, AttemptView, Backoff, NodeView, State, decide
from incluster.guardian.settings import Settings, settings_from
from incluster.lease import Lease
from incluster.preflight.cordon import cordon_pods_nodes
from jobs.demo.stand_in_trainer import metric_line
from jobs.guardian import objects as guardian_objects
from jobs.guardian.settings import guardian_settings
from jobs.spec.training import on_data_root
from tests.conftest import config_of
from tests.support import control_plane as cp
from tests.support import kube_objects as made
from tests.support.control_plane import ControlPlane
from tests.support.fault_proxy import FaultProxy, fault_proxy
from tests.support.kube_objects import Nodes

T0 = 1796126400.0
"""When the attempts of these cases started."""

END = T0 + 600
"""When they ended."""

GPU_NODE = NodeView("gpu-1", alive=True, gpus=8)
HEAD = NodeView("head", alive=True, gpus=0)

VERL_CRASH = (
    metric_line(2, evicted=3),
    "Traceback (most recent call last):",
    "ValueError: batch size 6 is not divisible by 4",
)
"""A deterministic crash of verl 0.9.1's V1 trainer after a step that evicted stale samples (the stand-in trainer's
metric line, jobs/demo/stand_in_trainer.py metric_line: verl/trainer/ppo/v1/replay_buffer.py L367)."""


@pytest.fixture(scope="module")
def settings(tmp_path_factory) -> Settings:
    """The dev stack's guardian settings with the shared storage under a directory of this module's own, as
    `guard --data-root` places it: never the host's /data, where a `python -m jobs submit` against a local head may
    have left this run's attempt logs (the guardian would then see an attempt)."""
    values = guardian_settings(config_of("dev", job={"maxRecoveries": 2}))
    data_root = str(tmp_path_factory.mktemp("data"))
    values["submission"] = on_data_root(values["submission"], data_root)
    values["export"] = on_data_root(values["export"], data_root)
    return settings_from(values, "test")


def failed(settings, now=END + 1, lines=(), message="", **changes) -> State:
    """The state after attempt 1 FAILED at END, the GPU node up."""
    newest = AttemptView(1, "FAILED", start=T0, end=END, message=message, last_lines=tuple(lines))
    base = State(now=now, settings=settings, newest=newest, nodes=(HEAD, GPU_NODE), settle=60,
                 backoff=Backoff(30, 600))  # fmt: skip
    return replace(base, **changes)


@dataclass
class Cluster:
    """The stack's namespace and the nodes on the real API server, held for the test (tests/conftest.py
    stack_namespace), and the proxy that records what the code under test asks."""

    plane: ControlPlane
    """The shared control plane (the test writes what the kubelet, the scheduler and the autoscaler would)."""
    namespace: str
    """The stack's namespace, the settings' own."""
    nodes: Nodes
    """The GPU nodes the test makes, deleted after it."""
    proxy: FaultProxy
    """The proxy in front of the API server."""
    token: str
    """The guardian's ServiceAccount's token, its rendered Role and ClusterRole (without cordoning) bound to it."""

    @property
    def endpoint(self) -> Endpoint:
        """The API server as the code under test reaches it: as the guardian's ServiceAccount, so RBAC judges it."""
        return Endpoint(self.proxy.url, self.plane.headers(self.token))

    def calls(self) -> list[tuple[str, str, str]]:
        """(API group, resource, verb) of every request the code under test sent, in order."""
        return [made.api_call(method, path) for method, path, _ in self.proxy.seen]


@pytest.fixture
def kube(control_plane, stack_namespace) -> Iterator[Cluster]:
    nodes = Nodes(control_plane)
    token = cp.guardian_in(control_plane, stack_namespace)
    try:
        with fault_proxy(control_plane.address, str(control_plane.ca)) as proxy:
            yield Cluster(control_plane, stack_namespace, nodes, proxy, token)
    finally:
        nodes.delete()


def judged_from(kube: Cluster, settings, **changes) -> Action:
    """decide() on a failed attempt with the pods and nodes the guardian reads from the API server."""
    pods = tuple(map(pod_view, worker_pods_of(kube.endpoint, settings)))
    nodes = tuple(map(kube_node_view, gpu_nodes_of(kube.endpoint)))
    return decide(failed(settings, worker_pods=pods, kube_nodes=nodes, **changes))


STOPPED = ("NodeStatusUnknown", "Kubelet stopped posting node status.")
"""The Ready condition's reason and message the node lifecycle controller writes for a node whose kubelet stopped
(kubernetes/kubernetes pkg/controller/nodelifecycle/node_lifecycle_controller.go tryUpdateNodeHealth)."""


# Item 7: facts, not words.


def test_a_crash_that_logs_verls_evicted_samples_or_a_preemption_word_is_not_lost_capacity(settings):
    message = "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n" + (
        "\n".join(VERL_CRASH)
    )
    action = decide(failed(settings, now=END + 60, lines=VERL_CRASH, message=message))
    assert (action.event, action.details) == ("failed", {"cause": "other"})
    vllm = "WARNING scheduler.py: Sequence group 7 is preempted by PreemptionMode.RECOMPUTE mode"
    assert decide(failed(settings, now=END + 60, lines=(vllm,))).details == {"cause": "other"}


def test_rays_own_node_died_sentence_is_lost_capacity_and_a_paraphrase_is_not(settings):
    ray_text = "ray.exceptions.ActorDiedError: The actor died because its node has died. Node Id: 5e1c"
    action = decide(failed(settings, lines=("x", ray_text)))
    assert action.details == {"cause": "gpu-capacity-lost"} and action.reason.endswith(ray_text)
    said = decide(failed(settings, now=END + 60, lines=("my node died, evicted and preempted",)))
    assert said.details == {"cause": "other"}


def test_a_worker_pod_the_kubelet_shut_down_with_its_node_is_lost_capacity(settings, kube):
    made.shut_down_worker(kube.plane, kube.namespace, "grpo-gpu-worker-a", "gke-gpu-1", END - 5)
    kube.nodes.ready("gke-gpu-2")
    action = judged_from(kube, settings, lines=VERL_CRASH)
    assert (action.event, action.details) == ("failed", {"cause": "gpu-capacity-lost"})
    assert action.reason == (
        "GPU worker pod grpo-gpu-worker-a ended with its node: Pod was terminated in response to imminent node shutdown."
    )
    assert kube.calls() == [("", "pods", "list"), ("", "nodes", "list")]


def test_a_shutdown_before_the_attempt_started_is_no_evidence(settings, kube):
    made.shut_down_worker(kube.plane, kube.namespace, "grpo-gpu-worker-a", "gke-gpu-1", T0 - 600)
    assert judged_from(kube, settings, now=END + 60, lines=VERL_CRASH).details == {"cause": "other"}


def test_the_schedulers_priority_preemption_is_no_reclaimed_vm(settings, kube):
    # A node no kubelet runs (kwok, as the pod's kubelet, writes the pod's conditions anew), Ready as its kubelet
    # last wrote it: the test reads it well within the node lifecycle controller's 4 s grace.
    kube.nodes.without_kubelet("gke-gpu-1", "True", END - 600, "KubeletReady", "kubelet is posting ready status")
    made.create_running_worker(kube.plane, kube.namespace, "grpo-gpu-worker-a", "gke-gpu-1")
    made.preempt(kube.plane, kube.namespace, "grpo-gpu-worker-a", END - 5)
    (pod,) = worker_pods_of(kube.endpoint, settings)
    assert (pod_view(pod).phase, pod_view(pod).disruption) == ("Running", "PreemptionByScheduler")
    assert judged_from(kube, settings, now=END + 60, lines=VERL_CRASH).details == {"cause": "other"}


def test_a_gpu_node_that_stopped_being_ready_while_the_attempt_ran_is_lost_capacity(settings, kube):
    kube.nodes.without_kubelet("gke-gpu-1", "Unknown", END - 20, *STOPPED)
    made.create_running_worker(kube.plane, kube.namespace, "grpo-gpu-worker-a", "gke-gpu-1")
    action = judged_from(kube, settings, lines=VERL_CRASH)
    assert action.details == {"cause": "gpu-capacity-lost"}
    assert action.reason == (
        "GPU node gke-gpu-1 stopped being Ready (Unknown): NodeStatusUnknown: Kubelet stopped posting node status."
    )
    made.delete_all(kube.plane, kube.namespace, "pods")
    kube.nodes.delete()
    kube.nodes.ready("gke-gpu-3")
    assert judged_from(kube, settings, now=END + 60, lines=VERL_CRASH).details == {"cause": "other"}


# Item 8: a failed attempt's lines from the end of its log, whatever its size.


class WholeLogRay:
    """A stand-in Jobs API client whose get_job_logs returns the driver's whole log as ray 2.60.0 does
    (python/ray/dashboard/modules/job/job_log_storage_client.py L20-24: one `f.read()` of job-driver-<id>.log), here
    the attempt's log; it refuses past 64 MiB instead of filling this shared machine's memory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def get_job_logs(self, _: str) -> str:
        size = self.path.stat().st_size
        if size > 64 * 1024**2:
            raise AssertionError(f"the guardian asked Ray for the whole {size}-byte log")
        return self.path.read_text()


def test_the_lines_of_a_failure_come_from_the_end_of_a_multi_gb_log_in_bounded_memory(settings, tmp_path):
    run_dir = tmp_path / "run"
    log = log_path(run_dir, 1)
    log.parent.mkdir(parents=True)
    with log.open("wb") as out:
        out.truncate(4 * 1024**3)  # a 4 GiB log, sparse: nothing of it is written but its end
        out.seek(0, 2)
        out.write(b"\n" + b"".join(f"2026-12-01T11:50:0{n}.000Z\tline {n}\n".encode() for n in range(9)))
    guard = object.__new__(Guardian)
    guard.settings = replace(settings, submission={**settings.submission, "runtime_env": {
        **settings.submission["runtime_env"], "env_vars": {"GRPO_RUN_DIR": str(run_dir)}}})  # fmt: skip
    guard.client = WholeLogRay(log)
    job = SimpleNamespace(submission_id="run-1", status="FAILED", start_time=T0 * 1000, end_time=END * 1000,
                          message="Job entrypoint command failed with exit code 7", metadata={"attempt": "1"})  # fmt: skip
    tracemalloc.start()
    try:
        view = guard._view(job, [])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert view.last_lines == tuple(f"line {n}" for n in range(9))
    assert peak < 2 * 1024**2, f"{peak} bytes allocated to read the end of a 4 GiB log"


def test_without_a_log_the_lines_are_rays_message(tmp_path):
    message = "Job entrypoint command failed with exit code 7, last available logs (truncated to 20,000 chars):\nboom"
    assert failure_lines(tmp_path, 3, message)[-1] == "boom"


# Item 6: an attempt lost with the Ray head.


class NewHead:
    """A stand-in Jobs API client of a new Ray head: its job table starts empty (without GCS fault tolerance the job
    table lives in the GCS's in-memory internal KV, ray 2.60.0 python/ray/dashboard/modules/job/common.py L224-281
    JobInfoStorageClient), and it takes submissions."""

    def __init__(self) -> None:
        self.jobs: list[SimpleNamespace] = []

    def list_jobs(self) -> list[SimpleNamespace]:
        return list(self.jobs)

    def submit_job(self, **kwargs) -> str:
        self.jobs.append(SimpleNamespace(status="PENDING", metadata=kwargs["metadata"], **{
            "submission_id": kwargs["submission_id"], "start_time": None, "end_time": None, "message": ""}))  # fmt: skip
        return kwargs["submission_id"]

    def get_job_status(self, _: str) -> str:
        return "PENDING"


def guardian_on(settings, client, clock=lambda: END + 100) -> Guardian:
    guard = object.__new__(Guardian)
    guard.settings, guard.client, guard.clock = settings, client, clock
    guard.seen_attempt, guard.missed_since = 0, {}
    return guard


def test_an_attempt_the_record_knows_and_a_new_head_does_not_is_lost_capacity_and_the_next_continues_it(
    settings, tmp_path
):
    run_dir = tmp_path / "run"
    local = replace(settings, submission={**settings.submission, "runtime_env": {
        **settings.submission["runtime_env"], "env_vars": {**settings.submission["runtime_env"]["env_vars"],
                                                           "GRPO_RUN_DIR": str(run_dir)}}})  # fmt: skip
    log_path(run_dir, 2).parent.mkdir(parents=True)
    log_path(run_dir, 2).write_text("2026-12-01T11:50:00.000Z\tstep:3 - x:1\n")
    record.append(run_dir, record.entry(T0, 2, "submitted", "attempt 2 after lost GPU capacity"))
    head = NewHead()
    guard = guardian_on(local, head)
    entries = record.read(run_dir)
    view = guard._missing_view(entries)
    assert (view.number, view.status, view.gone_from_ray) == (2, "FAILED", True)
    assert view.end == log_path(run_dir, 2).stat().st_mtime
    state = State(now=view.end + 1, settings=local, newest=view, nodes=(HEAD,),
                  recorded={"submitted": entries[0]}, backoff=Backoff(30, 600))  # fmt: skip
    action = decide(state)
    assert (action.event, action.details) == ("failed", {"cause": "gpu-capacity-lost"})
    assert action.reason.startswith("attempt 2 is not on the Ray head: a new head")
    outcome = run_submission.ensure_run(head, local.submission, lambda: run_submission.local_view(run_dir))
    assert outcome.submission_id == f"{local.run}-3", "attempt 1's id and log would be used again"
    assert guardian_on(local, NewHead())._missing_view([]) is not None  # the log alone tells attempt 2 ran
    assert guardian_on(settings, NewHead())._missing_view([]) is None  # a run with no attempt yet waits


def test_the_guardian_remembers_an_attempt_it_saw_before_the_head_went(settings, tmp_path):
    guard = guardian_on(settings, NewHead(), clock=lambda: END)
    guard.seen_attempt = 1
    view = guard._missing_view([])
    assert (view.number, view.end, view.gone_from_ray) == (1, END, True)


def test_after_the_scale_to_zero_the_guardian_reads_the_gpu_workers_through_the_api_server_at_most_every_minute(
    settings, monkeypatch, kube
):
    """workers_view: a RayCluster made anew keeps its GPU workers (replicas 1), one the guardian scaled keeps none;
    read once per WORKERS_REFRESH_SECONDS, and only after the scale to zero of an attempt that is over."""
    from incluster.guardian import loop

    made.create_raycluster(kube.plane, kube.namespace, replicas=1)
    ended = AttemptView(1, "SUCCEEDED", start=T0, end=END)
    scaled = {"scaled-to-zero": {"event": "scaled-to-zero", "attempt": 1}}
    monotonic = [1000.0]
    monkeypatch.setattr(loop.time, "monotonic", lambda: monotonic[0])
    proxy = Endpoint(
        f"{kube.proxy.url}/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy", kube.endpoint.headers
    )
    guard = guardian_on(settings, None)
    guard.endpoint, guard.report = proxy, print
    guard.hooks, guard._workers_read = Hooks(scale_to_zero=lambda s: "scaled"), (float("-inf"), False)
    assert guard.workers_view(ended, scaled) is True
    assert guard.workers_view(AttemptView(1, "RUNNING", start=T0), scaled) is False
    assert guard.workers_view(ended, {}) is False
    assert kube.calls() == [("ray.io", "rayclusters", "get")]
    scaling.scale_to(kube.endpoint, 0)
    assert guard.workers_view(ended, scaled) is True, "the minute has not passed: no second read"
    monotonic[0] += loop.WORKERS_REFRESH_SECONDS
    assert guard.workers_view(ended, scaled) is False
    assert kube.calls() == [("ray.io", "rayclusters", "get"), ("ray.io", "rayclusters", "patch"),
                            ("ray.io", "rayclusters", "get")]  # fmt: skip


# Item 11: the Role is exactly the calls.


def test_the_guardians_rbac_is_exactly_the_calls_its_code_makes(settings, tmp_path, kube):
    plane, namespace = kube.plane, kube.namespace
    kube.nodes.without_kubelet("gke-gpu-1", "True", END, "KubeletReady", "kubelet is posting ready status")
    made.shut_down_worker(plane, namespace, "grpo-gpu-worker-a", "gke-gpu-1", END)
    made.create_pending_worker(plane, namespace, "grpo-gpu-worker-b")
    made.failed_scale_up(plane, namespace, "grpo-gpu-worker-b", "GCE out of resources", END)
    reports: list[str] = []
    api = kube.endpoint
    gpu_nodes_of(api)  # the deadline of the next attempt; a GPU node's Ready condition
    worker_pods_of(api, settings)  # judging a failure
    readiness.scale_up_events(Guardian.capacity_of(settings, api))  # the gate's rung and why (events)
    lease = Lease(api, "guardian-a")
    assert lease.try_acquire_or_renew() and lease.try_acquire_or_renew()  # create, then renew (update)
    # Without job.cordonBadNodes the Role has no `get pods`: the API server refuses the cordon's first call for real.
    denied = len(kube.calls())
    assert cordon_pods_nodes(api, ["grpo-gpu-worker-a"], reports.append) == []
    (said,) = reports
    assert said.startswith("grpo-gke preflight: not cordoned grpo-gpu-worker-a: the API server refused GET ") and (
        ": 403 " in said
    ), said
    assert not plane.get("/api/v1/nodes/gke-gpu-1")["spec"].get("unschedulable")
    kube.proxy.seen[denied:] = []
    cordoning = Endpoint(api.address, plane.headers(cp.guardian_in(plane, namespace, cordon=True)), api.verify)
    before_cordon = len(kube.calls())
    cordoned = cordon_pods_nodes(cordoning, ["grpo-gpu-worker-a"], reports.append)  # job.cordonBadNodes
    assert cordoned == ["gke-gpu-1"], reports
    assert plane.get("/api/v1/nodes/gke-gpu-1")["spec"]["unschedulable"] is True
    cordon_calls = kube.calls()[before_cordon:]
    # The RayCluster last: KubeRay's operator deletes the pods of a suspended RayCluster (its labels are theirs).
    made.create_raycluster(plane, namespace, replicas=1)
    scaling.scale_to(api, 0)  # scale to zero
    assert scaling.gpu_workers(api) == 0  # after it: whether the workers came back
    always = set(kube.calls()[:before_cordon] + kube.calls()[before_cordon + len(cordon_calls) :])

    def granted(cordon: bool) -> set[tuple[str, str, str]]:
        rules = [*guardian_objects.render_role(cordon).rules, *guardian_objects.render_cluster_role(cordon).rules]
        return {(group, resource, verb) for rule in rules for group in rule.api_groups for resource in rule.resources
                for verb in rule.verbs}  # fmt: skip

    assert {call for call in always if call[1] == "leases"} == {
        ("coordination.k8s.io", "leases", verb) for verb in ("get", "create", "update")
    }
    assert granted(False) == always
    assert granted(True) == set(kube.calls())
    [raycluster] = [rule for rule in guardian_objects.render_role(False).rules if rule.resources == ["rayclusters"]]
    assert raycluster.resource_names == ["grpo"]


REQUEST_SITES = {
    ("incluster/readiness.py", "api_items"): (
        "the API server: gpu_nodes_of, worker_pods_of and the gate's scale_up_events, recorded above"
    ),
    ("incluster/scaling.py", "scale_to"): "the API server: scale to zero, recorded above",
    ("incluster/scaling.py", "once"): "the API server: scale to zero's one try, which scale_to's backoff sends again,"
    " recorded above",
    ("incluster/preflight/cordon.py", "_request"): "the API server: cordoning, recorded above",
    ("incluster/scaling.py", "gpu_workers"): "the API server: the GPU workers' count after the scale to zero, recorded"
    " above (also bring_back's read: pulumi up and the CLI, with the user's credentials)",
    ("incluster/readiness.py", "ray_nodes"): "the Ray dashboard, not the API server",
    ("incluster/lease.py", "_request"): "the API server: the Lease, recorded above",
    ("incluster/lustre_transfer.py", "_post"): "Managed Lustre's API (exportData, importData), not the API server",
    ("incluster/lustre_transfer.py", "get_operation"): "Managed Lustre's API (operations.get), not the API server",
    ("incluster/lustre_transfer.py", "_get"): "Cloud Storage (the parked bucket's objects), not the API server",
    ("incluster/lustre_transfer.py", "write_text"): "Cloud Storage (the park marker), not the API server",
    ("incluster/lustre_transfer.py", "send"): "Managed Lustre's API or Cloud Storage: the one try of each request"
    " above, which the backoff sends again, not the API server",
    ("incluster/lustre_transfer.py", "_page"): "a listing page of Managed Lustre's operations or of Cloud Storage's"
    " objects, not the API server",
    ("incluster/google_token.py", "metadata_credential"): "the node's metadata server (a Google token), not the API"
    " server",
    ("incluster/wandb_summary.py", "_post"): "W&B's GraphQL API (an ended attempt's run summary), not the API server",
}
"""Every function of the guardian's code that sends an HTTP request with `requests`, and what it reaches."""


def test_every_request_the_guardians_code_can_send_is_one_the_rbac_test_records_or_not_the_api_servers():
    import ast

    from incluster.shipping import shipped_files

    code = shipped_files()
    found = set()
    for path, text in code.items():
        for function in ast.walk(ast.parse(text)):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "requests"
                for call in ast.walk(function)
            ):
                found.add((path, function.name))
    assert found == set(REQUEST_SITES)
    assert not any("bring_back" in text for path, text in code.items() if path.startswith("incluster/guardian/"))


def test_after_a_lost_head_the_guardian_waits_for_the_gpus_preflights_the_new_head_and_submits_the_next_attempt(
    settings, tmp_path, monkeypatch
):
    """The loop's own steps (observe, decide, apply) on a new head: the record and log know attempt 1 and its
    preflight passed on the old head; the new head lists no job. The guardian records attempt 1 lost, runs the
    preflight on the new head (tests/incluster/test_guardian_preflight.py's recording stand-in for before_first_attempt),
    and submits attempt 2."""
    from incluster.preflight import gate
    from tests.incluster.test_guardian_preflight import Ran, write_result

    run_dir = tmp_path / "run"
    env = {**settings.submission["runtime_env"]["env_vars"], "GRPO_RUN_DIR": str(run_dir)}
    local = replace(settings, submission={**settings.submission, "runtime_env": {
        **settings.submission["runtime_env"], "env_vars": env}})  # fmt: skip
    log_path(run_dir, 1).parent.mkdir(parents=True)
    log_path(run_dir, 1).write_text("2026-12-01T11:50:00.000Z\tstep:4 - x:1\n")
    write_result(run_dir / "preflight", "1.json", passed=True, head="old-head")
    new_head = [
        {"node_id": "new-head", "is_head_node": True, "state": "ALIVE", "resources_total": {"CPU": 8}},
        {"node_id": "gpu-2", "is_head_node": False, "state": "ALIVE", "resources_total": {"GPU": 8}},
    ]
    head = NewHead()
    ran = Ran(refuse=False)
    monkeypatch.setattr(job_client, "connect", lambda endpoint: head)
    monkeypatch.setattr(readiness, "ray_nodes", lambda endpoint: new_head)
    monkeypatch.setattr(gate, "before_first_attempt", ran)
    guard = Guardian(local, Endpoint("http://head:8265"), Hooks(), lambda line: None,
                              backoff=Backoff(0, 0))  # fmt: skip
    for _ in range(3):
        guard.apply(decide(guard.observe()))
    events = [(item["attempt"], item["event"]) for item in record.read(run_dir)]
    assert events == [(1, "failed"), (1, "recovering"), (1, "preflight-passed"), (2, "submitted")]
    assert len(ran.calls) == 1 and record.read(run_dir)[2]["details"]["rayHead"] == "new-head"
    assert [job.submission_id for job in head.jobs] == [f"{local.run}-2"]
    assert head.jobs[0].metadata["attempt"] == "2"
