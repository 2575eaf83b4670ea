"""The park guard: what the Lustre instance's deletion waits on, and its refusal while the run is not parked.

The guard's inputs come from the program run under the mocks; the marker it reads is written by the project's own
park (incluster/park.py park_run) and import (the unpark resource's provider) against the Lustre and bucket
stand-ins, never by hand."""

from __future__ import annotations

import pickle

import pytest
from pulumi.runtime import rpc

from core import names
from incluster.google_token import Credential
from incluster.lustre_transfer import TransferError
from incluster.park import ParkRequest, holdings_of, park_run
from jobs.runs import park_guard, restore_provider
from jobs.runs.park_guard import ParkGuardProvider
from jobs.runs.restore_provider import RestoreProvider
from jobs.spec.training import training_spec
from tests.conftest import combination_config
from tests.infra.conftest import depends_on
from tests.support.lustre_stand_in import RUN, StandInLustre, StandInObjects, a_run

GUARD = "pulumi-python:dynamic:Resource"
UNKEPT = {"storage": {"keepOnDestroy": False}}
"""A Lustre stack whose instance `pulumi destroy` deletes (what parking needs)."""


def guard_props(infra_run, **sections) -> dict:
    """The guard's inputs as the program registers them for the standard B200 Lustre stack `test`."""
    return dict(infra_run("standard", "b200", "lustre", **sections).one(GUARD, names.PARK_GUARD).inputs)


@pytest.fixture
def bucket_of(tmp_path, monkeypatch):
    """The parked bucket's directory, which the guard and the unpark resource read through the bucket stand-in."""
    bucket = tmp_path / "bucket"
    monkeypatch.setattr(park_guard, "user_credential", lambda user: Credential("token"))
    monkeypatch.setattr(park_guard, "RestObjects", lambda name, headers: StandInObjects(bucket))
    return bucket


def park(props: dict, lustre, bucket) -> None:
    """The run of the guard's config parked by the project's park, on the stand-ins (the stand-in's run directory
    named as the config's run)."""
    config = combination_config("standard", "b200", "lustre", **UNKEPT)
    a_run(lustre)
    run = training_spec(config).run
    (lustre / "checkpoints" / RUN).rename(lustre / "checkpoints" / run)
    transfers = StandInLustre(lustre, bucket, props["bucket"], props["instance"])
    request = ParkRequest(props["instance"], props["bucket"], config.stack, run, 1, "verl", 8)
    holdings = holdings_of(lustre, "/checkpoints", "/exports", run)
    park_run(transfers, StandInObjects(bucket), request, holdings, 60, lambda line: None, poll=0)


def test_the_instance_waits_on_the_guard_through_inputs_taken_from_it(infra_run):
    recording = infra_run("standard", "b200", "lustre", **UNKEPT)
    guard, instance = recording.one(GUARD, names.PARK_GUARD), recording.one("gcp:lustre/instance:Instance")
    assert depends_on(recording, guard) == {instance.name}
    for key in park_guard.REPLACING_INPUTS:
        assert (instance.urn,) == guard.property_dependencies[key], f"{key} is taken from the instance"
    assert guard.inputs["instance"] == "projects/my-grpo-project/locations/us-central1-b/instances/grpo-test-lustre"
    assert (guard.inputs["bucket"], guard.inputs["kept"]) == ("grpo-test-parked-7b5ca2ad", False)
    assert "hfToken" not in guard.inputs["config"] and '"type": "lustre"' in guard.inputs["config"]
    assert guard.delete_before_replace


@pytest.mark.parametrize(
    "storage,sections", [("gcs", {}), ("lustre", {"storage": {"parked": True, **UNKEPT["storage"]}})]
)
def test_no_guard_without_an_instance(infra_run, storage, sections):
    recording = infra_run("standard", "b200", storage, **sections)
    assert [r for r in recording.by_type(GUARD) if r.name == names.PARK_GUARD] == []


def test_an_unknown_instance_replaces_the_guard_so_a_replaced_instance_deletes_it_first(infra_run):
    """calculateDependentReplacements diffs a dependent with the inputs from the replaced resource unknown."""
    props = guard_props(infra_run, **UNKEPT)
    diff = ParkGuardProvider().diff(props["instance"], props, {**props, "instance": rpc.UNKNOWN})
    assert (diff.changes, diff.replaces, diff.delete_before_replace) == (True, ["instance"], True)
    kept = ParkGuardProvider().diff(props["instance"], props, {**props, "kept": True})
    assert (kept.changes, kept.replaces) == (True, []), "keepOnDestroy updates the guard in place"
    assert not ParkGuardProvider().diff(props["instance"], props, dict(props)).changes


