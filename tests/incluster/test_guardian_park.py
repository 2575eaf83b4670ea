"""The guardian parks the run once the GPU workers are at zero (storage.parkWhenIdle): its park hook
(incluster/guardian/command.py cluster_hooks) exports what its mount of the instance holds (every run directory and
the exports root when there is one), as its Google service account (the metadata server's token), and the loop
records `parked` or `park-failed`. The guardian records `exported` itself once it sees the export job SUCCEEDED.
The Lustre API and the bucket are the stand-ins of tests/support/lustre_stand_in.py, which answer in the API's shapes
(its docstring cites them)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest

from core import names
from incluster import job_client, readiness, record, run_submission
from incluster.endpoint import Endpoint
from incluster.google_token import Credential, TokenError
from incluster.guardian import command
from incluster.guardian.command import cluster_hooks
from incluster.guardian.loop import ExportDone, Guardian
from incluster.guardian.policy import Action, AttemptView, State, decide
from incluster.guardian.settings import ParkTarget, Settings, settings_from
from incluster.lustre_transfer import TransferError
from jobs.guardian.settings import guardian_settings
from tests.conftest import LUSTRE, config_of
from tests.support.lustre_stand_in import BUCKET, INSTANCE, RUN, StandInLustre, StandInObjects, a_run, tree

PARK = Action("park", 1, "attempt 1 SUCCEEDED; the GPU workers are at zero: parking the run (storage.parkWhenIdle)")
"""The policy's park decision (tests/incluster/test_guardian.py checks when it is made)."""


def parking_settings(lustre: Path) -> Settings:
    """A parking Lustre stack's guardian settings, its run RUN on the stand-in instance whose root is `lustre`."""
    settings = settings_from(guardian_settings(config_of("dev", storage={**LUSTRE, "parkWhenIdle": True})), "test")
    runtime = settings.submission["runtime_env"]
    env = {**runtime["env_vars"], "GRPO_RUN_DIR": str(lustre / "checkpoints" / RUN)}
    target = ParkTarget(INSTANCE, BUCKET, f"/checkpoints/{RUN}", f"/exports/{RUN}", 60)
    return replace(
        settings, run=RUN, submission={**settings.submission, "runtime_env": {**runtime, "env_vars": env}}, park=target
    )


