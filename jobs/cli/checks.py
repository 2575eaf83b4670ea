"""The checks: `validate` (the stack's job spec, offline) and `preflight` (every GPU node and, in full, the fabric
between them; a table per node and a verdict)."""

from __future__ import annotations

import argparse

from core.config.model import StackConfig
from incluster import job_client
from incluster.preflight import run
from jobs.cli.lines import ProgressLine
from jobs.spec.defaults import preflight_mode
from jobs.spec.training import training_spec
from jobs.submit.target import UsageError, endpoint_of


def cmd_validate(args: argparse.Namespace, config: StackConfig) -> int:
    """Check the stack's job spec offline."""
    spec = training_spec(config)
    target = f"verl {spec.release}'s Hydra config" if spec.framework == "verl" else f"NeMo-RL {spec.release}'s keys"
    print(f"{config.stack}: run {spec.run}: {len(spec.overrides)} overrides fit {target}")
    return 0


def preflight_mode_of(config: StackConfig, asked: str | None) -> str:
    """The preflight the CLI runs: `--mode`, else the stack's job.preflight, else (when that is off) the default
    for its node count."""
    if asked:
        return asked
    mode, _ = preflight_mode(config)
    if mode == "off":
        mode, _ = preflight_mode(config.model_copy(update={"job": config.job.model_copy(update={"preflight": None})}))
    return mode


def cmd_preflight(args: argparse.Namespace, config: StackConfig) -> int:
    """Check every GPU node (and, in full, the fabric between them); a table per node and a verdict."""
    from jobs.preflight import settings  # pulumi_kubernetes through workloads.raycluster: +0.5-0.8 s on every command

    mode = preflight_mode_of(config, args.mode)
    if mode == "full" and config.gpu.nodes < 2:
        raise UsageError(
            f"--mode full needs 2 or more GPU nodes; stack {config.stack!r} has gpu.nodes=1 (use --mode gpu)"
        )
    client = job_client.connect(endpoint_of(args, config))
    made = settings.preflight_settings(config, mode, settings.results_dir(config, args.data_root), run.stamp_now())
    progress = ProgressLine()
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
