"""Submit, follow, inspect, plot and export the stack's GRPO run on its Ray cluster, and guard it.

`.venv/bin/python -m jobs validate|submit|status|logs|list|stop|plot|export|preflight|guard --stack NAME [--address URL]`.
Without `--address` the CLI reaches the stack's cluster the way the post-deploy step does:
the API server's service proxy to the Ray head service, with the cluster and Google access
token of the kubeconfig's `gke_<project>_<region>_<cluster>` context (`--kubeconfig`, default
$KUBECONFIG or ~/.kube/config, as written by `gcloud container clusters get-credentials`).
Exit codes: 0 done (a preflight passed); 1 the followed job FAILED or was STOPPED, or the preflight
failed (one line per bad node or NIC); 2 bad input or an unreachable cluster (one line, no traceback);
130 interrupted (Ctrl-C; one line, the job keeps running).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.config.problems import ConfigError
from core.stackfile import StackFileError, stack_file
from incluster import control, scaling
from incluster.logs import ERROR_SCAN_LINES, error_line, plain
from jobs.spec.training import training_spec
from jobs.submit import access
from jobs.submit.target import (
    PROGRAM,
    UsageError,
    endpoint_of,
    job_command,
    load_stack,
    local_submission,
)

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

    from jobs.runs.observe import RunView
    from jobs.spec.training import TrainingSpec

LAST_LINES = 20
"""Log lines shown when a followed job ends badly."""

class Interrupted(Exception):
    """Ctrl-C while following a job; the message is the one line the CLI prints."""


def counted(count: int, noun: str) -> str:
    """`1 attempt`, `2 attempts`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def checks_the_job(args: argparse.Namespace) -> bool:
    """Whether the command judges the stack's own job spec: validate, and submit of the trainer (a smoke test's
    `--entrypoint` runs another command, so the trainer's checks do not stop it)."""
    return args.command == "validate" or (args.command == "submit" and args.entrypoint is None)


class _ProgressLine:
    """One progress line on stderr: rewritten in place on a terminal, a new line per change otherwise."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.open = False

    def __call__(self, text: str) -> None:
        if self.tty:
            sys.stderr.write(f"\r\033[K{text}")
            self.open = True
        else:
            sys.stderr.write(f"{text}\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.open:
            sys.stderr.write("\n")
            self.open = False


def _job_line(job: JobDetails) -> str:
    """One job as `list` and `status` show it: an attempt with its run and number, an export with the run and step."""
    from jobs.runs.export import export_of

    meta = job.metadata or {}
    started = (
        datetime.fromtimestamp(job.start_time / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ") if job.start_time else "-"
    )
    exported = export_of(meta)
    if exported is not None:
        what = f"export of run={exported}  step={meta.get('step', '-')}"
    else:
        what = f"run={meta.get('run', '-')}  attempt={meta.get('attempt', '-')}"
    return f"{job.submission_id}  {control.status_text(job.status)}  {what}  started={started}"


def run_of(job: JobDetails) -> str | None:
    """The run a job belongs to: an attempt's `run`, an export's run (jobs/runs/export.py export_of); None for others."""
    from jobs.runs.export import export_of

    meta = job.metadata or {}
    return meta.get("run") or export_of(meta)


def _pick_job(client: JobSubmissionClient, stack: str, job_id: str | None) -> JobDetails:
    """The job `job_id` of the stack (refused when another stack, or no stack, submitted it), else the stack's
    newest attempt: an export or another helper job is never the run's newest job."""
    if job_id:
        try:
            job = client.get_job_info(job_id)
        except Exception:  # noqa: BLE001 - the Jobs API answers an unknown id with an HTTP error
            raise UsageError(f"no job {job_id!r} on the cluster") from None
        owner = (job.metadata or {}).get("stack")
        if owner != stack:
            if owner:
                raise UsageError(f"job {job_id} belongs to stack {owner!r}, not {stack!r}; name its stack: --stack {owner}")
            raise UsageError(f"job {job_id} belongs to no grpo-gke stack (its metadata names none), not to {stack!r}")
        return job
    attempts = [job for job in control.stack_jobs(client, stack) if (job.metadata or {}).get("run")]
    if not attempts:
        raise UsageError(f"stack {stack!r} has no attempt on the cluster; {job_command('submit', stack)}")
    return attempts[-1]


