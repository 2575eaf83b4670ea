"""One run as `status` and `plot` see it: Ray's attempts, the run's record and timestamped logs (read
through the Ray head, or from `--data-root DIR`), the GPU price, and the goodput figures; or, without a Ray head
(`make demo` stopped its own, a cluster is gone), the same from the run directory alone (directory_view)."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config.model import StackConfig
from core.facts.capacity import RUNGS
from core.prices import CATALOG_NAME, catalog, gpu_node_ceiling
from incluster import job_client
from incluster.record import RECORD_FILE, parse, stamp_seconds
from incluster.run_files import attempt_log, read_local_run_files, read_run_files, timed_lines
from incluster.runs import logged_attempts
from jobs.runs import observed
from jobs.runs.goodput import Goodput, StepDone, complete_checkpoints, measure
from jobs.runs.pricing import AttemptPrice, attempt_prices, pricing_lines
from jobs.runs.step_time import Breakdown, StepTime, WallTime, breakdown, step_times, wall_time
from jobs.spec.training import run_directory, under_data_root

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient


@dataclass(frozen=True)
class RunView:
    """What is known of one run across its attempts."""

    run: str
    """The run id."""
    framework: str
    """`verl` or `nemo-rl`."""
    attempts: tuple[observed.RayAttempt, ...]
    """Ray's attempts, oldest first."""
    record: tuple[dict[str, Any], ...]
    """The run's record, oldest first."""
    lines: dict[int, list[tuple[float, str]]]
    """Each attempt's timed step lines."""
    checkpoints: tuple[int, ...]
    """Steps of the run's complete checkpoints: listed under --data-root, and the steps attempts resumed from."""
    gpu_hourly: float | None
    """$/h of the stack's gpu.nodes on gpu.provisioning at the catalog's list price (flex-start: at most, the
    on-demand rate); None when the catalog has none. The price of an attempt whose rungs the record lacks."""
    node_hourly: dict[str, float | None] = field(default_factory=dict)
    """$/h of one GPU node on each rung (flex-start at most, the on-demand rate; None: no price)."""
    stack_rungs: dict[str, int] = field(default_factory=dict)
    """The stack's GPU nodes without a record of their rungs: {gpu.provisioning: gpu.nodes}."""

    def steps(self) -> list[StepDone]:
        """The steps done across all attempts."""
        return observed.run_steps(self.lines, self.framework)

    def prices(self) -> tuple[AttemptPrice, ...]:
        """Each started attempt's GPU $/h by the rungs its nodes ran on (jobs/runs/pricing.py), oldest first."""
        started = [item.number for item in self.attempts if item.start is not None]
        return attempt_prices(started, self.record, self.node_hourly, self.stack_rungs, self.gpu_hourly)

    def goodput(self, now: float) -> Goodput:
        """The run's goodput figures at `now`, each attempt's GPU hours at its own rungs' price (no dollars when the
        GPU nodes have no price)."""
        attempts = observed.goodput_attempts(self.attempts, self.record, self.lines)
        hourly = {price.attempt: price.hourly or 0.0 for price in self.prices()}
        return measure(attempts, self.steps(), self.checkpoints, self.gpu_hourly or 0.0, now, hourly_of=hourly)

    def step_times(self) -> list[StepTime]:
        """Each logged step's seconds by stage (jobs/runs/step_time.py), oldest attempt first."""
        return step_times(self.lines, self.framework)

    def breakdown(self) -> Breakdown | None:
        """The mean step by stage; None before a step logged its seconds."""
        return breakdown(self.step_times(), self.framework)

    def wall_time(self, now: float) -> WallTime | None:
        """The run's wall time by kind at `now`; None before an attempt."""
        attempts = observed.goodput_attempts(self.attempts, self.record, self.lines)
        return wall_time(attempts, self.step_times(), self.record, now)

    def unpriced(self) -> str | None:
        """Why there are no dollars, or None when every attempt's GPU nodes have a price."""
        dated = f"in {CATALOG_NAME} (dated {catalog().date})"
        prices = self.prices()
        for price in prices:
            if price.hourly is None and price.recorded:
                return f"no list price for the rungs attempt {price.attempt} ran on ({', '.join(price.rungs)}) {dated}"
            if price.hourly is None:
                return f"no list price for the stack's GPU nodes {dated}"
        if self.gpu_hourly is None and not prices:
            return f"no list price for the stack's GPU nodes {dated}"
        return None

    def at_most(self) -> bool:
        """Whether flex-start nodes, counted at the on-demand rate, make the dollars the most they can be."""
        return any(price.at_most for price in self.prices())

    def pricing_lines(self) -> list[str]:
        """Which rungs the dollars used (jobs/runs/pricing.py pricing_lines), under a heading; none before any attempt
        started."""
        prices = self.prices()
        if not prices:
            return []
        heading = f"priced by the rungs each attempt ran on ({CATALOG_NAME} of {catalog().date}):"
        return [heading, *(f"  {line}" for line in pricing_lines(prices))]


