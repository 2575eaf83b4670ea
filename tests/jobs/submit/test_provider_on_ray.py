"""The post-deploy dynamic provider's methods, called as the engine would, against a real local Ray head."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from incluster import job_client
from incluster.job_client import attempts, connect, endpoint_for_address, status_of
from incluster.runs import run_dir_of
from jobs.spec.training import on_data_root, submission_of, training_spec
from jobs.submit.local_head import refusing_address
from jobs.submit.provider import JobProvider
from tests.conftest import config_of


def props_for(data_root: Path, address: str, stack: str, entrypoint: str, **changes) -> dict:
    """Inputs of the dynamic resource as build_job gives them, with the address override and the shared
    storage's paths under `data_root`."""
    config = config_of("dev", stack=stack)
    props = {
        "submission": on_data_root(submission_of(config, training_spec(config, entrypoint), 1), str(data_root)),
        "kubeconfig": "",
        "address": address,
        "gpu_nodes": 1,
        "gpus_per_node": 8,
        "ready_timeout_seconds": 1,
        "cluster_uid": "uid-1",
        "run": None,
        "submission_id": None,
    }
    return {**props, **changes}


def client_of(address: str):
    return connect(endpoint_for_address(address))


def test_create_submits_once_and_is_idempotent(ray_head, tmp_path):
    provider = JobProvider()
    props = props_for(tmp_path, ray_head, "prov-create", "sleep 60")
    created = provider.create(props)
    run = props["submission"]["metadata"]["run"]
    assert created.id == "prov-create"
    assert created.outs["run"] == run and created.outs["submission_id"] == f"{run}-1"
    assert created.outs["submission"] == props["submission"]
    again = provider.create(props)
    assert again.outs["submission_id"] == f"{run}-1"
    client = client_of(ray_head)
    assert [job.submission_id for job in attempts(client, run)] == [f"{run}-1"]

    provider.delete(created.id, created.outs)
    assert status_of(client, f"{run}-1") == "STOPPED"


def test_diff_watches_the_spec_the_cluster_and_the_nodes_but_not_the_token(ray_head, tmp_path):
    provider = JobProvider()
    olds = props_for(tmp_path, ray_head, "prov-diff", "sleep 60")
    assert not provider.diff("prov-diff", olds, dict(olds)).changes
    assert not provider.diff("prov-diff", olds, {**olds, "kubeconfig": "other", "ready_timeout_seconds": 9}).changes
    changed_spec = props_for(tmp_path, ray_head, "prov-diff", "sleep 61")
    for news in (changed_spec, {**olds, "cluster_uid": "uid-2"}, {**olds, "gpu_nodes": 2}):
        result = provider.diff("prov-diff", olds, news)
        assert result.changes and not result.replaces


def test_update_with_a_changed_spec_stops_the_old_run_and_submits_the_new(ray_head, tmp_path):
    provider = JobProvider()
    olds = provider.create(props_for(tmp_path, ray_head, "prov-update", "sleep 60")).outs
    news = props_for(tmp_path, ray_head, "prov-update", "sleep 61")
    assert news["submission"]["metadata"]["run"] != olds["run"]
    updated = provider.update("prov-update", olds, news)
    client = client_of(ray_head)
    assert status_of(client, olds["submission_id"]) == "STOPPED"
    assert updated.outs["submission_id"] == f"{news['submission']['metadata']['run']}-1"
    assert status_of(client, updated.outs["submission_id"]) in ("PENDING", "RUNNING")
    provider.delete("prov-update", updated.outs)
    assert status_of(client, updated.outs["submission_id"]) == "STOPPED"


def test_update_after_the_cluster_was_replaced_resubmits_the_same_run(ray_head, tmp_path):
    provider = JobProvider()
    olds = provider.create(props_for(tmp_path, ray_head, "prov-recreate", "sleep 60")).outs
    run = olds["run"]
    provider.delete("prov-recreate", olds)
    news = {**props_for(tmp_path, ray_head, "prov-recreate", "sleep 60"), "cluster_uid": "uid-2"}
    updated = provider.update("prov-recreate", olds, news)
    assert updated.outs["run"] == run
    assert updated.outs["submission_id"] == f"{run}-2"
    provider.delete("prov-recreate", updated.outs)


