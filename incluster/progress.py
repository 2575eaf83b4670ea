"""A one-line training progress summary parsed from the framework's console log.

verl prints one line per step, `step:N - key:value - ...`, with numbers formatted by pprint,
so numpy scalars may read `np.float64(0.5)` (verl/utils/logger/aggregate_logger.py). NeMo-RL
prints `===== Step i/N =====` and then `  • Avg Reward: x` (nemo_rl/algorithms/grpo.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

VERL_SCORE_KEY = "critic/score/mean"
"""verl's mean sequence score of a step's samples (the GSM8K reward)."""

_NUMBER = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan|inf|-inf"
_VERL_STEP = re.compile(r"(?:^|\s)step:(\d+)\s+-\s")
_VERL_PAIR = re.compile(rf"(?:^|\s-\s)([\w/@.\-]+):(?:np\.\w+\()?({_NUMBER})\)?(?=\s+-\s|\s*$)")
_NEMO_STEP = re.compile(r"=+\s*Step\s+(\d+)\s*/\s*(\d+)\s*=+")
_NEMO_REWARD = re.compile(rf"Avg Reward:\s*({_NUMBER})")


@dataclass(frozen=True)
class Progress:
    """What the log has said so far about training progress."""

    step: int | None = None
    """Last step reported."""
    total_steps: int | None = None
    """Steps in the run, when the framework says (NeMo-RL)."""
    reward: float | None = None
    """Mean reward of the last step reported."""

    def line(self, framework: str) -> str:
        """The progress line shown while following a job."""
        if self.step is None:
            return "waiting for the first training step"
        step = f"step {self.step}" + (f"/{self.total_steps}" if self.total_steps else "")
        label = VERL_SCORE_KEY if framework == "verl" else "avg reward"
        reward = "-" if self.reward is None else f"{self.reward:.4f}"
        return f"{step}  {label} {reward}"


def parse_verl_metrics(line: str) -> dict[str, float] | None:
    """The metrics of one verl step line (`step:N - k:v - ...`), or None for any other line."""
    match = _VERL_STEP.search(line)
    if not match:
        return None
    start = match.start(1) - len("step:")
    return {key: float(value) for key, value in _VERL_PAIR.findall(line[start:])}


def advance(progress: Progress, line: str, framework: str) -> Progress:
    """`progress` updated by one log line of `framework` (`verl` or `nemo-rl`)."""
    if framework == "verl":
        metrics = parse_verl_metrics(line)
        if metrics is None or "step" not in metrics:
            return progress
        return replace(progress, step=int(metrics["step"]), reward=metrics.get(VERL_SCORE_KEY, progress.reward))
    step = _NEMO_STEP.search(line)
    if step:
        return replace(progress, step=int(step.group(1)), total_steps=int(step.group(2)), reward=None)
    reward = _NEMO_REWARD.search(line)
    if reward:
        return replace(progress, reward=float(reward.group(1)))
    return progress
