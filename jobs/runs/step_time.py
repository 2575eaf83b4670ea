"""Where a run's time goes: each step's seconds by stage and its tokens per second per GPU, from the framework's own
per-step metrics in the attempts' logs, and the run's wall time by kind, from its attempts, steps and record.

Pure: timed log lines (incluster/run_files.py timed_lines), goodput's attempts and the record in; figures and the
lines `status` prints out.

The stages and the frameworks' keys (STAGE_KEYS), read in the pinned releases:
- verl 0.9.1 (the wheel requirements-verl.txt pins; its default trainer is the V1 `sync` one, verl/trainer/config/
  ppo_trainer.yaml L232 `use_v1: true`, L238 `trainer_mode: sync`) times each stage with `marked_timer(name,
  timing_raw)` and logs `timing_s/<name>` (verl/trainer/ppo/metric_utils.py L645 compute_timing_metrics), one console
  line per step (verl/utils/logger/aggregate_logger.py L51): verl/trainer/ppo/v1/trainer_base.py L473 `step` (the
  whole step, the checkpoint save and the weight sync inside it), L484 `save_checkpoint` (on save steps only), L565
  `gen`, L578 `reward`, L585 `old_log_prob`, L590 `ref`, L599 `adv`, L604 `update_critic`, L609 `update_actor`, and
  verl/trainer/ppo/v1/trainer_sync.py L36 `update_weights`. `perf/throughput` is already per GPU: total tokens /
  (step seconds x GPUs) (metric_utils.py L687, called with the trainer's GPU count at trainer_base.py L1946-1947).
- NeMo-RL v0.7.0 (nemo_rl/algorithms/grpo.py grpo_train) times with `timer.time(name)` and prints, after the step's
  `Avg Reward` line, `⏱️  Timing:` (L3062), `  • Total step time: <s>s` (L3075, the `total_step_time` timer of
  L2258) and `  • <name>: <s>s (<p>%)` for every other timer (L3083): L2281 `prepare_for_generation/total` (the refit
  of the generation workers' weights inside it: L1894 `prepare_for_generation/transfer_and_update_weights`;
  nemo_rl/algorithms/utils.py L717-720 counts it as the refit time), L2333 `generation`, L2601
  `logprob_inference_prep`, L2605 `policy_and_reference_logprobs`, L2725 `training_prep`, L2730 `policy_training`,
  L2928 `checkpointing`; then nemo_rl/algorithms/utils.py L826 prints `    - E2E (Tokens/sec/gpu): <n>` (tokens /
  step seconds / GPUs, L794-796).
A step's seconds that no stage names (verl's reward and advantage, NeMo-RL's data processing and reward) are `other`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import median
from typing import Any

from incluster.progress import parse_verl_metrics
from incluster.record import stamp_seconds
from jobs.runs.goodput import Attempt, duration

STAGES = ("generation", "log-probs", "training", "weight sync", "checkpoint save")
"""The stages of a GRPO step, in the order a step runs them."""

OTHER = "other"
"""A step's seconds no stage names."""

STAGE_KEYS: dict[str, dict[str, tuple[str, ...]]] = {
    "verl": {
        "generation": ("timing_s/gen",),
        "log-probs": ("timing_s/old_log_prob", "timing_s/ref"),
        "training": ("timing_s/update_actor", "timing_s/update_critic"),
        "weight sync": ("timing_s/update_weights",),
        "checkpoint save": ("timing_s/save_checkpoint",),
    },
    "nemo-rl": {
        "generation": ("generation",),
        "log-probs": ("logprob_inference_prep", "policy_and_reference_logprobs"),
        "training": ("training_prep", "policy_training"),
        "weight sync": ("prepare_for_generation/total",),
        "checkpoint save": ("checkpointing",),
    },
}
"""Each framework's timing keys that make each stage (see the module's sources); a stage is their sum."""

STEP_KEY = {"verl": "timing_s/step", "nemo-rl": "total_step_time"}
"""The key of a whole step's seconds."""

THROUGHPUT_KEY = {"verl": "perf/throughput", "nemo-rl": "E2E (Tokens/sec/gpu)"}
"""Where each framework logs a step's tokens per second per GPU."""

_NUMBER = r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_NEMO_BANNER = re.compile(r"=+\s*Step\s+(\d+)\s*/\s*(\d+)\s*=+")
_NEMO_TOTAL = re.compile(rf"•\s+Total step time:\s+({_NUMBER})s")
_NEMO_TIMER = re.compile(rf"•\s+([\w/.\-]+):\s+({_NUMBER})s\s+\(")
_NEMO_THROUGHPUT = re.compile(rf"E2E \(Tokens/sec/gpu\):\s+({_NUMBER})")

