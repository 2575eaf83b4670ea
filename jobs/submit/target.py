"""The stack as the client reaches it: its validated config from the stack file, its cluster's Ray dashboard
(`--address`, else the kubeconfig's context through the API server's proxy), a submission placed under
`--data-root`, and how a command is spelled. Shared by the job CLI and the foreground guardian."""

from __future__ import annotations

import argparse
from pathlib import Path

from core import names
from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.stackfile import read_stack_file, stack_file
from incluster import job_client
from jobs.spec import load
from jobs.spec.training import on_data_root
from jobs.submit import access

PROGRAM = ".venv/bin/python -m jobs"
"""How the CLI is run from a fresh clone (`make` builds .venv): every printed hint uses it."""


def job_command(subcommand: str, stack: str, *rest: str) -> str:
    """The command line of a CLI subcommand for `stack`, as a user types it."""
    return " ".join([PROGRAM, subcommand, "--stack", stack, *rest])


class UsageError(Exception):
    """Bad input; the message is one line."""


def load_stack(stack: str, directory: Path, with_job_checks: bool = False) -> StackConfig:
    """The validated config of `Pulumi.<stack>.yaml` in `directory` (jobs/spec/load.py); `with_job_checks`: the job's
    checks too, the whole `load_stack` of jobs/spec/load.py that the program and the plan run."""
    values = read_stack_file(stack_file(directory, stack), PROJECT_NAMESPACE, stack)
    loader = load.load_stack if with_job_checks else load.load_config
    return loader(values.values, values.secret_keys, stack).config


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
        return job_client.endpoint_for_address(args.address)
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


def local_submission(args: argparse.Namespace, submission: dict) -> dict:
    """`submission` as it runs: with `--data-root DIR`, every shared-storage path placed under DIR."""
    return on_data_root(submission, args.data_root) if args.data_root else submission