def _finish(client: JobSubmissionClient, submission_id: str, status: str, show_lines: bool) -> int:
    if status == "SUCCEEDED":
        print(f"{submission_id} SUCCEEDED", file=sys.stderr)
        return 0
    info = client.get_job_info(submission_id)
    reason = plain(info.message or "").strip().splitlines()
    print(f"{submission_id} {status}: {reason[0] if reason else 'no message'}", file=sys.stderr)
    if show_lines:
        lines = control.last_lines(client, submission_id, LAST_LINES)
        print(f"last {counted(len(lines), 'log line')}:", file=sys.stderr)
        for line in lines:
            print(f"  {plain(line)}", file=sys.stderr)
    return 1


def cost_so_far(client: JobSubmissionClient, config: StackConfig, submission_id: str) -> Callable[[], str]:
    """What the progress line adds while following `submission_id`: the run's GPU dollars so far across its
    attempts at the catalog's list price (nothing when the catalog has no price for the GPU nodes)."""
    from core.prices import catalog, gpu_hourly
    from jobs.runs.observe import dollars_so_far
    from jobs.runs.observed import ray_attempts

    hourly = gpu_hourly(config, catalog())
    run = (client.get_job_info(submission_id).metadata or {}).get("run")
    if hourly is None or run is None:
        return lambda: ""
    attempts = ray_attempts(control.attempts(client, run))
    return lambda: f"  ${dollars_so_far(attempts, hourly):,.2f} so far"


def _follow(
    client: JobSubmissionClient,
    config: StackConfig,
    submission_id: str,
    framework: str,
    stream: bool,
) -> int:
    """Follow the stack's job to its end; a dashboard lost on the way is one line."""
    stack = config.stack
    progress = _ProgressLine()

    def on_line(line: str) -> None:
        progress.close()
        print(line, flush=True)

    try:
        suffix = cost_so_far(client, config, submission_id)

        def report(text: str) -> None:
            progress(text + suffix())

        status = control.follow(client, submission_id, framework, on_line if stream else None, report)
        return _finish(client, submission_id, status, show_lines=not stream)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted; {submission_id} keeps running (stop it with {job_command('stop', stack, submission_id)})"
        ) from None
    except (OSError, RuntimeError, control.Unreachable) as error:
        # A request past its deadline is Unreachable; requests' connection errors are OSErrors; the Jobs API
        # answers HTTP errors with RuntimeError.
        reason = _first_line(error).removeprefix(f"cannot reach the Ray dashboard at {client.get_address()}: ")
        raise control.Unreachable(
            f"lost the Ray dashboard at {client.get_address()} while following {submission_id}"
            f" ({reason}); the job may still be running:"
            f" {job_command('status', stack, submission_id)}"
        ) from None
    finally:
        progress.close()


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


def cmd_validate(args: argparse.Namespace, config: StackConfig) -> int:
    """Check the stack's job spec offline."""
    spec = training_spec(config)
    target = f"verl {spec.release}'s Hydra config" if spec.framework == "verl" else f"NeMo-RL {spec.release}'s keys"
    print(f"{config.stack}: run {spec.run}: {len(spec.overrides)} overrides fit {target}")
    return 0


def cmd_submit(args: argparse.Namespace, config: StackConfig) -> int:
    """Submit the stack's run (idempotent); with --wait follow it to the end."""
    from jobs.spec.training import submission_of

    spec = training_spec(config, args.entrypoint)
    endpoint = endpoint_of(args, config)
    client = control.connect(endpoint)
    timeout = args.ready_timeout if args.ready_timeout is not None else config.job.ready_timeout_seconds
    submission = submission_of(config, spec, 1)
    if args.fresh or control.wants_workers(client, submission):
        progress = _ProgressLine()
        try:
            scaling.bring_back(endpoint, config.gpu.nodes, progress)
            control.wait_for_gpus(endpoint, config.gpu.nodes, timeout, progress)
        finally:
            progress.close()
    if args.fresh:
        config, spec = _fresh(args, config)
        submission = submission_of(config, spec, 1)
    outcome = control.ensure_run(client, local_submission(args, submission))
    print(outcome.sentence(), file=sys.stderr)
    print(outcome.submission_id, flush=True)
    if not args.wait:
        return 0
    return _follow(client, config, outcome.submission_id, spec.framework, stream=False)