@pytest.fixture
def parking(tmp_path, monkeypatch):
    """A guardian of a parking stack whose hooks reach the stand-in instance and bucket with a metadata server's
    token; returns (guardian, lustre root, bucket root, the headers each client was given)."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    given: list[dict[str, str]] = []

    def transfers(headers):
        given.append(dict(headers))
        return StandInLustre(lustre, bucket, BUCKET, INSTANCE)

    def objects(name, headers):
        assert name == BUCKET
        given.append(dict(headers))
        return StandInObjects(bucket)

    monkeypatch.setattr(command, "RestTransfers", transfers)
    monkeypatch.setattr(command, "RestObjects", objects)
    monkeypatch.setattr(command.lustre_transfer, "POLL_SECONDS", 0)
    monkeypatch.setattr(job_client, "connect", lambda endpoint: None)
    settings = parking_settings(lustre)
    endpoint = Endpoint(address="http://grpo-head-svc:8265")
    hooks = cluster_hooks(settings, endpoint, lambda: Credential("ya29.guardian", None), lambda line: None)
    guardian = Guardian(settings, endpoint, hooks, lambda line: None, clock=lambda: 1796130000.0)
    return guardian, lustre, bucket, given


class ExportJobs:
    """The Ray head as the guardian asks it of the export job: its status (ray.job_submission get_job_status)."""

    def __init__(self, status: str) -> None:
        self.status = status

    def get_job_status(self, submission_id: str) -> str:
        assert submission_id == f"{RUN}-export-step-6"
        return self.status


def export_and_see_it_finish(guardian: Guardian) -> None:
    """The guardian's own export flow: `succeeded`, the export decided and submitted (the hook answers as
    cluster_hooks' does), then the export job SUCCEEDED on the Ray head and the guardian's `exported`."""
    submission = f"{RUN}-export-step-6"
    guardian.hooks = replace(
        guardian.hooks, export=lambda request: ExportDone(submission, f"{submission} exports step 6")
    )
    run_dir = guardian.settings.run_dir
    view = AttemptView(1, "SUCCEEDED", start=1796126400.0, end=1796129000.0)

    def decided() -> Action:
        recorded = {item["event"]: item for item in record.read(run_dir) if item.get("attempt") == 1}
        state = State(now=1796130000.0, settings=guardian.settings, newest=view, recorded=recorded, can_export=True,
                      export_status=guardian.export_status(recorded))  # fmt: skip
        return decide(state)

    guardian.apply(decided())
    guardian.apply(decided())
    assert record.read(run_dir)[-1]["event"] == "export-submitted"
    guardian.client = ExportJobs("RUNNING")
    assert decided().kind != "record"
    guardian.client = ExportJobs("SUCCEEDED")
    guardian.apply(decided())


def test_the_guardian_parks_every_file_of_the_run_and_its_exports_and_records_it(parking):
    guardian, lustre, bucket, given = parking
    export_and_see_it_finish(guardian)
    entries = record.read(guardian.settings.run_dir)
    assert [item["event"] for item in entries] == ["submitted", "succeeded", "export-submitted", "exported"]
    assert entries[-1]["reason"] == f"the export {RUN}-export-step-6 SUCCEEDED"
    run_files = {k: v for k, v in tree(lustre).items() if k.startswith(("checkpoints/", "exports/"))}
    guardian.apply(PARK)
    marker = json.loads((bucket / names.PARK_MARKER).read_text())
    # Every file as it stood when parking began: the record's own `parked` entry comes after the export.
    assert tree(bucket / marker["prefix"]) == run_files
    assert (marker["state"], marker["run"], marker["step"], marker["attempt"]) == ("parked", RUN, 6, 1)
    assert (marker["runs"], marker["exports"]) == ([RUN], [RUN])
    entry = record.read(guardian.settings.run_dir)[-1]
    objects = sum(marker["objects"].values())
    assert objects == len(run_files)
    assert (entry["event"], entry["attempt"], entry["details"]) == (
        "parked",
        1,
        {"bucket": BUCKET, "step": 6, "objects": objects},
    )
    assert entry["reason"] == (
        f"{objects} objects (step 6) in gs://{BUCKET}/{marker['prefix']}; the Lustre instance bills on until"
        " storage.parked true and pulumi up delete it"
    )
    assert given == [{"Authorization": "Bearer ya29.guardian"}] * 2


def test_exports_on_the_instance_are_parked_whatever_the_record_says(parking):
    """The record says nothing of an export (the export job of an earlier guardian, or `python -m jobs export`):
    the exports on the instance are parked all the same."""
    guardian, lustre, bucket, _ = parking
    assert "exported" not in [item["event"] for item in record.read(guardian.settings.run_dir)]
    guardian.apply(PARK)
    marker = json.loads((bucket / names.PARK_MARKER).read_text())
    assert tree(bucket / marker["prefix"] / "exports") == tree(lustre / "exports")


def test_a_run_that_never_exported_parks_its_directory_alone(parking):
    guardian, lustre, bucket, _ = parking
    shutil.rmtree(lustre / "exports")
    guardian.apply(PARK)
    marker = json.loads((bucket / names.PARK_MARKER).read_text())
    assert (marker["roots"], marker["exports"]) == (["/checkpoints"], None)
    assert record.read(guardian.settings.run_dir)[-1]["event"] == "parked"


def test_the_guardian_marks_a_parked_marker_stale_before_it_submits(parking, monkeypatch):
    guardian, lustre, bucket, _ = parking
    guardian.apply(PARK)
    submitted: list[str] = []
    monkeypatch.setattr(readiness, "wait_for_gpus", lambda *args, **kwargs: None)
    monkeypatch.setattr(guardian, "preflight", lambda attempt: True)

    def ensure_run(client, submission, known, deadline_stop_of=None, after=0):
        submitted.append(json.loads((bucket / names.PARK_MARKER).read_text())["state"])
        return SimpleNamespace(action="resumed", submission_id=f"{RUN}-2", sentence=lambda: "")

    monkeypatch.setattr(run_submission, "ensure_run", ensure_run)
    guardian.submit(1, "the schedule asks for more")
    assert submitted == ["stale"]
    assert json.loads((bucket / names.PARK_MARKER).read_text())["staleBecause"] == (
        "the run guardian submitted an attempt"
    )


def test_a_guardian_that_cannot_mark_the_marker_stale_does_not_submit(parking, monkeypatch):
    guardian, *_ = parking
    monkeypatch.setattr(readiness, "wait_for_gpus", lambda *args, **kwargs: None)
    monkeypatch.setattr(guardian, "preflight", lambda attempt: True)
    monkeypatch.setattr(run_submission, "ensure_run", lambda *args, **kwargs: pytest.fail("submitted"))
    lines: list[str] = []

    def refused() -> str:
        raise TransferError("writing gs://b/parked/marker.json: HTTP 403: denied")

    guardian.hooks, guardian.report = replace(guardian.hooks, mark_stale=refused), lines.append
    guardian.submit(1, "the schedule asks for more")
    assert lines == [
        f"{RUN}: not submitting: the park marker cannot be marked stale: writing gs://b/parked/marker.json: HTTP 403:"
        " denied"
    ]


def test_a_failed_park_is_recorded_with_its_reason_and_not_raised(parking, monkeypatch):
    """A fault at the boundary: one shard of the run fails to copy (the Operation's objectsFailedCount)."""
    guardian, lustre, bucket, _ = parking

    def transfers(headers):
        stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
        stand_in.failing = {f"{RUN}/global_step_6/data.pt"}
        return stand_in

    monkeypatch.setattr(command, "RestTransfers", transfers)
    guardian.hooks = cluster_hooks(
        guardian.settings, guardian.endpoint, lambda: Credential("ya29.guardian", None), lambda line: None
    )
    guardian.apply(PARK)
    entry = record.read(guardian.settings.run_dir)[-1]
    assert entry["event"] == "park-failed"
    assert entry["reason"] == (
        "exporting /checkpoints is not whole: 55 of 56 objects copied, 1 failed; PERMISSION_DENIED x1:"
        f" {RUN}/global_step_6/data.pt permission denied; python -m jobs park parks it by hand"
    )
    assert json.loads((bucket / names.PARK_MARKER).read_text())["state"] == "parking"


def test_no_google_token_is_a_park_failed_entry_that_says_what_to_link(parking):
    guardian, *_ = parking

    def no_token() -> Credential:
        raise TokenError("the metadata server gave no access token (HTTP 404): is the pod's Kubernetes service"
                         " account linked to a Google service account (iam.gke.io/gcp-service-account)?")  # fmt: skip

    guardian.hooks = cluster_hooks(guardian.settings, guardian.endpoint, no_token, lambda line: None)
    guardian.apply(PARK)
    entry = record.read(guardian.settings.run_dir)[-1]
    assert (entry["event"], entry["reason"]) == (
        "park-failed",
        "the metadata server gave no access token (HTTP 404): is the pod's Kubernetes service account linked to a"
        " Google service account (iam.gke.io/gcp-service-account)?; python -m jobs park parks it by hand",
    )
