"""`python -m jobs park` as the user meets it: the command, its exit status, its whole output."""

from __future__ import annotations

import json
import shutil

import pytest

from infra.storage import park_refusal
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
    assert (marker["state"], marker["run"], marker["step"], marker["stack"]) == ("parked", run, 6, "lus")
    assert (marker["runs"], marker["exports"]) == ([run], [run])
    bucket_name, prefix = config.parked_bucket_name, marker["prefix"]
    assert stand_in.requests == [
        ("export", "/checkpoints", f"gs://{bucket_name}/{prefix}checkpoints/"),
        ("export", "/exports", f"gs://{bucket_name}/{prefix}exports/"),
    ]
    exporting = ["exporting /checkpoints: running for 0 s, 0.0 of 0.0 GiB"] * 2 + [
        "exporting /exports: running for 0 s, 0.0 of 0.0 GiB"
    ] * 2
    assert err.splitlines() == [
        f"parking {run}: exporting /checkpoints, /exports to gs://{bucket_name}/parked/data/",
        *exporting,
        f"parked {run} (step 6): 58 objects in gs://{bucket_name}/{prefix}; marker gs://{bucket_name}/parked/marker.json",
        "next: with grpo-gke:storage.keepOnDestroy false already applied by pulumi up, run pulumi config set --path"
        " grpo-gke:storage.parked true --stack lus && pulumi up --stack lus (deletes the Lustre instance and what"
        " mounts it)",
        "then: once storage.parked false and pulumi up bring the run back, set grpo-gke:storage.keepOnDestroy true"
        " again (pulumi config set --path grpo-gke:storage.keepOnDestroy true --stack lus); until the run is parked"
        " anew, park-guard refuses pulumi destroy and any edit that replaces the instance",
    ]
    assert tree(data) == before, "parking reads the instance, never changes it"
    assert park_refusal(out, config, run) is None, "pulumi up accepts the marker the command wrote"


def test_the_marker_speaks_for_the_parked_run_only_not_for_a_config_whose_spec_changed_since(parked_stack, capsys):
    """The marker `python -m jobs park` wrote passes `pulumi up` for the config it parked; the same stack with its
    learning rate changed names another run (another spec hash), which the park did not export: refused."""
    config, run, data, bucket, stand_in, args = parked_stack
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert park_refusal(out, config, training_spec(config).run) is None
    edited = config.model_copy(update={"grpo": config.grpo.model_copy(update={"learning_rate": 2e-6})})
    other = training_spec(edited).run
    assert other != run and other.startswith("lus-")
    assert park_refusal(out, edited, other) == (
        f"grpo-gke:storage.parked is true but gs://{config.parked_bucket_name}/parked/marker.json parked {run} of"
        f" stack 'lus', and this config names the run {other} (its spec changed since the park): the park does not"
        f" speak for {other}, and deleting the Lustre instance could lose it; undo the config's change, or run"
        " python -m jobs park --stack lus again with this config (or set storage.parked false)"
    )


def test_park_takes_every_run_on_the_instance_and_exports_the_record_does_not_name(parked_stack, capsys):
    config, run, data, bucket, stand_in, args = parked_stack
    other = data / "checkpoints" / "lus-0000000000"
    other.mkdir()
    (other / "attempts.jsonl").write_text("{}\n")
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert json.loads(out)["runs"] == sorted([run, "lus-0000000000"])
    assert err.splitlines()[0] == (
        f"parking {run} and 1 other run (lus-0000000000): exporting /checkpoints, /exports to"
        f" gs://{config.parked_bucket_name}/parked/data/"
    )
    assert "exported" not in (data / "checkpoints" / run / "attempts.jsonl").read_text()


def test_park_without_exports_exports_the_run_directory_only(parked_stack, capsys):
    config, run, data, bucket, stand_in, args = parked_stack
    shutil.rmtree(data / "exports")
    code, out, _ = cli(capsys, *args)
    assert code == 0
    assert [request[1] for request in stand_in.requests] == ["/checkpoints"]


def test_park_without_a_record_exits_2_in_one_line(parked_stack, capsys):
    config, run, data, bucket, stand_in, args = parked_stack
    (data / "checkpoints" / run / "attempts.jsonl").unlink()
    code, out, err = cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err == (f"error: the run {run} has no record at /data/checkpoints/{run}/attempts.jsonl: nothing to park\n")
    assert stand_in.requests == [] and not bucket.exists()


def test_a_transfer_that_is_not_whole_exits_2_in_one_line_and_marks_nothing_parked(parked_stack, capsys):
    """A fault at the boundary: one exported model file fails to copy (the Operation's objectsFailedCount)."""
    config, run, data, bucket, stand_in, args = parked_stack
    stand_in.failing = {f"{run}/step-6/model.safetensors"}
    code, out, err = cli(capsys, *args)
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        "error: exporting /exports is not whole: 1 of 2 objects copied, 1 failed; PERMISSION_DENIED x1:"
        f" {run}/step-6/model.safetensors permission denied"
    )
    marker = (bucket / "parked" / "marker.json").read_text()
    assert json.loads(marker)["state"] == "parking"
    assert "says 'parking', not 'parked'" in park_refusal(marker, config, run)


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


def test_submit_after_a_park_marks_the_marker_stale_and_pulumi_up_then_refuses_to_delete(parked_stack, capsys,
                                                                                         monkeypatch):  # fmt: skip
    """`python -m jobs park` parks, then `python -m jobs submit` continues the run: before it submits, the marker is
    stale, so `storage.parked: true` is refused (infra/storage.py park_refusal). The Ray head is a stand-in with no
    job of the run (StandInJobs; `--data-root` reads the run directory in place), the GPU gate and the submission are
    patched at that boundary."""
    from incluster import job_client, readiness, run_submission, scaling
    from incluster.google_token import Credential
    from jobs.submit import parked
    from tests.jobs.test_cli_messages import StandInJobs

    config, run, data, bucket, stand_in, args = parked_stack
    assert cli(capsys, *args)[0] == 0
    monkeypatch.setattr(parked, "RestObjects", lambda name, headers: StandInObjects(bucket))
    monkeypatch.setattr(parked, "user_credential", lambda user: Credential("ya29.user", None))
    monkeypatch.setattr(job_client, "connect", lambda endpoint: StandInJobs([], {}))
    monkeypatch.setattr(scaling, "bring_back", lambda *args_: None)
    monkeypatch.setattr(readiness, "wait_for_gpus", lambda *args_, **kwargs: None)
    seen: list[str] = []

    def ensure_run(client, submission, *rest, **kwargs):
        seen.append(json.loads((bucket / "parked" / "marker.json").read_text())["state"])
        raise job_client.JobError("stand-in: not submitted")

    monkeypatch.setattr(run_submission, "ensure_run", ensure_run)
    stack = args[args.index("--stack") : args.index("--data-root")]
    code, out, err = cli(capsys, "submit", *stack, "--address", "http://127.0.0.1:8265", "--data-root", str(data))
    assert (code, seen) == (2, ["stale"])
    assert err.splitlines() == [
        f"the park marker of {run} is stale now: the run goes on, park it again before deleting",
        "error: stand-in: not submitted",
    ]
    marker = (bucket / "parked" / "marker.json").read_text()
    assert "says 'stale', not 'parked'" in park_refusal(marker, config, run)