def _record_where(args: argparse.Namespace, run: str) -> str:
    """Where the run's record lies: under `--data-root`, else on the shared storage."""
    from incluster.record import RECORD_FILE
    from jobs.spec.training import run_directory, under_data_root

    where = f"{run_directory(run)}/{RECORD_FILE}"
    return under_data_root(where, args.data_root) if args.data_root else where


def _print_records(args: argparse.Namespace, client: JobSubmissionClient, runs: list[str]) -> None:
    """Each run's record (attempts.jsonl): under `--data-root`, else read through the Ray head (jobs/runs/run_files.py,
    one short job per run); nothing for a run without a record."""
    from incluster import record
    from jobs.runs.run_files import read_run_files
    from jobs.spec.training import run_directory, under_data_root

    for run in dict.fromkeys(runs):
        if args.data_root:
            events = record.read(Path(under_data_root(run_directory(run), args.data_root)))
        else:
            found = read_run_files(client, run_directory(run), [record.RECORD_FILE])
            events = record.parse(found[record.RECORD_FILE] or "")
        lines = record.record_lines(events)
        if lines:
            print(f"record of {run} ({_record_where(args, run)}):")
        for line in lines:
            print(f"  {line}")


def _fresh(args: argparse.Namespace, config: StackConfig) -> tuple[StackConfig, TrainingSpec]:
    """Record the next job.runGeneration in the stack file; the config and spec of the new run."""
    from jobs.spec.generation import record_generation

    path = stack_file(Path(args.dir), args.stack)
    generation = config.job.run_generation + 1
    try:
        record_generation(path, generation, lambda _: load_stack(args.stack, Path(args.dir)).job.run_generation)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(f"a fresh run: {PROJECT_NAMESPACE}:job.runGeneration is now {generation} in {path.name}", file=sys.stderr)
    fresh = load_stack(args.stack, Path(args.dir))
    return fresh, training_spec(fresh, args.entrypoint)


def checked_data_root(given: str | None) -> str | None:
    """`--data-root DIR` as the absolute directory every subcommand uses for `/data` (`/data/x` is `DIR/x`, also
    in the paths it prints; a Ray job runs in another directory, so a relative one would point elsewhere); None
    without it; UsageError when it is no directory."""
    if given is None:
        return None
    root = Path(given)
    if not root.is_dir():
        raise UsageError(f"--data-root {given}: no such directory; name the directory that stands for /data")
    return str(root.resolve())


def _data_root(args: argparse.Namespace) -> Path | None:
    """`--data-root DIR` (made absolute by main) as a Path, None without it."""
    return Path(args.data_root) if args.data_root else None


def _view(args: argparse.Namespace, config: StackConfig, client: JobSubmissionClient, job: JobDetails) -> RunView:
    """The run of `job` (an attempt's, or the run an export exports) with its files, read with a progress line."""
    from jobs.runs.observe import run_view

    meta = job.metadata or {}
    progress = _ProgressLine()
    try:
        framework = meta.get("framework", config.workload.framework)
        return run_view(client, config, run_of(job), framework, _data_root(args), progress)
    finally:
        progress.close()


