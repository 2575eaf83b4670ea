"""The newest *complete* checkpoint of a run directory, and making the framework resume from it.

verl 0.9.1 (`verl/utils/checkpoint/fsdp_checkpoint_manager.py`, `verl/trainer/ppo/ray_trainer.py`
`_save_checkpoint`): `global_step_<N>/actor/` holds `model_`, `optim_` and `extra_state_world_size_<W>_rank_<r>.pt`
for every rank r < W and rank 0's `fsdp_config.json`; the trainer writes `global_step_<N>/data.pt`
(the dataloader state) after the actor's save, then `latest_checkpointed_iteration.txt` in the run
directory, which it skips under `async_save` (verl-project/verl#7952), so `resume_mode=auto` reads
the tracker or starts from step 0.

verl's rotation (`trainer.max_actor_ckpt_to_keep`) deletes only the actor directory of a step and only of the
steps this attempt saved: verl 0.9.1 verl/trainer/ppo/v1/trainer_base.py L972-979 passes it the path
`global_step_<N>/actor`, verl/utils/checkpoint/checkpoint_manager.py L59 starts `previous_saved_paths` empty in every
process, L181-194 (register_checkpoint) and L166-179 (ensure_checkpoint_capacity) remove the oldest of that list,
and L156-164 rmtree just those paths. So a rotated step leaves `global_step_<N>/data.pt` without `actor/`
(`ROTATED`, never a half-written step: the actor is saved before data.pt, trainer_base.py L978-999), and every
earlier attempt's steps stay. `prunable(keep=K)`, which the attempt wrapper decides right after `prepare_resume` and
carries out (`prune`) once the framework has loaded the step it resumed from, finishes the rotation across attempts:
it removes the rotated remains and every complete step but the newest K, never the newest step a resume has loaded
(`loaded_step`), and the moved-aside directories of `incomplete/` but the newest K.

A step is complete when every file is there and whole: each `.pt` a whole zip archive (`torn`), fsdp_config.json JSON.
A whole-looking step can still fail to load (bytes lost inside a file a node never flushed): the wrapper then moves it
aside as unloadable and resumes from the previous complete step (incluster/attempt.py).

NeMo-RL (`nemo_rl/utils/checkpoint.py`, NVIDIA-NeMo/RL @01e9028): a step is written into
`tmp_step_<N>/` (training_info.json first) and renamed to `step_<N>/` when complete; resume takes the
`step_<N>` with the highest N (`get_latest_checkpoint_path`), so an incomplete one must not be named
`step_<N>`. Its rotation (`checkpointing.keep_top_k`) needs no help with the complete steps: at v0.7.0 (81aa43d)
remove_old_checkpoints (L268-313), called by finalize_checkpoint after each rename (L266), lists every `step_<N>` of
the directory (_load_checkpoint_history, L393-419: the glob `step_*` of L410, fullmatch `step_\\d+`), whichever attempt
wrote it, and removes whole step directories beyond the newest K (by step when metric_name is null, L291-292). It
never reaches `incomplete/`, where the wrapper moves cut `tmp_step_<N>` saves aside: `prunable` trims that for both
frameworks.

Pod-side (the attempt wrapper, incluster/attempt.py, runs it in the framework image; incluster/): stdlib only. Filesystem reads, plus the writes `prepare_resume` makes: moving incomplete step directories
into `<run dir>/incomplete/`, verl's tracker file and, with `keep`, removing the moved-aside directories beyond
`grpo.keepCheckpoints` (which the user asked to keep no more of) and, for verl, what its rotation leaves and the
complete steps beyond it.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

VERL_TRACKER = "latest_checkpointed_iteration.txt"
"""verl's file naming the step `resume_mode=auto` loads (checkpoint_manager.get_checkpoint_tracker_filename)."""

VERL_SHARDS = ("model", "optim", "extra_state")
"""Per-rank files of verl's actor checkpoint (default checkpoint contents model, optimizer, extra)."""

ROTATED = "data.pt"
"""What verl's rotation leaves of a step: `global_step_<N>/data.pt`, without the `actor/` it deleted."""

INCOMPLETE_DIR = "incomplete"
"""Directory of the run where incomplete step directories are moved aside."""

_STEP_NAMES = {
    "verl": re.compile(r"global_step_(\d+)"),
    "nemo-rl": re.compile(r"(?:tmp_)?step_(\d+)"),
}


def step_of(name: str, framework: str) -> int | None:
    """The step a finished step directory named `name` holds for the framework (`global_step_<N>`, `step_<N>`), else
    None: NeMo-RL's `tmp_step_<N>` is a save still under way (or cut), never a step."""
    match = _STEP_NAMES[framework].fullmatch(name)
    return int(match.group(1)) if match is not None and not name.startswith("tmp_") else None


class CheckpointError(Exception):
    """Checkpoints exist but none is complete; the message is one line naming what is missing."""


@dataclass(frozen=True)
class StepDir:
    """One step directory of a run and what it lacks to be complete."""

    step: int
    """The training step it holds."""
    path: Path
    """The directory."""
    missing: tuple[str, ...]
    """Files or directories (relative to `path`) it lacks; empty when complete."""

    @property
    def complete(self) -> bool:
        """Whether the framework can resume from it."""
        return not self.missing


