"""The export Ray job's driver (pod-side, incluster/: the standard library and the shipped incluster package only): picks the
checkpoint (the given step, which must be complete, or the newest complete one), runs the framework's converter
into a fresh directory beside `<exports root>/step-<N>/`, writes `lineage.json` there, then renames it to
`step-<N>/`: a `step-<N>/` is always whole, and one that exists is an export already done (exit 0, nothing run).

The converter's target must not exist: NeMo-RL v0.7.0 raises FileExistsError when it does
(nemo_rl/utils/native_checkpoint.py L235-238 convert_dcp_to_hf, nemo_rl/models/megatron/community_import.py
L213-215 export_model_from_megatron; neither examples/converters script passes `overwrite`), and verl 0.9.1's
merger creates it (verl/model_merger/base_model_merger.py L162, `exist_ok=True`). A converter that fails leaves
nothing behind: its scratch directory is removed.

verl's reward at the exported step is read from the step lines of the attempts' logs (the attempt wrapper's rolled
parts, incluster/attempt.py log_parts), the lines `status` and `plot` read: on Cloud Storage a part reaches the bucket
within ROLL_SECONDS, where a file verl held open for the whole attempt would be lost with the head.

`python3 -m incluster.export_run --framework F --run-dir D --world-size W --exports-root E --run R --spec-hash H
[--step N] -- CONVERTER...`: in CONVERTER, @STEP_DIR@ and @TARGET_DIR@ stand for the checkpoint and the model
directory. Exit codes: the converter's; 3 when no complete checkpoint fits or `step-<N>/` is there without its
lineage.json (one line).
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from incluster.attempt import log_parts
from incluster.checkpoints import CheckpointError, newest_complete, step_dirs
from incluster.progress import VERL_SCORE_KEY, parse_verl_metrics
from incluster.runs import logged_attempts

STEP_DIR = "@STEP_DIR@"
"""Stands for the chosen checkpoint directory in the converter's command."""

TARGET_DIR = "@TARGET_DIR@"
"""Stands for the model directory in the converter's command."""

REWARD_KEYS = {"verl": VERL_SCORE_KEY, "nemo-rl": "val_reward"}
"""The reward each framework records: verl's per-step metric in its console step line, which carries every numeric
metric the step logged (verl 0.9.1 verl/utils/tracking.py L191-194 Tracking.log hands the same dict to every backend;
verl/utils/logger/aggregate_logger.py L26-32 concat_dict_to_str prints each numbers.Number value, L49-51 LocalLogger.log;
`critic/score/mean` is a Python float, verl/trainer/ppo/metric_utils.py L474-475 and L556), NeMo-RL's validation reward
in the step's training_info.json."""

REFUSED = 3
"""Exit code when no complete checkpoint fits, or the model directory is there without its lineage."""

LINEAGE = "lineage.json"
"""The file of a model directory that records where it came from, written last before the rename."""

SUBMISSION_PREFIX = "export"
"""The word between the run and the step in an export's submission id."""


def export_submission_id(run: str, step: int) -> str:
    """The export job's Ray submission id for the run's step: the same for the same export, so a second
    submission is refused by Ray and followed instead (incluster/export_submission.py submit_export)."""
    return f"{run}-{SUBMISSION_PREFIX}-step-{step}"


def retry_id(submission_id: str, retry: int) -> str:
    """The id of try `retry` (1, 2, ...) of an export: itself first, then `-try-<retry>`, each after the one
    before ended FAILED or STOPPED (Ray keeps a finished job's id, so a new try needs a new one)."""
    return submission_id if retry == 1 else f"{submission_id}-try-{retry}"


def for_step(submission: dict[str, Any], run: str, step: int) -> dict[str, Any]:
    """An export submission of the newest checkpoint (jobs/runs/export.py export_submission, no step) pinned to `step`:
    `--step` in its driver's arguments, the step in its metadata and its deterministic submission id."""
    words = shlex.split(submission["entrypoint"])
    split = words.index("--")
    words[split:split] = ["--step", str(step)]
    metadata = {**submission.get("metadata", {}), "step": str(step)}
    return {
        **submission,
        "submission_id": export_submission_id(run, step),
        "entrypoint": shlex.join(words),
        "metadata": metadata,
    }


def choose(run_dir: Path, framework: str, world_size: int, step: int | None) -> Path:
    """The checkpoint to export; CheckpointError (one line) when the step is absent or incomplete, or none is."""
    if step is None:
        chosen = newest_complete(run_dir, framework, world_size)
        if chosen is None:
            raise CheckpointError(f"refused: {run_dir} holds no checkpoint to export")
        return chosen.path
    for item in step_dirs(run_dir, framework, world_size):
        if item.step == step and item.complete:
            return item.path
    raise CheckpointError(f"refused: {run_dir} has no complete checkpoint of step {step}")


