"""The run's budget (job.maxCost, job.maxGpuHours), pure: what the run's attempts have spent, when spending at the
current rate crosses the budget, and whether a budget raised since a budget stop lets the run resume.

What is counted, per attempt that started: its wall time on Ray (start to end, a live one to now) x its GPU nodes on
each rung (the record's `gpu-rungs` entry, else gpu.nodes on gpu.provisioning) x that rung's list $/h of one node, as
the plan prices it (core/prices.py gpu_node_ceiling: flex-start, which has no list price, at the on-demand rate it
bills at most); GPU hours are that wall time x the nodes x the GPUs of one node (its machine's, in the settings).
Compute Engine bills a VM's vCPUs, GPUs and memory by the second after its first minute ("All vCPUs, GPUs, and GB
of memory are charged a minimum of 1 minute ... After 1 minute, instances are charged in 1 second increments",
cloud.google.com/compute/vm-instance-pricing "Billing model", stored copy read 2026-12-07, the same model for Spot and
on-demand VMs; for flex-start assumed, the page read names no exception), so wall time x $/h is the bill of the attempt's time. Not counted: the head node and the storage (they
bill whether a run goes or not), the idle bill once the GPUs are at zero, the GPU nodes' time outside an attempt (coming
up before it, waiting between attempts, job.idleMinutes after it), and an attempt the Ray head no longer lists (a new
head: its times are gone with the old head's job table).

Stdlib only: the in-cluster guardian carries it (incluster/shipping.py), and `python -m jobs status` shows the same
figures.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from core.facts.capacity import RUNGS
from incluster.progress import parse_verl_metrics
from incluster.record import utc_stamp

LIMIT_KEYS = ("maxCost", "maxGpuHours")
"""The budget's keys, as job metadata (text: "" for no limit) and in a `budget-stop` entry's details (null)."""


@dataclass(frozen=True)
class Span:
    """One attempt's time on Ray (seconds since the epoch)."""

    attempt: int
    """The attempt's number."""
    start: float
    """When it started running."""
    end: float | None
    """When it ended; None while it runs."""


@dataclass(frozen=True)
class Spent:
    """What the run's attempts have used."""

    dollars: float
    """US dollars of their GPU nodes at list prices."""
    gpu_hours: float
    """GPUs x hours."""
    hourly: float
    """$/h of the newest attempt's GPU nodes: the rate spending goes on at while it runs."""
    gpus: int
    """The newest attempt's GPUs."""
    unpriced: bool = False
    """A rung among the attempts' has no price (its dollars count 0)."""


def limits_of(metadata: Mapping[str, str]) -> dict[str, float | None]:
    """The budget in job metadata (`maxCost`, `maxGpuHours`; absent or "": no limit)."""
    return {key: float(metadata[key]) if metadata.get(key) else None for key in LIMIT_KEYS}


def rungs_of(record: Iterable[Mapping[str, Any]]) -> dict[int, dict[str, int]]:
    """Each attempt's GPU nodes per rung, from the record's first `gpu-rungs` entry of it that names a node on a rung
    (core/facts/capacity.py RUNGS, in their order; unknown rungs and counts that are no positive whole number left
    out; an entry with none, or malformed, is no record of the attempt)."""
    found: dict[int, dict[str, int]] = {}
    for entry in record:
        attempt, details = entry.get("attempt"), entry.get("details") or {}
        if entry.get("event") != "gpu-rungs" or not isinstance(attempt, int) or attempt in found:
            continue
        counted = details.get("rungs") if isinstance(details.get("rungs"), dict) else {}
        rungs = {rung: counted[rung] for rung in RUNGS if type(counted.get(rung)) is int and counted[rung] > 0}
        if rungs:
            found[attempt] = rungs
    return found


def spent(
    spans: Iterable[Span],
    record: Iterable[Mapping[str, Any]],
    node_hourly: Mapping[str, float | None],
    stack_rungs: Mapping[str, int],
    now: float,
    *,
    gpus_per_node: int,
) -> Spent:
    """What `spans` used by `now`: each attempt's wall time x its nodes per rung (`rungs_of` the record, else
    `stack_rungs`) x `node_hourly` of the rung (None: no price, counted 0 and said so); GPU hours at `gpus_per_node`
    GPUs a node (the stack's machine, core/facts/platform.py GPU_MACHINES)."""
    recorded = rungs_of(record)
    dollars = gpu_hours = 0.0
    hourly, gpus, unpriced = 0.0, 0, False
    for span in sorted(spans, key=lambda item: item.attempt):
        rungs = recorded.get(span.attempt, dict(stack_rungs))
        rates = [node_hourly.get(rung) for rung in rungs]
        unpriced = unpriced or None in rates
        hourly = sum(count * (node_hourly.get(rung) or 0.0) for rung, count in rungs.items())
        gpus = gpus_per_node * sum(rungs.values())
        hours = max(0.0, (now if span.end is None else span.end) - span.start) / 3600
        dollars += hourly * hours
        gpu_hours += gpus * hours
    return Spent(dollars, gpu_hours, hourly, gpus, unpriced)


