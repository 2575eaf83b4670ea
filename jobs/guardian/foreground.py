"""The run guardian in the foreground, `python -m jobs guard --stack NAME`: the settings and the dashboard endpoint
come from the stack file, as the job CLI finds them; the loop is the in-cluster guardian's (incluster/guardian/)."""

from __future__ import annotations

import argparse
from pathlib import Path

from core import names
from core.config.problems import ConfigError
from core.stackfile import StackFileError
from incluster.endpoint import Endpoint
from incluster.guardian.command import main as guardian_main
from incluster.guardian.settings import GuardError, Settings, settings_from
from jobs.guardian.settings import guardian_settings
from jobs.submit.access import user_credential
from jobs.submit.target import UsageError, checked_data_root, endpoint_of, load_stack, local_submission


def from_stack(args: argparse.Namespace) -> tuple[Settings, Endpoint]:
    """The foreground form: the settings of the stack file's config, the endpoint the CLI would use."""
    try:
        args.data_root = checked_data_root(args.data_root)
        config = load_stack(args.stack, Path(args.dir))
        endpoint = endpoint_of(args, config)
    except (StackFileError, UsageError) as error:
        raise GuardError(str(error)) from None
    except ConfigError as error:
        raise GuardError(f"the stack config was refused: {'; '.join(map(str, error.problems))}") from None
    if not args.data_root and not Path(names.DATA_MOUNT).is_dir():
        raise GuardError(
            f"the guardian reads the checkpoints and writes the run's record on the shared storage, and {names.DATA_MOUNT}"
            " is not mounted here: pass --data-root DIR for a run on this machine (job.recover deploys it in the cluster)"
        )
    values = guardian_settings(config, args.entrypoint)
    values["submission"] = local_submission(args, values["submission"])
    values["export"] = local_submission(args, values["export"])
    return settings_from(values, f"the config of stack {args.stack!r}"), endpoint


def main(argv: list[str] | None = None) -> int:
    """`python -m jobs guard ...`; return the exit code. It parks (storage.parkWhenIdle) with the user's Google
    token, as `python -m jobs park` does."""
    return guardian_main(argv, from_stack, lambda: user_credential({}))
