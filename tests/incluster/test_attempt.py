"""The attempt wrapper (`python3 -m incluster.attempt`): the checkpoint check before the command, the output passed
through unchanged, the timestamped log, the refusal; and its modules, sent to the pods, stdlib only for Python 3.10."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from incluster import shipping
from incluster.attempt import (
    REFUSED_EXIT,
    REFUSED_LINE,
    RESUMED_LINE,
    UNSAVED_STOP_EXIT,
    AttemptLog,
    deadline_stop_in,
    last_log_part,
    log_parts,
    log_path,
    logged_lines,
)
from incluster.export_run import final_reward
from jobs.demo.stand_in_trainer import SHARD_KINDS, metric_line, shard_name, write_archive

WORLD = 2
"""A small world size: two ranks' shards make a complete verl checkpoint here."""

STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\t")
"""The start of every line of the attempt's log."""


def verl_step(run_dir: Path, step: int, complete: bool = True) -> Path:
    """A verl `global_step_<step>`, complete or lacking rank 1's model shard and data.pt."""
    folder = run_dir / f"global_step_{step}"
    (folder / "actor").mkdir(parents=True)
    for kind in SHARD_KINDS:
        for rank in range(WORLD):
            if complete or (kind, rank) != ("model", 1):
                write_archive(folder / "actor" / shard_name(kind, WORLD, rank), {"step": step})
    (folder / "actor" / "fsdp_config.json").write_text("{}")
    if complete:
        write_archive(folder / "data.pt", {"step": step})
    return folder


def wrapped(run_dir: Path, attempt: int, *command: str, keep: int | None = None) -> subprocess.CompletedProcess:
    """`python -m incluster.attempt` around `command` for attempt `attempt` of the run in `run_dir` (`--keep` when given),
    from the shipped files alone (incluster/shipping.py), as a pod runs it."""
    with shipping.py_modules() as modules:
        env = {
            **os.environ,
            "GRPO_RUN_DIR": str(run_dir),
            "GRPO_ATTEMPT": str(attempt),
            "PYTHONPATH": str(Path(modules[0]).parent),
        }
        argv = [sys.executable, "-m", "incluster.attempt", "--framework", "verl", "--world-size", str(WORLD),
                *(["--keep", str(keep)] if keep is not None else []), "--", *command]  # fmt: skip
        return subprocess.run(argv, env=env, capture_output=True, timeout=60, cwd="/")


def test_without_checkpoints_the_command_runs_its_output_passes_through_and_each_line_is_logged_with_its_time(
    tmp_path,
):
    code = "import sys; print('out one'); print('err one', file=sys.stderr, flush=True); print('out two'); sys.exit(5)"
    result = wrapped(tmp_path, 4, sys.executable, "-c", code)
    assert result.returncode == 5
    lines = result.stdout.decode().splitlines()
    assert lines[0] == f"grpo-gke attempt 4: no checkpoint; starting at step 0 in {tmp_path}"
    assert sorted(lines[1:]) == ["err one", "out one", "out two"]
    assert result.stderr == b""
    logged = log_path(tmp_path, 4).read_text().splitlines()
    assert all(STAMP.match(line) for line in logged)
    assert [STAMP.sub("", line) for line in logged] == lines


def test_the_newest_complete_checkpoint_is_resumed_and_a_newer_half_written_one_moved_aside(tmp_path):
    verl_step(tmp_path, 2)
    verl_step(tmp_path, 4)
    verl_step(tmp_path, 6, complete=False)
    result = wrapped(tmp_path, 2, "sh", "-c", 'cat "$GRPO_RUN_DIR/latest_checkpointed_iteration.txt"')
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == [
        f"grpo-gke attempt 2: resuming from global_step_4 (step 4) in {tmp_path}",
        "4",
    ]
    # the line status and plot read the resume from (jobs/runs/observed.py logged_resumes)
    assert RESUMED_LINE.match(result.stdout.decode().splitlines()[0]).groups() == ("2", "4")
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert not (tmp_path / "global_step_6").exists()
    assert [path.name.split("-")[0] for path in (tmp_path / "incomplete").iterdir()] == ["global_step_6"]