def crossing(limits: Mapping[str, float | None], used: Spent, now: float) -> tuple[float, str] | None:
    """When spending on at `used`'s rate from `now` crosses the first limit of `limits`, and its key; None without
    a limit, or with no rate to cross it at (no price)."""
    found = []
    cost, hours = limits.get("maxCost"), limits.get("maxGpuHours")
    if cost is not None and used.hourly > 0:
        found.append((now + (cost - used.dollars) / used.hourly * 3600, "maxCost"))
    if hours is not None and used.gpus > 0:
        found.append((now + (hours - used.gpu_hours) / used.gpus * 3600, "maxGpuHours"))
    return min(found) if found else None


def raised(stopped: Mapping[str, Any], wanted: Mapping[str, str]) -> bool:
    """Whether the budget of job metadata `wanted` lets a run resume that a `budget-stop` entry's details `stopped`
    ended: the limit that stopped it (`details.limit`) higher than then or gone, and the other not lowered (a limit
    added where there was none is kept by the guardian as any other)."""
    limit, now = stopped.get("limit"), limits_of(wanted)
    if limit not in LIMIT_KEYS:
        return False
    for key in LIMIT_KEYS:
        before, after = stopped.get(key), now[key]
        if after is None or not isinstance(before, (int, float)):
            continue
        if after < before or (key == limit and after == before):
            return False
    return True


def stop_entry(entries: Iterable[Mapping[str, Any]], attempt: int) -> Mapping[str, Any] | None:
    """The record's `budget-stop` entry of `attempt`, or None."""
    return next(
        (item for item in entries if item.get("attempt") == attempt and item.get("event") == "budget-stop"), None
    )


def budget_line(
    limits: Mapping[str, float | None], used: Spent, stopped: Mapping[str, Any] | None = None
) -> str | None:
    """`budget: $12.40 of $50.00 spent, $37.60 left; 9.9 of 64.0 GPU hours, 54.1 left` (only the limits set) and, when
    the newest attempt's `budget-stop` entry is `stopped`, what stopped it and how to go on; None without a budget."""
    parts = []
    cost, hours = limits.get("maxCost"), limits.get("maxGpuHours")
    if cost is not None:
        most = " (a rung without a price counted $0)" if used.unpriced else ""
        parts.append(f"${used.dollars:,.2f} of ${cost:,.2f} spent, ${max(0.0, cost - used.dollars):,.2f} left{most}")
    if hours is not None:
        parts.append(f"{used.gpu_hours:,.1f} of {hours:,.1f} GPU hours, {max(0.0, hours - used.gpu_hours):,.1f} left")
    if not parts:
        return None
    line = f"budget: {'; '.join(parts)}"
    if stopped is None:
        return line
    details = stopped.get("details") or {}
    step = details.get("step")
    saved = "no checkpoint" if step is None else f"step {step}"
    limit = details.get("limit")
    wanted = {key: str(value) for key, value in limits.items() if value is not None}
    then = (
        "pulumi up resumes it (raised since)"
        if raised(details, wanted)
        else f"raise job.{limit} and pulumi up to resume"
    )
    return f"{line}: the guardian stopped attempt {stopped.get('attempt')} at job.{limit} after saving {saved}; {then}"