RUN_FILE_LINES = r"Total step time:|\u2022\s+[\w/.\-]+: -?[\d.]+s \(|E2E \(Tokens/sec/gpu\):"
"""NeMo-RL's timing and throughput lines, which `status` and `plot` read from the attempts' logs besides the step
lines (verl's timings are in its step line); ASCII only (`\u2022` is NeMo-RL's bullet), as it travels in the
reading job's command line (incluster/run_files.py)."""


@dataclass(frozen=True)
class StepTime:
    """One step's seconds by stage, as the framework logged them."""

    attempt: int
    """The attempt that ran it."""
    step: int
    """The step number."""
    time: float
    """When its metrics were logged (seconds since the epoch)."""
    total_s: float | None
    """The whole step's seconds; None when the framework did not log them."""
    stages: dict[str, float] = field(default_factory=dict)
    """Seconds of each stage the framework logged (STAGES)."""
    tokens_per_gpu_s: float | None = None
    """Tokens per second per GPU of the step; None when not logged."""

    @property
    def other_s(self) -> float:
        """Seconds of the step no stage names (never below zero)."""
        return max(0.0, (self.total_s or 0.0) - sum(self.stages.values()))


def _stages(timings: Mapping[str, float], framework: str) -> dict[str, float]:
    found = {}
    for stage, keys in STAGE_KEYS[framework].items():
        values = [timings[key] for key in keys if key in timings]
        if values:
            found[stage] = sum(values)
    return found


def verl_step_time(attempt: int, time: float, line: str) -> StepTime | None:
    """The StepTime of one verl step line, or None for any other line."""
    metrics = parse_verl_metrics(line)
    if metrics is None or "step" not in metrics:
        return None
    return StepTime(
        attempt=attempt,
        step=int(metrics["step"]),
        time=time,
        total_s=metrics.get(STEP_KEY["verl"], metrics.get("perf/time_per_step")),
        stages=_stages(metrics, "verl"),
        tokens_per_gpu_s=metrics.get(THROUGHPUT_KEY["verl"]),
    )


def nemo_rl_step_times(attempt: int, lines: Sequence[tuple[float, str]]) -> list[StepTime]:
    """The StepTimes of one attempt's NeMo-RL log: a step's timers follow its `Step N/M` banner and end at its
    throughput line (or the next banner, or the log's end, when the step logged its total)."""
    found: list[StepTime] = []
    step: int | None = None
    timings: dict[str, float] = {}
    throughput: float | None = None
    last = 0.0

    def close() -> None:
        if step is not None and STEP_KEY["nemo-rl"] in timings:
            found.append(
                StepTime(attempt, step, last, timings[STEP_KEY["nemo-rl"]], _stages(timings, "nemo-rl"), throughput)
            )

    for time, line in lines:
        banner = _NEMO_BANNER.search(line)
        if banner:
            close()
            step, timings, throughput = int(banner.group(1)), {}, None
            continue
        if step is None:
            continue
        total = _NEMO_TOTAL.search(line)
        timer = None if total else _NEMO_TIMER.search(line)
        rate = _NEMO_THROUGHPUT.search(line)
        if total:
            timings[STEP_KEY["nemo-rl"]], last = float(total.group(1)), time
        elif timer:
            timings[timer.group(1)], last = float(timer.group(2)), time
        elif rate and STEP_KEY["nemo-rl"] in timings:
            throughput = float(rate.group(1))
            close()
            step = None
    close()
    return found


def step_times(lines: Mapping[int, Sequence[tuple[float, str]]], framework: str) -> list[StepTime]:
    """Every logged step's StepTime, oldest attempt first."""
    found: list[StepTime] = []
    for attempt in sorted(lines):
        if framework == "verl":
            for time, line in lines[attempt]:
                item = verl_step_time(attempt, time, line)
                if item is not None:
                    found.append(item)
        else:
            found += nemo_rl_step_times(attempt, lines[attempt])
    return found


def seconds_text(seconds: float) -> str:
    """`0.35s`, `12.4s`, or goodput's `5m 07s` from a minute on."""
    if seconds >= 60:
        return duration(seconds)
    return f"{seconds:.2f}s" if seconds < 10 else f"{seconds:.1f}s"