def final_reward(run_dir: Path, framework: str, step_dir: Path, step: int) -> float | None:
    """The reward at the exported step: verl's `critic/score/mean` of the latest step at or before it in the step lines
    of every attempt's log (a step an attempt ran again: the later attempt's line), NeMo-RL's `val_reward` of the step;
    None when not recorded."""
    key = REWARD_KEYS[framework]
    if framework == "nemo-rl":
        info = step_dir / "training_info.json"
        value = json.loads(info.read_text()).get(key) if info.is_file() else None
        return float(value) if isinstance(value, (int, float)) else None
    found: tuple[int, float] | None = None
    for at, reward in _logged_rewards(run_dir, key):
        if at <= step and (found is None or at >= found[0]):
            found = (at, reward)
    return found[1] if found else None


def _logged_rewards(run_dir: Path, key: str) -> Iterator[tuple[int, float]]:
    """The (step, `key`) of every verl step line that carries `key`, in every attempt's log, oldest attempt first, each
    log read line by line across its parts (a log is GBs); a part that cannot be read is skipped."""
    try:
        names = [path.name for path in (run_dir / "logs").iterdir()]
    except OSError:
        return
    for attempt in sorted(logged_attempts(names)):
        for path in log_parts(run_dir, attempt):
            try:
                with path.open(encoding="utf-8", errors="replace") as log:
                    for line in log:
                        metrics = parse_verl_metrics(line.split("\t", 1)[-1]) if "step:" in line else None
                        if metrics and "step" in metrics and key in metrics:
                            yield int(metrics["step"]), metrics[key]
            except OSError:
                continue


def lineage(run: str, spec_hash: str, step: int, reward: float | None, source: Path) -> dict[str, Any]:
    """What lineage.json records: the run, its spec hash, the step, the final reward and the checkpoint."""
    return {"run": run, "specHash": spec_hash, "step": step, "finalReward": reward, "sourceCheckpoint": str(source)}


def main(argv: list[str] | None = None) -> int:
    """Export one checkpoint; return the exit code."""
    args, command = _parse(sys.argv[1:] if argv is None else argv)
    run_dir = Path(args.run_dir)
    try:
        step_dir = choose(run_dir, args.framework, args.world_size, args.step)
    except CheckpointError as error:
        print(f"grpo-gke export: {error}", flush=True)
        return REFUSED
    step = int(step_dir.name.rsplit("_", 1)[1])
    root = Path(args.exports_root)
    target = root / f"step-{step}"
    if target.exists():
        return _already(target)
    root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".step-{step}-", dir=root))
    try:
        fresh = scratch / "model"  # not there yet: the converter makes it
        filled = [part.replace(STEP_DIR, str(step_dir)).replace(TARGET_DIR, str(fresh)) for part in command]
        print(f"grpo-gke export: step {step} from {step_dir} into {target} (through {fresh})", flush=True)
        code = subprocess.call(filled)
        if code != 0:
            return code
        reward = final_reward(run_dir, args.framework, step_dir, step)
        record = lineage(args.run, args.spec_hash, step, reward, step_dir)
        (fresh / LINEAGE).write_text(json.dumps(record, sort_keys=True, indent=2) + "\n")
        try:
            fresh.rename(target)
        except OSError:
            if not (target / LINEAGE).is_file():
                raise
            return _already(target)  # another export of the step renamed first
        print(f"grpo-gke export: wrote {target} with its {LINEAGE}", flush=True)
        return 0
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _already(target: Path) -> int:
    """An existing model directory: done when it holds its lineage (one line, 0), else refused (one line)."""
    if (target / LINEAGE).is_file():
        print(f"grpo-gke export: {target} is already exported (its {LINEAGE} is there); nothing to do", flush=True)
        return 0
    print(
        f"grpo-gke export: refused: {target} exists without its {LINEAGE} (an export cut short by an older"
        " grpo-gke): move it away and export again",
        flush=True,
    )
    return REFUSED


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python3 -m incluster.export_run")
    parser.add_argument("--framework", required=True, choices=sorted(REWARD_KEYS))
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--world-size", type=int, required=True)
    parser.add_argument("--exports-root", required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--spec-hash", required=True)
    parser.add_argument("--step", type=int)
    return parser.parse_args(argv[:split]), argv[split + 1 :]


if __name__ == "__main__":
    sys.exit(main())
