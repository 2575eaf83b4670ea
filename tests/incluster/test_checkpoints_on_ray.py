"""`grpo.keepCheckpoints` across attempts, on a real local Ray head: the attempt wrapper around the stand-in trainer,
which rotates as verl 0.9.1's `trainer.max_actor_ckpt_to_keep` does (only the actor directories this attempt saved;
jobs/demo/stand_in_trainer.py), three attempts in a row."""

from __future__ import annotations

import re
import shlex
import sys
import time
import uuid
from pathlib import Path

import pytest

from incluster import job_client, shipping
from incluster.endpoint import Endpoint
from tests.ray_fixtures import stand_in_trainer

pytestmark = pytest.mark.usefixtures("ray_head")

ATTEMPT_SECONDS = 120.0
"""Longest wait for one attempt of the stand-in."""

KEEP = 2
"""grpo.keepCheckpoints of the run."""


def _run_attempt(
    client, run_dir: Path, run: str, attempt: int, steps: int, *faults: str, keep: int = KEEP, ends: str = "SUCCEEDED"
) -> str:
    """Submit attempt `attempt` (the wrapper with `--keep`, the stand-in with verl's rotation and `faults`) and wait
    for its end, `ends`; its log."""
    trainer = stand_in_trainer(
        "--steps", str(steps), "--save-every", "1", "--keep", str(keep), "--step-seconds", "0", *faults
    )  # fmt: skip
    wrapper = [
        sys.executable,
        "-m",
        "incluster.attempt",
        "--framework",
        "verl",
        "--world-size",
        "8",
        "--keep",
        str(keep),
    ]
    with shipping.py_modules() as modules:
        submission_id = client.submit_job(
            entrypoint=shlex.join([*wrapper, "--", "sh", "-c", trainer]),
            submission_id=f"{run}-{attempt}",
            runtime_env={
                "env_vars": {"GRPO_RUN_DIR": str(run_dir), "GRPO_ATTEMPT": str(attempt)},
                "py_modules": modules,
            },
        )
    deadline = time.monotonic() + ATTEMPT_SECONDS
    while (status := job_client.status_of(client, submission_id)) not in ("SUCCEEDED", "FAILED", "STOPPED"):
        assert time.monotonic() < deadline, f"attempt {attempt} still {status} after {ATTEMPT_SECONDS:.0f} s"
        time.sleep(0.5)
    assert status == ends, client.get_job_logs(submission_id)[-2000:]
    return client.get_job_logs(submission_id)


def _layout(run_dir: Path) -> dict[str, list[str]]:
    """Each global_step_N and what it holds at the top (actor, data.pt)."""
    return {path.name: sorted(item.name for item in path.iterdir()) for path in sorted(run_dir.glob("global_step_*"))}


def test_the_newest_keep_checkpoints_stay_across_attempts_and_verls_rotated_remains_go(ray_head, tmp_path):
    client = job_client.connect(Endpoint(address=ray_head))
    run_dir, run = tmp_path / "run", f"rotation-{uuid.uuid4().hex[:8]}"
    run_dir.mkdir()
    _run_attempt(client, run_dir, run, 1, steps=3)
    # verl's rotation inside attempt 1: step 1's actor/ removed before step 3's save, its data.pt left.
    assert _layout(run_dir) == {
        "global_step_1": ["data.pt"], "global_step_2": ["actor", "data.pt"], "global_step_3": ["actor", "data.pt"],
    }  # fmt: skip
    logs = _run_attempt(client, run_dir, run, 2, steps=5)
    assert "grpo-gke attempt 2: removed global_step_1 (keeping the newest 2 checkpoints)" in logs
    # Attempt 2's rotation knows only its own steps 4 and 5: 2 and 3 stay until the next attempt's wrapper.
    assert list(_layout(run_dir)) == ["global_step_2", "global_step_3", "global_step_4", "global_step_5"]
    logs = _run_attempt(client, run_dir, run, 3, steps=6)
    assert "grpo-gke attempt 3: resuming from global_step_5 (step 5)" in logs
    assert "grpo-gke attempt 3: removed global_step_2, global_step_3 (keeping the newest 2 checkpoints)" in logs
    assert list(_layout(run_dir)) == ["global_step_4", "global_step_5", "global_step_6"]
    assert not (run_dir / "incomplete").exists()


def test_a_cut_save_is_not_resumed_a_save_that_fails_to_load_falls_back_and_cut_saves_are_kept_to_keep(
    ray_head, tmp_path
):
    """Issue 30 item 5, with keepCheckpoints 1 (verl's rotation keeps one save of each attempt). Boundary faults of the
    stand-in, a node lost right after a save before all its bytes reached the storage: attempt 2's step 3 has a shard
    cut short, attempt 3's step 5 a shard whose first bytes are zero (its zip directory whole: only a load finds it)."""
    client = job_client.connect(Endpoint(address=ray_head))
    run_dir, run = tmp_path / "run", f"torn-{uuid.uuid4().hex[:8]}"
    run_dir.mkdir()
    _run_attempt(client, run_dir, run, 1, 2, keep=1)
    logs = _run_attempt(client, run_dir, run, 2, 3, "--cut-shard-at", "3", keep=1, ends="FAILED")
    assert "stand-in: the node was lost after saving step 3" in logs
    logs = _run_attempt(client, run_dir, run, 3, 5, "--damage-shard-at", "5", keep=1, ends="FAILED")
    # the cut step 3 moved aside; step 2 resumed, and loaded
    assert "grpo-gke attempt 3: resuming from global_step_2 (step 2)" in logs
    assert [path.name.split("-")[0] for path in (run_dir / "incomplete").iterdir()] == ["global_step_3"]
    assert (run_dir / "loaded-step.txt").read_text() == "2\n"
    logs = _run_attempt(client, run_dir, run, 4, 6, keep=1)
    assert "grpo-gke attempt 4: resuming from global_step_5 (step 5)" in logs
    assert "PytorchStreamReader failed reading" in logs
    assert re.search(r"grpo-gke attempt 4: global_step_5 failed to load \(PytorchStreamReader failed reading\); moved"
                     r" to incomplete/global_step_5-unloadable-\d{8}T\d{6}Z; falling back to the previous complete step",
                     logs)  # fmt: skip
    # step 2, the newest step that loaded, was kept past keepCheckpoints 1 for this: the run goes on from it
    assert "grpo-gke attempt 4: resuming from global_step_2 (step 2)" in logs
    # once it loaded again: the older cut save goes (incomplete/ keeps 1 too); verl's rotated remains of steps 3 and 4
    # stay, as this attempt saves those steps again into the same directories
    removed = r"grpo-gke attempt 4: removed incomplete/global_step_3-\d{8}T\d{6}Z \(keeping"
    assert re.search(removed, logs)
    assert [path.name.split("-")[:2] for path in (run_dir / "incomplete").iterdir()] == [
        ["global_step_5", "unloadable"]
    ]
    assert _layout(run_dir)["global_step_2"] == _layout(run_dir)["global_step_6"] == ["actor", "data.pt"]
