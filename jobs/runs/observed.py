"""What a run's files and Ray's attempt list say about it, as goodput's inputs and the plot's points.

Pure: Ray's attempts (as plain data), the run's record `attempts.jsonl` and each attempt's timestamped
log (incluster/run_files.py) in; jobs/runs/goodput.py's attempts and steps, and per-step metrics, out.

From the record (one JSON object per line, sorted keys: `time`, `attempt`, `event`, `reason`,
`resumed_from_step`, optional `details`): an attempt's submission time is its `submitted` event's
(else Ray's start), the step it resumed from its first event that names one, and it was preempted
when a `failed` event says `gpu-capacity-lost` (in `details.failure` or at the start of `reason`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from incluster import budget
from incluster.attempt import RESUMED_LINE
from incluster.progress import VERL_SCORE_KEY, parse_verl_metrics
from incluster.record import GPU_CAPACITY_LOST, RECORD_FILE, stamp_seconds
from incluster.run_files import attempt_log, timed_lines
from jobs.runs import step_time
from jobs.runs.goodput import Attempt, StepDone, steps_done

VERL_STEP_TIME_KEY = "timing_s/step"
"""verl's seconds of one training step in its step line (verl/trainer/ppo/metric_utils.py compute_timing_metrics)."""

RUN_FILE_LINES = (
    r"^\{|step:\d+ - |Step \d+\s*/\s*\d+|Avg Reward:|grpo-gke attempt \d+: resuming from |" + step_time.RUN_FILE_LINES
)
"""The lines goodput and the plot read from the run's files: the record's JSON objects and, from an attempt's
log, verl's step line, NeMo-RL's step banner, reward and timing lines (jobs/runs/step_time.py), and the attempt
wrapper's resume line (incluster/attempt.py RESUMED_LINE)."""

_NEMO_STEP = re.compile(r"=+\s*Step\s+(\d+)\s*/\s*(\d+)\s*=+")
_NEMO_REWARD = re.compile(r"Avg Reward:\s*(-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|nan)")


@dataclass(frozen=True)
class RayAttempt:
    """One attempt as Ray's job list shows it (times in seconds since the epoch)."""

    number: int
    """Attempt number, from the job's metadata."""
    status: str
    """Ray's job status."""
    start: float | None
    """When Ray accepted it; None when unknown."""
    end: float | None
    """When it ended; None while it is live."""
    max_steps: str | None = None
    """The schedule's step limit it was submitted with, its metadata's `maxSteps` ("": none); None where unknown."""
    last_step: int | None = None
    """The schedule's last step it was submitted with, its metadata's `lastStep` (incluster/budget.py
    scheduled_last_step); None where unknown (an attempt submitted before the key, a data set of unknown size)."""


@dataclass(frozen=True)
class StepPoint:
    """One training step as the plot draws it."""

    attempt: int
    """The attempt that ran it."""
    step: int
    """The step number."""
    time: float
    """When its result was logged (seconds since the epoch)."""
    reward: float | None
    """Mean reward of the step (verl `critic/score/mean`, NeMo-RL's average reward)."""
    step_s: float | None
    """Seconds the step took: verl's `timing_s/step`, else the time since the attempt's previous step."""


def ray_attempts(jobs: Iterable[Any]) -> list[RayAttempt]:
    """RayAttempts of Ray JobDetails (metadata `attempt`, `start_time`/`end_time` in milliseconds), oldest first."""
    found = []
    for job in jobs:
        try:
            number = int((job.metadata or {}).get("attempt", "0"))
        except ValueError:
            continue
        status = str(getattr(job.status, "value", job.status))
        start = job.start_time / 1000 if job.start_time else None
        end = job.end_time / 1000 if job.end_time else None
        metadata = job.metadata or {}
        max_steps = metadata.get("maxSteps")
        last = budget.scheduled_last_step(metadata)
        found.append(RayAttempt(number, status, start, end, max_steps if isinstance(max_steps, str) else None, last))
    return sorted(found, key=lambda item: item.number)


