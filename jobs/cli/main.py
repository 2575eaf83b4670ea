"""Submit, follow, inspect, plot and export the stack's GRPO run on its Ray cluster, and guard it.

`.venv/bin/python -m jobs validate|submit|status|logs|list|stop|plot|export|preflight|park|guard --stack NAME [--address URL]`.
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
from pathlib import Path
from typing import NoReturn

from core.config.problems import ConfigError
from core.stackfile import StackFileError
from incluster import guardian, job_client
from incluster.lustre_transfer import TRANSFER_DEADLINE_SECONDS, TransferError
from jobs.cli.checks import cmd_preflight, cmd_validate
from jobs.cli.follow import Interrupted, cmd_list, cmd_logs, cmd_stop, cmd_submit
from jobs.cli.lines import first_line
from jobs.cli.park import cmd_park
from jobs.cli.runs import cmd_export, cmd_plot, cmd_status
from jobs.submit import access
from jobs.submit.target import PROGRAM, UsageError, checked_data_root, load_stack


def checks_the_job(args: argparse.Namespace) -> bool:
    """Whether the command judges the stack's own job spec: validate, and submit of the trainer (a smoke test's
    `--entrypoint` runs another command, so the trainer's checks do not stop it)."""
    return args.command == "validate" or (args.command == "submit" and args.entrypoint is None)


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
    "park": cmd_park,
}
"""Handler of each subcommand, in the order `--help` lists them (then `guard`, the run guardian)."""

REACHES_THE_CLUSTER = frozenset(COMMANDS) - {"validate"}
"""Subcommands that talk to the Ray dashboard: they take --address, --kubeconfig and --context."""

USES_DATA_ROOT = frozenset({"submit", "status", "logs", "list", "plot", "export", "preflight", "park"})
"""Subcommands that read or place the run's files on the shared storage: they take --data-root."""

READS_A_RUN_DIRECTORY = frozenset({"status", "plot", "logs"})
"""Subcommands that read a run from its directory alone when no Ray head has it: they take --run-dir, and read the
run's directory under --data-root when the head does not answer or lists no attempt of the stack
(jobs/cli/stack_jobs.py reach_or_read)."""


def positive_seconds(text: str) -> float:
    """A timeout or deadline option's value: a number of seconds above zero (argparse names the option on error)."""
    try:
        seconds = float(text)
    except ValueError:
        seconds = float("nan")
    if not seconds > 0 or seconds == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, got {text!r}")
    return seconds


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def _guard_summary() -> str:
    """The run guardian's one-line description (incluster/guardian.py's first docstring line)."""
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
    directory = _Parser(add_help=False)
    directory.add_argument(
        "--run-dir",
        metavar="DIR",
        help="read the run from this copy of its directory (/data/checkpoints/<run>: the demo's, a download of the"
        " parked bucket's) alone, no Ray head asked",
    )
    top = _Parser(prog=PROGRAM, description=__doc__.splitlines()[0])
    commands = top.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    made = {}
    for name, handler in COMMANDS.items():
        summary = (handler.__doc__ or "").splitlines()[0]
        parents = [
            stack,
            *([cluster] if name in REACHES_THE_CLUSTER else []),
            *([data] if name in USES_DATA_ROOT else []),
            *([directory] if name in READS_A_RUN_DIRECTORY else []),
        ]
        made[name] = commands.add_parser(name, parents=parents, help=summary, description=summary)
    guard = _guard_summary()
    commands.add_parser("guard", help=guard, description=guard, add_help=False)
    submit = made["submit"]
    submit.add_argument("--wait", action="store_true", help="follow the job to its end with a progress line")
    submit.add_argument(
        "--ready-timeout", type=positive_seconds, help="seconds to wait for the GPU nodes (default: config)"
    )
    submit.add_argument("--entrypoint", help="run this command instead of the trainer (smoke tests); another run")
    submit.add_argument("--fresh", action="store_true", help="start a new run of the same spec (job.runGeneration + 1)")
    made["status"].add_argument("job", nargs="?", help="submission id (default: the stack's newest attempt)")
    made["status"].add_argument("--json", action="store_true", help="print the status and goodput figures as JSON")
    made["logs"].add_argument("job", nargs="?", help="submission id (default: the stack's newest attempt)")
    made["logs"].add_argument("--follow", action="store_true", help="stream until the job ends, with a progress line")
    made["stop"].add_argument("job", nargs="?", help="submission id (default: every live job of the stack)")
    made["plot"].add_argument("job", nargs="?", help="an attempt or export of the run (default: the newest attempt)")
    made["plot"].add_argument("--out", help="the PNG to write (default: <run>.png)")
    made["export"].add_argument(
        "job", nargs="?", help="an attempt of the run to export (default: the stack's run); never another run"
    )
    made["export"].add_argument("--step", type=int, help="the checkpoint's step (default: the newest complete one)")
    made["export"].add_argument(
        "--converter",
        metavar="CMD",
        help="run CMD in the converter's place (smoke tests): split into words as a POSIX shell does, quotes"
        " kept, and run without a shell (no pipes, &&, $VAR or globs; for those: sh -c '...'); @STEP_DIR@ and"
        " @TARGET_DIR@ stand for the checkpoint and the model directory",
    )
    made["preflight"].add_argument(
        "--mode", choices=("full", "gpu"), help="default: job.preflight, else full on 2+ nodes"
    )
    made["park"].add_argument(
        "--deadline",
        type=positive_seconds,
        default=TRANSFER_DEADLINE_SECONDS,
        help=f"seconds to wait for each transfer (default: {TRANSFER_DEADLINE_SECONDS:g})",
    )
    return top


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return its exit code."""
    given = sys.argv[1:] if argv is None else argv
    if given[:1] == ["guard"]:
        return guardian.main(given[1:])
    try:
        args = parser().parse_args(given)
        if args.command in USES_DATA_ROOT:
            args.data_root = checked_data_root(args.data_root)
        if getattr(args, "run_dir", None) and not Path(args.run_dir).is_dir():
            raise UsageError(f"--run-dir {args.run_dir}: no such directory; name a copy of the run's directory")
        config = load_stack(args.stack, Path(args.dir), checks_the_job(args))
        return COMMANDS[args.command](args, config)
    except (UsageError, StackFileError, access.AccessError, job_client.JobError, TransferError) as error:
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
        print(f"error: the Ray dashboard failed: {first_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"interrupted ({PROGRAM} status --stack NAME shows what keeps running)", file=sys.stderr)
        return 130