def cmd_export(args: argparse.Namespace, config: StackConfig) -> int:
    """Export a complete checkpoint of the stack's run (default: the newest) as a Hugging Face model directory."""
    import shlex

    from jobs.runs.export import export_submission, exports_dir

    if args.step is not None and args.step < 1:
        raise UsageError(f"--step must be a step number of 1 or more, got {args.step}")
    from jobs.spec.training import under_data_root

    spec = training_spec(config)
    converter = shlex.split(args.converter) if args.converter else None
    submission = local_submission(args, export_submission(config, spec, args.step, converter))
    endpoint = endpoint_of(args, config)
    client = control.connect(endpoint)
    progress = _ProgressLine()
    try:
        scaling.bring_back(endpoint, config.gpu.nodes, progress)
        control.wait_for_gpus(endpoint, 1, config.job.ready_timeout_seconds, progress)
    finally:
        progress.close()
    # The driver (incluster/export_run.py) reaches the cluster as py_modules, added at submission and never stored.
    submission_id, already = control.submit_export(client, submission)
    done = "already submitted, following it" if already else "submitted"
    exports = under_data_root(exports_dir(spec.run), args.data_root) if args.data_root else exports_dir(spec.run)
    print(f"{done} {submission_id}: the export of {spec.run} into {exports}/", file=sys.stderr)
    print(submission_id, flush=True)
    return _follow(client, config, submission_id, spec.framework, stream=False)


def cmd_status(args: argparse.Namespace, config: StackConfig) -> int:
    """Show a job (default: the stack's newest attempt), its run's goodput and cost across attempts, and its exports."""
    import json
    import time

    from incluster.record import record_lines
    from jobs.runs.export import export_of

    client = control.connect(endpoint_of(args, config))
    job = _pick_job(client, config.stack, args.job)
    status = control.status_text(job.status)
    error = None
    if status == "FAILED":
        error = error_line("\n".join(control.last_lines(client, job.submission_id, ERROR_SCAN_LINES)))
    run = (job.metadata or {}).get("run")
    view = _view(args, config, client, job) if run else None
    figures = view.goodput(time.time()) if view is not None else None
    exports = [item for item in control.stack_jobs(client, config.stack) if run and export_of(item.metadata) == run]
    if args.json:
        document = {
            "attempt": job.submission_id,
            "status": status,
            "run": run,
            "error": error,
            "gpuHourly": None if view is None else view.gpu_hourly,
            "goodput": None if figures is None else figures.as_json(),
            "record": [] if view is None else list(view.record),
            "exports": [
                {"id": item.submission_id, "status": control.status_text(item.status), "step": item.metadata.get("step")}
                for item in exports
            ],
        }
        print(json.dumps(document, sort_keys=True, indent=2))
        return 0
    print(_job_line(job))
    message = plain(job.message or "").strip().splitlines()
    if message:
        print(f"  {message[0]}")
    if status == "FAILED":
        print(f"  error: {error}" if error else f"  no error line in the last {ERROR_SCAN_LINES} log lines")
    if view is not None and figures is not None:
        print(f"run {view.run} across {counted(len(view.attempts), 'attempt')}:")
        for line in figures.lines(view.unpriced()):
            print(f"  {line}")
    if exports:
        print(f"{'export' if len(exports) == 1 else 'exports'} of {run}:")
        for item in exports:
            print(f"  {_job_line(item)}")
    if view is not None and view.record:
        print(f"record of {view.run} ({_record_where(args, view.run)}):")
        for line in record_lines(list(view.record)):
            print(f"  {plain(line)}")
    return 0


def cmd_plot(args: argparse.Namespace, config: StackConfig) -> int:
    """Draw the run's reward and step time against the step across its attempts, preemptions and resumes marked."""
    import time

    from jobs.runs import observed
    from jobs.runs.plot import draw, markers

    if args.out and Path(args.out).suffix.lower() != ".png":
        raise UsageError(f"--out {args.out}: the plot is a PNG; name a file ending in .png")
    client = control.connect(endpoint_of(args, config))
    job = _pick_job(client, config.stack, args.job)
    if run_of(job) is None:
        raise UsageError(f"job {job.submission_id} is not an attempt of a grpo-gke run; name one (list shows them)")
    view = _view(args, config, client, job)
    attempts = observed.goodput_attempts(view.attempts, view.record, view.lines)
    marks = markers(view.goodput(time.time()).losses, {item.number: item.resumed_from for item in attempts})
    points = observed.step_points(view.lines, view.framework)
    out = Path(args.out) if args.out else Path(f"{view.run}.png")
    tried = counted(len(view.attempts), "attempt")
    try:
        draw(points, marks, view.framework, f"{view.run}: {tried}", out)
    except OSError as error:
        raise UsageError(f"cannot write the plot to {out}: {error.strerror or error}") from None
    print(f"wrote {out}: {counted(len(points), 'step')} of {tried}, {counted(len(marks), 'mark')}")
    return 0


