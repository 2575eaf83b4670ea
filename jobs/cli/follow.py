"""Submitting, following, listing and stopping the stack's jobs: `submit` (with --wait, --fresh), `logs` (with
--follow), `stop` and `list`, and the following itself (a progress line with the run's cost so far; how a followed
job ended), which `export` uses too."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.prices import catalog, gpu_hourly
from core.stackfile import stack_file
from incluster import budget, job_client, readiness, run_submission, scaling
from incluster.attempt import log_parts
from incluster.logs import plain
from incluster.progress import parse_verl_metrics
from incluster.runs import run_dir_of
from jobs.cli.lines import ProgressLine, counted, first_line
from jobs.cli.stack_jobs import RunDirectory, job_line, pick_job, print_records, reach_or_read
from jobs.runs.observe import dollars_so_far
from jobs.runs.observed import VERL_STEP_TIME_KEY, ray_attempts
from jobs.spec.generation import record_generation
from jobs.spec.training import TrainingSpec, scheduled_steps, submission_of, training_spec
from jobs.submit.parked import mark_parked_stale
from jobs.submit.target import UsageError, endpoint_of, job_command, load_stack, local_submission

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

LAST_LINES = 20
"""Log lines shown when a followed job ends badly."""


class Interrupted(Exception):
    """Ctrl-C while following a job; the message is the one line the CLI prints."""


def finish(client: JobSubmissionClient, submission_id: str, status: str, show_lines: bool) -> int:
    """Say how the followed job ended (its reason and, with `show_lines`, its last log lines); its exit status."""
    if status == "SUCCEEDED":
        print(f"{submission_id} SUCCEEDED", file=sys.stderr)
        return 0
    info = client.get_job_info(submission_id)
    reason = plain(info.message or "").strip().splitlines()
    print(f"{submission_id} {status}: {reason[0] if reason else 'no message'}", file=sys.stderr)
    if show_lines:
        lines = job_client.last_lines(client, submission_id, LAST_LINES)
        print(f"last {counted(len(lines), 'log line')}:", file=sys.stderr)
        for line in lines:
            print(f"  {plain(line)}", file=sys.stderr)
    return 1


def cost_so_far(client: JobSubmissionClient, config: StackConfig, submission_id: str) -> Callable[[], str]:
    """What the progress line adds while following `submission_id`: the run's GPU dollars so far across its
    attempts at the catalog's list price of gpu.nodes on gpu.provisioning (nothing when the catalog has no price for
    them). The line reads no record, so with a ladder it says so: `status` prices each attempt by its rungs."""
    hourly = gpu_hourly(config, catalog())
    run = (client.get_job_info(submission_id).metadata or {}).get("run")
    if hourly is None or run is None:
        return lambda: ""
    attempts = ray_attempts(job_client.attempts(client, run))
    rate = f" at {config.gpu.provisioning}'s rate (status: by rung)" if config.gpu.capacity is not None else ""
    return lambda: f"  ${dollars_so_far(attempts, hourly):,.2f} so far{rate}"


class ProjectedEnd:
    """What the followed log says of the pace (each step line's verl `timing_s/step`, else the time between step
    lines as they come) and how the progress line shows the run's projected end from it (incluster/budget.py
    projected_end to the stack's last step, jobs/spec/training.py scheduled_steps, at the stack's $/h; the log reads no record, so no preemption is folded in: `status` does)."""

    def __init__(self, config: StackConfig, framework: str, clock: Callable[[], float] = time.time) -> None:
        self.last_step, self.hourly, self.framework, self.clock = scheduled_steps(config), gpu_hourly(config, catalog()), framework, clock  # fmt: skip
        self.seconds: list[float] = []
        self.step = 0
        self.seen_at: float | None = None

    def see(self, line: str) -> None:
        """Take one log line: a verl step line adds its step time."""
        metrics = parse_verl_metrics(plain(line)) if self.framework == "verl" else None
        if metrics is None or "step" not in metrics:
            return
        now = self.clock()
        took = metrics.get(VERL_STEP_TIME_KEY)
        if took is None and self.seen_at is not None:
            took = now - self.seen_at
        if took is not None:
            self.seconds.append(took)
        self.step, self.seen_at = max(self.step, int(metrics["step"])), now

    def suffix(self) -> str:
        """`  projected end: ...` once a step time is known and the schedule's last step is (scheduled_steps), else ""."""
        if self.hourly is None:
            return ""
        found = budget.projected_end(self.seconds, self.step, self.last_step, self.hourly)
        return "" if found is None else f"  {budget.projection_line(found, self.hourly, self.clock())}"


def follow(
    client: JobSubmissionClient,
    config: StackConfig,
    submission_id: str,
    framework: str,
    stream: bool,
) -> int:
    """Follow the stack's job to its end; a dashboard lost on the way is one line."""
    stack = config.stack
    progress = ProgressLine()

    projected = ProjectedEnd(config, framework)

    def on_line(line: str) -> None:
        projected.see(line)
        if stream:
            progress.close()
            print(line, flush=True)

    try:
        suffix = cost_so_far(client, config, submission_id)

        def report(text: str) -> None:
            progress(text + suffix() + projected.suffix())

        status = job_client.follow(client, submission_id, framework, on_line, report)
        return finish(client, submission_id, status, show_lines=not stream)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted; {submission_id} keeps running (stop it with {job_command('stop', stack, submission_id)})"
        ) from None
    except (OSError, RuntimeError, job_client.Unreachable, job_client.Refused) as error:
        # A request past its deadline is Unreachable; requests' connection errors are OSErrors; the Jobs API's
        # HTTP errors are Refused (incluster/job_client.py), a websocket's RuntimeError.
        reason = first_line(error).removeprefix(f"cannot reach the Ray dashboard at {client.get_address()}: ")
        raise job_client.Unreachable(
            f"lost the Ray dashboard at {client.get_address()} while following {submission_id}"
            f" ({reason}); the job may still be running:"
            f" {job_command('status', stack, submission_id)}"
        ) from None
    finally:
        progress.close()