@dataclass(frozen=True)
class Breakdown:
    """The mean step's seconds by stage over the steps that logged their total (a stage a step did not run counts
    0 in it, so the stages and `other` add up to the mean step), and the median tokens per second per GPU."""

    framework: str
    """`verl` or `nemo-rl`."""
    steps: int
    """Steps that logged their whole seconds."""
    mean_s: dict[str, float]
    """Mean seconds per step of each stage logged in any step, then `other`."""
    total_s: float
    """Mean seconds of a whole step."""
    saves: int
    """Steps that saved a checkpoint."""
    tokens_per_gpu_s: float | None
    """Median tokens per second per GPU; None when no step logged it."""

    def lines(self) -> list[str]:
        """The lines `status` prints; one for the whole step when the framework logged no stage."""
        steps = f"{self.steps} step" + ("" if self.steps == 1 else "s")
        if list(self.mean_s) == [OTHER]:
            return [f"step time: {seconds_text(self.total_s)} (mean of {steps}; no stage timings in the log)"]
        keys = "verl's timing_s/*" if self.framework == "verl" else "NeMo-RL's Timing lines"
        shown = [f"step time by stage (mean of {steps}, {keys}):"]
        width = max(len(name) for name in (*self.mean_s, "whole step"))
        for name, seconds in self.mean_s.items():
            share = seconds / self.total_s if self.total_s else 0.0
            line = f"  {name:<{width}}  {seconds_text(seconds):>7}  {share:>4.0%}"
            if name == "checkpoint save" and self.saves:
                line += f" (saved on {self.saves} of {self.steps} steps)"
            shown.append(line)
        shown.append(f"  {'whole step':<{width}}  {seconds_text(self.total_s):>7}")
        if self.tokens_per_gpu_s is not None:
            shown.append(
                f"tokens per second per GPU: {self.tokens_per_gpu_s:.1f} (median; {THROUGHPUT_KEY[self.framework]})"
            )
        return shown

    def as_json(self) -> dict[str, Any]:
        """The figures for `status --json`."""
        return {
            "meanSeconds": {name: round(value, 4) for name, value in self.mean_s.items()},
            "saves": self.saves,
            "steps": self.steps,
            "tokensPerGpuSecond": self.tokens_per_gpu_s,
            "wholeStepSeconds": round(self.total_s, 4),
        }


def breakdown(times: Sequence[StepTime], framework: str) -> Breakdown | None:
    """The mean step by stage over `times`; None when no step logged its whole seconds."""
    timed = [item for item in times if item.total_s is not None]
    if not timed:
        return None
    logged = [stage for stage in STAGES if any(stage in item.stages for item in timed)]
    mean_s = {stage: sum(item.stages.get(stage, 0.0) for item in timed) / len(timed) for stage in logged}
    mean_s[OTHER] = sum(item.other_s for item in timed) / len(timed)
    rates = [item.tokens_per_gpu_s for item in times if item.tokens_per_gpu_s is not None]
    return Breakdown(
        framework=framework,
        steps=len(timed),
        mean_s=mean_s,
        total_s=sum(item.total_s or 0.0 for item in timed) / len(timed),
        saves=sum(1 for item in timed if item.stages.get("checkpoint save")),
        tokens_per_gpu_s=median(rates) if rates else None,
    )


KINDS = (
    "setup",
    "training",
    "checkpointing",
    "recovery",
    "waiting for capacity",
    "idle, GPUs up",
    "idle at zero",
)
"""The kinds of the run's wall time (WallTime's rules)."""


@dataclass(frozen=True)
class WallTime:
    """The run's wall time from its first submission to its end or now, by kind (KINDS):
    - setup: from a submission (or a successful attempt's end) to the attempt's first step's start (its first step
      line less the step's logged seconds);
    - training: from an attempt's first step's start to its end, less its checkpoint saves;
    - checkpointing: the saves' logged seconds;
    - recovery: from a failed or stopped attempt's end to the next attempt's first step's start;
    - waiting for capacity: within setup or recovery, the readiness gate's wait on the capacity ladder (a `capacity`
      entry: from its `details.since`, when the autoscaler began trying the rung, to the entry's time, when the gate
      ended), and after a `deadline-stop` the time to the next attempt's submission (its GPU capacity ended with
      work left);
    - idle, GPUs up: after the run's last attempt ended (not to be retried) until the `scaled-to-zero` entry;
    - idle at zero: from the `scaled-to-zero` entry on, until a next attempt's submission."""

    seconds: dict[str, float]
    """Seconds of each kind, in KINDS order."""

    @property
    def total_s(self) -> float:
        """The whole wall time."""
        return sum(self.seconds.values())

    def lines(self) -> list[str]:
        """The lines `status` prints."""
        shown = [f"wall time by kind ({duration(self.total_s)} since the first submission):"]
        width = max(map(len, KINDS))
        for kind, seconds in self.seconds.items():
            share = seconds / self.total_s if self.total_s else 0.0
            shown.append(f"  {kind:<{width}}  {duration(seconds):>7}  {share:>4.0%}")
        return shown

    def as_json(self) -> dict[str, float]:
        """The figures for `status --json`."""
        return {kind: round(seconds, 3) for kind, seconds in self.seconds.items()}


