"""`python -m jobs park` as the user meets it: the command, its exit status, its whole output."""

from __future__ import annotations

import json
import shutil

import pytest

from jobs.cli import park
from jobs.spec.training import training_spec
from jobs.submit.target import load_stack
from tests.jobs.test_cli_messages import cli
from tests.support.lustre_stand_in import StandInLustre, StandInObjects, a_run, tree

LUSTRE = {"type": "lustre", "capacityGib": 18000, "throughput": 1000, "keepOnDestroy": False}
"""The storage section of a Lustre stack whose instance is not kept on destroy."""


@pytest.fixture
def parked_stack(make_stack, tmp_path, monkeypatch):
    """Stack `lus` on Lustre, its run under DIR/data (the instance's file system), the stand-ins patched in."""
    name, directory = make_stack("lus", storage=LUSTRE)
    config = load_stack(name, directory)
    run = training_spec(config).run
    data, bucket = directory / "data", directory / "bucket"
    a_run(data)
    shutil.move(data / "checkpoints" / "verl-qwen-0123456789ab", data / "checkpoints" / run)
    shutil.move(data / "exports" / "verl-qwen-0123456789ab", data / "exports" / run)
    instance = f"projects/my-grpo-project/locations/{config.zone}/instances/grpo-lus-lustre"
    stand_in = StandInLustre(data, bucket, config.parked_bucket_name, instance)
    monkeypatch.setattr(park, "transfer_clients", lambda config: (stand_in, StandInObjects(bucket)))
    monkeypatch.setattr("incluster.lustre_transfer.POLL_SECONDS", 0)
    args = ["park", "--stack", name, "--dir", str(directory), "--data-root", str(data)]
    return config, run, data, bucket, stand_in, args


def test_park_exports_the_run_and_its_exports_waits_verifies_and_marks_it(parked_stack, capsys):
    config, run, data, bucket, stand_in, args = parked_stack
    before = tree(data)
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    marker = json.loads(out)
    assert marker == json.loads((bucket / "parked" / "marker.json").read_text())
    assert (marker["state"], marker["run"], marker["step"]) == ("parked", run, 6)
    assert sorted(marker["exported"]) == [f"/checkpoints/{run}", f"/exports/{run}"]
    assert stand_in.requests == [
        ("export", f"/checkpoints/{run}", f"gs://{config.parked_bucket_name}/parked/data/checkpoints/{run}/"),
        ("export", f"/exports/{run}", f"gs://{config.parked_bucket_name}/parked/data/exports/{run}/"),
    ]
    bucket_name = config.parked_bucket_name
    exporting = [f"exporting /checkpoints/{run}: running for 0 s, 0.0 of 0.0 GiB"] * 2 + [
        f"exporting /exports/{run}: running for 0 s, 0.0 of 0.0 GiB"
    ] * 2
    assert err.splitlines() == [
        f"parking {run}: exporting /checkpoints/{run}, /exports/{run} to gs://{bucket_name}/parked/data/",
        *exporting,
        f"parked {run} (step 6): 57 objects in gs://{bucket_name}/parked/data/; marker"
        f" gs://{bucket_name}/parked/marker.json",
        "next: with grpo-gke:storage.keepOnDestroy false already applied by pulumi up, run pulumi config set --path"
        " grpo-gke:storage.parked true --stack lus && pulumi up --stack lus (deletes the Lustre instance and what"
        " mounts it)",
        "then: once storage.parked false and pulumi up bring the run back, set grpo-gke:storage.keepOnDestroy true"
        " again (pulumi config set --path grpo-gke:storage.keepOnDestroy true --stack lus); until the run is parked"
        " anew, park-guard refuses pulumi destroy and any edit that replaces the instance",
    ]
    assert tree(data) == before, "parking reads the instance, never changes it"


def test_park_without_exports_exports_the_run_directory_only(parked_stack, capsys):
    config, run, data, bucket, stand_in, args = parked_stack
    shutil.rmtree(data / "exports")
    (data / "checkpoints" / run / "attempts.jsonl").write_text('{"attempt": 1, "event": "submitted"}\n')
    code, out, _ = cli(capsys, *args)
    assert code == 0
    assert [request[1] for request in stand_in.requests] == [f"/checkpoints/{run}"]


def test_park_without_a_record_exits_2_in_one_line(parked_stack, capsys):
    config, run, data, bucket, stand_in, args = parked_stack
    (data / "checkpoints" / run / "attempts.jsonl").unlink()
    code, out, err = cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err == (f"error: the run {run} has no record at /data/checkpoints/{run}/attempts.jsonl: nothing to park\n")
    assert stand_in.requests == [] and not bucket.exists()


def test_a_failed_transfer_exits_2_in_one_line_and_marks_nothing(parked_stack, capsys):
    config, run, data, bucket, stand_in, args = parked_stack
    shutil.rmtree(data / "exports")
    code, out, err = cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1].startswith(f"error: exporting /exports/{run} failed (code 5): ")
    assert not (bucket / "parked" / "marker.json").exists()


def test_park_on_a_bucket_stack_is_refused_naming_the_key(make_stack, capsys):
    name, directory = make_stack("gcs")
    code, out, err = cli(capsys, "park", "--stack", name, "--dir", str(directory))
    assert (code, out) == (2, "")
    assert err == (
        "error: grpo-gke:storage.type is 'gcs': only a Managed Lustre stack parks its run (a bucket bills only what"
        " it holds)\n"
    )


def test_park_of_a_run_still_running_is_refused_through_the_cluster(parked_stack, capsys, monkeypatch):
    from ray.job_submission import JobDetails, JobStatus, JobType

    from incluster import job_client
    from tests.jobs.test_cli_messages import StandInJobs

    config, run, data, bucket, stand_in, args = parked_stack
    running = JobDetails(
        type=JobType.SUBMISSION, submission_id=f"{run}-2", status=JobStatus.RUNNING, entrypoint="x",
        metadata={"stack": "lus", "run": run, "attempt": "2"},
    )  # fmt: skip
    monkeypatch.setattr(job_client, "connect", lambda endpoint: StandInJobs([running], {}))
    cluster_args = [arg for arg in args if arg not in ("--data-root", str(data))] + [
        "--address",
        "http://127.0.0.1:8265",
    ]
    code, out, err = cli(capsys, *cluster_args)
    assert (code, out) == (2, "")
    assert err == (
        f"error: {run}-2 of the run is still RUNNING: park a run once it is over (python -m jobs stop --stack lus"
        " stops it)\n"
    )
    assert stand_in.requests == []