def cmd_logs(args: argparse.Namespace, config: StackConfig) -> int:
    """Print a job's log (default: the newest attempt); with --follow stream it with a progress line."""
    client = control.connect(endpoint_of(args, config))
    job = _pick_job(client, config.stack, args.job)
    framework = (job.metadata or {}).get("framework", config.workload.framework)
    if args.follow:
        return _follow(client, config, job.submission_id, framework, stream=True)
    sys.stdout.write(client.get_job_logs(job.submission_id))
    return 0


def cmd_stop(args: argparse.Namespace, config: StackConfig) -> int:
    """Stop a job, or every live job of the stack."""
    client = control.connect(endpoint_of(args, config))
    jobs = [_pick_job(client, config.stack, args.job)] if args.job else control.stack_jobs(client, config.stack)
    stopped = control.stop_jobs(client, jobs)
    print(f"stopped {', '.join(stopped)}" if stopped else f"no live job of stack {config.stack!r}")
    return 0


def cmd_list(args: argparse.Namespace, config: StackConfig) -> int:
    """List the stack's jobs, oldest first."""
    client = control.connect(endpoint_of(args, config))
    jobs = control.stack_jobs(client, config.stack)
    for job in jobs:
        print(_job_line(job))
    if not jobs:
        print(f"no job of stack {config.stack!r}", file=sys.stderr)
    _print_records(args, client, [job.metadata["run"] for job in jobs if (job.metadata or {}).get("run")])
    return 0


def preflight_mode_of(config: StackConfig, asked: str | None) -> str:
    """The preflight the CLI runs: `--mode`, else the stack's job.preflight, else (when that is off) the default
    for its node count."""
    from jobs.spec.defaults import preflight_mode

    if asked:
        return asked
    mode, _ = preflight_mode(config)
    if mode == "off":
        mode, _ = preflight_mode(config.model_copy(update={"job": config.job.model_copy(update={"preflight": None})}))
    return mode


def cmd_preflight(args: argparse.Namespace, config: StackConfig) -> int:
    """Check every GPU node (and, in full, the fabric between them); a table per node and a verdict."""
    from incluster.preflight import run
    from jobs.preflight import settings

    mode = preflight_mode_of(config, args.mode)
    if mode == "full" and config.gpu.nodes < 2:
        raise UsageError(f"--mode full needs 2 or more GPU nodes; stack {config.stack!r} has gpu.nodes=1 (use --mode gpu)")
    client = control.connect(endpoint_of(args, config))
    made = settings.preflight_settings(config, mode, settings.results_dir(config, args.data_root), run.stamp_now())
    progress = _ProgressLine()
    try:
        outcome = run.run_preflight(client, made, progress)
    finally:
        progress.close()
    print("\n".join(outcome.table()))
    print(f"results: {outcome.path}")
    if outcome.passed:
        return 0
    print("\n".join(outcome.failure_lines()))
    return 1


COMMANDS = {
    "validate": cmd_validate,
    "submit": cmd_submit,
    "status": cmd_status,
    "logs": cmd_logs,
    "list": cmd_list,
    "stop": cmd_stop,
    "plot": cmd_plot,
    "export": cmd_export,
    "preflight": cmd_preflight,
}
"""Handler of each subcommand, in the order `--help` lists them (then `guard`, the run guardian)."""

REACHES_THE_CLUSTER = frozenset(COMMANDS) - {"validate"}
"""Subcommands that talk to the Ray dashboard: they take --address, --kubeconfig and --context."""

