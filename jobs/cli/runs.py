"""The run across its attempts as the CLI shows it: `status` (a job, its error line, the run's goodput and cost, its
exports and record), `plot` (the run's picture) and `export` (a checkpoint as a Hugging Face model directory)."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from core.config.model import StackConfig
from core.prices import catalog, idle_bill
from incluster import budget, job_client, readiness, scaling
from incluster.attempt import logged_lines
from incluster.capacity_events import NODE_POOL_LABEL, rung_of_node
from incluster.endpoint import Endpoint
from incluster.export_submission import submit_export
from incluster.guardian.cluster import api_endpoint, gpu_nodes_of
from incluster.logs import ERROR_SCAN_LINES, error_line, plain
from incluster.record import GPU_CAPACITY_LOST, RECORD_FILE, record_lines
from jobs.cli.follow import follow
from jobs.cli.lines import ProgressLine, counted
from jobs.cli.stack_jobs import (
    RunDirectory,
    directory_job_line,
    job_line,
    pick_job,
    reach_or_read,
    record_where,
    run_of,
)
from jobs.runs import observed
from jobs.runs.export import export_of, export_submission, exports_dir, for_run
from jobs.runs.first_step import HEADING, FirstStep, first_step_lines, first_steps, first_steps_json
from jobs.runs.goodput import Goodput
from jobs.runs.idle import IdleView, idle_view
from jobs.runs.observe import RunView, directory_view, run_view
from jobs.runs.plot import draw, markers
from jobs.spec.training import TrainingSpec, model_size_b, scheduled_steps, training_spec, under_data_root
from jobs.submit.target import UsageError, endpoint_of, local_submission

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient


def now() -> float:
    """The time `status` reports at, in seconds since the epoch (a function, so that a test can fix it)."""
    return time.time()


def _data_root(args: argparse.Namespace) -> Path | None:
    """`--data-root DIR` (made absolute by main) as a Path, None without it."""
    return Path(args.data_root) if args.data_root else None


def _view(args: argparse.Namespace, config: StackConfig, client: JobSubmissionClient, job: JobDetails) -> RunView:
    """The run of `job` (an attempt's, or the run an export exports) with its files, read with a progress line."""
    meta = job.metadata or {}
    progress = ProgressLine()
    try:
        framework = meta.get("framework", config.workload.framework)
        return run_view(client, config, run_of(job), framework, _data_root(args), progress)
    finally:
        progress.close()


def cmd_export(args: argparse.Namespace, config: StackConfig) -> int:
    """Export a complete checkpoint of the stack's run (default: the newest) as a Hugging Face model directory."""
    if args.step is not None and args.step < 1:
        raise UsageError(f"--step must be a step number of 1 or more, got {args.step}")
    spec = training_spec(config)
    converter = shlex.split(args.converter) if args.converter else None
    endpoint = endpoint_of(args, config)
    client = job_client.connect(endpoint)
    if args.job:
        spec = named_run(client, config, spec, args.job)
    submission = local_submission(args, export_submission(config, spec, args.step, converter))
    progress = ProgressLine()
    brought_back = False
    try:
        brought_back = scaling.bring_back(endpoint, config.gpu.nodes, progress)
        readiness.wait_for_gpus(
            endpoint, 1, config.job.ready_timeout_seconds, progress, gpus_per_node=config.gpus_per_node
        )
    except BaseException:
        progress.close()
        if brought_back:  # nothing was submitted: the workers this command brought back go again
            try:
                print(back_to_zero(client, endpoint), file=sys.stderr)
            except job_client.JobError as error:
                print(f"the GPU workers stay up: {error}", file=sys.stderr)
        raise
    finally:
        progress.close()
    # The driver (incluster/export_run.py) reaches the cluster as py_modules, added at submission and never stored.
    submission_id, already = submit_export(client, submission)
    done = "already submitted, following it" if already else "submitted"
    exports = under_data_root(exports_dir(spec.run), args.data_root) if args.data_root else exports_dir(spec.run)
    print(f"{done} {submission_id}: the export of {spec.run} into {exports}/", file=sys.stderr)
    print(submission_id, flush=True)
    code = follow(client, config, submission_id, spec.framework, stream=False)
    if brought_back:
        print(back_to_zero(client, endpoint), file=sys.stderr)
    return code


def named_run(client: JobSubmissionClient, config: StackConfig, spec: TrainingSpec, job_id: str) -> TrainingSpec:
    """The spec of the run whose attempt (or export) `job_id` is, a job of the stack on the cluster (pick_job): the
    export is of that run and of no other; UsageError, one line, for a job of no run or a run of another framework."""
    job = pick_job(client, config.stack, job_id)
    run = run_of(job)
    if run is None:
        raise UsageError(f"job {job_id} is no attempt or export of a grpo-gke run; name one (list shows them)")
    framework = (job.metadata or {}).get("framework", spec.framework)
    if framework != spec.framework:
        raise UsageError(
            f"run {run} is a {framework} run and stack {config.stack!r} is {spec.framework} now: export it with the"
            " stack file it ran with"
        )
    return for_run(spec, run)


def back_to_zero(client: JobSubmissionClient, endpoint: Endpoint) -> str:
    """Scale the GPU workers to zero again after this command brought them back for an export, unless a job is live
    on the cluster; the line saying which.

    Left up, they would bill at the running rate with nothing to do: an in-cluster guardian scales them down again
    within a minute of nothing being live (incluster/guardian/policy.py `_idle`), but no guardian runs with
    job.recover false, and this command knows at once that its export has ended.
    """
    live = [job for job in client.list_jobs() if job_client.status_text(job.status) in job_client.LIVE]
    if live:
        return f"the GPU workers stay up: {live[0].submission_id} is {job_client.status_text(live[0].status)} on the cluster"
    api = scaling.api_of(endpoint)
    assert api is not None, "bring_back scales through the API server only"
    scaling.scale_to(api, 0)
    return "the GPU workers were at zero before this export: scaled back to zero"


def gpu_node_rungs(endpoint: Endpoint, config: StackConfig) -> tuple[list[dict[str, str | None]] | None, str] | None:
    """Each GPU node's name and rung (from its NODE_POOL_LABEL, core/names.py gpu_pool_name per rung; None for a
    pool of no rung) and where the ladder's scale-up stands (readiness.ladder_line, the autoscaler's MIGs looked up in
    the GPU pools' instance groups, readiness.instance_groups_of), through the API server behind
    the dashboard's proxy; None without one (a plain --address). An API server that refuses: no nodes, and why."""
    api = api_endpoint(endpoint)
    if api is None:
        return None
    try:
        nodes = gpu_nodes_of(api)
    except job_client.JobError as error:
        return None, f"rung unknown ({error})"
    rungs = [
        {
            "name": str((node.get("metadata") or {}).get("name", "")),
            "rung": rung_of_node((node.get("metadata") or {}).get("labels") or {}, config.gpu.provisioning),
        }
        for node in nodes
    ]
    try:
        groups = readiness.instance_groups_of(api)
    except job_client.JobError as error:
        return sorted(rungs, key=lambda item: str(item["name"])), f"rung unknown ({error})"
    ladder = readiness.ladder_line(readiness.Capacity(api, groups))
    return sorted(rungs, key=lambda item: str(item["name"])), ladder


def run_idle(view: RunView | None, config: StackConfig, moment: float) -> IdleView | None:
    """The run's idle bill at `moment` once it is over (jobs/runs/idle.py): when the GPU workers scale to zero, or
    since when the parts that stay bill and how much; None while it is not over."""
    if view is None:
        return None
    planned = idle_bill(config, catalog(), model_size_b(config.workload))
    return idle_view(view.record, view.attempts, config.job.idle_minutes, planned, moment)


def budget_status(view: RunView, config: StackConfig, moment: float) -> str | None:
    """The run's budget line (incluster/budget.py budget_line): job.maxCost and job.maxGpuHours against what the
    attempts Ray lists spent by `moment`, each at its rungs' list price, and the guardian's stop at it when the newest
    attempt has one; None without a budget."""
    limits = {"maxCost": config.job.max_cost, "maxGpuHours": config.job.max_gpu_hours}
    if all(value is None for value in limits.values()):
        return None
    spans = [budget.Span(item.number, item.start, item.end) for item in view.attempts if item.start is not None]
    used = budget.spent(
        spans, view.record, view.node_hourly, view.stack_rungs, moment, gpus_per_node=config.gpus_per_node
    )
    newest = max((item.number for item in view.attempts), default=0)
    return budget.budget_line(limits, used, budget.stop_entry(view.record, newest))


def projected_status(view: RunView, config: StackConfig, figures: Goodput, moment: float) -> str | None:
    """The run's projected end (incluster/budget.py projected_end) while its newest attempt is live: the steps left to
    the last step it was submitted with (its `lastStep` metadata, as the guardian reads it; for an attempt submitted
    without, its `maxSteps`; else the stack's: jobs/spec/training.py scheduled_steps, epochs-only included) at
    the median of the newest measured step times (jobs/runs/observed.py step_points), at the newest
    attempt's rungs' $/h, with each preemption's measured loss (goodput's Loss: after the checkpoint and the restart)
    folded in once one happened; None otherwise, or without a price."""
    newest = view.attempts[-1] if view.attempts else None
    prices = view.prices()
    if newest is None or newest.status not in job_client.LIVE or not prices or prices[-1].hourly is None:
        return None
    times = [point.step_s for point in observed.step_points(view.lines, view.framework) if point.step_s is not None]
    recoveries = [loss.total_s for loss in figures.losses if loss.failure == GPU_CAPACITY_LOST]
    hourly = prices[-1].hourly
    scheduled, limit = newest.max_steps or "", newest.last_step
    if limit is None:
        limit = int(scheduled) if scheduled.isdigit() else scheduled_steps(config)
    found = budget.projected_end(times, figures.steps_done, limit, hourly, recoveries)
    return None if found is None else budget.projection_line(found, hourly, moment)


def measured_first_steps(view: RunView, now: float) -> list[FirstStep]:
    """Each attempt's time to its first step line, from the run's record (submissions) and step lines."""
    return first_steps(observed.goodput_attempts(view.attempts, view.record, view.lines), view.steps(), now)


def print_first_steps(found: list[FirstStep]) -> None:
    """The measured time to each attempt's first step, under its heading (nothing before an attempt started)."""
    if found:
        print(HEADING)
        for line in first_step_lines(found):
            print(f"  {line}")


def time_lines(view: RunView, moment: float) -> list[str]:
    """Where the run's time goes (jobs/runs/step_time.py): the mean step by stage and the tokens per second per GPU,
    once a step logged its seconds, and the wall time by kind since the first submission."""
    figures, wall = view.breakdown(), view.wall_time(moment)
    return [*([] if figures is None else figures.lines()), *([] if wall is None else wall.lines())]


def time_document(view: RunView | None, moment: float) -> dict[str, object]:
    """`status --json`'s `stepTime` (the mean step by stage) and `wallTime` (seconds by kind); null where none."""
    figures = None if view is None else view.breakdown()
    wall = None if view is None else view.wall_time(moment)
    return {
        "stepTime": None if figures is None else figures.as_json(),
        "wallTime": None if wall is None else wall.as_json(),
    }


def cmd_status(args: argparse.Namespace, config: StackConfig) -> int:
    """Show a job (default: the stack's newest attempt), its run's goodput and cost across attempts, and its exports.

    Once the run is over: when the GPU workers scale to zero, then since when the rest bills and how much.
    Through the API server (not a plain --address): each GPU node's rung of the capacity ladder, and the scale-up.
    Without a Ray head that has the run (--run-dir, or --data-root when none answers): the same from the run's
    directory, its attempts as its record and logs tell them."""
    source = reach_or_read(args, config)
    if isinstance(source, RunDirectory):
        return status_from_directory(args, config, source)
    client, job = source
    endpoint = endpoint_of(args, config)
    status = job_client.status_text(job.status)
    error = None
    if status == "FAILED":
        error = error_line("\n".join(job_client.last_lines(client, job.submission_id, ERROR_SCAN_LINES)))
    run = (job.metadata or {}).get("run")
    view = _view(args, config, client, job) if run else None
    moment = now()
    exports = [item for item in job_client.stack_jobs(client, config.stack) if run and export_of(item.metadata) == run]
    capacity = gpu_node_rungs(endpoint, config)
    if args.json:
        document = status_document(config, job.submission_id, status, run, error, view, moment)
        document["exports"] = [
            {"id": item.submission_id, "status": job_client.status_text(item.status), "step": item.metadata.get("step")}
            for item in exports
        ]
        document["gpuNodes"] = None if capacity is None else capacity[0]
        document["scaleUp"] = None if capacity is None else capacity[1] or None
        print(json.dumps(document, sort_keys=True, indent=2))
        return 0
    print(job_line(job))
    message = plain(job.message or "").strip().splitlines()
    if message:
        print(f"  {message[0]}")
    if status == "FAILED":
        print(f"  error: {error}" if error else f"  no error line in the last {ERROR_SCAN_LINES} log lines")
    if view is not None:
        print_run(config, view, moment)
    if exports:
        print(f"{'export' if len(exports) == 1 else 'exports'} of {run}:")
        for item in exports:
            print(f"  {job_line(item)}")
    if view is not None:
        print_record_and_idle(config, view, record_where(args, view.run), moment)
    if capacity is not None:
        nodes, ladder = capacity
        if nodes is None:
            print(f"GPU nodes: {ladder}")
        else:
            print(f"GPU nodes by rung (their {NODE_POOL_LABEL} label):" if nodes else "GPU nodes: none")
            for item in nodes:
                print(f"  {item['name']}  {item['rung'] or 'rung unknown'}")
            if ladder:
                print(f"  scale-up: {ladder}")
    return 0


def status_from_directory(args: argparse.Namespace, config: StackConfig, found: RunDirectory) -> int:
    """`status` of an attempt read from its run's directory alone (jobs/runs/observe.py directory_view): its status
    the record's, its error line from its log's end, the run's figures, record and idle bill; no exports or GPU nodes,
    which only the cluster knows."""
    view = directory_view(config, found.run, config.workload.framework, found.path)
    attempt = next(item for item in view.attempts if item.number == found.attempt)
    error = None
    if attempt.status == "FAILED":
        error = error_line("\n".join(logged_lines(found.path, found.attempt, ERROR_SCAN_LINES)))
    moment = now()
    if args.json:
        document = status_document(
            config, f"{found.run}-{found.attempt}", attempt.status, found.run, error, view, moment
        )
        document.update({"exports": [], "gpuNodes": None, "scaleUp": None, "runDirectory": str(found.path)})
        print(json.dumps(document, sort_keys=True, indent=2))
        return 0
    print(directory_job_line(found.run, attempt))
    if attempt.status == "FAILED":
        print(f"  error: {error}" if error else f"  no error line in the last {ERROR_SCAN_LINES} log lines")
    print_run(config, view, moment)
    print_record_and_idle(config, view, str(found.path / RECORD_FILE), moment)
    return 0


def status_document(
    config: StackConfig,
    attempt: str,
    status: str,
    run: str | None,
    error: str | None,
    view: RunView | None,
    moment: float,
) -> dict[str, object]:
    """`status --json`'s keys that the run's files and attempts give (the cluster's exports and GPU nodes are added by
    the caller)."""
    figures = view.goodput(moment) if view is not None else None
    idle = run_idle(view, config, moment)
    starts = measured_first_steps(view, moment) if view is not None else None
    return {
        "attempt": attempt,
        "status": status,
        "run": run,
        "error": error,
        "gpuHourly": None if view is None else view.gpu_hourly,
        "gpuPrices": []
        if view is None
        else [
            {"attempt": item.attempt, "rungs": item.rungs, "hourly": item.hourly, "recorded": item.recorded}
            for item in view.prices()
        ],
        "goodput": None if figures is None else figures.as_json(),
        "firstSteps": None if starts is None else first_steps_json(starts),
        "record": [] if view is None else list(view.record),
        "idle": None if idle is None else idle.as_json(),
        **time_document(view, moment),
    }


def print_run(config: StackConfig, view: RunView, moment: float) -> None:
    """The run's figures across its attempts: goodput and cost, pricing, budget and projected end, the time to each
    first step and where the time goes."""
    figures = view.goodput(moment)
    print(f"run {view.run} across {counted(len(view.attempts), 'attempt')}:")
    unpriced = view.unpriced()
    for line in figures.lines(unpriced, view.at_most()):
        print(f"  {line}")
    for line in [] if unpriced else view.pricing_lines():
        print(f"  {line}")
    for line in (budget_status(view, config, moment), projected_status(view, config, figures, moment)):
        if line is not None:
            print(f"  {line}")
    print_first_steps(measured_first_steps(view, moment))
    for line in time_lines(view, moment):
        print(line)


def print_record_and_idle(config: StackConfig, view: RunView, where: str, moment: float) -> None:
    """The run's record (from `where`) and, once the run is over, its idle bill."""
    if view.record:
        print(f"record of {view.run} ({where}):")
        for line in record_lines(list(view.record)):
            print(f"  {plain(line)}")
    idle = run_idle(view, config, moment)
    for line in [] if idle is None else idle.lines():
        print(line)


def cmd_plot(args: argparse.Namespace, config: StackConfig) -> int:
    """Draw the run's reward and step time by stage against the step, each attempt's preemption and resume marked."""
    if args.out and Path(args.out).suffix.lower() != ".png":
        raise UsageError(f"--out {args.out}: the plot is a PNG; name a file ending in .png")
    source = reach_or_read(args, config)
    if isinstance(source, RunDirectory):
        view = directory_view(config, source.run, config.workload.framework, source.path)
    else:
        client, job = source
        if run_of(job) is None:
            raise UsageError(f"job {job.submission_id} is not an attempt of a grpo-gke run; name one (list shows them)")
        view = _view(args, config, client, job)
    attempts = observed.goodput_attempts(view.attempts, view.record, view.lines)
    marks = markers(view.goodput(time.time()).losses, {item.number: item.resumed_from for item in attempts})
    points = observed.step_points(view.lines, view.framework)
    out = Path(args.out) if args.out else Path(f"{view.run}.png")
    tried = counted(len(view.attempts), "attempt")
    try:
        draw(points, marks, view.framework, f"{view.run}: {tried}", out, view.step_times())
    except OSError as error:
        raise UsageError(f"cannot write the plot to {out}: {error.strerror or error}") from None
    print(f"wrote {out}: {counted(len(points), 'step')} of {tried}, {counted(len(marks), 'mark')}")
    return 0