def test_with_keep_the_wrapper_removes_verls_rotated_remains_and_the_oldest_complete_steps_of_earlier_attempts(
    tmp_path,
):
    shutil.rmtree(verl_step(tmp_path, 2) / "actor")  # what verl's rotation leaves: data.pt
    verl_step(tmp_path, 4)
    verl_step(tmp_path, 6)
    verl_step(tmp_path, 8, complete=False)
    result = wrapped(tmp_path, 3, "echo", metric_line(7), keep=1)  # verl's line of the step after the one it loaded
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == [
        f"grpo-gke attempt 3: resuming from global_step_6 (step 6) in {tmp_path}",
        metric_line(7),
        "grpo-gke attempt 3: removed global_step_2, global_step_4 (keeping the newest 1 checkpoints)",
    ]
    assert sorted(path.name for path in tmp_path.glob("global_step_*")) == ["global_step_6"]
    assert [path.name.split("-")[0] for path in (tmp_path / "incomplete").iterdir()] == ["global_step_8"]


def test_checkpoints_none_complete_refuse_the_attempt_with_one_last_line_and_exit_3(tmp_path):
    verl_step(tmp_path, 2, complete=False)
    marker = tmp_path / "ran"
    result = wrapped(tmp_path, 3, "touch", str(marker))
    assert result.returncode == REFUSED_EXIT == 3
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1 and REFUSED_LINE.match(lines[0])
    assert "none is complete" in lines[0] and "global_step_2" in lines[0]
    assert not marker.exists() and (tmp_path / "global_step_2").is_dir()
    assert STAMP.sub("", log_path(tmp_path, 3).read_text().splitlines()[-1]) == lines[0]


def test_a_command_that_cannot_run_and_bad_usage_are_one_line_each(tmp_path):
    missing = wrapped(tmp_path, 1, str(tmp_path / "no-such-program"))
    assert missing.returncode == 127
    assert missing.stdout.decode().splitlines()[-1].startswith("grpo-gke attempt: cannot run ")
    with shipping.py_modules() as modules:
        env = {**os.environ, "PYTHONPATH": str(Path(modules[0]).parent)}
        env.pop("GRPO_RUN_DIR", None)
        usage = subprocess.run([sys.executable, "-m", "incluster.attempt", "--framework", "verl", "--world-size", "8", "--", "true"],
                               env=env, capture_output=True, text=True, timeout=60, cwd="/")  # fmt: skip
    assert usage.returncode == 2 and len(usage.stderr.splitlines()) == 1 and "GRPO_RUN_DIR" in usage.stderr


NEMO_RL_DEADLINE = "Timeout has been reached, stopping training early"
"""NeMo-RL v0.7.0 nemo_rl/algorithms/grpo.py L3125, printed before grpo_train returns (exit 0) at its deadline."""


def test_a_deadline_stop_that_saved_ends_with_the_wrapper_naming_the_step_and_exit_0(tmp_path):
    verl_step(tmp_path, 2)
    code = (
        f"import pathlib, sys; sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r});"
        f" from tests.incluster.test_attempt import verl_step; verl_step(pathlib.Path({str(tmp_path)!r}), 3);"
        f" print({NEMO_RL_DEADLINE!r})"
    )
    result = wrapped(tmp_path, 2, sys.executable, "-c", code)
    assert result.returncode == 0
    last = result.stdout.decode().splitlines()[-2:]
    assert last == [NEMO_RL_DEADLINE, f"grpo-gke attempt 2: stopped at its deadline after saving step 3"
                    f" ({NEMO_RL_DEADLINE!r}); the run resumes from it"]  # fmt: skip
    assert deadline_stop_in(tmp_path, 2) == 3 and deadline_stop_in(tmp_path, 1) is None


def test_a_deadline_stop_that_saved_nothing_is_a_failed_attempt(tmp_path):
    verl_step(tmp_path, 2)
    result = wrapped(tmp_path, 2, sys.executable, "-c", f"print({NEMO_RL_DEADLINE!r})")
    assert result.returncode == UNSAVED_STOP_EXIT
    assert result.stdout.decode().splitlines()[-1].startswith("grpo-gke attempt 2: failed: the framework stopped at")
    assert deadline_stop_in(tmp_path, 2) is None