def run_dir_known(
    args: argparse.Namespace, client: JobSubmissionClient, submission: dict
) -> Callable[[], run_submission.RunDirView]:
    """How `submit` reads what the run's directory knows of its attempts before it numbers the next: in place under
    `--data-root`, else through the Ray head (incluster/run_files.py, with a progress line)."""
    run_dir = run_dir_of(submission)
    if args.data_root:
        return lambda: run_submission.local_view(Path(run_dir))

    def through_the_head() -> run_submission.RunDirView:
        progress = ProgressLine()
        try:
            return run_submission.head_view(client, run_dir, progress)
        finally:
            progress.close()

    return through_the_head


def cmd_submit(args: argparse.Namespace, config: StackConfig) -> int:
    """Submit the stack's run (idempotent); with --wait follow it to the end."""
    spec = training_spec(config, args.entrypoint)
    endpoint = endpoint_of(args, config)
    client = job_client.connect(endpoint)
    timeout = args.ready_timeout if args.ready_timeout is not None else config.job.ready_timeout_seconds
    submission = local_submission(args, submission_of(config, spec, 1))
    if args.fresh or run_submission.wants_workers(client, submission, run_dir_known(args, client, submission)):
        parked = config.parked_bucket_name if config.storage.type == "lustre" else None
        mark_parked_stale(parked, "python -m jobs submit", lambda line: print(line, file=sys.stderr))
        progress = ProgressLine()
        try:
            scaling.bring_back(endpoint, config.gpu.nodes, progress)
            readiness.wait_for_gpus(endpoint, config.gpu.nodes, timeout, progress, gpus_per_node=config.gpus_per_node)
        finally:
            progress.close()
    if args.fresh:
        config, spec = fresh_run(args, config)
        submission = local_submission(args, submission_of(config, spec, 1))
    outcome = run_submission.ensure_run(client, submission, run_dir_known(args, client, submission))
    print(outcome.sentence(), file=sys.stderr)
    print(outcome.submission_id, flush=True)
    if not args.wait or outcome.action == "over":
        return 0
    return follow(client, config, outcome.submission_id, spec.framework, stream=False)


def fresh_run(args: argparse.Namespace, config: StackConfig) -> tuple[StackConfig, TrainingSpec]:
    """Record the next job.runGeneration in the stack file; the config and spec of the new run."""
    path = stack_file(Path(args.dir), args.stack)
    generation = config.job.run_generation + 1
    try:
        record_generation(path, generation, lambda _: load_stack(args.stack, Path(args.dir)).job.run_generation)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(f"a fresh run: {PROJECT_NAMESPACE}:job.runGeneration is now {generation} in {path.name}", file=sys.stderr)
    fresh = load_stack(args.stack, Path(args.dir))
    spec = training_spec(fresh, args.entrypoint)
    if config.job.recover and not args.address:
        # The guardian's settings name the run (jobs/guardian/settings.py); only `pulumi up` rewrites them.
        print(
            f"the run guardian in the cluster guards generation {generation} once pulumi up --stack {args.stack} has"
            " updated it; until then nothing recovers the new run or scales its GPU workers to zero after it",
            file=sys.stderr,
        )
    return fresh, spec


def cmd_logs(args: argparse.Namespace, config: StackConfig) -> int:
    """Print a job's log (default: the newest attempt); with --follow stream it with a progress line."""
    source = reach_or_read(args, config)
    if isinstance(source, RunDirectory):
        if args.follow:
            raise UsageError(
                f"--follow streams a job on a Ray head; {source.path} is read as it is (leave --follow out)"
            )
        # The attempt wrapper's log holds every line the attempt printed, each after its time and a tab.
        for part in log_parts(source.path, source.attempt):
            with open(part, encoding="utf-8", errors="replace") as log:
                for line in log:
                    sys.stdout.write(line.split("\t", 1)[-1])
        return 0
    client, job = source
    framework = (job.metadata or {}).get("framework", config.workload.framework)
    if args.follow:
        return follow(client, config, job.submission_id, framework, stream=True)
    sys.stdout.write(client.get_job_logs(job.submission_id))
    return 0


def cmd_stop(args: argparse.Namespace, config: StackConfig) -> int:
    """Stop a job, or every live job of the stack."""
    client = job_client.connect(endpoint_of(args, config))
    jobs = [pick_job(client, config.stack, args.job)] if args.job else job_client.stack_jobs(client, config.stack)
    stopped = job_client.stop_jobs(client, jobs)
    print(f"stopped {', '.join(stopped)}" if stopped else f"no live job of stack {config.stack!r}")
    return 0


def cmd_list(args: argparse.Namespace, config: StackConfig) -> int:
    """List the stack's jobs, oldest first."""
    client = job_client.connect(endpoint_of(args, config))
    jobs = job_client.stack_jobs(client, config.stack)
    for job in jobs:
        print(job_line(job))
    if not jobs:
        print(f"no job of stack {config.stack!r}", file=sys.stderr)
    print_records(args, client, [job.metadata["run"] for job in jobs if (job.metadata or {}).get("run")])
    return 0
