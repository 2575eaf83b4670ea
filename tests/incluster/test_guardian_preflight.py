"""The guardian's preflight before an attempt on a Ray cluster no preflight has checked (a fresh RayCluster),
never before a resume on the same one: which head the newest result names, and what the guardian records."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from incluster import export_submission, job_client, readiness, record
from incluster.endpoint import Endpoint
from incluster.export_run import for_step
from incluster.google_token import Credential
from incluster.guardian import cluster, loop
from incluster.guardian.cluster import IN_CLUSTER_API, with_deadline
from incluster.guardian.command import cluster_hooks
from incluster.guardian.loop import ExportDone, ExportRequest, Guardian, Hooks, head_node_id, preflighted_head
from incluster.guardian.settings import settings_from
from incluster.preflight import gate
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of

HEAD_NODES = [
    {"node_id": "old-head", "is_head_node": True, "state": "DEAD"},
    {"node_id": "gpu-1", "is_head_node": False, "state": "ALIVE"},
    {"node_id": "new-head", "is_head_node": True, "state": "ALIVE"},
]


def write_result(results: Path, name: str, passed: bool, head: str | None) -> None:
    """A preflight result as the driver writes it, named newest."""
    results.mkdir(parents=True, exist_ok=True)
    result = {"verdict": {"passed": passed}, **({"rayHead": head} if head else {})}
    (results / name).write_text(json.dumps(result))
    (results / "newest").write_text(name + "\n")


def test_the_head_is_the_alive_head_node():
    assert head_node_id(HEAD_NODES) == "new-head"
    assert head_node_id(HEAD_NODES[:2]) is None


def test_a_passed_result_names_its_head(tmp_path):
    write_result(tmp_path, "1.json", passed=True, head="new-head")
    assert preflighted_head(tmp_path) == "new-head"


@pytest.mark.parametrize(
    "results",
    ["none", "failed", "headless", "unreadable"],
)
def test_no_head_counts_as_checked_without_a_passed_result_naming_it(tmp_path, results):
    if results == "failed":
        write_result(tmp_path, "1.json", passed=False, head="new-head")
    elif results == "headless":
        write_result(tmp_path, "1.json", passed=True, head=None)
    elif results == "unreadable":
        write_result(tmp_path, "1.json", passed=True, head="new-head")
        (tmp_path / "1.json").write_text("{not json")
    assert preflighted_head(tmp_path) is None


class Ran:
    """A recording stand-in for incluster/preflight/gate.py before_first_attempt."""

    def __init__(self, refuse: bool):
        self.refuse, self.calls = refuse, []

    def __call__(self, client, template, report, api=None):
        self.calls.append((template, api))
        if self.refuse:
            outcome = type(
                "Outcome", (), {"mode": "gpu", "path": "/r.json", "failure_lines": lambda self: ["w-1: FAIL"]}
            )
            raise gate.PreflightRefused(outcome())
        return type("Outcome", (), {"path": "/r.json"})()


@pytest.fixture
def guard(tmp_path, monkeypatch):
    """A guardian of the dev stack (cordonBadNodes on) whose run lies under tmp_path, on a stand-in cluster."""
    values = guardian_settings(config_of("dev", job={"cordonBadNodes": True}))
    settings = settings_from(values, "test")
    run_dir = tmp_path / "run"
    settings = replace(settings, submission=_with_run_dir(settings.submission, run_dir))
    monkeypatch.setattr(job_client, "connect", lambda endpoint: object())
    monkeypatch.setattr(readiness, "ray_nodes", lambda endpoint: HEAD_NODES)
    proxy = "https://1.2.3.4/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy"
    endpoint = Endpoint(address=proxy, headers={"Authorization": "Bearer t"}, verify="/ca.pem")
    return Guardian(settings, endpoint, Hooks(), lambda line: None)


def _with_run_dir(submission: dict, run_dir: Path) -> dict:
    env = {**submission["runtime_env"]["env_vars"], "GRPO_RUN_DIR": str(run_dir)}
    return {**submission, "runtime_env": {**submission["runtime_env"], "env_vars": env}}


def test_a_fresh_ray_cluster_is_preflighted_and_the_pass_recorded(guard, monkeypatch):
    ran = Ran(refuse=False)
    monkeypatch.setattr(gate, "before_first_attempt", ran)
    assert guard.preflight(attempt=2) is True
    ((template, api),) = ran.calls
    assert template["results_dir"] == str(guard.settings.run_dir / "preflight")
    assert api == Endpoint(address="https://1.2.3.4", headers={"Authorization": "Bearer t"}, verify="/ca.pem")
    (entry,) = record.read(guard.settings.run_dir)
    assert (entry["event"], entry["attempt"], entry["details"]) == (
        "preflight-passed",
        2,
        {"rayHead": "new-head", "results": "/r.json"},
    )


def test_the_same_ray_cluster_is_not_preflighted_again(guard, monkeypatch):
    ran = Ran(refuse=False)
    monkeypatch.setattr(gate, "before_first_attempt", ran)
    write_result(guard.settings.run_dir / "preflight", "1.json", passed=True, head="new-head")
    assert guard.preflight(attempt=2) is True
    assert ran.calls == [] and record.read(guard.settings.run_dir) == []


def test_a_failed_preflight_is_recorded_and_not_retried(guard, monkeypatch):
    monkeypatch.setattr(gate, "before_first_attempt", Ran(refuse=True))
    assert guard.preflight(attempt=2) is False
    events = [
        (entry["event"], entry["reason"], entry.get("last_lines")) for entry in record.read(guard.settings.run_dir)
    ]
    assert events == [
        ("preflight-failed", "refused: the gpu preflight failed (results /r.json):", ["  w-1: FAIL"]),
        ("not-retried", "the preflight failed on 1 node(s) or NIC(s)", None),
    ]


def test_a_stack_without_a_preflight_runs_none(guard, monkeypatch):
    ran = Ran(refuse=False)
    monkeypatch.setattr(gate, "before_first_attempt", ran)
    guard.settings = replace(guard.settings, raw={**guard.settings.raw, "preflight": None})
    assert guard.preflight(attempt=2) is True and ran.calls == []


def test_the_guardians_hooks_export_and_scale_to_zero_through_the_api_server(monkeypatch, tmp_path):
    """main()'s hooks: the settings' export submission with its driver's modules; the scale to zero as the JSON
    patch of incluster/scaling.py to the API server behind the dashboard's proxy (none without an API server)."""
    from incluster import scaling

    values = guardian_settings(config_of("dev"))
    settings = settings_from(values, "test")
    sent: list[tuple] = []
    monkeypatch.setattr(cluster, "SERVICE_ACCOUNT_DIR", tmp_path)
    monkeypatch.setattr(job_client, "connect", lambda endpoint: "client")
    already: list[bool] = [False, True]
    monkeypatch.setattr(
        export_submission,
        "submit_export",
        lambda client, submission: sent.append((client, submission)) or ("x-1", already.pop(0)),
    )
    monkeypatch.setattr(scaling, "scale_to", lambda api, replicas, report=None: sent.append((api.address, replicas)))
    proxy = Endpoint(address="https://1.2.3.4/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy")
    hooks = cluster_hooks(settings, proxy, no_google_token, print)
    assert hooks.export(ExportRequest(settings, 1, 8)) == ExportDone(
        "x-1", "x-1 exports the newest complete checkpoint (step 8)"
    )
    hooks.scale_to_zero(settings)
    # Pinned to the step, with the step's deterministic submission id: a second guardian's export follows the first.
    pinned = for_step(values["export"], settings.run, 8)
    assert pinned["submission_id"] == f"{settings.run}-export-step-8"
    assert sent == [("client", pinned), ("https://1.2.3.4", 0)]
    assert hooks.export(ExportRequest(settings, 1, 8)) == ExportDone(
        "x-1", "x-1 (already submitted) exports the newest complete checkpoint (step 8)"
    )
    sent.clear()
    local = cluster_hooks(settings, Endpoint(address="http://127.0.0.1:8265"), no_google_token, print)
    assert local.export is not None and local.scale_to_zero is None and local.park is None
    (tmp_path / "token").write_text("pod-token\n")
    in_cluster = cluster_hooks(settings, Endpoint(address="http://grpo-head-svc:8265"), no_google_token, print)
    in_cluster.scale_to_zero(settings)
    assert sent[-1] == (IN_CLUSTER_API, 0)