def test_a_job_that_can_never_be_placed_fails_create_with_a_clear_message(ray_head, tmp_path):
    props = props_for(tmp_path, ray_head, "prov-unplaceable", "sleep 60", gpu_nodes=2)
    with pytest.raises(Exception, match=r"can never be placed: 1 of 2 Ray nodes with 8 GPUs are up.*missing 1"):
        JobProvider().create(props)
    assert attempts(client_of(ray_head), props["submission"]["metadata"]["run"]) == []


def test_an_unreachable_cluster_fails_create_but_not_delete(tmp_path):
    with refusing_address() as address:
        props = props_for(tmp_path, address, "prov-gone", "sleep 60")
        with pytest.raises(Exception, match="cannot reach the Ray dashboard"):
            JobProvider().create(props)
        JobProvider().delete("prov-gone", props)


@pytest.fixture
def short_stop(monkeypatch) -> None:
    """Stopping waits 1 s for an attempt to end instead of job_client.DEADLINES.stop."""
    monkeypatch.setattr(job_client, "DEADLINES", job_client.Deadlines(stop=1.0))


def submit_pending(address: str, props: dict) -> str:
    """Submit attempt 1 of the props' run so that it stays PENDING (it asks for a resource no node has,
    and a PENDING job ignores stop_job until Ray's job start timeout); return its id."""
    return client_of(address).submit_job(**props["submission"], entrypoint_resources={"grpo-gke-absent": 1})


def test_update_stops_the_old_run_through_the_new_inputs_not_the_stale_state(ray_head, tmp_path):
    provider = JobProvider()
    created = provider.create(props_for(tmp_path, ray_head, "prov-stale", "sleep 60")).outs
    with refusing_address() as dead:
        stale = {**created, "address": dead}
        updated = provider.update("prov-stale", stale, props_for(tmp_path, ray_head, "prov-stale", "sleep 61"))
    assert status_of(client_of(ray_head), created["submission_id"]) == "STOPPED"
    provider.delete("prov-stale", updated.outs)


def test_update_fails_naming_an_old_attempt_that_does_not_stop_in_time(pending_ray_head, short_stop, tmp_path):
    olds = props_for(tmp_path, pending_ray_head, "prov-pending-update", "sleep 60")
    pending = submit_pending(pending_ray_head, olds)
    news = props_for(tmp_path, pending_ray_head, "prov-pending-update", "sleep 61")
    with pytest.raises(Exception) as raised:
        JobProvider().update("prov-pending-update", olds, news)
    assert str(raised.value) == (
        f"grpo-gke job {news['submission']['metadata']['run']}: cannot stop the old run"
        f" {olds['submission']['metadata']['run']}: {pending} did not stop within 1 s; Ray still shows it live"
    )
    assert status_of(client_of(pending_ray_head), pending) == "PENDING"
    assert attempts(client_of(pending_ray_head), news["submission"]["metadata"]["run"]) == []


def test_delete_warns_and_returns_when_an_attempt_does_not_stop_in_time(pending_ray_head, short_stop, capsys, tmp_path):
    props = props_for(tmp_path, pending_ray_head, "prov-pending-delete", "sleep 60")
    pending = submit_pending(pending_ray_head, props)
    JobProvider().delete("prov-pending-delete", props)
    assert capsys.readouterr().err == (
        f"grpo-gke job: warning: {props['submission']['metadata']['run']} not stopped ({pending} did not stop"
        " within 1 s; Ray still shows it live); deleting the RayCluster ends it\n"
    )


def test_update_fails_when_ray_refuses_to_stop_the_old_run(ray_head, monkeypatch, tmp_path):
    from ray.job_submission import JobSubmissionClient

    provider = JobProvider()
    olds = provider.create(props_for(tmp_path, ray_head, "prov-refused", "sleep 60")).outs
    news = props_for(tmp_path, ray_head, "prov-refused", "sleep 61")

    def refuse(_client, _submission_id: str) -> bool:
        raise RuntimeError("Request failed with status code 500: stop refused.")

    monkeypatch.setattr(JobSubmissionClient, "stop_job", refuse)
    with pytest.raises(Exception, match=r"cannot stop the old run .*: Ray refused to stop .*-1: Request failed"):
        provider.update("prov-refused", olds, news)
    monkeypatch.undo()
    assert status_of(client_of(ray_head), olds["submission_id"]) in job_client.LIVE
    provider.delete("prov-refused", olds)


