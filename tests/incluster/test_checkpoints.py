"""The newest complete checkpoint of a run, the verl tracker, the move-aside, the refusal, and the rotation kept
across attempts (verl's rotated remains are not half-written steps)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from incluster.checkpoints import CheckpointError, newest_complete, prepare_resume, prunable, prune, step_of
from jobs.demo.stand_in_trainer import write_archive
from plan.harness import REPO_ROOT

WORLD = 16
NOW = datetime(2026, 12, 1, 10, 0, 0, tzinfo=UTC)


def verl_step(run_dir: Path, step: int, world: int = WORLD, skip: tuple[str, ...] = ()) -> Path:
    """A verl global_step_<step> as verl 0.9.1 writes it, without the files named in `skip`."""
    path = run_dir / f"global_step_{step}"
    names = [
        f"actor/{kind}_world_size_{world}_rank_{rank}.pt"
        for kind in ("model", "optim", "extra_state")
        for rank in range(world)
    ]
    names += ["actor/fsdp_config.json", "actor/huggingface/config.json", "data.pt"]
    for name in names:
        if name not in skip:
            (path / name).parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(".pt"):
                write_archive(path / name, {"step": step})
            else:
                (path / name).write_text(json.dumps({"name": name}))
    return path


def rotated_step(run_dir: Path, step: int) -> Path:
    """What verl 0.9.1's rotation leaves of a step: its data.pt, the actor/ removed (checkpoint_manager.py L156-164)."""
    path = verl_step(run_dir, step)
    shutil.rmtree(path / "actor")
    return path


def nemo_step(run_dir: Path, step: int, renamed: bool = True) -> Path:
    """A NeMo-RL step directory, finished (renamed to step_N) or still tmp_step_N."""
    path = run_dir / f"{'' if renamed else 'tmp_'}step_{step}"
    (path / "policy" / "weights").mkdir(parents=True)
    (path / "training_info.json").write_text("{}")
    return path


def tree(root: Path) -> set[str]:
    return {str(path.relative_to(root)) for path in root.rglob("*") if path.is_file()}


def test_the_newest_complete_verl_step_is_found_past_half_written_ones(tmp_path):
    verl_step(tmp_path, 10)
    verl_step(tmp_path, 20)
    verl_step(tmp_path, 30, skip=("actor/optim_world_size_16_rank_7.pt",))
    verl_step(tmp_path, 40, skip=("data.pt",))
    chosen = newest_complete(tmp_path, "verl", WORLD)
    assert chosen is not None and chosen.path.name == "global_step_20"


def test_steps_order_by_number_not_text(tmp_path):
    verl_step(tmp_path, 9)
    verl_step(tmp_path, 10)
    assert newest_complete(tmp_path, "verl", WORLD).step == 10


def test_shards_of_another_world_size_are_not_complete(tmp_path):
    verl_step(tmp_path, 5, world=8)
    with pytest.raises(CheckpointError, match="model_world_size_16_rank_0.pt"):
        newest_complete(tmp_path, "verl", WORLD)


def test_no_step_directory_means_from_scratch(tmp_path):
    assert newest_complete(tmp_path, "verl", WORLD) is None
    assert newest_complete(tmp_path / "absent", "nemo-rl", WORLD) is None
    assert prepare_resume(tmp_path, "verl", WORLD, NOW) is None
    assert not (tmp_path / "latest_checkpointed_iteration.txt").exists()


def test_verl_resume_rewrites_the_tracker_and_moves_incomplete_steps_aside_without_deleting(tmp_path):
    verl_step(tmp_path, 10)
    verl_step(tmp_path, 20, skip=("actor/model_world_size_16_rank_3.pt",))
    (tmp_path / "latest_checkpointed_iteration.txt").write_text("20")
    before = tree(tmp_path)
    chosen = prepare_resume(tmp_path, "verl", WORLD, NOW)
    assert chosen.step == 10
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "10"
    assert not (tmp_path / "global_step_20").exists()
    aside = tmp_path / "incomplete" / "global_step_20-20261201T100000Z"
    moved = {name.replace("incomplete/global_step_20-20261201T100000Z", "global_step_20") for name in tree(tmp_path)}
    assert aside.is_dir() and moved == before
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith("global_step_")] == ["global_step_10"]