def torn(path: Path) -> str:
    """Why the `torch.save` file at `path` is not whole ("" when it is). torch.save writes a zip archive straight to
    its name and its end of central directory record last (torch 2.13.0 torch/serialization.py L810-834:
    `_open_zipfile_writer_file.__exit__` calls `write_end_of_file`; caffe2/serialize/inline_container.h L89-90: "it
    puts its central directory at the end of the archive"), and verl 0.9 writes each shard and data.pt that way
    (verl v0.9.0 verl/utils/checkpoint/fsdp_checkpoint_manager.py L347, L352, L361; verl/trainer/ppo/ray_trainer.py
    L1032-1034; v0.9.1 assumed the same, its tag is not in the mirror read): a file cut short lacks the record, or its
    central directory, or the last member that precedes it. Reads the end of the file and one local header."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
            if not members:
                return "an empty archive"
            with archive.open(max(members, key=lambda member: member.header_offset)):
                pass
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        return f"cut short ({error})"
    return ""


def step_files(framework: str, world_size: int) -> tuple[str, ...]:
    """What a complete step directory holds, relative to it (a name ending in `/`: a directory of files): verl's
    shards of every rank, rank 0's fsdp_config.json and data.pt; NeMo-RL's training_info.json and policy/weights."""
    if framework == "verl":
        shards = [
            f"actor/{kind}_world_size_{world_size}_rank_{rank}.pt" for kind in VERL_SHARDS for rank in range(world_size)
        ]
        return (*shards, "actor/fsdp_config.json", "data.pt")
    return ("training_info.json", "policy/weights/")


def step_lacks(name: str, framework: str, world_size: int, held: Callable[[str], bool]) -> tuple[str, ...]:
    """What the step directory `name` lacks to be complete (empty when nothing): the one rule of a complete step, for
    the resume (files on disk, here) and the park (the names of what the instance holds, incluster/park.py). `held`
    says whether one of `step_files` is there. A directory `step_of` takes for no step (NeMo-RL's `tmp_step_<N>`) also
    lacks its rename."""
    missing = [f"the rename to {name.removeprefix('tmp_')}"] if step_of(name, framework) is None else []
    missing += [path.rstrip("/") for path in step_files(framework, world_size) if not held(path)]
    return tuple(missing)


def _on_disk(step_dir: Path) -> Callable[[str], bool]:
    """`step_lacks`'s `held` for a step directory on disk: a file, or a directory for a name ending in `/`."""
    return lambda path: (step_dir / path).is_dir() if path.endswith("/") else (step_dir / path).is_file()


def _missing_verl(path: Path, world_size: int) -> tuple[str, ...]:
    missing = step_lacks(path.name, "verl", world_size, _on_disk(path))
    if missing:
        return missing
    cut = [name for name in step_files("verl", world_size) if name.endswith(".pt") and torn(path / name)]
    try:
        json.loads((path / "actor/fsdp_config.json").read_bytes())
    except (OSError, ValueError):
        cut.append("actor/fsdp_config.json")
    return tuple(f"a whole {name}" for name in cut)


def _missing_nemo_rl(path: Path) -> tuple[str, ...]:
    return step_lacks(path.name, "nemo-rl", 0, _on_disk(path))


def rotated(path: Path, framework: str) -> bool:
    """Whether `path` is what verl's rotation left of a step (its data.pt, no actor/), not a step directory."""
    return framework == "verl" and (path / ROTATED).is_file() and not (path / "actor").exists()


def _candidates(run_dir: Path, framework: str) -> list[tuple[int, Path]]:
    """Every directory named as one of the framework's steps, with its step number."""
    pattern = _STEP_NAMES[framework]
    found = []
    for path in run_dir.iterdir() if run_dir.is_dir() else ():
        match = pattern.fullmatch(path.name)
        if match is not None and path.is_dir():
            found.append((int(match.group(1)), path))
    return found


def step_dirs(run_dir: Path, framework: str, world_size: int) -> list[StepDir]:
    """The run's step directories (not verl's rotated remains), by step number (then name), each with what it
    lacks."""
    found = []
    for step, path in _candidates(run_dir, framework):
        if rotated(path, framework):
            continue
        missing = _missing_verl(path, world_size) if framework == "verl" else _missing_nemo_rl(path)
        found.append(StepDir(step, path, missing))
    return sorted(found, key=lambda item: (item.step, item.path.name))


def newest_complete(run_dir: Path, framework: str, world_size: int) -> StepDir | None:
    """The complete step directory with the highest step; None when the run has no step directory.

    CheckpointError when step directories exist but none is complete.
    """
    found = step_dirs(run_dir, framework, world_size)
    complete = [item for item in found if item.complete]
    if complete:
        return complete[-1]
    if not found:
        return None
    newest = found[-1]
    shown = ", ".join(newest.missing[:3]) + (f" and {len(newest.missing) - 3} more" if len(newest.missing) > 3 else "")
    raise CheckpointError(
        f"refused: {run_dir} has {len(found)} checkpoint(s) and none is complete (the newest, {newest.path.name},"
        f" lacks {shown}); not starting over the run: move them away or submit --fresh"
    )


LOADED_FILE = "loaded-step.txt"
"""In the run directory: the newest step a resume has loaded (the attempt wrapper writes it once the framework reported a
step beyond the one it resumed from, so that step's files were read whole); prune never removes it."""


def loaded_step(run_dir: Path) -> int | None:
    """The newest step a resume has loaded (LOADED_FILE), None when none has or the file is unreadable."""
    try:
        text = (run_dir / LOADED_FILE).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def mark_loaded(run_dir: Path, step: int) -> None:
    """Record that a resume loaded `step` (written whole: a temporary file renamed over LOADED_FILE)."""
    partial = run_dir / f".{LOADED_FILE}.tmp"
    partial.write_text(f"{step}\n")
    partial.replace(run_dir / LOADED_FILE)


def prunable(run_dir: Path, framework: str, world_size: int, keep: int | None, loaded: int | None) -> list[Path]:
    """What `prune` removes with `keep` (none without one): the oldest moved-aside directories of `incomplete/` beyond
    the newest `keep` by the UTC time that ends their names (cut saves would otherwise fill the instance), for either
    framework; and for verl, its rotated remains and every complete step but the newest `keep` except step `loaded`
    (the newest a resume has loaded, or the one it is loading: the wrapper removes these only after that load, so a
    step is kept until a newer one has loaded). Rotated remains of a step beyond `loaded` stay: the attempt resuming
    from `loaded` saves that step again into the same directory, and removing it after the load would race that save
    (seen in tests/incluster/test_checkpoints_on_ray.py: the new save's shard written into a directory just removed); a
    later attempt's prune removes what verl's rotation then leaves of it. NeMo-RL's complete steps are its own
    rotation's (checkpointing.keep_top_k, which reaches every `step_<N>` of the directory and never `incomplete/`:
    see the module's docstring). Incomplete steps are left to prepare_resume's move aside."""
    if not keep or keep < 1:
        return []
    removed = []
    if framework == "verl":
        removed += [
            path
            for step, path in sorted(_candidates(run_dir, framework))
            if rotated(path, framework) and (loaded is None or step <= loaded)
        ]
        complete = [item for item in step_dirs(run_dir, framework, world_size) if item.complete]
        removed += [item.path for item in complete[: max(0, len(complete) - keep)] if item.step != loaded]
    aside = run_dir / INCOMPLETE_DIR
    moved = sorted(aside.iterdir(), key=lambda path: (path.name[-16:], path.name)) if aside.is_dir() else []
    return removed + moved[: max(0, len(moved) - keep)]


def prune(paths: list[Path]) -> list[Path]:
    """Remove the directories `prunable` chose (those already gone are skipped); the removed ones."""
    removed = [path for path in paths if path.exists()]
    for path in removed:
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    return removed


def move_aside(run_dir: Path, step_dir: Path, why: str = "", now: datetime | None = None) -> Path:
    """Move a step directory to `<run dir>/incomplete/<name>-<UTC time>` (`<name>-<why>-<UTC time>` with `why`), its
    files kept; the new path."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    aside = run_dir / INCOMPLETE_DIR / "-".join(part for part in (step_dir.name, why, stamp) if part)
    aside.parent.mkdir(exist_ok=True)
    step_dir.rename(aside)
    return aside


def prepare_resume(run_dir: Path, framework: str, world_size: int, now: datetime | None = None) -> StepDir | None:
    """Make the framework resume from the newest complete step (None: from scratch, no checkpoint exists).

    Incomplete step directories move to `<run dir>/incomplete/<name>-<UTC time>` (verl's rotated remains are not
    steps and stay, for prune); for verl the tracker file is rewritten to the step. CheckpointError (nothing
    moved) when none is complete.
    """
    chosen = newest_complete(run_dir, framework, world_size)
    if chosen is None:
        return None
    for item in step_dirs(run_dir, framework, world_size):
        if not item.complete:
            move_aside(run_dir, item.path, now=now)
    if framework == "verl":
        tracker = run_dir / VERL_TRACKER
        partial = tracker.with_name(f".{VERL_TRACKER}.tmp")
        partial.write_text(str(chosen.step))
        partial.replace(tracker)
    return chosen


def main(argv: list[str] | None = None) -> int:
    """`python -m incluster.checkpoints RUN_DIR FRAMEWORK WORLD_SIZE`: prepare the resume; one line, exit 2 when refused."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3 or args[1] not in _STEP_NAMES or not args[2].isdigit() or int(args[2]) < 1:
        print("usage: python -m incluster.checkpoints RUN_DIR verl|nemo-rl WORLD_SIZE", file=sys.stderr)
        return 2
    run_dir, framework, world_size = Path(args[0]), args[1], int(args[2])
    try:
        chosen = prepare_resume(run_dir, framework, world_size)
    except CheckpointError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(f"resuming from {chosen.path.name}" if chosen else f"no checkpoint in {run_dir}; starting at step 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