def _preempted(event: Mapping[str, Any]) -> bool:
    """Whether a `failed` event of the record is the guardian's lost GPU capacity (incluster/guardian/policy.py details.cause)."""
    details = event.get("details") if isinstance(event.get("details"), dict) else {}
    return details.get("cause") == GPU_CAPACITY_LOST


def logged_resumes(lines: Mapping[int, Sequence[tuple[float, str]]]) -> dict[int, int]:
    """The step each attempt resumed from, from its own log's resume line (incluster/attempt.py RESUMED_LINE): every
    attempt has one, whoever submitted it (the guardian's record names the step only for the attempts it submits)."""
    found = {}
    for attempt, timed in lines.items():
        for _, line in timed:
            match = RESUMED_LINE.match(line)
            if match is not None and int(match.group(1)) == attempt:
                found[attempt] = int(match.group(2))
                break
    return found


def goodput_attempts(
    ray: Sequence[RayAttempt],
    record: Sequence[Mapping[str, Any]],
    lines: Mapping[int, Sequence[tuple[float, str]]] | None = None,
) -> list[Attempt]:
    """goodput's Attempts of the run: Ray's times and statuses with the record's submission and failure; the step
    it resumed from is its log's resume line (`lines`, each attempt's timed log lines), else the record's."""
    logged = logged_resumes(lines or {})
    found = []
    for item in ray:
        if item.start is None:
            continue
        own = [event for event in record if event.get("attempt") == item.number]
        submitted = next((stamp_seconds(e.get("time")) for e in own if e.get("event") == "submitted"), None)
        recorded = next((e["resumed_from_step"] for e in own if isinstance(e.get("resumed_from_step"), int)), None)
        resumed = logged.get(item.number, recorded)
        failed = [event for event in own if event.get("event") == "failed"]
        failure = None
        if item.status == "FAILED" or failed:
            failure = GPU_CAPACITY_LOST if any(_preempted(event) for event in failed) else "other"
        found.append(
            Attempt(
                number=item.number,
                submitted=min(submitted, item.start) if submitted is not None else item.start,
                start=item.start,
                end=item.end,
                status=item.status,
                resumed_from=resumed,
                failure=failure if item.status in ("FAILED", "STOPPED") else None,
            )
        )
    return found


def file_names(ray: Sequence[RayAttempt]) -> list[str]:
    """The run files to read: the record and each attempt's log."""
    return [RECORD_FILE, *(attempt_log(item.number) for item in ray)]


def attempt_lines(files: Mapping[str, str | None], ray: Sequence[RayAttempt]) -> dict[int, list[tuple[float, str]]]:
    """Each attempt's timed log lines (none for an attempt without a log)."""
    return {item.number: timed_lines(files.get(attempt_log(item.number)) or "") for item in ray}


def run_steps(lines: Mapping[int, Sequence[tuple[float, str]]], framework: str) -> list[StepDone]:
    """The steps done across all attempts, in time order."""
    found = [done for timed in lines.values() for done in steps_done(timed, framework)]
    return sorted(found, key=lambda done: (done.time, done.step))


def step_points(lines: Mapping[int, Sequence[tuple[float, str]]], framework: str) -> list[StepPoint]:
    """The reward and step time of every step of every attempt, oldest attempt first."""
    points = []
    for attempt in sorted(lines):
        previous: float | None = None
        pending_step: int | None = None
        for time, line in lines[attempt]:
            step, reward, step_s = None, None, None
            if framework == "verl":
                metrics = parse_verl_metrics(line)
                if metrics is None or "step" not in metrics:
                    continue
                step, reward, step_s = (
                    int(metrics["step"]),
                    metrics.get(VERL_SCORE_KEY),
                    metrics.get(VERL_STEP_TIME_KEY),
                )
            else:
                banner = _NEMO_STEP.search(line)
                if banner:
                    pending_step = int(banner.group(1))
                    continue
                found = _NEMO_REWARD.search(line)
                if found is None or pending_step is None:
                    continue
                step, reward, pending_step = pending_step, float(found.group(1)), None
            if step_s is None and previous is not None:
                step_s = time - previous
            previous = time
            points.append(StepPoint(attempt, step, time, reward, step_s))
    return points