def test_a_parked_run_lets_the_instance_go(infra_run, bucket_of, tmp_path, capfd):
    props = guard_props(infra_run, **UNKEPT)
    park(props, tmp_path / "lustre", bucket_of)
    ParkGuardProvider().delete(props["instance"], props)
    assert capfd.readouterr().err == (
        f"grpo-gke park guard: the run on {props['instance']} is parked in gs://{props['bucket']}/: deleting the"
        " instance\n"
    )


def test_a_config_whose_spec_changed_since_the_park_is_refused_naming_both_runs(infra_run, bucket_of, tmp_path):
    """The park parked the run of the config (learning rate as shipped); the last `pulumi up` changed the learning
    rate, so the kept config names another run of the same stack, which the park did not export."""
    parked = combination_config("standard", "b200", "lustre", **UNKEPT)
    props = guard_props(infra_run, **UNKEPT, grpo={"learningRate": 2e-6})
    park(props, tmp_path / "lustre", bucket_of)
    edited = training_spec(combination_config("standard", "b200", "lustre", **UNKEPT, grpo={"learningRate": 2e-6}))
    assert edited.run != training_spec(parked).run
    with pytest.raises(Exception) as refused:
        ParkGuardProvider().delete(props["instance"], props)
    assert (
        f"parked {training_spec(parked).run} of stack 'test', and this config names the run {edited.run} (its spec"
        " changed since the park)"
    ) in str(refused.value)


def test_a_run_imported_back_is_refused_with_what_to_do(infra_run, bucket_of, tmp_path, monkeypatch):
    props = guard_props(infra_run, **UNKEPT)
    lustre = tmp_path / "lustre"
    park(props, lustre, bucket_of)
    monkeypatch.setattr(restore_provider, "user_credential", lambda user: Credential("token"))
    monkeypatch.setattr(
        restore_provider,
        "RestTransfers",
        lambda headers: StandInLustre(lustre, bucket_of, props["bucket"], props["instance"]),
    )
    monkeypatch.setattr(restore_provider, "RestObjects", lambda name, headers: StandInObjects(bucket_of))
    RestoreProvider().create({"bucket": props["bucket"], "instance": props["instance"], "deadline_seconds": 60})
    with pytest.raises(Exception) as refused:
        ParkGuardProvider().delete(props["instance"], props)
    message = str(refused.value)
    assert message.startswith(
        f"grpo-gke park guard: refusing to delete the Lustre instance {props['instance']} (pulumi destroy,"
        " storage.parked true or an edit that replaces it) with a run on it that is not parked: grpo-gke:storage.parked"
    )
    assert "says 'restored', not 'parked'" in message and "\n" not in message
    assert message.endswith(
        "To delete it with the run anyway: pulumi state delete"
        " 'urn:pulumi:test::grpo-gke::pulumi-python:dynamic:Resource::park-guard' --stack test, then run the command"
        " again"
    )


def test_a_run_never_parked_is_refused(infra_run, bucket_of):
    props = guard_props(infra_run, **UNKEPT)
    with pytest.raises(Exception, match=r"parked/marker.json does not exist: the run is not parked"):
        ParkGuardProvider().delete(props["instance"], props)


def test_an_unreadable_marker_is_refused(infra_run, monkeypatch):
    """A fault at the bucket boundary: objects.get answers no status (TransferError), so nothing is deleted."""

    class Unreachable:
        def read(self, name: str) -> None:
            raise TransferError(f"reading {name}: no answer: ConnectTimeout")

    monkeypatch.setattr(park_guard, "user_credential", lambda user: Credential("token"))
    monkeypatch.setattr(park_guard, "RestObjects", lambda name, headers: Unreachable())
    props = guard_props(infra_run, **UNKEPT)
    with pytest.raises(Exception, match=r"refusing to delete .*: cannot read gs://grpo-test-parked-7b5ca2ad/parked/"):
        ParkGuardProvider().delete(props["instance"], props)


def test_an_instance_kept_on_destroy_is_not_guarded(infra_run, monkeypatch, capfd):
    monkeypatch.setattr(park_guard, "RestObjects", lambda name, headers: pytest.fail("nothing to read"))
    props = guard_props(infra_run)
    assert props["kept"] is True
    ParkGuardProvider().delete(props["instance"], props)
    assert "is kept on destroy (storage.keepOnDestroy): nothing to guard" in capfd.readouterr().err


def test_the_provider_pickles_as_an_import_of_its_module():
    dumped = pickle.dumps(ParkGuardProvider())
    assert b"jobs.runs.park_guard" in dumped and b"co_code" not in dumped
    assert isinstance(pickle.loads(dumped), ParkGuardProvider)
