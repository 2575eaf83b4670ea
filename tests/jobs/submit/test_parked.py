"""Every client-side submitter marks a parked run's marker stale before it submits (jobs/submit/parked.py): the
post-deploy step here (`python -m jobs submit`: tests/jobs/test_cli_park.py; the guardian:
tests/incluster/test_guardian_park.py). The marker is the one park_run writes for the Lustre stand-in's run; the Ray
head, the GPU gate and the submission are patched at their boundary."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from core import names
from incluster.google_token import Credential
from incluster.park import ParkRequest, holdings_of, park_run, read_marker
from jobs.submit import parked, provider
from tests.support.lustre_stand_in import BUCKET, INSTANCE, RUN, StandInLustre, StandInObjects, a_run


@pytest.fixture
def parked_run(tmp_path, monkeypatch):
    """The stand-in run parked by park_run; the bucket's root. The parked bucket's client is the stand-in's."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    request = ParkRequest(INSTANCE, BUCKET, "verl", RUN, 1, "verl", 8)
    holdings = holdings_of(lustre, "/checkpoints", "/exports", RUN)
    park_run(StandInLustre(lustre, bucket, BUCKET, INSTANCE), StandInObjects(bucket), request, holdings, 60,
             lambda line: None, poll=0)  # fmt: skip
    monkeypatch.setattr(parked, "RestObjects", lambda name, headers: StandInObjects(bucket))
    monkeypatch.setattr(parked, "user_credential", lambda user: Credential("ya29.user", None))
    return bucket


def deploy_props(parked_bucket: str | None) -> dict:
    """The post-deploy step's inputs for a run on a local head (no kubeconfig)."""
    submission = {"metadata": {"run": RUN, "stack": "verl"}, "entrypoint": "x",
                  "runtime_env": {"env_vars": {"GRPO_RUN_DIR": f"/data/checkpoints/{RUN}"}}}  # fmt: skip
    return {"submission": submission, "address": "http://127.0.0.1:8265", "gpu_nodes": 1, "gpus_per_node": 8, "ready_timeout_seconds": 1,
            "parked_bucket": parked_bucket}  # fmt: skip


def test_the_post_deploy_step_marks_the_marker_stale_before_it_submits(parked_run, monkeypatch, capfd):
    seen: list[str] = []

    def ensure_run(client, submission, known):
        seen.append(json.loads((parked_run / names.PARK_MARKER).read_text())["state"])
        return SimpleNamespace(submission_id=f"{RUN}-2", sentence=lambda: "submitted")

    monkeypatch.setattr(provider, "connect", lambda endpoint: None)
    monkeypatch.setattr(provider, "next_step", lambda client, submission, known: SimpleNamespace(action="submitted"))
    monkeypatch.setattr(provider, "bring_back", lambda *args: None)
    monkeypatch.setattr(provider, "wait_for_gpus", lambda *args, **kwargs: None)
    monkeypatch.setattr(provider, "ensure_run", ensure_run)
    provider._deploy(deploy_props(BUCKET), fresh_cluster=False)
    assert seen == ["stale"]
    assert (
        read_marker(StandInObjects(parked_run))["staleBecause"] == "pulumi up's post-deploy step submitted an attempt"
    )
    assert f"the park marker of {RUN} is stale now" in capfd.readouterr().err


def test_a_run_with_nothing_to_submit_leaves_the_marker_parked(parked_run, monkeypatch):
    monkeypatch.setattr(provider, "connect", lambda endpoint: None)
    monkeypatch.setattr(provider, "next_step", lambda client, submission, known: SimpleNamespace(
        action="succeeded", submission_id=f"{RUN}-1", sentence=lambda: "succeeded"))  # fmt: skip
    monkeypatch.setattr(provider, "ensure_run", lambda *args: pytest.fail("nothing is submitted"))
    provider._deploy(deploy_props(BUCKET), fresh_cluster=False)
    assert read_marker(StandInObjects(parked_run))["state"] == "parked"


def test_a_marker_that_cannot_be_marked_fails_pulumi_up_before_it_submits(parked_run, monkeypatch):
    from incluster.lustre_transfer import TransferError

    def refused(objects, submitter):
        raise TransferError("writing gs://b/parked/marker.json: HTTP 403: denied")

    monkeypatch.setattr(parked, "mark_stale", refused)
    monkeypatch.setattr(provider, "connect", lambda endpoint: None)
    monkeypatch.setattr(provider, "next_step", lambda client, submission, known: SimpleNamespace(action="submitted"))
    monkeypatch.setattr(provider, "ensure_run", lambda *args: pytest.fail("submitted"))
    with pytest.raises(Exception, match=f"grpo-gke job {RUN}: writing gs://b/parked/marker.json: HTTP 403: denied"):
        provider._deploy(deploy_props(BUCKET), fresh_cluster=False)


def test_a_cloud_storage_stack_has_no_marker_to_mark(monkeypatch):
    monkeypatch.setattr(parked, "RestObjects", lambda name, headers: pytest.fail("no bucket is read"))
    parked.mark_parked_stale(None, "python -m jobs submit", print)
