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
earlier attempt's steps stay. `prune(keep=K)`, run by the attempt wrapper after `prepare_resume`, finishes the
rotation across attempts: it removes the rotated remains and every complete step but the newest K.

NeMo-RL (`nemo_rl/utils/checkpoint.py`, NVIDIA-NeMo/RL @01e9028): a step is written into
`tmp_step_<N>/` (training_info.json first) and renamed to `step_<N>/` when complete; resume takes the
`step_<N>` with the highest N (`get_latest_checkpoint_path`), so an incomplete one must not be named
`step_<N>`. Its rotation (`checkpointing.keep_top_k`) needs no help: at v0.7.0 remove_old_checkpoints (L268-313)
lists every `step_<N>` of the directory (_load_checkpoint_history, L393-419), whichever attempt wrote it, and removes
whole step directories beyond the newest K (by step when metric_name is null, L291-292).

Pod-side (the attempt wrapper, incluster/attempt.py, runs it in the framework image; incluster/): stdlib only. Filesystem reads, plus the writes `prepare_resume` makes: moving incomplete step directories
into `<run dir>/incomplete/` (never deleting them), verl's tracker file and, with `keep`, removing what verl's
rotation leaves and the complete steps beyond `grpo.keepCheckpoints` (which the user asked to keep no more of).
"""

from __future__ import annotations

import re
import shutil
import sys
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
    """The step a directory named `name` holds for the framework (`global_step_<N>`, `step_<N>`), else None."""
    match = _STEP_NAMES[framework].fullmatch(name)
    return int(match.group(1)) if match is not None else None


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


def _missing_verl(path: Path, world_size: int) -> tuple[str, ...]:
    wanted = [
        f"actor/{kind}_world_size_{world_size}_rank_{rank}.pt" for kind in VERL_SHARDS for rank in range(world_size)
    ]
    wanted += ["actor/fsdp_config.json", "data.pt"]
    return tuple(name for name in wanted if not (path / name).is_file())


def _missing_nemo_rl(path: Path) -> tuple[str, ...]:
    missing = [] if path.name.startswith("step_") else [f"the rename to step_{path.name.rsplit('_', 1)[1]}"]
    missing += [name for name in ("training_info.json", "policy/weights") if not (path / name).exists()]
    return tuple(missing)


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


def prune(run_dir: Path, framework: str, world_size: int, keep: int) -> list[Path]:
    """Remove verl's rotated remains and every complete step but the newest `keep` (at least 1); the removed
    directories. Incomplete steps are left to prepare_resume's move aside."""
    if framework != "verl" or keep < 1:
        return []
    removed = [path for _, path in sorted(_candidates(run_dir, framework)) if rotated(path, framework)]
    complete = [item.path for item in step_dirs(run_dir, framework, world_size) if item.complete]
    removed += complete[: max(0, len(complete) - keep)]
    for path in removed:
        shutil.rmtree(path)
    return removed


def prepare_resume(run_dir: Path, framework: str, world_size: int, now: datetime | None = None) -> StepDir | None:
    """Make the framework resume from the newest complete step (None: from scratch, no checkpoint exists).

    Incomplete step directories move to `<run dir>/incomplete/<name>-<UTC time>` (verl's rotated remains are not
    steps and stay, for prune); for verl the tracker file is rewritten to the step. CheckpointError (nothing
    moved) when none is complete.
    """
    chosen = newest_complete(run_dir, framework, world_size)
    if chosen is None:
        return None
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    for item in step_dirs(run_dir, framework, world_size):
        if not item.complete:
            aside = run_dir / INCOMPLETE_DIR / f"{item.path.name}-{stamp}"
            aside.parent.mkdir(exist_ok=True)
            item.path.rename(aside)
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