def no_google_token() -> Credential:
    """A Google token source for a stack that does not park: asking it is a failure of the test."""
    raise AssertionError("a stack without storage.parkWhenIdle asked for a Google token")


MAINTENANCE_AT = 1796130000
"""A GPU node's coming maintenance (Unix seconds), as GKE's label gives it."""

GPU_NODE = {
    "metadata": {"name": "gke-gpu-1", "labels": {"cloud.google.com/scheduled-maintenance-time": str(MAINTENANCE_AT)}}
}


def test_a_known_end_tells_nemo_rl_by_an_override_of_its_command_less_its_setup_and_verl_nothing():
    """verl 0.9.1's default trainer reads no expiration variable (core/facts/job.py VERL_DEADLINE_READER): its
    submission is unchanged. NeMo-RL's duration counts from grpo_train's start: 2 h less the 15-minute margin and
    the 45-minute setup bound."""
    from incluster.deadline import earliest_end

    ends = earliest_end([GPU_NODE], "spot", ladder=False)
    verl = guardian_settings(config_of("dev"))["submission"]
    assert with_deadline(verl, "verl", ends, now=MAINTENANCE_AT - 7200) == verl
    nemo = guardian_settings(config_of("nemo-rl-standard-b200"))["submission"]
    told = with_deadline(nemo, "nemo-rl", ends, now=MAINTENANCE_AT - 7200)
    assert told["entrypoint"].endswith(" checkpointing.checkpoint_must_save_by=00:01:00:00'")
    assert told["entrypoint"].startswith(nemo["entrypoint"][:-1]) and told["runtime_env"] == nemo["runtime_env"]
    assert with_deadline(verl, "verl", None, now=0) is verl


def test_the_guardian_tells_the_next_attempt_the_gpu_nodes_end(guard, monkeypatch):
    listed = []
    monkeypatch.setattr(loop, "gpu_nodes_of", lambda api: listed.append(api.address) or [GPU_NODE])
    assert guard.told_the_deadline(guard.settings.submission) == guard.settings.submission
    assert listed == ["https://1.2.3.4"]
    guard.settings = replace(guard.settings, framework="nemo-rl")
    told = guard.told_the_deadline(guard.settings.submission)
    assert " checkpointing.checkpoint_must_save_by=00:" in told["entrypoint"]
    monkeypatch.setattr(loop, "gpu_nodes_of", lambda api: [{"metadata": {"name": "gke-gpu-2", "labels": {}}}])
    assert guard.told_the_deadline(guard.settings.submission) is guard.settings.submission

    def refused(api):
        raise job_client.JobError("the API server answered HTTP 403 listing the GPU nodes")

    monkeypatch.setattr(loop, "gpu_nodes_of", refused)
    assert guard.told_the_deadline(guard.settings.submission) is guard.settings.submission