def test_verls_rotated_remains_are_not_half_written_steps_and_stay_where_they_are(tmp_path):
    rotated_step(tmp_path, 10)
    verl_step(tmp_path, 20)
    verl_step(tmp_path, 30, skip=("data.pt", "actor/optim_world_size_16_rank_9.pt"))
    assert prepare_resume(tmp_path, "verl", WORLD, NOW).step == 20
    assert [path.name for path in (tmp_path / "incomplete").iterdir()] == ["global_step_30-20261201T100000Z"]
    assert sorted(path.name for path in tmp_path.glob("global_step_*")) == ["global_step_10", "global_step_20"]


def test_prune_keeps_the_newest_complete_steps_of_every_attempt_and_removes_verls_rotated_remains(tmp_path):
    """Attempt 1 saved 10-30 and rotated 10 away, attempt 2 saved 40 (its rotation knows only 40), 50 was cut short:
    with keep 2 the next attempt starts from 30 and 40 alone, 50 moved aside as before."""
    rotated_step(tmp_path, 10)
    for step in (20, 30, 40):
        verl_step(tmp_path, step)
    verl_step(tmp_path, 50, skip=("data.pt",))
    assert prepare_resume(tmp_path, "verl", WORLD, NOW).step == 40
    removed = prune(prunable(tmp_path, "verl", WORLD, 2, loaded=40))
    assert [path.name for path in removed] == ["global_step_10", "global_step_20"]
    assert sorted(path.name for path in tmp_path.iterdir()) == [
        "global_step_30", "global_step_40", "incomplete", "latest_checkpointed_iteration.txt",
    ]  # fmt: skip
    assert prune(prunable(tmp_path, "verl", WORLD, 2, loaded=40)) == []
    assert [path.name for path in prune(prunable(tmp_path, "verl", WORLD, 1, loaded=40))] == ["global_step_30"]


def test_prune_leaves_nemo_rl_alone_whose_keep_top_k_reaches_every_step_of_the_directory(tmp_path):
    for step in (10, 20, 30):
        nemo_step(tmp_path, step)
    assert prunable(tmp_path, "nemo-rl", WORLD, 1, loaded=None) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["step_10", "step_20", "step_30"]


def test_none_complete_is_refused_with_the_directory_and_what_is_missing_and_nothing_moves(tmp_path):
    verl_step(tmp_path, 10, skip=("data.pt",))
    verl_step(tmp_path, 20, skip=("data.pt", "actor/extra_state_world_size_16_rank_15.pt"))
    before = tree(tmp_path)
    with pytest.raises(CheckpointError) as caught:
        prepare_resume(tmp_path, "verl", WORLD, NOW)
    message = str(caught.value)
    assert "\n" not in message and str(tmp_path) in message
    assert "global_step_20" in message and "extra_state_world_size_16_rank_15.pt" in message and "data.pt" in message
    assert tree(tmp_path) == before


def test_nemo_rl_takes_the_newest_renamed_step_and_moves_a_tmp_step_aside(tmp_path):
    nemo_step(tmp_path, 10)
    nemo_step(tmp_path, 20)
    nemo_step(tmp_path, 30, renamed=False)
    chosen = prepare_resume(tmp_path, "nemo-rl", WORLD, NOW)
    assert chosen.path.name == "step_20"
    assert (tmp_path / "incomplete" / "tmp_step_30-20261201T100000Z" / "training_info.json").is_file()
    assert sorted(path.name for path in tmp_path.iterdir()) == ["incomplete", "step_10", "step_20"]
    assert not (tmp_path / "latest_checkpointed_iteration.txt").exists()