Segment = tuple[float, float, str]


def _carve(segments: list[Segment], start: float, end: float, kind: str, over: tuple[str, ...]) -> list[Segment]:
    """`segments` with the part of [start, end] that lies on a segment of a kind in `over` made `kind`."""
    if end <= start:
        return segments
    carved: list[Segment] = []
    for low, high, was in segments:
        if was not in over or high <= start or end <= low:
            carved.append((low, high, was))
            continue
        if low < start:
            carved.append((low, start, was))
        carved.append((max(low, start), min(high, end), kind))
        if end < high:
            carved.append((end, high, was))
    return carved


_OVER = ("succeeded", "not-retried", "gave-up")
"""Record events after which nothing retries the run (jobs/runs/idle.py RUN_OVER_EVENTS)."""


def _after(item: Attempt, last: bool, deadline_stopped: set[Any], record: Sequence[Mapping[str, Any]]) -> str:
    """The kind of the time after attempt `item` ended (until the next attempt's first step, or now when `last`)."""
    failed = item.failure is not None and item.number not in deadline_stopped
    if not last or item.end is None or item.number in deadline_stopped:
        return "recovery" if failed else "setup"
    over = any(event.get("attempt") == item.number and event.get("event") in _OVER for event in record)
    return "recovery" if failed and not over else "idle, GPUs up"


def wall_time(
    attempts: Sequence[Attempt], times: Sequence[StepTime], record: Sequence[Mapping[str, Any]], now: float
) -> WallTime | None:
    """The run's wall time by kind (WallTime's rules) from goodput's attempts, the steps' times and the record; None
    before any attempt was submitted."""
    ordered = sorted(attempts, key=lambda item: item.number)
    if not ordered:
        return None
    events = [(event, stamp_seconds(event.get("time"))) for event in record]
    deadline_stopped = {event.get("attempt") for event, _ in events if event.get("event") == "deadline-stop"}
    segments: list[Segment] = []
    cursor = min(item.submitted for item in ordered)
    gap_kind = "setup"
    saves = 0.0
    for item in ordered:
        if item.start is None:
            continue
        end = max(cursor, now if item.end is None else item.end)
        own = [step for step in times if step.attempt == item.number]
        first = None
        if own:
            first = min(max(own[0].time - (own[0].total_s or 0.0), cursor), end)
            saves += sum(step.stages.get("checkpoint save", 0.0) for step in own)
        segments.append((cursor, end if first is None else first, gap_kind))
        if first is not None:
            segments.append((first, end, "training"))
        cursor = end
        gap_kind = _after(item, item is ordered[-1], deadline_stopped, [e for e, _ in events])
    if cursor < now:
        segments.append((cursor, now, gap_kind))
    submissions = sorted(item.submitted for item in ordered)
    ends = sorted(item.end for item in ordered if item.end is not None)
    for event, at in events:
        if at is None:
            continue
        name = event.get("event")
        following = next((moment for moment in submissions if moment > at), now)
        if name == "deadline-stop":
            segments = _carve(segments, at, following, "waiting for capacity", ("setup", "idle, GPUs up"))
        elif name == "capacity":
            since = stamp_seconds((event.get("details") or {}).get("since"))
            before = max((moment for moment in ends if moment <= at), default=submissions[0])
            start = at if since is None else min(max(since, before), at)
            segments = _carve(segments, start, at, "waiting for capacity", ("setup", "recovery"))
        elif name == "scaled-to-zero":
            segments = _carve(segments, at, following, "idle at zero", ("idle, GPUs up",))
    seconds = dict.fromkeys(KINDS, 0.0)
    for low, high, kind in segments:
        seconds[kind] += max(0.0, high - low)
    moved = min(saves, seconds["training"])
    seconds["training"] -= moved
    seconds["checkpointing"] += moved
    return WallTime(seconds)
