"""`.venv/bin/python -m jobs submit|status|logs|stop|list|validate|export --stack NAME [--address URL]`.

Without `--address` the CLI reaches the stack's cluster the way the post-deploy step does:
the API server's service proxy to the Ray head service, with the cluster and Google access
token of the kubeconfig's `gke_<project>_<region>_<cluster>` context (`--kubeconfig`, default
$KUBECONFIG or ~/.kube/config, as written by `gcloud container clusters get-credentials`).
Exit codes: 0 done; 1 the followed job FAILED or was STOPPED; 2 bad input or an unreachable
cluster (one line, no traceback).
"""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from core import names
from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.config.problems import ConfigError
from core.stackfile import StackFileError, read_stack_file, stack_file
from jobs import access, control, scaling
from jobs.load import load_config
from jobs.spec import training_spec

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

    from jobs.spec import TrainingSpec

LAST_LINES = 20
"""Log lines shown when a followed job ends badly."""

ERROR_SCAN_LINES = 200
"""Lines at the end of a FAILED job's log searched for its error line."""

PROGRAM = ".venv/bin/python -m jobs"
"""How the CLI is run from a fresh clone (`make` builds .venv): every printed hint uses it."""


def job_command(subcommand: str, stack: str, *rest: str) -> str:
    """The command line of a CLI subcommand for `stack`, as a user types it."""
    return " ".join([PROGRAM, subcommand, "--stack", stack, *rest])


class UsageError(Exception):
    """Bad input; the message is one line."""


def load_stack(stack: str, directory: Path) -> StackConfig:
    """The validated config of `Pulumi.<stack>.yaml` in `directory`."""
    values = read_stack_file(stack_file(directory, stack), PROJECT_NAMESPACE, stack)
    return load_config(values.values, values.secret_keys, stack).config


def stack_context(config: StackConfig) -> str:
    """The kubeconfig context `gcloud container clusters get-credentials` gives the stack's cluster."""
    return names.gcloud_context_name(config.project, config.region, config.cluster_name)


def credentials_command(config: StackConfig) -> str:
    """The stack's `gcloud container clusters get-credentials` command."""
    return names.get_credentials_command(config.cluster_name, config.region, config.project)


