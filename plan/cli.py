"""`.venv/bin/python -m plan (--stack NAME | --config PATH) [--out DIR] [--against DIR]`: the offline plan,
and with --against what `pulumi up` would change on a stack deployed from an earlier plan."""

from __future__ import annotations

import argparse
import gc
import json
import sys
from pathlib import Path

from core import names
from core.config.load import LoadedConfig
from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.config.problems import ConfigError
from core.prices import catalog
from core.stackfile import StackFileError, read_stack_file, stack_file, stack_name_of
from jobs.spec.load import load_stack
from jobs.spec.training import training_spec
from plan.prices import COST_FILE, budget_lines, budget_refusal, estimate, render_cost_json, summary_lines

EXIT_BAD_INPUT = 2
"""Exit status of a refused config or a missing stack file."""


def add_plan_arguments(parser: argparse.ArgumentParser) -> None:
    """The plan command's arguments, shared by `python -m plan` and the alias of its earlier name (infra/__main__.py)."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--stack", help="stack name: reads Pulumi.<NAME>.yaml beside Pulumi.yaml")
    source.add_argument("--config", type=Path, help="path of a Pulumi.<stack>.yaml file")
    parser.add_argument("--out", type=Path, help="output directory (default build/<stack>/)")
    parser.add_argument(
        "--against", type=Path, help="directory of an earlier plan of the stack: show what `pulumi up` would change"
    )


def key_facts(loaded: LoadedConfig) -> dict[str, str]:
    """The facts the summary shows: GPUs, storage, framework and model, the run, the head's machine and the
    derived defaults."""
    config = loaded.config
    machine = config.gpu_machine
    if config.storage.type == "gcs":
        storage = f"Cloud Storage bucket {config.bucket_name} (FUSE)"
    else:
        storage = f"Managed Lustre {config.storage.capacity_gib} GiB at {config.storage.throughput} MB/s/TiB"
        if config.storage.parked:
            storage = f"Managed Lustre parked in gs://{config.parked_bucket_name}/ (no instance)"
        elif config.storage.keep_on_destroy:
            storage += ", kept on pulumi destroy (storage.keepOnDestroy)"
        else:
            storage += (
                f", deleted by pulumi destroy or a replacing edit only once the run is parked ({names.PARK_GUARD})"
            )
    shown = {
        "cluster": f"{config.cluster_name} ({config.cluster.mode}) in {config.region}, GPUs in {config.zone}",
        "gpus": f"{machine.machine_type} x {config.gpu.nodes} ({config.gpu.provisioning}), {config.total_gpus} x {machine.accelerator}",
        "fabric": gpu_fabric(config),
        "storage": storage,
        "job": f"{config.workload.framework} GRPO on {config.workload.model} with {config.workload.dataset}",
        "run": training_spec(config).run,
        "head": head_machine(config),
    }
    if loaded.derived:
        shown["derived"] = ", ".join(str(value) for value in loaded.derived)
    return shown


def gpu_fabric(config: StackConfig) -> str:
    """What carries GPU traffic between nodes: gIB over the RDMA VPC where the machine has RDMA NICs, else what is
    left out and why (core/facts/platform.py GpuMachine.rdma_nics)."""
    machine = config.gpu_machine
    if machine.rdma:
        return f"{machine.rdma_nics} RDMA NICs a node on the RDMA VPC, with gIB (the NCCL RDMA installer)"
    return (
        f"no RDMA VPC, gVNIC VPC, GKE network objects, gIB or compact placement: {machine.machine_type} has no"
        f" RDMA NICs ({machine.gpus} GPU a node), and only the 8-GPU A3 Ultra and A4 machines need them"
    )


def head_machine(config: StackConfig) -> str:
    """The Ray head's machine: the CPU pool's type on Standard; on Autopilot, what the head asks for."""
    if config.cluster.mode == "standard":
        return f"{config.cluster.head_machine_type} (the Ray head's CPU node pool)"
    requests = config.head_requests
    return f"chosen by Autopilot for the head's request of {requests['cpu']} CPUs and {requests['memory']} memory"


def shown_path(path: Path) -> Path:
    """`path` as the user would type it: relative to the working directory when it lies below it."""
    absolute, here = path.resolve(), Path.cwd().resolve()
    return absolute.relative_to(here) if absolute.is_relative_to(here) else path


def plan(args: argparse.Namespace) -> int:
    """Validate the stack config, run the program under mocks and write the plan files."""
    # Pulumi and the program come with plan.harness: +0.3-0.8 s that `--help` and a bad argument skip (`python -m
    # plan --help`: 0.3-0.4 s; 0.6-1.2 s with it at the top); and here run() has paused the gc.
    from plan.harness import REPO_ROOT, project_name, run_values, virtualenv_note

    path = shown_path(args.config if args.config else stack_file(REPO_ROOT, args.stack))
    stack = args.stack or stack_name_of(path)
    try:
        project = project_name()
        values = read_stack_file(path, PROJECT_NAMESPACE, stack)
        loaded = load_stack(values.values, values.secret_keys, stack)
    except StackFileError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ConfigError as error:
        print(f"error: the config of stack '{stack}' ({path}) was refused:", file=sys.stderr)
        for problem in error.problems:
            print(f"  {problem}", file=sys.stderr)
        return EXIT_BAD_INPUT
    note = virtualenv_note()
    if note:
        print(f"warning: {note}", file=sys.stderr)
    # The providers' resource modules come with these four: +0.9 s of CPU that a refused config skips (1.4 -> 0.5 s
    # per refusal of `python -m plan`, measured for issue 20 item 5: the test suite runs some fifty of them).
    from plan.blast import PlanError, blast_radius, default_image_source_warning, read_plan, render
    from plan.security import security_summary
    from plan.startup import STARTUP_FILE, estimate_startup, render_startup_json, startup_lines
    from plan.writer import render_plan_json, summary, write_plan

    try:
        earlier = read_plan(args.against, stack) if args.against else None
    except PlanError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT

    out_dir = args.out or REPO_ROOT / "build" / stack
    if out_dir.exists() and not out_dir.is_dir():
        print(f"error: --out {shown_path(out_dir)}: is a file, not a directory; name a directory", file=sys.stderr)
        return EXIT_BAD_INPUT
    cost = estimate(loaded.config, catalog())
    recording = run_values(values.values, values.secret_keys, stack, project=project)
    startup = estimate_startup(loaded.config, recording.resources)
    refused = budget_refusal(loaded.config, cost, startup.from_up.seconds)
    if refused is not None:
        print(f"error: {refused}", file=sys.stderr)
        return EXIT_BAD_INPUT
    extra_files = {COST_FILE: render_cost_json(cost), STARTUP_FILE: render_startup_json(startup)}
    # The program logs the config's warnings for `pulumi up`; the plan shows them once, in its Security block.
    for warning in recording.warnings:
        if warning not in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
    try:
        write_plan(recording, out_dir, extra_files)
    except OSError as error:
        print(f"error: cannot write the plan to {shown_path(out_dir)}: {error.strerror or error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    lines = [*summary_lines(cost), *budget_lines(loaded.config, cost), *startup_lines(startup)]
    plan_summary = summary(recording, key_facts(loaded), out_dir, lines, list(extra_files))
    *overview, wrote = plan_summary.splitlines()
    print("\n".join([*overview, security_summary(loaded), wrote]))
    if earlier is not None:
        later = json.loads(render_plan_json(recording))
        workload = loaded.config.workload
        warning = default_image_source_warning(
            earlier, later, workload.image_source, workload.resolved_image().image, shown_path(args.against)
        )
        if warning is not None:
            print(f"warning: {warning}", file=sys.stderr)
        print(render(blast_radius(earlier, later), shown_path(args.against)))
    return 0


def run(args: argparse.Namespace) -> int:
    """Plan with parsed arguments, the garbage collector paused."""
    # A short-lived command: the SDKs load a few million objects that live until exit, and the
    # cyclic garbage collector would walk them again and again while the program registers.
    gc.disable()
    try:
        return plan(args)
    finally:
        gc.enable()


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m plan`."""
    parser = argparse.ArgumentParser(prog=".venv/bin/python -m plan", description=__doc__)
    add_plan_arguments(parser)
    return run(parser.parse_args(argv))