PREEMPTED = (
    "echo 'ray.exceptions.ActorDiedError: The actor died because its node has died."
    " (a stand-in for a preempted GPU worker pod)'; exit 1"
)
"""An attempt that fails at once the way a preempted worker pod makes verl fail: lost capacity, which the guardian
recovers."""


def test_the_guardian_and_the_provider_submitting_at_once_start_one_attempt_and_ray_refuses_the_second(
    ray_head, tmp_path, monkeypatch, capsys
):
    """Attempt 1 was lost with its GPU capacity: the guardian recorded it `failed` and `recovering` and submits attempt
    2 while `pulumi up`'s provider submits the run too. Both compute `<run>-2` (one numbering), both reach Ray's
    submit_job at the same moment (a barrier holds the first until the second arrives), Ray takes one and refuses the
    other's id (ray 2.60.0 dashboard/modules/job/job_manager.py L549-556), and the one refused says so: one live attempt
    on the run directory, not two."""
    import threading

    from incluster.guardian.loop import Guardian, Hooks
    from incluster.guardian.policy import Backoff, decide
    from incluster.guardian.settings import settings_from
    from incluster.record import read
    from jobs.guardian.settings import guardian_settings

    config = config_of("dev", stack="prov-race", job={"preflight": "off"})
    submission = on_data_root(submission_of(config, training_spec(config, PREEMPTED), 1), str(tmp_path))
    run = submission["metadata"]["run"]
    props = {
        **props_for(tmp_path, ray_head, "prov-race", PREEMPTED, ready_timeout_seconds=30),
        "submission": submission,
    }
    provider = JobProvider()
    assert provider.create(props).outs["submission_id"] == f"{run}-1"
    lines: list[str] = []
    values = {**guardian_settings(config), "run": run, "submission": submission}
    guardian = Guardian(settings_from(values, "test"), endpoint_for_address(ray_head), Hooks(), lines.append,
                        backoff=Backoff(0, 0), settle=1.0)  # fmt: skip
    deadline = time.monotonic() + 60
    while (action := decide(guardian.observe())).kind != "recover":
        assert time.monotonic() < deadline, f"the guardian never decided to recover; last: {action}"
        if action.kind == "record":
            guardian.apply(action)
        else:
            time.sleep(0.5)
    assert [(item["attempt"], item["event"]) for item in read(Path(run_dir_of(submission)))] == [
        (1, "failed"),
        (1, "recovering"),
    ]

    client_type = job_client._client_type()
    submit_job = client_type.submit_job
    both_there = threading.Barrier(2, timeout=60)

    def at_once(self, **kwargs):
        if kwargs.get("submission_id") == f"{run}-2":
            both_there.wait()
        return submit_job(self, **kwargs)

    monkeypatch.setattr(client_type, "submit_job", at_once)
    failures: list[BaseException] = []

    def guardian_submits() -> None:
        try:
            guardian.apply(action)
        except BaseException as error:  # noqa: BLE001 - re-raised below
            failures.append(error)

    thread = threading.Thread(target=guardian_submits, daemon=True)
    thread.start()
    capsys.readouterr()
    outs = provider.update("prov-race", props, {**props, "cluster_uid": "uid-2"}).outs
    thread.join(90)
    assert not thread.is_alive() and not failures, failures
    assert outs["submission_id"] == f"{run}-2"
    client = client_of(ray_head)
    assert [job.submission_id for job in attempts(client, run)] == [f"{run}-1", f"{run}-2"]
    refused = f"{run}-2 was submitted by another submitter first"
    said = [line for line in (*lines, *capsys.readouterr().err.splitlines()) if refused in line]
    assert len(said) == 1, lines
    events = [(item["attempt"], item["event"]) for item in read(Path(run_dir_of(submission)))]
    guardian_won = said[0].startswith("grpo-gke job: ")
    assert events == [(1, "failed"), (1, "recovering"), *([(2, "submitted")] if guardian_won else [])]