def test_an_exit_0_without_the_deadline_line_is_left_as_it_is(tmp_path):
    result = wrapped(
        tmp_path, 1, sys.executable, "-c", "print('Max number of steps has been reached, stopping training early')"
    )
    assert result.returncode == 0 and deadline_stop_in(tmp_path, 1) is None


def test_a_log_that_cannot_be_written_is_reported_once_and_the_output_and_exit_code_are_the_commands(tmp_path):
    """Issue 31 item 7. A boundary fault: the attempt's log on a full volume (the log is /dev/full, whose every write
    fails with ENOSPC)."""
    log_path(tmp_path, 4).parent.mkdir(parents=True)
    log_path(tmp_path, 4).symlink_to("/dev/full")
    code = "import sys; print('out one'); print('out two', flush=True); sys.exit(5)"
    result = wrapped(tmp_path, 4, sys.executable, "-c", code)
    assert result.returncode == 5
    assert result.stdout.decode().splitlines() == [
        f"grpo-gke attempt 4: no checkpoint; starting at step 0 in {tmp_path}", "out one", "out two",
    ]  # fmt: skip
    assert result.stderr.decode().splitlines() == [
        f"grpo-gke attempt 4: cannot write its log {log_path(tmp_path, 4)}: No space left on device; the output goes"
        " on to stdout only"
    ]


def _open_paths() -> set[str]:
    """The files this process holds open."""
    return {
        os.readlink(f"/proc/self/fd/{fd}")
        for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{fd}")
    }


def test_the_log_is_rolled_so_no_line_stays_in_an_open_file_longer_than_the_roll_and_readers_read_every_part(tmp_path):
    """Issue 30 item 7: on Cloud Storage FUSE a file reaches the bucket when it is closed, so a lost head loses what the
    open part holds. Each part is closed `roll_seconds` after it opened, output or not (here 0.5 s for 300). The run's
    metrics are the step lines in it (no verl file logger): the same bound."""
    log = AttemptLog(tmp_path, "4", roll_seconds=0.5)
    log.write(b"step:1 - critic/score/mean:0.5")
    time.sleep(0.8)  # no output for longer than the roll: the part is closed all the same
    assert str(log_path(tmp_path, 4)) not in _open_paths()
    # a head lost now leaves the closed part, and in it the step's metrics: the export's reward is read there
    assert final_reward(tmp_path, "verl", tmp_path, 1) == 0.5
    log.write(b"step:2 - critic/score/mean:0.6")
    log.write(b"grpo-gke attempt 4: stopped at its deadline after saving step 2 ('x'); the run resumes from it")
    time.sleep(0.8)
    log.write(b"last")
    log.close()
    parts = log_parts(tmp_path, 4)
    assert [path.name for path in parts] == ["attempt-4.log", "attempt-4.1.log", "attempt-4.2.log"]
    assert not _open_paths() & {str(path) for path in parts}
    assert logged_lines(tmp_path, 4, 10) == [
        "step:1 - critic/score/mean:0.5", "step:2 - critic/score/mean:0.6",
        "grpo-gke attempt 4: stopped at its deadline after saving step 2 ('x'); the run resumes from it", "last",
    ]  # fmt: skip
    assert logged_lines(tmp_path, 4, 2, most=len(parts[-1].read_bytes()) + 5) == ["last"]
    assert deadline_stop_in(tmp_path, 4) is None and last_log_part(tmp_path, 4) == parts[-1]
    # a wrapper started again for the same attempt writes on after the parts there
    again = AttemptLog(tmp_path, "4", roll_seconds=60)
    again.write(b"step:3 - critic/score/mean:0.7")
    again.close()
    assert logged_lines(tmp_path, 4, 1) == ["step:3 - critic/score/mean:0.7"]
    assert log_parts(tmp_path, 4)[-1].name == "attempt-4.3.log"


