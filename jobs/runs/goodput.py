"""Goodput and dollars per step of one run across its attempts: recorded data in, figures out.

Goodput here is the share of the GPU time that made training progress kept by the run; the time
lost to a preemption runs from the last checkpoint before the failure to the failure, plus the
restart until the next attempt's first new step (what gpu-recipes' goodput guide counts as lost to
failures and preemptions, ../shared/reference/day-two-operations.md "Goodput").

GPU time is counted while an attempt runs (Ray's start to end, or `now`); the GPU price is dollars per
hour for the GPU nodes, passed in as numbers: each attempt's own (the rungs its nodes ran on,
jobs/runs/pricing.py), else the stack's. A step counts as done when the
framework reports its results: verl's `step:N - ...` line, NeMo-RL's `Avg Reward` line after its
`Step N/M` banner (both parsed by incluster/progress.py).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from incluster.checkpoints import step_dirs
from incluster.progress import Progress, advance, parse_verl_metrics
from incluster.record import GPU_CAPACITY_LOST

Failure = Literal["gpu-capacity-lost", "other"]

_ENDED_BADLY = ("FAILED", "STOPPED")
"""Ray statuses of an attempt that ended without finishing the run: its work after the last checkpoint is lost."""


@dataclass(frozen=True)
class Attempt:
    """One attempt of the run as recorded (times in seconds since the epoch)."""

    number: int
    """Attempt number, from 1."""
    submitted: float
    """When it was submitted."""
    start: float | None
    """When it started running; None while it waits."""
    end: float | None
    """When it ended; None while it runs."""
    status: str
    """Ray's job status (PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED)."""
    resumed_from: int | None = None
    """The checkpoint step it resumed from; None when it started from scratch."""
    failure: Failure | None = None
    """Why it failed: GPU capacity lost (a preemption) or other; None when it did not fail."""


@dataclass(frozen=True)
class StepDone:
    """A training step the framework reported as done, and when."""

    step: int
    """The step number."""
    time: float
    """When its line was written (seconds since the epoch)."""


@dataclass(frozen=True)
class Loss:
    """The time one failed attempt cost the run."""

    attempt: int
    """The failed attempt's number."""
    failure: Failure
    """Why it failed."""
    last_step: int | None
    """The last step it reported; None when it reported none."""
    checkpoint: int | None
    """The checkpoint step the work was kept until; None when none was."""
    after_checkpoint_s: float
    """Seconds from the last checkpoint (or the attempt's start) to the failure."""
    restart_s: float
    """Seconds from the next attempt's start to its first step (to its end or now when none yet)."""

    @property
    def total_s(self) -> float:
        """Seconds lost in all."""
        return self.after_checkpoint_s + self.restart_s


