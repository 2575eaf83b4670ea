"""One run as `status` and `plot` see it: Ray's attempts, the run's record and timestamped logs (read
through the Ray head, or from `--data-root DIR`), the GPU price, and the goodput figures."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config.model import StackConfig
from core.prices import CATALOG_NAME, catalog, gpu_hourly
from incluster import job_client
from incluster.record import parse
from jobs.runs import observed
from jobs.runs.goodput import Goodput, StepDone, complete_checkpoints, measure
from jobs.runs.run_files import read_local_run_files, read_run_files
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
    """$/h of the stack's GPU nodes at the catalog's list price; None when the catalog has none."""

    def steps(self) -> list[StepDone]:
        """The steps done across all attempts."""
        return observed.run_steps(self.lines, self.framework)

    def goodput(self, now: float) -> Goodput:
        """The run's goodput figures at `now` (no dollars when the GPU nodes have no price)."""
        attempts = observed.goodput_attempts(self.attempts, self.record, self.lines)
        return measure(attempts, self.steps(), self.checkpoints, self.gpu_hourly or 0.0, now)

    def unpriced(self) -> str | None:
        """Why there are no dollars, or None when the GPU nodes have a price."""
        if self.gpu_hourly is not None:
            return None
        return f"no list price for the stack's GPU nodes in {CATALOG_NAME} (dated {catalog().date})"


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
    record = parse(files.get(names[0]) or "")
    lines = observed.attempt_lines(files, ray)
    resumed = [event["resumed_from_step"] for event in record if isinstance(event.get("resumed_from_step"), int)]
    resumed += observed.logged_resumes(lines).values()
    return RunView(
        run=run,
        framework=framework,
        attempts=tuple(ray),
        record=tuple(record),
        lines=lines,
        checkpoints=tuple(sorted({*checkpoints, *resumed})),
        gpu_hourly=gpu_hourly(config, catalog()),
    )


def dollars_so_far(attempts: list[observed.RayAttempt], hourly: float, now: float | None = None) -> float:
    """Dollars the GPU nodes cost while the run's attempts ran (a live one until `now`)."""
    moment = time.time() if now is None else now
    seconds = sum((moment if item.end is None else item.end) - item.start for item in attempts if item.start)
    return hourly * seconds / 3600
