"""`make bench`: each shipped stack's expected time from `pulumi up` to its first training step and from a
preemption to the next step, with the image pulled whole, streamed, and from a disk cache on the GPU nodes, beside
the critical path to the submitted job and the serial sum. From the cited figures of core/facts/startup.py along
the dependency graph of the stack's mocked run (plan/startup.py): an estimate, not a measurement."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root (put on sys.path for the imports below)."""
sys.path.insert(0, str(REPO))

from core.config.model import PROJECT_NAMESPACE  # noqa: E402
from core.facts.startup import (  # noqa: E402
    GPU_NODE_BOOT_SECONDS,
    IMAGE_GB,
    RAY_JOIN_SECONDS,
    RESOURCE_CREATION_SECONDS,
    STREAMED_PULL_SECONDS,
    WHOLE_PULL_SECONDS_PER_GB,
    Figure,
)
from core.stackfile import read_stack_file, stack_file  # noqa: E402
from jobs.runs.goodput import duration  # noqa: E402
from jobs.spec.load import load_stack  # noqa: E402
from plan.harness import REPO_ROOT, run_stack  # noqa: E402
from plan.startup import estimate_startup  # noqa: E402

SHIPPED_STACKS = ("dev", "nemo-rl-standard-b200", "verl-autopilot-b200", "verl-standard-h200")
"""The stack files beside Pulumi.yaml."""

VARIANTS: tuple[tuple[str, bool, bool], ...] = (
    ("pulled whole", False, False),
    ("streamed", True, False),
    ("disk cache", True, True),
)
"""How the image reaches the GPU nodes: (label, streamed, disk cache). GKE's disk cache needs streaming on (GKE
"Use secondary boot disks": "Configure image streaming to use the secondary boot disk feature")."""


def figure_line(name: str, figure: Figure, unit: str) -> str:
    """One figure with its unit and source; `(assumed)` where no published figure exists."""
    return f"    {name}: {figure.value:g} {unit}{'' if figure.published else ' (assumed)'} ({figure.source})"


def stack_rows(stack: str) -> list[str]:
    """The stack's critical path to the submission, and from `up` and after a preemption per variant."""
    values = read_stack_file(stack_file(REPO_ROOT, stack), PROJECT_NAMESPACE, stack)
    config = load_stack(values.values, values.secret_keys, stack).config
    resources = run_stack(stack).resources
    shipped = estimate_startup(config, resources)
    rows = [
        f"  {stack}: critical path to the submitted job {shipped.from_up.steps[0].seconds / 60:.0f} min beside"
        f" {shipped.serial_seconds / 60:.0f} min one after another (as shipped: image {shipped.image})"
    ]
    for label, streamed, cache in VARIANTS:
        estimate = estimate_startup(config, resources, streamed=streamed, disk_cache=cache)
        rows.append(
            f"    {label:>12}: first step {duration(estimate.from_up.seconds):>8} from `up`,"
            f" {duration(estimate.after_preemption.seconds):>8} after a preemption"
            f" (not included: {', '.join(estimate.after_preemption.left_out()) or 'nothing'})"
        )
    return rows


def main() -> int:
    """Print every shipped stack's figures and where each comes from."""
    print("time to the first training step, estimated from cited figures (core/facts/startup.py):")
    for stack in SHIPPED_STACKS:
        for row in stack_rows(stack):
            print(row)
    print("  figures:")
    print(figure_line("GPU node boot", GPU_NODE_BOOT_SECONDS, "s"))
    print(figure_line("whole pull", WHOLE_PULL_SECONDS_PER_GB, "s per GB"))
    print(figure_line("streamed pull", STREAMED_PULL_SECONDS, "s"))
    print(figure_line("Ray join", RAY_JOIN_SECONDS, "s"))
    for image, size in IMAGE_GB.items():
        print(figure_line(f"size of {image}", size, "GB"))
    for kind, figure in RESOURCE_CREATION_SECONDS.items():
        print(figure_line(kind, figure, "s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