def endpoint_of(args: argparse.Namespace, config: StackConfig) -> access.Endpoint:
    """`--address`, else the stack's cluster (or `--context`) through the service proxy of the kubeconfig.

    Without `--context` only the stack's own context is used: the current one may be another cluster.
    """
    if args.address:
        return control.endpoint_for_address(args.address)
    path = Path(args.kubeconfig) if args.kubeconfig else access.default_kubeconfig_path()
    try:
        return access.endpoint_from_kubeconfig_file(path, args.context or stack_context(config))
    except access.KubeconfigUnreadable as error:
        raise UsageError(f"{error}; write it with: {credentials_command(config)}") from None
    except access.MissingContext as error:
        if args.context:
            raise
        raise UsageError(
            f"{error}: the stack's cluster is not in it; add it with: {credentials_command(config)}"
            " (or pass --context NAME to use another context)"
        ) from None


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
    meta = job.metadata or {}
    started = (
        datetime.fromtimestamp(job.start_time / 1000, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        if job.start_time
        else "-"
    )
    run, attempt = meta.get("run", "-"), meta.get("attempt", "-")
    return f"{job.submission_id}  {control.status_text(job.status)}  run={run}  attempt={attempt}  started={started}"


def _pick_job(client: JobSubmissionClient, stack: str, job_id: str | None) -> JobDetails:
    if job_id:
        try:
            return client.get_job_info(job_id)
        except Exception:  # noqa: BLE001 - the Jobs API answers an unknown id with an HTTP error
            raise UsageError(f"no job {job_id!r} on the cluster") from None
    jobs = control.stack_jobs(client, stack)
    if not jobs:
        raise UsageError(f"stack {stack!r} has no job on the cluster; {job_command('submit', stack)}")
    return jobs[-1]


def _finish(client: JobSubmissionClient, submission_id: str, status: str, show_lines: bool) -> int:
    if status == "SUCCEEDED":
        print(f"{submission_id} SUCCEEDED", file=sys.stderr)
        return 0
    info = client.get_job_info(submission_id)
    reason = (info.message or "").strip().splitlines()
    print(f"{submission_id} {status}: {reason[0] if reason else 'no message'}", file=sys.stderr)
    if show_lines:
        lines = control.last_lines(client, submission_id, LAST_LINES)
        print(f"last {len(lines)} log lines:", file=sys.stderr)
        for line in lines:
            print(f"  {line}", file=sys.stderr)
    return 1


def _follow(client: JobSubmissionClient, stack: str, submission_id: str, framework: str, stream: bool) -> int:
    """Follow the stack's job to its end; a dashboard lost on the way is one line."""
    progress = _ProgressLine()

    def on_line(line: str) -> None:
        progress.close()
        print(line, flush=True)

    try:
        status = control.follow(client, submission_id, framework, on_line if stream else None, progress)
        return _finish(client, submission_id, status, show_lines=not stream)
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


RAY_WORKER_PREFIX = re.compile(r"^\([^()\s]+ pid=\d+(?:, ip=[^)]*)?\) ")
"""The `(TaskRunner pid=12, ip=10.0.0.3) ` prefix Ray puts before lines that actors print."""

ERROR_WORDS = re.compile(r"\b(error|exception|failed|fatal)\b", re.IGNORECASE)
"""A log line that looks like an error."""


def error_line(log: str) -> str | None:
    """The line that says why a job failed: the last Traceback's final line, else the last error-looking line."""
    lines = [RAY_WORKER_PREFIX.sub("", line).rstrip() for line in log.splitlines()]
    starts = [index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        after = lines[starts[-1] + 1 :]
        final = next((line for line in after if line and not line[0].isspace()), None)
        if final:
            return final[:300]
    found = next((line for line in reversed(lines) if ERROR_WORDS.search(line)), None)
    return found.strip()[:300] if found else None


def cmd_validate(args: argparse.Namespace, config: StackConfig) -> int:
    """Check the stack's job spec offline."""
    from jobs.validate import check

    check(config)
    spec = training_spec(config)
    target = f"verl {spec.release}'s Hydra config" if spec.framework == "verl" else f"NeMo-RL {spec.release}'s keys"
    print(f"{config.stack}: run {spec.run}: {len(spec.overrides)} overrides fit {target}")
    return 0


def cmd_submit(args: argparse.Namespace, config: StackConfig) -> int:
    """Submit the stack's run (idempotent); with --wait follow it to the end."""
    from jobs.spec import submission_of
    from jobs.validate import check

    if args.entrypoint is None:
        check(config)
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
    outcome = control.ensure_run(client, submission)
    print(outcome.sentence(), file=sys.stderr)
    print(outcome.submission_id, flush=True)
    if not args.wait:
        return 0
    return _follow(client, config.stack, outcome.submission_id, spec.framework, stream=False)


def _fresh(args: argparse.Namespace, config: StackConfig) -> tuple[StackConfig, TrainingSpec]:
    """Record the next job.runGeneration in the stack file; the config and spec of the new run."""
    from jobs.generation import record_generation

    path = stack_file(Path(args.dir), args.stack)
    generation = config.job.run_generation + 1
    try:
        record_generation(path, generation, lambda _: load_stack(args.stack, Path(args.dir)).job.run_generation)
    except ValueError as error:
        raise UsageError(str(error)) from None
    print(f"a fresh run: {PROJECT_NAMESPACE}:job.runGeneration is now {generation} in {path.name}", file=sys.stderr)
    fresh = load_stack(args.stack, Path(args.dir))
    return fresh, training_spec(fresh, args.entrypoint)


def cmd_export(args: argparse.Namespace, config: StackConfig) -> int:
    """Export a complete checkpoint of the stack's run (default: the newest) as a Hugging Face model directory."""
    import shlex

    import jobs
    from jobs.export import export_submission, exports_dir

    if args.step is not None and args.step < 1:
        raise UsageError(f"--step must be a step number of 1 or more, got {args.step}")
    spec = training_spec(config)
    converter = shlex.split(args.converter) if args.converter else None
    submission = export_submission(config, spec, args.step, converter, args.data_root)
    endpoint = endpoint_of(args, config)
    client = control.connect(endpoint)
    progress = _ProgressLine()
    try:
        scaling.bring_back(endpoint, config.gpu.nodes, progress)
        control.wait_for_gpus(endpoint, 1, config.job.ready_timeout_seconds, progress)
    finally:
        progress.close()
    # The driver (jobs/export_run.py) reaches the cluster as a py_module, added here and never stored.
    runtime_env = {**submission["runtime_env"], "py_modules": [str(Path(jobs.__file__).parent)]}
    try:
        submission_id = client.submit_job(**{**submission, "runtime_env": runtime_env})
    except RuntimeError as error:
        raise UsageError(f"Ray refused the export of {spec.run}: {_first_line(error)}") from None
    print(f"submitted {submission_id}: the export of {spec.run} into {exports_dir(spec.run)}/", file=sys.stderr)
    print(submission_id, flush=True)
    return _follow(client, config.stack, submission_id, spec.framework, stream=False)


def cmd_status(args: argparse.Namespace, config: StackConfig) -> int:
    """Show the status of a job (default: the stack's newest)."""
    client = control.connect(endpoint_of(args, config))
    job = _pick_job(client, config.stack, args.job)
    print(_job_line(job))
    if job.message:
        print(f"  {job.message.strip().splitlines()[0]}")
    if control.status_text(job.status) == "FAILED":
        found = error_line("\n".join(control.last_lines(client, job.submission_id, ERROR_SCAN_LINES)))
        print(f"  error: {found}" if found else f"  no error line in the last {ERROR_SCAN_LINES} log lines")
    return 0


def cmd_logs(args: argparse.Namespace, config: StackConfig) -> int:
    """Print a job's log; with --follow stream it with a progress line."""
    client = control.connect(endpoint_of(args, config))
    job = _pick_job(client, config.stack, args.job)
    framework = (job.metadata or {}).get("framework", config.workload.framework)
    if args.follow:
        return _follow(client, config.stack, job.submission_id, framework, stream=True)
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
    return 0


COMMANDS = {
    "submit": cmd_submit,
    "status": cmd_status,
    "logs": cmd_logs,
    "stop": cmd_stop,
    "list": cmd_list,
    "validate": cmd_validate,
    "export": cmd_export,
}
"""Handler of each subcommand."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def parser() -> argparse.ArgumentParser:
    """The command line."""
    common = _Parser(add_help=False)
    common.add_argument("--stack", required=True, help="stack name: reads Pulumi.<stack>.yaml in --dir")
    common.add_argument("--dir", default=".", help="directory of the stack files (default: .)")
    common.add_argument("--address", help="Ray dashboard URL; default: the stack's cluster via the kubeconfig")
    common.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    common.add_argument("--context", help="kubeconfig context (default: the stack's gke_<project>_<region>_<cluster>)")
    top = _Parser(prog=PROGRAM, description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True, parser_class=_Parser)
    submit = commands.add_parser("submit", parents=[common], help=cmd_submit.__doc__)
    submit.add_argument("--wait", action="store_true", help="follow the job to its end with a progress line")
    submit.add_argument("--ready-timeout", type=float, help="seconds to wait for the GPU nodes (default: config)")
    submit.add_argument("--entrypoint", help="run this command instead of the trainer (smoke tests); another run")
    submit.add_argument("--fresh", action="store_true", help="start a new run of the same spec (job.runGeneration + 1)")
    for name in ("status", "stop"):
        sub = commands.add_parser(name, parents=[common], help=COMMANDS[name].__doc__)
        sub.add_argument("job", nargs="?", help="submission id (default: the stack's newest job)")
    logs = commands.add_parser("logs", parents=[common], help=cmd_logs.__doc__)
    logs.add_argument("job", nargs="?", help="submission id (default: the stack's newest job)")
    logs.add_argument("--follow", action="store_true", help="stream until the job ends, with a progress line")
    export = commands.add_parser("export", parents=[common], help=cmd_export.__doc__)
    export.add_argument("--step", type=int, help="the checkpoint's step (default: the newest complete one)")
    export.add_argument("--data-root", help="a local directory standing for /data (runs on this machine)")
    export.add_argument("--converter", help="run CMD in the converter's place (@STEP_DIR@, @TARGET_DIR@; smoke tests)")
    commands.add_parser("list", parents=[common], help=cmd_list.__doc__)
    commands.add_parser("validate", parents=[common], help=cmd_validate.__doc__)
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return its exit code."""
    try:
        args = parser().parse_args(argv)
        config = load_stack(args.stack, Path(args.dir))
        return COMMANDS[args.command](args, config)
    except (UsageError, StackFileError, access.AccessError, control.JobError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ConfigError as error:
        print(f"error: the stack config was refused: {'; '.join(map(str, error.problems))}", file=sys.stderr)
        return 2
    except Exception as error:
        # requests' connection errors are OSErrors; the Jobs API answers HTTP errors with RuntimeError
        # and refused credentials (an expired token) with ray.exceptions.AuthenticationError.
        if not isinstance(error, (OSError, RuntimeError)) and not type(error).__module__.startswith("ray."):
            raise
        print(f"error: the Ray dashboard failed: {_first_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted; the job keeps running ({PROGRAM} stop to end it)", file=sys.stderr)
        return 130
