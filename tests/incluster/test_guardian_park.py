"""The guardian parks the run once the GPU workers are at zero (storage.parkWhenIdle): its park hook
(incluster/guardian/command.py cluster_hooks) exports the run's directory and, once the record says it exported,
its exports directory, as its Google service account (the metadata server's token), and the loop records `parked` or
`park-failed`. The Lustre API and the bucket are the stand-ins of tests/support/lustre_stand_in.py, which behave as
the API documents (its docstring cites it)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from core import names
from incluster import job_client, record
from incluster.endpoint import Endpoint
from incluster.google_token import Credential, TokenError
from incluster.guardian import command
from incluster.guardian.command import cluster_hooks
from incluster.guardian.loop import Guardian
from incluster.guardian.policy import Action
from incluster.guardian.settings import ParkTarget, Settings, settings_from
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


def test_the_guardian_parks_every_file_of_the_run_and_its_exports_and_records_it(parking):
    guardian, lustre, bucket, given = parking
    run_files = {k: v for k, v in tree(lustre).items() if k.startswith((f"checkpoints/{RUN}/", f"exports/{RUN}/"))}
    guardian.apply(PARK)
    # Every file as it stood when parking began: the record's own `parked` entry comes after the export.
    assert tree(bucket / names.PARK_PREFIX) == run_files
    marker = json.loads((bucket / names.PARK_MARKER).read_text())
    assert (marker["state"], marker["run"], marker["step"]) == ("parked", RUN, 6)
    entry = record.read(guardian.settings.run_dir)[-1]
    objects = sum(item["objects"] for item in marker["exported"].values())
    assert objects == len(run_files)
    assert (entry["event"], entry["attempt"], entry["details"]) == (
        "parked",
        1,
        {"bucket": BUCKET, "step": 6, "objects": objects},
    )
    assert entry["reason"] == (
        f"{objects} objects (step 6) in gs://{BUCKET}/; the Lustre instance bills on until storage.parked true and"
        " pulumi up delete it"
    )
    assert given == [{"Authorization": "Bearer ya29.guardian"}] * 2


def test_a_run_that_never_exported_parks_its_directory_alone(parking):
    guardian, lustre, bucket, _ = parking
    record_file = guardian.settings.run_dir / record.RECORD_FILE
    record_file.write_text('{"attempt": 1, "event": "submitted"}\n')
    guardian.apply(PARK)
    assert json.loads((bucket / names.PARK_MARKER).read_text())["exported"].keys() == {f"/checkpoints/{RUN}"}
    assert record.read(guardian.settings.run_dir)[-1]["event"] == "parked"


def test_a_failed_park_is_recorded_with_its_reason_and_not_raised(parking):
    guardian, lustre, bucket, _ = parking
    guardian.settings = replace(guardian.settings, park=replace(guardian.settings.park, run_path="/checkpoints/gone"))
    guardian.hooks = cluster_hooks(
        guardian.settings, guardian.endpoint, lambda: Credential("ya29.guardian", None), lambda line: None
    )
    guardian.apply(PARK)
    entry = record.read(guardian.settings.run_dir)[-1]
    assert entry["event"] == "park-failed"
    assert entry["reason"].startswith("exporting /checkpoints/gone failed (code 5): ")
    assert entry["reason"].endswith("; python -m jobs park parks it by hand")
    assert not (bucket / names.PARK_MARKER).exists()


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
