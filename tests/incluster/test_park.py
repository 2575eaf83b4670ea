"""Parking a Lustre stack's runs in its bucket and bringing them back: nothing is lost on the way. The instance and the
bucket are the stand-ins of tests/support/lustre_stand_in.py (Managed Lustre v1's shapes, cited there); every park
reads its Holdings from the stand-in instance with the code the guardian uses (holdings_of)."""

from __future__ import annotations

import json
import shutil
from itertools import count

import pytest

from core import names
from incluster.lustre_transfer import RestObjects, RestTransfers, TransferError, wait_for
from incluster.park import (
    PARKED,
    PARKING,
    RESTORED,
    STALE,
    ParkRequest,
    holdings_of,
    mark_stale,
    newest_complete_step,
    park_run,
    read_marker,
    restore_run,
)
from tests.support.lustre_stand_in import (
    BUCKET,
    INSTANCE,
    RUN,
    StandInLustre,
    StandInObjects,
    a_run,
    google_apis,
    stand_in_apis,
    tree,
    write,
)

REQUEST = ParkRequest(INSTANCE, BUCKET, "verl", RUN, 1, "verl", 8)
"""The park of the stand-in run (stack `verl`: RUN is `verl-qwen-<hash>`)."""


def clock():
    """A fresh `now` for each park: 01:00:00Z, 01:00:01Z, ..."""
    ticks = count()
    return lambda: f"2026-12-02T01:00:{next(ticks):02d}Z"


def park(lustre, bucket, stand_in=None, now=None, run=RUN):
    """park_run of what the stand-in instance at `lustre` holds, as the guardian's hook calls it."""
    stand_in = stand_in or StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    holdings = holdings_of(lustre, "/checkpoints", "/exports", run)
    request = ParkRequest(INSTANCE, BUCKET, "verl", run, 1, "verl", 8)
    return park_run(stand_in, StandInObjects(bucket), request, holdings, 60, lambda line: None, now or clock(), 0)


def unpark(lustre, bucket):
    """The instance deleted and made anew, then restore_run into it; the restored marker."""
    shutil.rmtree(lustre)
    lustre.mkdir()
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    return restore_run(stand_in, StandInObjects(bucket), INSTANCE, BUCKET, 60, lambda line: None, poll=0)


def owned(lustre):
    """The run's files on the instance (staging's models are not the run's)."""
    return {name: data for name, data in tree(lustre).items() if not name.startswith("models/")}