def run_view(
    client: JobSubmissionClient,
    config: StackConfig,
    run: str,
    framework: str,
    data_root: Path | None,
    report: job_client.Report,
) -> RunView:
    """The run `run` of the stack: Ray's attempts, and its files from `data_root` or through the Ray head."""
    ray = observed.ray_attempts(job_client.attempts(client, run))
    names = observed.file_names(ray)
    run_dir = run_directory(run)
    if data_root is not None:
        local = Path(under_data_root(run_dir, str(data_root)))
        files = read_local_run_files(local, names, observed.RUN_FILE_LINES)
        checkpoints = complete_checkpoints(local, framework, config.total_gpus)
    else:
        files = read_run_files(client, run_dir, names, observed.RUN_FILE_LINES, report=report)
        checkpoints = []
    return _view_of(config, run, framework, ray, parse(files.get(names[0]) or ""), files, checkpoints)


def _view_of(
    config: StackConfig,
    run: str,
    framework: str,
    attempts: Sequence[observed.RayAttempt],
    record: list[dict[str, Any]],
    files: Mapping[str, str | None],
    checkpoints: Sequence[int],
) -> RunView:
    """The RunView of `run` from its attempts, its record and its files as read (the attempts' logs' kept lines)."""
    lines = observed.attempt_lines(files, attempts)
    resumed = [event["resumed_from_step"] for event in record if isinstance(event.get("resumed_from_step"), int)]
    resumed += observed.logged_resumes(lines).values()
    return RunView(
        run=run,
        framework=framework,
        attempts=tuple(attempts),
        record=tuple(record),
        lines=lines,
        checkpoints=tuple(sorted({*checkpoints, *resumed})),
        **stack_prices(config),
    )


RECORDED_ENDS = {
    "succeeded": "SUCCEEDED",
    "failed": "FAILED",
    "not-retried": "FAILED",
    "gave-up": "FAILED",
    "deadline-stop": "STOPPED",
    "budget-stop": "STOPPED",
}
"""How an attempt ended, as Ray's status, by the guardian's record entry that says it (incluster/record.py EVENTS): the
guardian records `failed` for a FAILED or STOPPED attempt before it decides `not-retried` or `gave-up`, and stops the
attempts it records as `deadline-stop` and `budget-stop` itself."""

UNRECORDED = "ENDED"
"""The status of an attempt whose end the record does not say (an attempt after it exists, or no Ray head lists it)."""


def directory_attempts(
    record: Sequence[Mapping[str, Any]], logs: Mapping[int, Sequence[tuple[float, str]]]
) -> list[observed.RayAttempt]:
    """The run's attempts as its directory alone tells them, without Ray's job list: every attempt its record or its
    logs name, started at its record's `submitted` entry (else its log's first line), ended at its log's last line
    (else its record's last entry), its status the record's (RECORDED_ENDS; the first such entry), else UNRECORDED.
    Pure."""
    numbers = {item.get("attempt") for item in record if isinstance(item.get("attempt"), int)} | set(logs)
    found = []
    for number in sorted(number for number in numbers if number > 0):
        own = [item for item in record if item.get("attempt") == number]
        times = [moment for item in own if (moment := stamp_seconds(item.get("time"))) is not None]
        submitted = [stamp_seconds(item.get("time")) for item in own if item.get("event") == "submitted"]
        logged = logs.get(number) or []
        start = submitted[0] if submitted and submitted[0] is not None else (logged[0][0] if logged else None)
        end = logged[-1][0] if logged else (max(times) if times else None)
        status = next((RECORDED_ENDS[item["event"]] for item in own if item.get("event") in RECORDED_ENDS), UNRECORDED)
        found.append(observed.RayAttempt(number, status, start if start is not None else end, end))
    return found


def directory_view(config: StackConfig, run: str, framework: str, run_dir: Path) -> RunView:
    """The run `run` from its directory on this machine alone (`--data-root`, `--run-dir`: a copy of the parked
    bucket's, a downloaded one): its record, every attempt's rolled log parts and its complete checkpoints; the
    attempts as directory_attempts tells them."""
    try:
        logged = logged_attempts(os.listdir(run_dir / "logs"))
    except OSError:
        logged = []
    record = parse(read_local_run_files(run_dir, [RECORD_FILE]).get(RECORD_FILE) or "")
    whole = read_local_run_files(run_dir, [attempt_log(number) for number in logged])
    logs = {number: timed_lines(whole.get(attempt_log(number)) or "") for number in logged}
    attempts = directory_attempts(record, logs)
    keep = re.compile(observed.RUN_FILE_LINES)
    files = {
        name: "".join(line for line in (text or "").splitlines(True) if keep.search(line))
        for name, text in whole.items()
    }
    return _view_of(
        config, run, framework, attempts, record, files, complete_checkpoints(run_dir, framework, config.total_gpus)
    )


def stack_prices(config: StackConfig) -> dict[str, Any]:
    """RunView's prices for `config`: each rung's $/h a node, the stack's GPU nodes and their $/h without a record."""
    node_hourly = {rung: gpu_node_ceiling(config, catalog(), rung) for rung in RUNGS}
    rate = node_hourly[config.gpu.provisioning]
    return {
        "gpu_hourly": None if rate is None else config.gpu.nodes * rate,
        "node_hourly": node_hourly,
        "stack_rungs": {config.gpu.provisioning: config.gpu.nodes},
    }


def dollars_so_far(attempts: list[observed.RayAttempt], hourly: float, now: float | None = None) -> float:
    """Dollars the GPU nodes cost while the run's attempts ran (a live one until `now`)."""
    moment = time.time() if now is None else now
    seconds = sum((moment if item.end is None else item.end) - item.start for item in attempts if item.start)
    return hourly * seconds / 3600
