"""The export Ray job's driver (pod-side: the standard library and jobs.checkpoints only, Python 3.10): picks the
checkpoint (the given step, which must be complete, or the newest complete one), runs the framework's converter
into `<exports root>/step-<N>/`, then writes `lineage.json` beside the model.

`python3 -m jobs.export_run --framework F --run-dir D --world-size W --exports-root E --run R --spec-hash H
[--step N] -- CONVERTER...`: in CONVERTER, @STEP_DIR@ and @TARGET_DIR@ stand for the checkpoint and the model
directory. Exit codes: the converter's; 3 when no complete checkpoint fits (one line).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from jobs.checkpoints import CheckpointError, newest_complete, step_dirs

STEP_DIR = "@STEP_DIR@"
"""Stands for the chosen checkpoint directory in the converter's command."""

TARGET_DIR = "@TARGET_DIR@"
"""Stands for the model directory in the converter's command."""

REWARD_KEYS = {"verl": "critic/score/mean", "nemo-rl": "val_reward"}
"""The reward each framework records: verl's per-step metric in its file logger's JSON lines, NeMo-RL's
validation reward in the step's training_info.json."""

REFUSED = 3
"""Exit code when no complete checkpoint fits."""


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
    """The reward at the exported step: verl's last `critic/score/mean` logged at or before it (any attempt's
    metrics file), NeMo-RL's `val_reward` of the step; None when not recorded."""
    key = REWARD_KEYS[framework]
    if framework == "nemo-rl":
        info = step_dir / "training_info.json"
        value = json.loads(info.read_text()).get(key) if info.is_file() else None
        return float(value) if isinstance(value, (int, float)) else None
    found: tuple[int, float] | None = None
    for path in sorted((run_dir / "metrics").rglob("*.jsonl")):
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            data = record.get("data", record) if isinstance(record, dict) else {}
            at = record.get("step") if isinstance(record, dict) else None
            if isinstance(at, int) and at <= step and isinstance(data.get(key), (int, float)):
                if found is None or at >= found[0]:
                    found = (at, float(data[key]))
    return found[1] if found else None


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
    target = Path(args.exports_root) / f"step-{step}"
    target.mkdir(parents=True, exist_ok=True)
    filled = [part.replace(STEP_DIR, str(step_dir)).replace(TARGET_DIR, str(target)) for part in command]
    print(f"grpo-gke export: step {step} from {step_dir} into {target}", flush=True)
    code = subprocess.call(filled)
    if code != 0:
        return code
    record = lineage(args.run, args.spec_hash, step, final_reward(run_dir, args.framework, step_dir, step), step_dir)
    (target / "lineage.json").write_text(json.dumps(record, sort_keys=True, indent=2) + "\n")
    print(f"grpo-gke export: wrote {target}/lineage.json", flush=True)
    return 0


def _parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    split = argv.index("--") if "--" in argv else len(argv)
    parser = argparse.ArgumentParser(prog="python3 -m jobs.export_run")
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