@dataclass(frozen=True)
class Goodput:
    """The run's figures across all attempts."""

    first_step_after_s: float | None
    """Seconds from the first submission to the first step done; None before it."""
    steps_done: int
    """The highest step done."""
    steps_per_hour: float | None
    """Steps done per hour from the first submission to the run's end (or now)."""
    gpu_s: float
    """Seconds the attempts ran (GPU time billed)."""
    progress_s: float
    """Seconds of GPU time that made progress the run kept."""
    losses: tuple[Loss, ...]
    """One per failed or stopped attempt, oldest first."""
    dollars: float
    """Dollars spent on the GPU nodes so far."""
    dollars_lost: float
    """Dollars of the time lost to failures."""

    @property
    def goodput(self) -> float | None:
        """Share of GPU time that made progress; None before any GPU time."""
        return self.progress_s / self.gpu_s if self.gpu_s else None

    @property
    def dollars_per_step(self) -> float | None:
        """Dollars so far per step done; None before the first step."""
        return self.dollars / self.steps_done if self.steps_done else None

    def as_json(self) -> dict[str, Any]:
        """The figures as plain data for `status --json` (dump with sort_keys for a deterministic text)."""
        return {
            "dollars": round(self.dollars, 4),
            "dollars_lost": round(self.dollars_lost, 4),
            "dollars_per_step": None if self.dollars_per_step is None else round(self.dollars_per_step, 4),
            "first_step_after_s": self.first_step_after_s,
            "goodput": None if self.goodput is None else round(self.goodput, 4),
            "gpu_s": self.gpu_s,
            "losses": [
                {
                    "after_checkpoint_s": loss.after_checkpoint_s,
                    "attempt": loss.attempt,
                    "checkpoint": loss.checkpoint,
                    "failure": loss.failure,
                    "last_step": loss.last_step,
                    "lost_s": loss.total_s,
                    "restart_s": loss.restart_s,
                }
                for loss in self.losses
            ],
            "progress_s": self.progress_s,
            "steps_done": self.steps_done,
            "steps_per_hour": None if self.steps_per_hour is None else round(self.steps_per_hour, 2),
        }

    def json_text(self) -> str:
        """The JSON `status --json` prints."""
        return json.dumps(self.as_json(), sort_keys=True, indent=2)

    def lines(self, unpriced: str | None = None, at_most: bool = False) -> list[str]:
        """The lines `status` prints; `unpriced` (why the GPU nodes have no price) replaces the cost line; `at_most`:
        the dollars are the most they can be (flex-start counted at the on-demand rate)."""
        if self.first_step_after_s is None:
            shown = ["first step: not reached yet", "steps: 0 done"]
        else:
            rate = "-" if self.steps_per_hour is None else f"{self.steps_per_hour:.1f}"
            shown = [
                f"first step: {duration(self.first_step_after_s)} after submission",
                f"steps: {self.steps_done} done, {rate} per hour",
            ]
        for loss in self.losses:
            what = "preemption" if loss.failure == GPU_CAPACITY_LOST else "failure"
            at = "before step 1" if loss.last_step is None else f"at step {loss.last_step}"
            kept = "the attempt's start" if loss.checkpoint is None else f"checkpoint step {loss.checkpoint}"
            shown.append(
                f"{what} of attempt {loss.attempt} {at}: lost {duration(loss.total_s)}"
                f" ({duration(loss.after_checkpoint_s)} since {kept}, {duration(loss.restart_s)} restart)"
            )
        share = "-" if self.goodput is None else f"{self.goodput:.1%}"
        shown.append(f"goodput: {share} of {duration(self.gpu_s)} GPU time made progress")
        if unpriced is not None:
            shown.append(f"cost: {unpriced}")
            return shown
        per_step = "-" if self.dollars_per_step is None else f"${self.dollars_per_step:.2f}"
        most = " at most" if at_most else ""
        shown.append(f"cost:{most} ${self.dollars:.2f} so far, ${self.dollars_lost:.2f} lost, {per_step} per step")
        return shown


