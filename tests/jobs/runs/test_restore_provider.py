"""Unparking during `pulumi up`: the import resource's provider, with the Lustre and bucket stand-ins."""

from __future__ import annotations

import json
import pickle
import shutil

from incluster.google_token import Credential
from incluster.park import ParkRequest, holdings_of, park_run
from jobs.runs import restore_provider
from jobs.runs.restore_provider import RestoreProvider
from tests.support.lustre_stand_in import BUCKET, INSTANCE, RUN, StandInLustre, StandInObjects, a_run, tree

PROPS = {"bucket": BUCKET, "instance": INSTANCE, "instance_uid": "u-1", "deadline_seconds": 60, "marker_state": None}


def patched(monkeypatch, lustre, bucket):
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    monkeypatch.setattr(restore_provider, "user_credential", lambda user: Credential("token"))
    monkeypatch.setattr(restore_provider, "RestTransfers", lambda token: stand_in)
    monkeypatch.setattr(restore_provider, "RestObjects", lambda bucket_name, token: StandInObjects(bucket))
    monkeypatch.setattr("incluster.lustre_transfer.POLL_SECONDS", 0)
    return stand_in


def test_create_imports_a_parked_run_into_the_new_instance_and_marks_it_restored(tmp_path, monkeypatch, capfd):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    before = {name: data for name, data in tree(lustre).items() if not name.startswith("models/")}
    park_run(
        StandInLustre(lustre, bucket, BUCKET, INSTANCE), StandInObjects(bucket),
        ParkRequest(INSTANCE, BUCKET, "verl", RUN, 1, "verl", 8), holdings_of(lustre, "/checkpoints", "/exports", RUN),
        60, lambda line: None, poll=0,
    )  # fmt: skip
    shutil.rmtree(lustre)
    lustre.mkdir()
    stand_in = patched(monkeypatch, lustre, bucket)
    result = RestoreProvider().create(dict(PROPS))
    assert tree(lustre) == before
    assert (result.id, result.outs["marker_state"]) == (INSTANCE, "restored")
    assert json.loads((bucket / "parked" / "marker.json").read_text())["restoredInto"] == INSTANCE
    prefix = json.loads((bucket / "parked" / "marker.json").read_text())["prefix"]
    assert stand_in.requests == [("import", f"gs://{BUCKET}/{prefix}", "/")]
    assert capfd.readouterr().err.splitlines()[-1] == f"grpo-gke unpark: {INSTANCE}: restored"


def test_create_without_a_marker_imports_nothing(tmp_path, monkeypatch, capfd):
    stand_in = patched(monkeypatch, tmp_path / "lustre", tmp_path / "bucket")
    result = RestoreProvider().create(dict(PROPS))
    assert (result.outs["marker_state"], stand_in.requests) == ("nothing parked", [])
    assert capfd.readouterr().err == f"grpo-gke unpark: {INSTANCE}: nothing parked\n"


def test_only_another_instance_or_bucket_imports_again():
    provider = RestoreProvider()
    assert not provider.diff(INSTANCE, PROPS, {**PROPS, "deadline_seconds": 10}).changes
    replaced = provider.diff(INSTANCE, PROPS, {**PROPS, "instance_uid": "u-2"})
    assert (replaced.changes, replaced.replaces, replaced.delete_before_replace) == (True, ["instance_uid"], True)


def test_the_provider_pickles_as_an_import_of_its_module():
    dumped = pickle.dumps(RestoreProvider())
    assert b"jobs.runs.restore_provider" in dumped and b"co_code" not in dumped
    assert isinstance(pickle.loads(dumped), RestoreProvider)
