"""Parking a Lustre stack's run in its bucket and bringing it back: nothing is lost on the way."""

from __future__ import annotations

import json
import shutil

import pytest

from core import names
from incluster.lustre_transfer import TransferError, wait_for
from incluster.park import PARKED, RESTORED, newest_step, park_run, restore_run
from tests.support.lustre_stand_in import BUCKET, INSTANCE, PATHS, RUN, StandInLustre, StandInObjects, a_run, tree


def test_every_file_of_the_run_is_there_after_a_park_and_an_unpark(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    before = {name: data for name, data in tree(lustre).items() if not name.startswith("models/")}
    objects = StandInObjects(bucket)
    lines: list[str] = []
    marker = park_run(
        StandInLustre(lustre, bucket, BUCKET, INSTANCE), objects, INSTANCE, BUCKET, RUN, "verl", PATHS, 60,
        lines.append, now=lambda: "2026-12-02T01:00:00Z", poll=0,
    )  # fmt: skip
    assert marker == {
        "state": PARKED,
        "run": RUN,
        "instance": INSTANCE,
        "exported": {
            f"/checkpoints/{RUN}": {"uri": f"gs://{BUCKET}/parked/data/checkpoints/{RUN}/", "objects": 55},
            f"/exports/{RUN}": {"uri": f"gs://{BUCKET}/parked/data/exports/{RUN}/", "objects": 2},
        },
        "step": 6,
        "parkedAt": "2026-12-02T01:00:00Z",
    }
    assert json.loads((bucket / names.PARK_MARKER).read_text()) == marker
    assert (
        lines
        == [f"exporting /checkpoints/{RUN}: running for 0 s, 0.0 of 0.0 GiB"] * 2
        + [f"exporting /exports/{RUN}: running for 0 s, 0.0 of 0.0 GiB"] * 2
    )

    # pulumi up with storage.parked: true deletes the instance; false makes a new, empty one.
    shutil.rmtree(lustre)
    lustre.mkdir()
    fresh = "projects/p/locations/us-central1-b/instances/grpo-dev-lustre"
    stand_in = StandInLustre(lustre, bucket, BUCKET, fresh)
    restored = restore_run(
        stand_in, objects, fresh, BUCKET, 60, lines.append, now=lambda: "2026-12-03T09:00:00Z", poll=0
    )
    assert tree(lustre) == before
    assert stand_in.requests == [("import", f"gs://{BUCKET}/parked/data/", "/")]
    assert restored == {**marker, "state": RESTORED, "restoredAt": "2026-12-03T09:00:00Z", "restoredInto": fresh}
    assert json.loads((bucket / names.PARK_MARKER).read_text()) == restored

    # A later up (the restore's resource unchanged, or made again) imports nothing over the running run.
    again = StandInLustre(lustre, bucket, BUCKET, fresh)
    assert restore_run(again, objects, fresh, BUCKET, 60, lines.append, poll=0) == restored
    assert again.requests == []


def test_nothing_parked_restores_nothing(tmp_path):
    stand_in = StandInLustre(tmp_path / "lustre", tmp_path / "bucket", BUCKET, INSTANCE)
    assert restore_run(stand_in, StandInObjects(tmp_path / "bucket"), INSTANCE, BUCKET, 60, print, poll=0) is None
    assert stand_in.requests == []


def test_a_failed_export_writes_no_marker(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    shutil.rmtree(lustre / "exports")
    with pytest.raises(TransferError, match=rf"exporting /exports/{RUN} failed \(code 5\): .* not found"):
        park_run(
            StandInLustre(lustre, bucket, BUCKET, INSTANCE), StandInObjects(bucket), INSTANCE, BUCKET, RUN, "verl",
            PATHS, 60, lambda line: None, poll=0,
        )  # fmt: skip
    assert not (bucket / names.PARK_MARKER).exists()


def test_a_run_without_its_record_is_not_marked_parked(tmp_path):
    lustre, bucket = tmp_path / "lustre", tmp_path / "bucket"
    a_run(lustre)
    (lustre / "checkpoints" / RUN / "attempts.jsonl").unlink()
    with pytest.raises(TransferError, match="lacks the run's record attempts.jsonl; nothing marked parked"):
        park_run(
            StandInLustre(lustre, bucket, BUCKET, INSTANCE), StandInObjects(bucket), INSTANCE, BUCKET, RUN, "verl",
            PATHS, 60, lambda line: None, poll=0,
        )  # fmt: skip
    assert not (bucket / names.PARK_MARKER).exists()


def test_a_transfer_still_running_at_its_deadline_names_the_operation():
    clock = iter([0.0, 0.0, 5.0, 11.0])

    class Running:
        def get_operation(self, name):
            return {"name": name, "done": False, "metadata": {"statusMessage": "copying"}}

    lines: list[str] = []
    with pytest.raises(TransferError, match="still running after 10 s; it goes on in the cloud as ops/1"):
        wait_for(Running(), {"name": "ops/1"}, "exporting /x", 10, lines.append, 0, lambda: next(clock), lambda s: None)
    assert lines == ["exporting /x: running for 0 s", "exporting /x: running for 5 s, copying"]


def test_the_newest_step_skips_nemo_rl_steps_in_the_making():
    names_ = ["p/step_4/a", "p/tmp_step_6/a", "p/step_10/x/y", "p/attempts.jsonl", "q/step_99/a"]
    assert newest_step(names_, "p/", "nemo-rl") == 10
    assert newest_step(["p/attempts.jsonl"], "p/", "verl") is None