def last_step(max_steps: int | None, epochs: int, train_rows: int | None, prompts_per_step: int) -> int | None:
    """The schedule's last step as the trainer counts it: `max_steps` when set, else `epochs` x the steps of an epoch,
    the training split's rows // the prompts of a step (each framework's train dataloader drops the last, partial
    batch); None without a step limit on a data set of unknown size. verl 0.9.1's default trainer:
    steps_per_epoch = len(train_dataset) // data.train_batch_size, x trainer.total_epochs, replaced by
    trainer.total_training_steps when set (verl/trainer/ppo/v1/trainer_base.py L765-771; the legacy trainer the same:
    len(train_dataloader) x total_epochs, drop_last=True, verl/trainer/ppo/ray_trainer.py L404-440). NeMo-RL v0.7.0:
    a dataloader of grpo.num_prompts_per_step with drop_last=True (nemo_rl/algorithms/grpo.py L357-365), run while
    current_epoch < max_num_epochs and total_steps < max_num_steps (L2228): min(max_num_steps, epochs x len(dataloader))
    (the same sum at L819-822); the recipes' own max_num_steps, 1000000 (examples/configs/grpo_math_1B.yaml L7), is
    left out: no shipped data set comes near it."""
    if max_steps is not None:
        return max_steps
    if train_rows is None:
        return None
    return epochs * (train_rows // prompts_per_step)


def scheduled_last_step(metadata: Mapping[str, str]) -> int | None:
    """The last step an attempt was submitted with: its job metadata's `lastStep` (jobs/spec/training.py schedule_of;
    "" or absent: none known)."""
    value = metadata.get("lastStep") or ""
    return int(value) if value.isdigit() else None


STEP_WINDOW = 10
"""The newest step times the projection takes the median of: the run's pace now, not its first steps' warm-up."""


@dataclass(frozen=True)
class Projection:
    """The run's projected end at the current rungs: the time and the cost to the schedule's last step."""

    last_step: int
    """The schedule's last step (grpo.maxSteps, else the epochs' steps: last_step)."""
    steps_left: int
    """Steps still to run."""
    seconds: float
    """Seconds to the last step: the steps left at the measured step time, and the expected preemptions' recovery."""
    dollars: float
    """US dollars of those seconds at the current rungs' $/h."""
    preemptions: int
    """Preemptions so far (0: none folded in)."""
    recovery_s: float
    """Mean measured recovery per preemption (its time after the checkpoint and the restart); 0 without one."""


def projected_end(
    step_seconds: Sequence[float],
    steps_done: int,
    max_steps: int | None,
    hourly: float,
    recoveries: Sequence[float] = (),
) -> Projection | None:
    """The projection from the measured step times (oldest first; the median of the newest STEP_WINDOW), the highest
    step done, the schedule's last step (`max_steps`: last_step), the current $/h and each preemption's measured recovery in seconds: once
    one has happened, the steps left expect as many more as the run had per step done, each costing the mean
    recovery. None without a last step (an epochs-only schedule on a data set of unknown size: last_step) or before a
    step time was measured."""
    if max_steps is None or not step_seconds:
        return None
    newest = sorted(step_seconds[-STEP_WINDOW:])
    middle = len(newest) // 2
    per_step = newest[middle] if len(newest) % 2 else (newest[middle - 1] + newest[middle]) / 2
    left = max(0, max_steps - steps_done)
    seconds = left * per_step
    recovery = sum(recoveries) / len(recoveries) if recoveries else 0.0
    if recoveries and steps_done > 0:
        seconds += len(recoveries) / steps_done * left * recovery
    return Projection(max_steps, left, seconds, hourly * seconds / 3600, len(recoveries), recovery)


VERL_STEP_TIME_KEY = "timing_s/step"
"""verl's seconds of one training step in its step line (verl 0.9.1 verl/trainer/ppo/metric_utils.py
compute_timing_metrics; jobs/runs/observed.py reads the same key for the plot)."""


def verl_pace(lines: Iterable[str]) -> tuple[list[float], int]:
    """The step times (`timing_s/step`, oldest first) and the highest step of verl's step lines among `lines`."""
    times, step = [], 0
    for line in lines:
        metrics = parse_verl_metrics(line)
        if metrics is None or "step" not in metrics:
            continue
        step = max(step, int(metrics["step"]))
        if VERL_STEP_TIME_KEY in metrics:
            times.append(metrics[VERL_STEP_TIME_KEY])
    return times, step


def _hours(seconds: float) -> str:
    """`1h 02m` or `7m 05s`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m {secs:02d}s"


def projection_line(found: Projection, hourly: float | None, now: float) -> str:
    """`projected end: step 100 in ~1h 02m (2026-12-07T20:10:00.000Z), ~$42.10 more at $40.82/h` (no dollars
    without `hourly`) and, once a preemption happened, how much recovery it folds in."""
    if found.steps_left == 0:
        return f"projected end: step {found.last_step} reached"
    line = f"projected end: step {found.last_step} in ~{_hours(found.seconds)} ({utc_stamp(now + found.seconds)})"
    if hourly is not None:
        line += f", ~${found.dollars:,.2f} more at ${hourly:,.2f}/h"
    if found.preemptions:
        times = "preemption" if found.preemptions == 1 else "preemptions"
        line += f", with {found.preemptions} {times} so far at {_hours(found.recovery_s)} of recovery each folded in"
    return line
