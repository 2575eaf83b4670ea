"""The recovery tests' foundation against a real two-node Ray cluster in network namespaces: the real
spec with the stand-in trainer as its entrypoint, submitted through incluster.run_submission from inside the
head's namespace. A GPU node lost mid-run and started again, with the guardian submitting the next
attempt: tests/incluster/test_guardian_on_ray.py, on the same cluster."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from incluster import job_client, readiness, run_submission
from incluster.runs import for_attempt
from jobs.demo.gpu_node import GPUS
from jobs.spec.training import on_data_root, submission_of, training_spec
from tests.ray_fixtures import stand_in_trainer

pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[default]' (requirements.txt)")

from jobs.demo.stand_in_trainer import SHARD_KINDS, TRACKER, read_archive, shard_name
from tests.conftest import config_of
from tests.support.two_node_ray import TwoNodeRay

WORLD_SIZE = GPUS
"""The dev stack's one GPU node: 8 ranks."""


class Run:
    """One run of the stand-in trainer on the two-node cluster, as `python -m jobs submit --entrypoint` makes it."""

    def __init__(self, cluster: TwoNodeRay, stack: str, data_root: Path, *flags: str) -> None:
        self.cluster = cluster
        self.config = config_of("dev", stack=stack)
        self.spec = training_spec(self.config, stand_in_trainer(*flags))
        submission = submission_of(self.config, self.spec, 1)
        self.submission = on_data_root(submission, str(data_root))
        self.id = submission["metadata"]["run"]
        self.dir = Path(self.submission["runtime_env"]["env_vars"]["GRPO_RUN_DIR"])
        self.client = cluster.call(job_client.connect, cluster.endpoint)

    def submit(self) -> run_submission.Outcome:
        """Pass the readiness gate, then submit the run's next attempt (incluster.run_submission.ensure_run)."""
        self.cluster.call(
            readiness.wait_for_gpus,
            self.cluster.endpoint,
            self.config.gpu.nodes,
            60.0,
            lambda _: None,
            gpus_per_node=self.config.gpus_per_node,
        )
        known = functools.partial(run_submission.local_view, self.dir)
        return self.cluster.call(run_submission.ensure_run, self.client, self.submission, known)

    def wait(self, attempt: int, timeout: float = 90.0) -> str:
        """The attempt's final status (at most `timeout` seconds)."""
        submission_id = f"{self.id}-{attempt}"
        deadline = time.monotonic() + timeout
        while (
            status := self.cluster.call(job_client.status_of, self.client, submission_id)
        ) not in job_client.TERMINAL:
            assert time.monotonic() < deadline, f"{submission_id} still {status} after {timeout:.0f} s"
            time.sleep(0.5)
        return status

    def logs(self, attempt: int) -> str:
        """The attempt's whole log."""
        return self.cluster.call(self.client.get_job_logs, f"{self.id}-{attempt}")

    def complete(self, step: int) -> bool:
        """Whether global_step_<step> holds every rank's three shards and the dataloader state."""
        folder = self.dir / f"global_step_{step}"
        names = [shard_name(kind, WORLD_SIZE, rank) for rank in range(WORLD_SIZE) for kind in SHARD_KINDS]
        shards = [folder / "actor" / name for name in names]
        return all(path.is_file() for path in shards) and (folder / "data.pt").is_file()


def steps_in(log: str) -> list[int]:
    """The steps whose verl-style metric line the log shows, in order."""
    return [int(line.split("step:", 1)[1].split()[0]) for line in log.splitlines() if line.startswith("step:")]


def wait_until(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll `condition` until it holds, at most `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.2)


def test_a_half_written_checkpoint_is_never_tracked_and_resuming_from_it_fails_on_the_missing_shard(
    two_nodes, tmp_path
):
    run = Run(two_nodes, "two-node-half", tmp_path, "--steps", "4", "--save-every", "2", "--half-save-at", "4",
              "--hold-seconds", "0")  # fmt: skip
    run.submit()
    assert run.wait(1) == "FAILED"
    actor = run.dir / "global_step_4" / "actor"
    log = run.logs(1)
    assert f"stand-in: wrote half of {actor.parent}; waiting for a node loss" in log and "ActorDiedError" in log
    written = {path.name for path in actor.glob("*.pt")}
    assert written == {shard_name(kind, WORLD_SIZE, rank) for rank in range(4) for kind in SHARD_KINDS}
    assert not (run.dir / "global_step_4" / "data.pt").exists()
    assert run.complete(2) and (run.dir / TRACKER).read_text() == "2"

    # A resume logic that trusted the newest step directory would pick this one: the framework's command
    # alone, without the attempt wrapper, fails on the load.
    (run.dir / TRACKER).write_text("4")
    unwrapped = {**for_attempt(run.submission, 2), "entrypoint": run.spec.entrypoint}
    two_nodes.call(run.client.submit_job, **unwrapped)
    assert run.wait(2) == "FAILED"
    assert f"No such file or directory: '{actor}/{shard_name('model', WORLD_SIZE, 4)}'" in run.logs(2)

    # Every attempt's wrapper resumes from the newest complete step, whatever the tracker says, and moves the
    # half-written one aside.
    run.submit()
    assert run.wait(3) == "SUCCEEDED"
    log = run.logs(3)
    assert f"grpo-gke attempt 3: resuming from global_step_2 (step 2) in {run.dir}" in log
    assert f"Resuming from {run.dir}/global_step_2" in log and steps_in(log) == [3, 4]
    assert run.complete(4) and (run.dir / TRACKER).read_text() == "4"
    assert [path.name.split("-")[0] for path in (run.dir / "incomplete").iterdir()] == ["global_step_4"]


def test_async_save_writes_no_tracker_the_wrapper_does_so_the_next_attempt_resumes_and_a_bug_fails_every_attempt(
    two_nodes, tmp_path, make_stack
):
    run = Run(two_nodes, "two-node-bug", tmp_path, "--steps", "6", "--save-every", "2", "--async-save",
              "--fail-at", "3", "--exit-code", "7")  # fmt: skip
    for attempt in (1, 2):
        outcome = run.submit()
        assert outcome.submission_id == f"{run.id}-{attempt}"
        assert run.wait(attempt) == "FAILED"
        log = run.logs(attempt)
        assert "stand-in trainer: deterministic failure at step 3 (exit code 7)" in log
        if attempt == 1:
            assert "Training from scratch" in log and steps_in(log) == [1, 2]
            assert run.complete(2) and not (run.dir / TRACKER).exists()
        else:
            assert f"grpo-gke attempt 2: resuming from global_step_2 (step 2) in {run.dir}" in log
            assert f"Resuming from {run.dir}/global_step_2" in log and steps_in(log) == []
    info = run.cluster.call(run.client.get_job_info, f"{run.id}-2")
    assert "exit code 7" in info.message
    assert run.complete(2) and (run.dir / TRACKER).read_text() == "2"
    assert read_archive(run.dir / "global_step_2" / "data.pt") == {"step": 2}

    name, directory = make_stack("two-node-bug")
    listed = two_nodes.cli("list", "--stack", name, "--dir", str(directory), "--address", two_nodes.dashboard_url)
    assert listed.returncode == 0, listed.stderr
    assert [line.split("  ")[:4] for line in listed.stdout.splitlines()] == [
        [f"{run.id}-{attempt}", "FAILED", f"run={run.id}", f"attempt={attempt}"] for attempt in (1, 2)
    ]