USES_DATA_ROOT = frozenset({"submit", "status", "list", "plot", "export", "preflight"})
"""Subcommands that read or place the run's files on the shared storage: they take --data-root."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _guard_summary() -> str:
    """The run guardian's one-line description (incluster/guardian.py's first docstring line)."""
    from incluster import guardian

    return (guardian.__doc__ or "the run guardian").splitlines()[0]


def parser() -> argparse.ArgumentParser:
    """The command line: each subcommand with a one-line description and only the options it uses."""
    stack = _Parser(add_help=False)
    stack.add_argument("--stack", required=True, help="stack name: reads Pulumi.<stack>.yaml in --dir")
    stack.add_argument("--dir", default=".", help="directory of the stack files (default: .)")
    cluster = _Parser(add_help=False)
    cluster.add_argument("--address", help="Ray dashboard URL; default: the stack's cluster via the kubeconfig")
    cluster.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    cluster.add_argument("--context", help="kubeconfig context (default: the stack's gke_<project>_<region>_<cluster>)")
    data = _Parser(add_help=False)
    data.add_argument(
        "--data-root",
        metavar="DIR",
        help="a local directory standing for the shared storage: /data/x is DIR/x (a run on this machine)",
    )
    top = _Parser(prog=PROGRAM, description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    made = {}
    for name, handler in COMMANDS.items():
        summary = (handler.__doc__ or "").splitlines()[0]
        parents = [stack, *([cluster] if name in REACHES_THE_CLUSTER else []), *([data] if name in USES_DATA_ROOT else [])]
        made[name] = commands.add_parser(name, parents=parents, help=summary, description=summary)
    guard = _guard_summary()
    commands.add_parser("guard", help=guard, description=guard, add_help=False)
    submit = made["submit"]
    submit.add_argument("--wait", action="store_true", help="follow the job to its end with a progress line")
    submit.add_argument("--ready-timeout", type=float, help="seconds to wait for the GPU nodes (default: config)")
    submit.add_argument("--entrypoint", help="run this command instead of the trainer (smoke tests); another run")
    submit.add_argument("--fresh", action="store_true", help="start a new run of the same spec (job.runGeneration + 1)")
    made["status"].add_argument("job", nargs="?", help="submission id (default: the stack's newest attempt)")
    made["status"].add_argument("--json", action="store_true", help="print the status and goodput figures as JSON")
    made["logs"].add_argument("job", nargs="?", help="submission id (default: the stack's newest attempt)")
    made["logs"].add_argument("--follow", action="store_true", help="stream until the job ends, with a progress line")
    made["stop"].add_argument("job", nargs="?", help="submission id (default: every live job of the stack)")
    made["plot"].add_argument("job", nargs="?", help="an attempt or export of the run (default: the newest attempt)")
    made["plot"].add_argument("--out", help="the PNG to write (default: <run>.png)")
    made["export"].add_argument("--step", type=int, help="the checkpoint's step (default: the newest complete one)")
    made["export"].add_argument(
        "--converter", help="run CMD in the converter's place (@STEP_DIR@, @TARGET_DIR@; smoke tests)"
    )
    made["preflight"].add_argument(
        "--mode", choices=("full", "gpu"), help="default: job.preflight, else full on 2+ nodes"
    )
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return its exit code."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["guard"]:
        from incluster.guardian import main as guard

        return guard(given[1:])
    try:
        args = parser().parse_args(given)
        if args.command in USES_DATA_ROOT:
            args.data_root = checked_data_root(args.data_root)
        config = load_stack(args.stack, Path(args.dir), checks_the_job(args))
        return COMMANDS[args.command](args, config)
    except (UsageError, StackFileError, access.AccessError, control.JobError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ConfigError as error:
        print(f"error: the stack config was refused: {'; '.join(map(str, error.problems))}", file=sys.stderr)
        return 2
    except Interrupted as interrupted:
        print(interrupted, file=sys.stderr)
        return 130
    except Exception as error:
        # requests' connection errors are OSErrors; the Jobs API answers HTTP errors with RuntimeError
        # and refused credentials (an expired token) with ray.exceptions.AuthenticationError.
        if not isinstance(error, (OSError, RuntimeError)) and not type(error).__module__.startswith("ray."):
            raise
        print(f"error: the Ray dashboard failed: {_first_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted ({PROGRAM} status --stack NAME shows what keeps running)", file=sys.stderr)
        return 130