def duration(seconds: float) -> str:
    """`1h 02m`, `5m 07s` or `42s`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h {minutes:02d}m"
    if minutes:
        return f"{minutes}m {secs:02d}s"
    return f"{secs}s"


def steps_done(lines: Iterable[tuple[float, str]], framework: str) -> list[StepDone]:
    """The steps reported done in timed log lines (`(time, line)`) of `framework` (`verl` or `nemo-rl`)."""
    found = []
    progress = Progress()
    for time, line in lines:
        if framework == "verl":
            metrics = parse_verl_metrics(line)
            if metrics is not None and "step" in metrics:
                found.append(StepDone(int(metrics["step"]), time))
            continue
        before, progress = progress, advance(progress, line, framework)
        if progress.step is not None and progress.reward is not None and before.reward is None:
            found.append(StepDone(progress.step, time))
    return found


def complete_checkpoints(run_dir: Path, framework: str, world_size: int) -> list[int]:
    """The steps of the run's complete checkpoints (incluster/checkpoints.py's step finder)."""
    return sorted({item.step for item in step_dirs(run_dir, framework, world_size) if item.complete})


def _within(steps: Sequence[StepDone], start: float, end: float) -> list[StepDone]:
    return [done for done in steps if start <= done.time <= end]


def measure(
    attempts: Sequence[Attempt],
    steps: Sequence[StepDone],
    checkpoints: Iterable[int],
    gpu_hourly: float,
    now: float,
    hourly_of: Mapping[int, float] | None = None,
) -> Goodput:
    """The run's figures from its attempts (oldest first), the steps done, its checkpoint steps and the GPU $/h:
    `hourly_of` an attempt's own by number (the rungs its nodes ran on), else `gpu_hourly`. A loss's dollars are the
    failed attempt's time after its checkpoint at its price and the restart at the next attempt's."""

    def rate(number: int) -> float:
        return (hourly_of or {}).get(number, gpu_hourly)

    ordered = sorted(attempts, key=lambda item: item.number)
    timeline = sorted(steps, key=lambda done: (done.time, done.step))
    saved = sorted(set(checkpoints))
    ran = [(item, item.start, now if item.end is None else item.end) for item in ordered if item.start is not None]
    # Per attempt, the time that made no kept progress is the union of its startup (start to first step) and,
    # when it failed, its work after the kept checkpoint; a loss counts the startup of the attempt after it
    # as its restart, so a failed restart's own loss starts after that startup (nothing is counted twice).
    losses = []
    wasted_s = 0.0
    dollars_lost = 0.0
    previous_failed = False
    for index, (item, start, end) in enumerate(ran):
        own = _within(timeline, start, end)
        startup_end = own[0].time if own else end
        counted_from = startup_end if previous_failed else start
        failed = item.status in _ENDED_BADLY and item.end is not None
        waste_from = end
        if failed:
            last_step = max((done.step for done in own), default=None)
            following = ran[index + 1] if index + 1 < len(ran) else None
            if following is not None:  # what the next attempt loaded is what was kept
                checkpoint = following[0].resumed_from
            else:
                reached = max((done.step for done in timeline if done.time <= end), default=0)
                checkpoint = max((step for step in saved if step <= reached), default=None)
            kept_at = max(
                (done.time for done in timeline if done.step == checkpoint and done.time <= end), default=start
            )
            waste_from = max(start, kept_at)
            restart_s = 0.0
            if following is not None:
                next_steps = _within(timeline, following[1], following[2])
                restart_s = (next_steps[0].time if next_steps else following[2]) - following[1]
                dollars_lost += rate(following[0].number) * restart_s / 3600
            after_checkpoint_s = end - max(waste_from, counted_from)
            dollars_lost += rate(item.number) * after_checkpoint_s / 3600
            losses.append(
                Loss(
                    attempt=item.number,
                    failure=item.failure or "other",
                    last_step=last_step,
                    checkpoint=checkpoint,
                    after_checkpoint_s=after_checkpoint_s,
                    restart_s=restart_s,
                )
            )
        wasted_s += (end - start) if waste_from <= startup_end else (startup_end - start) + (end - waste_from)
        previous_failed = failed
    gpu_s = sum(end - start for _, start, end in ran)
    done = max((item.step for item in timeline), default=0)
    first_submitted = min((item.submitted for item in ordered), default=now)
    ends = [item.end for item in ordered if item.end is not None]
    until = max(ends) if ordered and len(ends) == len(ordered) else now
    wall_h = (until - first_submitted) / 3600
    return Goodput(
        first_step_after_s=timeline[0].time - first_submitted if timeline else None,
        steps_done=done,
        steps_per_hour=done / wall_h if done and wall_h > 0 else None,
        gpu_s=gpu_s,
        progress_s=gpu_s - wasted_s,
        losses=tuple(losses),
        dollars=sum(rate(item.number) * (end - start) for item, start, end in ran) / 3600,
        dollars_lost=dollars_lost,
    )