def test_nemo_rl_step_without_weights_is_not_complete(tmp_path):
    path = tmp_path / "step_5"
    path.mkdir()
    (path / "training_info.json").write_text("{}")
    with pytest.raises(CheckpointError, match="step_5, lacks policy/weights"):
        newest_complete(tmp_path, "nemo-rl", WORLD)


def run_module(*args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "incluster.checkpoints", *args]
    return subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)


def test_the_command_resumes_or_refuses_in_one_line(tmp_path):
    verl_step(tmp_path, 4)
    done = run_module(str(tmp_path), "verl", str(WORLD))
    assert (done.returncode, done.stdout, done.stderr) == (0, "resuming from global_step_4\n", "")
    verl_step(tmp_path / "broken", 4, skip=("data.pt",))
    refused = run_module(str(tmp_path / "broken"), "verl", str(WORLD))
    assert refused.returncode == 2 and refused.stdout == ""
    assert refused.stderr.startswith("error: refused: ") and refused.stderr.count("\n") == 1
    bad = run_module(str(tmp_path), "megatron", "8")
    assert (
        bad.returncode == 2 and bad.stderr == "usage: python -m incluster.checkpoints RUN_DIR verl|nemo-rl WORLD_SIZE\n"
    )


def test_the_newest_step_a_resume_loaded_is_kept_beyond_keep_until_a_newer_one_has_loaded(tmp_path):
    for step in (10, 20, 30):
        verl_step(tmp_path, step)
    assert [path.name for path in prunable(tmp_path, "verl", WORLD, 1, loaded=20)] == ["global_step_10"]
    assert [path.name for path in prunable(tmp_path, "verl", WORLD, 1, loaded=30)] == [
        "global_step_10",
        "global_step_20",
    ]


def test_rotated_remains_beyond_the_step_a_resume_loads_stay_for_that_attempt_to_save_again(tmp_path):
    """After a fall back to step 20, the attempt saves steps 30 and 40 again into the directories verl's rotation left:
    removing them once it loaded 20 would race its own saves; with nothing loaded yet (a start from scratch, pruned
    before the trainer runs) every rotated remain goes."""
    verl_step(tmp_path, 20)
    for step in (10, 30, 40):
        rotated_step(tmp_path, step)
    assert [path.name for path in prunable(tmp_path, "verl", WORLD, 1, loaded=20)] == ["global_step_10"]
    assert [path.name for path in prunable(tmp_path, "verl", WORLD, 1, loaded=None)] == [
        "global_step_10", "global_step_30", "global_step_40",
    ]  # fmt: skip


def test_a_shard_cut_short_or_without_its_end_of_central_directory_is_not_whole_and_the_step_not_complete(tmp_path):
    """A boundary fault: a save whose last bytes never reached the storage (a node lost before its cache was
    flushed): the file cut short, or its end of central directory record zero; a step 10 whose fsdp_config.json was cut
    leaves no complete step."""
    verl_step(tmp_path, 10)
    shard = verl_step(tmp_path, 20) / "actor/optim_world_size_16_rank_15.pt"
    whole = shard.read_bytes()
    shard.write_bytes(whole[: len(whole) - 30])
    assert newest_complete(tmp_path, "verl", WORLD).step == 10
    shard.write_bytes(whole[:-22] + bytes(22))  # the length kept, the end of central directory record zero
    assert newest_complete(tmp_path, "verl", WORLD).step == 10
    (tmp_path / "global_step_10" / "actor/fsdp_config.json").write_text('{"FSDP_vers')
    with pytest.raises(CheckpointError, match="lacks a whole actor/optim_world_size_16_rank_15.pt"):
        newest_complete(tmp_path, "verl", WORLD)


def test_a_nemo_rl_tmp_step_is_no_step_whoever_asks():
    """What park.py and the export read a step number from: NeMo-RL's unfinished `tmp_step_<N>` is not step N."""
    assert step_of("tmp_step_30", "nemo-rl") is None
    assert step_of("step_30", "nemo-rl") == step_of("global_step_30", "verl") == 30
    assert step_of("global_step_30-20261201T100000Z", "verl") is step_of("step_x", "nemo-rl") is None