def test_a_step_that_fails_to_load_with_no_earlier_complete_step_stays_where_it_is(tmp_path):
    """Falling back needs an earlier complete step: without one the step is left in place (moving it aside would make
    the next attempt start from step 0 and, with --keep, prune it) and the attempt ends with the trainer's code."""
    verl_step(tmp_path, 2)
    error = "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central directory"
    result = wrapped(tmp_path, 2, "sh", "-c", f"echo '{error}'; exit 1", keep=1)
    assert result.returncode == 1
    assert result.stdout.decode().splitlines()[-1] == (
        "grpo-gke attempt 2: global_step_2 failed to load (PytorchStreamReader failed reading); no earlier complete step"
        " to fall back to, so it stays where it is"
    )
    assert (tmp_path / "global_step_2" / "data.pt").is_file() and not (tmp_path / "incomplete").exists()
    assert not (tmp_path / "loaded-step.txt").exists()


NEMO_RL_SAVES = """\
import os, sys
from pathlib import Path

run = Path(os.environ["GRPO_RUN_DIR"])
newest = max((int(path.name.split("_")[1]) for path in run.glob("step_*")), default=0)


def save(step, whole):
    tmp = run / f"tmp_step_{step}"
    (tmp / "policy" / "weights").mkdir(parents=True)
    (tmp / "training_info.json").write_text('{"step": %d}' % step)
    if whole:
        (tmp / "policy" / "weights" / "model.safetensors").write_bytes(b"weights")
        tmp.rename(run / f"step_{step}")


save(newest + 1, True)
save(newest + 2, False)
sys.exit(137)
"""
"""Stands in for NeMo-RL v0.7.0's saves (no stand-in trainer writes its layout): nemo_rl/utils/checkpoint.py
init_tmp_checkpoint makes `tmp_step_<N>/` and writes training_info.json first (L218-228), the policy's weights go
under it, and finalize_checkpoint renames it to `step_<N>` (L247-265). It saves the step after the newest whole,
then is cut during the next save (the fault injected at the boundary: a node lost mid-save, exit 137), leaving
`tmp_step_<N+2>/` with training_info.json only. It does not rotate: keep_top_k is NeMo-RL's own."""


def test_nemo_rl_attempts_keep_the_newest_cut_saves_moved_aside_and_leave_its_complete_steps(tmp_path):
    """Five attempts of a NeMo-RL run, each its submission's entrypoint (jobs/spec/training.py: the wrapper with
    `--keep` grpo.keepCheckpoints around the trainer command) run by a shell as Ray runs it: each moves the last
    attempt's cut `tmp_step_<N>` to `incomplete/`, which keeps the newest two; every complete `step_<N>` stays (the
    wrapper never rotates NeMo-RL's, keep_top_k does)."""
    from jobs.spec.training import submission_of, training_spec
    from tests.conftest import combination_config

    config = combination_config(framework="nemo-rl", grpo={"keepCheckpoints": 2})
    script = tmp_path / "saves.py"
    script.write_text(NEMO_RL_SAVES)
    spec = training_spec(config, f"python3 {script}")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    outputs = []
    with shipping.py_modules() as modules:
        for attempt in range(1, 6):
            entrypoint = submission_of(config, spec, attempt)["entrypoint"]
            assert "--framework nemo-rl" in entrypoint and "--keep 2 " in entrypoint
            env = {**os.environ, "GRPO_RUN_DIR": str(run_dir), "GRPO_ATTEMPT": str(attempt),
                   "PYTHONPATH": str(Path(modules[0]).parent),
                   "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}  # fmt: skip
            result = subprocess.run(["sh", "-c", entrypoint], env=env, capture_output=True, timeout=60, cwd="/")
            assert result.returncode == 137, result.stdout + result.stderr
            outputs.append(result.stdout.decode().splitlines())
    assert sorted(path.name for path in run_dir.glob("step_*")) == [f"step_{n}" for n in range(1, 6)]
    assert [path.name for path in run_dir.glob("tmp_step_*")] == ["tmp_step_6"], "the last cut, not yet moved"
    aside = sorted(path.name.rsplit("-", 1)[0] for path in (run_dir / "incomplete").iterdir())
    assert aside == ["tmp_step_4", "tmp_step_5"]
    assert outputs[4][0] == f"grpo-gke attempt 5: resuming from step_4 (step 4) in {run_dir}"
    removed = re.fullmatch(r"grpo-gke attempt 5: removed (\S+) \(keeping the newest 2 checkpoints\)", outputs[4][1])
    assert removed is not None and removed.group(1).startswith("incomplete/tmp_step_3-")