def test_every_file_of_the_run_is_there_after_a_park_and_an_unpark(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    before = owned(lustre)
    lines: list[str] = []
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    holdings = holdings_of(lustre, "/checkpoints", "/exports", RUN)
    marker = park_run(stand_in, StandInObjects(bucket), REQUEST, holdings, 60, lines.append, clock(), 0)
    prefix = "parked/data/2026-12-02T010000Z/"
    assert marker == {
        "state": PARKED,
        "stack": "verl",
        "run": RUN,
        "attempt": 1,
        "step": 6,
        "framework": "verl",
        "worldSize": 8,
        "runs": [RUN],
        "exports": [RUN],
        "instance": INSTANCE,
        "prefix": prefix,
        "roots": ["/checkpoints", "/exports"],
        "replaces": 0,
        "objects": {"/checkpoints": 56, "/exports": 2},
        "startedAt": "2026-12-02T01:00:00Z",
        "parkedAt": "2026-12-02T01:00:01Z",
    }
    assert json.loads((bucket / names.PARK_MARKER).read_text()) == marker
    assert stand_in.requests == [
        ("export", "/checkpoints", f"gs://{BUCKET}/{prefix}checkpoints/"),
        ("export", "/exports", f"gs://{BUCKET}/{prefix}exports/"),
    ]
    assert (
        lines
        == ["exporting /checkpoints: running for 0 s, 0.0 of 0.0 GiB"] * 2
        + ["exporting /exports: running for 0 s, 0.0 of 0.0 GiB"] * 2
    )

    restored = unpark(lustre, bucket)
    assert owned(lustre) == before
    assert (restored["state"], restored["restoredInto"]) == (RESTORED, INSTANCE)
    # A later up (the restore's resource unchanged, or made again) imports nothing over the running run.
    again = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    assert restore_run(again, StandInObjects(bucket), INSTANCE, BUCKET, 60, print, poll=0) == read_marker(
        StandInObjects(bucket)
    )
    assert again.requests == []


def test_a_step_deleted_after_a_park_does_not_come_back_at_the_next_unpark(tmp_path):
    """Exports are incremental and never delete at the destination: a second park into the first park's prefix
    would keep step 4, which keepCheckpoints pruned, and the unpark would bring it back."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    now = clock()
    park(lustre, bucket, now=now)
    run_dir = lustre / "checkpoints" / RUN
    shutil.rmtree(run_dir / "global_step_4")
    shutil.copytree(run_dir / "global_step_6", run_dir / "global_step_8")
    (run_dir / "latest_checkpointed_iteration.txt").write_text("8")
    before = owned(lustre)
    assert park(lustre, bucket, now=now)["step"] == 8
    unpark(lustre, bucket)
    assert owned(lustre) == before
    assert not (run_dir / "global_step_4").exists()


def test_every_run_directory_on_the_instance_is_parked_and_listed(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    other = lustre / "checkpoints" / "verl-qwen-ffffffffff"
    write(other / "attempts.jsonl", '{"attempt": 1}\n')
    write(other / "global_step_2" / "data.pt", "x")
    before = owned(lustre)
    marker = park(lustre, bucket)
    assert marker["runs"] == [RUN, "verl-qwen-ffffffffff"]
    unpark(lustre, bucket)
    assert owned(lustre) == before


def test_a_park_whose_export_is_not_whole_is_left_parking_and_never_parked(tmp_path):
    """A fault at the boundary: one shard fails to copy; the Operation still ends with a response, and only its
    counters (objectsFailedCount, errorSummaries) say so."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    stand_in.failing = {f"{RUN}/global_step_6/actor/model_world_size_8_rank_3.pt"}
    with pytest.raises(TransferError) as raised:
        park(lustre, bucket, stand_in)
    assert str(raised.value) == (
        f"exporting /checkpoints is not whole: 55 of 56 objects copied, 1 failed; PERMISSION_DENIED x1:"
        f" {RUN}/global_step_6/actor/model_world_size_8_rank_3.pt permission denied"
    )
    assert read_marker(StandInObjects(bucket))["state"] == PARKING


def test_a_failed_re_park_leaves_no_parked_marker_of_the_first_park(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    now = clock()
    first = park(lustre, bucket, now=now)
    run_dir = lustre / "checkpoints" / RUN
    shutil.copytree(run_dir / "global_step_6", run_dir / "global_step_8")
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    stand_in.failing = {f"{RUN}/global_step_8/data.pt"}
    with pytest.raises(TransferError, match="is not whole"):
        park(lustre, bucket, stand_in, now=now)
    marker = read_marker(StandInObjects(bucket))
    assert (marker["state"], marker["step"], marker["replaces"] > 0) == (PARKING, 8, True)
    assert marker["prefix"] != first["prefix"]


def test_a_park_while_another_transfer_runs_on_the_instance_is_refused_and_not_parked(tmp_path):
    """One transfer per instance at a time: Managed Lustre refuses the second with ABORTED (transfer-data page)."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    stand_in.export_data(INSTANCE, "/models", f"gs://{BUCKET}/elsewhere/")
    with pytest.raises(TransferError, match="HTTP 409: ABORTED: unable to queue the operation"):
        park(lustre, bucket, stand_in)
    assert read_marker(StandInObjects(bucket))["state"] == PARKING


def test_a_park_of_a_run_not_on_the_instance_writes_nothing(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    with pytest.raises(TransferError, match="the instance holds no /checkpoints/verl-qwen-other: nothing of the run"):
        park(lustre, bucket, run="verl-qwen-other")
    assert not bucket.exists()


def test_an_export_whose_objects_are_not_in_the_bucket_is_not_parked(tmp_path):
    """A fault at the boundary: the Operation says whole, but the exports' objects are not in the bucket."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)

    class Vanishing(StandInLustre):
        def get_operation(self, name):
            operation = super().get_operation(name)
            for path in bucket.rglob(f"exports/{RUN}"):
                shutil.rmtree(path)
            return operation

    with pytest.raises(TransferError, match=f"holds nothing of {RUN}"):
        park(lustre, bucket, Vanishing(lustre, bucket, BUCKET, INSTANCE))
    assert read_marker(StandInObjects(bucket))["state"] == PARKING


def test_a_park_whose_bucket_lacks_the_newest_step_is_not_parked(tmp_path):
    """A fault at the boundary: the Operation says whole, but the newest step's data.pt is not in the bucket."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)

    class Shortened(StandInLustre):
        def get_operation(self, name):
            operation = super().get_operation(name)
            for path in bucket.rglob(f"checkpoints/{RUN}/global_step_6/data.pt"):
                path.unlink()
            return operation

    with pytest.raises(TransferError, match="the instance's newest complete step is 6 but .* holds 4; not parked"):
        park(lustre, bucket, Shortened(lustre, bucket, BUCKET, INSTANCE))
    assert read_marker(StandInObjects(bucket))["state"] == PARKING


def test_a_run_without_its_record_is_not_marked_parked(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    (lustre / "checkpoints" / RUN / "attempts.jsonl").unlink()
    with pytest.raises(TransferError, match="lacks the run's record attempts.jsonl; not parked"):
        park(lustre, bucket)
    assert read_marker(StandInObjects(bucket))["state"] == PARKING


def test_a_submission_during_a_park_keeps_the_park_from_marking_parked(tmp_path):
    """The submitter's stale mark is conditional on the generation it read, and so is the park's `parked`: the
    newer one (stale) stands."""
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)

    class SubmittedMeanwhile(StandInLustre):
        def export_data(self, instance, lustre_path, gcs_uri):
            if lustre_path == "/exports":
                assert mark_stale(StandInObjects(bucket), "python -m jobs submit", lambda: "T").startswith(
                    f"the park marker of {RUN} is stale now"
                )
            return super().export_data(instance, lustre_path, gcs_uri)

    with pytest.raises(TransferError, match="the park marker changed while exporting"):
        park(lustre, bucket, SubmittedMeanwhile(lustre, bucket, BUCKET, INSTANCE))
    marker = read_marker(StandInObjects(bucket))
    assert (marker["state"], marker["staleBecause"]) == (STALE, "python -m jobs submit submitted an attempt")


def test_marking_stale_changes_a_parked_marker_only(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    objects = StandInObjects(bucket)
    assert mark_stale(objects, "the run guardian") is None and not bucket.exists()
    a_run(lustre)
    park(lustre, bucket)
    assert mark_stale(objects, "the run guardian", lambda: "T") is not None
    assert read_marker(objects)["state"] == STALE
    assert mark_stale(objects, "the run guardian") is None
    assert unpark(lustre, bucket)["state"] == STALE, "a stale marker is imported by nobody"


def test_an_import_that_is_not_whole_leaves_the_marker_parked(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    marker = park(lustre, bucket)
    shutil.rmtree(lustre)
    lustre.mkdir()
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    stand_in.failing = {f"checkpoints/{RUN}/attempts.jsonl"}
    with pytest.raises(TransferError, match=f"importing {RUN} is not whole: 57 of 58 objects copied, 1 failed"):
        restore_run(stand_in, StandInObjects(bucket), INSTANCE, BUCKET, 60, lambda line: None, poll=0)
    assert read_marker(StandInObjects(bucket)) == marker


def test_an_import_refuses_a_prefix_without_the_marked_step(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    marker = park(lustre, bucket)
    (bucket / marker["prefix"] / "checkpoints" / RUN / "global_step_6" / "data.pt").unlink()
    shutil.rmtree(lustre)
    lustre.mkdir()
    stand_in = StandInLustre(lustre, bucket, BUCKET, INSTANCE)
    with pytest.raises(TransferError, match="the marker says step 6 but .* holds 4 complete: nothing imported"):
        restore_run(stand_in, StandInObjects(bucket), INSTANCE, BUCKET, 60, lambda line: None, poll=0)
    assert stand_in.requests == [] and read_marker(StandInObjects(bucket)) == marker


def test_nothing_parked_restores_nothing(tmp_path):
    stand_in = StandInLustre(tmp_path / "lustre", tmp_path / "bucket", BUCKET, INSTANCE)
    assert restore_run(stand_in, StandInObjects(tmp_path / "bucket"), INSTANCE, BUCKET, 60, print, poll=0) is None
    assert stand_in.requests == []


def test_a_transfer_still_running_at_its_deadline_names_the_operation():
    clock_ = iter([0.0, 0.0, 5.0, 11.0])

    class Running:
        def get_operation(self, name):
            return {"name": name, "done": False, "metadata": {"statusMessage": "copying"}}

    lines: list[str] = []
    with pytest.raises(TransferError, match="still running after 10 s; it goes on in the cloud as ops/1"):
        wait_for(
            Running(), {"name": "ops/1"}, "exporting /x", 10, lines.append, 0, lambda: next(clock_), lambda s: None
        )
    assert lines == ["exporting /x: running for 0 s", "exporting /x: running for 5 s, copying"]


def test_the_newest_complete_step_skips_steps_in_the_making():
    nemo = ["step_4/training_info.json", "step_4/policy/weights/a", "tmp_step_6/training_info.json",
            "tmp_step_6/policy/weights/a", "step_10/training_info.json", "attempts.jsonl"]  # fmt: skip
    assert newest_complete_step(nemo, "nemo-rl", 8) == 4
    verl = [f"global_step_2/actor/{kind}_world_size_1_rank_0.pt" for kind in ("model", "optim", "extra_state")]
    assert newest_complete_step([*verl, "global_step_2/data.pt"], "verl", 1) is None, "no fsdp_config.json"
    assert (
        newest_complete_step([*verl, "global_step_2/data.pt", "global_step_2/actor/fsdp_config.json"], "verl", 1) == 2
    )


def test_a_park_tried_again_picks_up_the_export_its_failed_try_left_running(tmp_path):
    """Fault injected: the first try's wait ends at its deadline (0 s) while its export still runs in the cloud, the
    marker left `parking`; the next try (the guardian's PARK_TRIES) exports into the same prefix, so the instance's
    refusal of a second transfer (ABORTED) is answered by waiting on the one running, and the park ends parked."""
    apis = stand_in_apis(tmp_path, reads_to_done=3)
    a_run(tmp_path / "lustre")
    lines: list[str] = []
    with google_apis(apis):
        transfers = RestTransfers({}, lines.append, api=f"{apis.url}/v1", sleep=lambda s: None)
        objects = RestObjects(BUCKET, {}, lines.append, f"{apis.url}/storage/v1", f"{apis.url}/upload/storage/v1",
                              sleep=lambda s: None)  # fmt: skip
        holdings, now = holdings_of(tmp_path / "lustre", "/checkpoints", "/exports", RUN), clock()
        with pytest.raises(TransferError, match="still running"):
            park_run(transfers, objects, REQUEST, holdings, 0, lines.append, now, 0)
        first = read_marker(objects)
        marker = park_run(transfers, objects, REQUEST, holdings, 60, lines.append, now, 0)
    assert first["state"] == PARKING and marker["state"] == PARKED and marker["prefix"] == first["prefix"]
    assert apis.lustre.starts == 2, "the checkpoints' export once, the exports' once"
    assert any(line.endswith("which runs it already") for line in lines), lines
