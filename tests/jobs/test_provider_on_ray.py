"""The post-deploy dynamic provider's methods, called as the engine would, against a real local Ray head."""

from __future__ import annotations

import pytest

from jobs.control import attempts, connect, endpoint_for_address, status_of
from jobs.local_head import refusing_address
from jobs.provider import JobProvider
from jobs.spec import submission_of, training_spec
from tests.jobs.test_spec import config_of


def props_for(address: str, stack: str, entrypoint: str, **changes) -> dict:
    """Inputs of the dynamic resource as build_job gives them, with the address override."""
    config = config_of("dev", stack=stack)
    props = {
        "submission": submission_of(config, training_spec(config, entrypoint), 1),
        "kubeconfig": "",
        "address": address,
        "gpu_nodes": 1,
        "ready_timeout_seconds": 1,
        "cluster_uid": "uid-1",
        "run": None,
        "submission_id": None,
    }
    return {**props, **changes}


def client_of(address: str):
    return connect(endpoint_for_address(address))


def test_create_submits_once_and_is_idempotent(ray_head):
    provider = JobProvider()
    props = props_for(ray_head, "prov-create", "sleep 60")
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


def test_diff_watches_the_spec_the_cluster_and_the_nodes_but_not_the_token(ray_head):
    provider = JobProvider()
    olds = props_for(ray_head, "prov-diff", "sleep 60")
    assert not provider.diff("prov-diff", olds, dict(olds)).changes
    assert not provider.diff("prov-diff", olds, {**olds, "kubeconfig": "other", "ready_timeout_seconds": 9}).changes
    changed_spec = props_for(ray_head, "prov-diff", "sleep 61")
    for news in (changed_spec, {**olds, "cluster_uid": "uid-2"}, {**olds, "gpu_nodes": 2}):
        result = provider.diff("prov-diff", olds, news)
        assert result.changes and not result.replaces


def test_update_with_a_changed_spec_stops_the_old_run_and_submits_the_new(ray_head):
    provider = JobProvider()
    olds = provider.create(props_for(ray_head, "prov-update", "sleep 60")).outs
    news = props_for(ray_head, "prov-update", "sleep 61")
    assert news["submission"]["metadata"]["run"] != olds["run"]
    updated = provider.update("prov-update", olds, news)
    client = client_of(ray_head)
    assert status_of(client, olds["submission_id"]) == "STOPPED"
    assert updated.outs["submission_id"] == f"{news['submission']['metadata']['run']}-1"
    assert status_of(client, updated.outs["submission_id"]) in ("PENDING", "RUNNING")
    provider.delete("prov-update", updated.outs)
    assert status_of(client, updated.outs["submission_id"]) == "STOPPED"


def test_update_after_the_cluster_was_replaced_resubmits_the_same_run(ray_head):
    provider = JobProvider()
    olds = provider.create(props_for(ray_head, "prov-recreate", "sleep 60")).outs
    run = olds["run"]
    provider.delete("prov-recreate", olds)
    news = {**props_for(ray_head, "prov-recreate", "sleep 60"), "cluster_uid": "uid-2"}
    updated = provider.update("prov-recreate", olds, news)
    assert updated.outs["run"] == run
    assert updated.outs["submission_id"] == f"{run}-2"
    provider.delete("prov-recreate", updated.outs)


def test_a_job_that_can_never_be_placed_fails_create_with_a_clear_message(ray_head):
    props = props_for(ray_head, "prov-unplaceable", "sleep 60", gpu_nodes=2)
    with pytest.raises(Exception, match=r"can never be placed: 1 of 2 Ray nodes with 8 GPUs are up.*missing 1"):
        JobProvider().create(props)
    assert attempts(client_of(ray_head), props["submission"]["metadata"]["run"]) == []


def test_an_unreachable_cluster_fails_create_but_not_delete():
    with refusing_address() as address:
        props = props_for(address, "prov-gone", "sleep 60")
        with pytest.raises(Exception, match="cannot reach the Ray dashboard"):
            JobProvider().create(props)
        JobProvider().delete("prov-gone", props)
