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
from incluster import job_client, readiness, scaling
from incluster.capacity_events import NODE_POOL_LABEL, rung_of_node
from incluster.endpoint import Endpoint
from incluster.export_submission import submit_export
from incluster.guardian.cluster import api_endpoint, gpu_nodes_of
from incluster.logs import ERROR_SCAN_LINES, error_line, plain
from incluster.record import record_lines
from jobs.cli.follow import follow
from jobs.cli.lines import ProgressLine, counted
from jobs.cli.stack_jobs import job_line, pick_job, record_where, run_of
from jobs.runs import observed
from jobs.runs.export import export_of, export_submission, exports_dir
from jobs.runs.first_step import HEADING, FirstStep, first_step_lines, first_steps, first_steps_json
from jobs.runs.idle import IdleView, idle_view
from jobs.runs.observe import RunView, run_view
from jobs.runs.plot import draw, markers
from jobs.spec.training import model_size_b, training_spec, under_data_root
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
    submission = local_submission(args, export_submission(config, spec, args.step, converter))
    endpoint = endpoint_of(args, config)
    client = job_client.connect(endpoint)
    progress = ProgressLine()
    brought_back = False
    try:
        brought_back = scaling.bring_back(endpoint, config.gpu.nodes, progress)
        readiness.wait_for_gpus(endpoint, 1, config.job.ready_timeout_seconds, progress)
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
    Through the API server (not a plain --address): each GPU node's rung of the capacity ladder, and the scale-up."""
    endpoint = endpoint_of(args, config)
    client = job_client.connect(endpoint)
    job = pick_job(client, config.stack, args.job)
    status = job_client.status_text(job.status)
    error = None
    if status == "FAILED":
        error = error_line("\n".join(job_client.last_lines(client, job.submission_id, ERROR_SCAN_LINES)))
    run = (job.metadata or {}).get("run")
    view = _view(args, config, client, job) if run else None
    moment = now()
    figures = view.goodput(moment) if view is not None else None
    idle = run_idle(view, config, moment)
    starts = measured_first_steps(view, moment) if view is not None else None
    exports = [item for item in job_client.stack_jobs(client, config.stack) if run and export_of(item.metadata) == run]
    capacity = gpu_node_rungs(endpoint, config)
    if args.json:
        document = {
            "attempt": job.submission_id,
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
            "exports": [
                {
                    "id": item.submission_id,
                    "status": job_client.status_text(item.status),
                    "step": item.metadata.get("step"),
                }
                for item in exports
            ],
            "gpuNodes": None if capacity is None else capacity[0],
            "scaleUp": None if capacity is None else capacity[1] or None,
            "idle": None if idle is None else idle.as_json(),
            **time_document(view, moment),
        }
        print(json.dumps(document, sort_keys=True, indent=2))
        return 0
    print(job_line(job))
    message = plain(job.message or "").strip().splitlines()
    if message:
        print(f"  {message[0]}")
    if status == "FAILED":
        print(f"  error: {error}" if error else f"  no error line in the last {ERROR_SCAN_LINES} log lines")
    if view is not None and figures is not None:
        print(f"run {view.run} across {counted(len(view.attempts), 'attempt')}:")
        unpriced = view.unpriced()
        for line in figures.lines(unpriced, view.at_most()):
            print(f"  {line}")
        for line in [] if unpriced else view.pricing_lines():
            print(f"  {line}")
        print_first_steps(starts or [])
        for line in time_lines(view, moment):
            print(line)
    if exports:
        print(f"{'export' if len(exports) == 1 else 'exports'} of {run}:")
        for item in exports:
            print(f"  {job_line(item)}")
    if view is not None and view.record:
        print(f"record of {view.run} ({record_where(args, view.run)}):")
        for line in record_lines(list(view.record)):
            print(f"  {plain(line)}")
    for line in [] if idle is None else idle.lines():
        print(line)
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


def cmd_plot(args: argparse.Namespace, config: StackConfig) -> int:
    """Draw the run's reward and step time by stage against the step, each attempt's preemption and resume marked."""
    if args.out and Path(args.out).suffix.lower() != ".png":
        raise UsageError(f"--out {args.out}: the plot is a PNG; name a file ending in .png")
    client = job_client.connect(endpoint_of(args, config))
    job = pick_job(client, config.stack, args.job)
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
