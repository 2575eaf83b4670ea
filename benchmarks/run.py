"""`make bench`: speed targets, measured as ratios of runs taken alternately (the machine is noisy).

1. The offline plan of the dev stack beside the floor of importing and touching the SDK
   classes the program uses (target: at most 1.2x).
2. The first `make plan` on a fresh clone (target: under a minute; the install dominates it).
3. The job layer's own benchmark (benchmarks/bench_jobs.py) when it is present.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root."""
PYTHON = sys.executable
"""The venv's interpreter, used for every timed run."""
PAIRS = int(os.environ.get("BENCH_PAIRS", "9"))
"""Alternating pairs of runs per measurement (BENCH_PAIRS)."""
PLAN_TARGET = 1.2
"""Largest accepted ratio of the dev plan to the SDK import floor."""
FIRST_PLAN_TARGET_S = 60.0
"""Longest accepted first `make plan` on a fresh clone, in seconds."""


def _timed(command: list[str], cwd: Path = REPO) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def sdk_floor_script() -> str:
    """A script that imports and touches every SDK class behind the dev plan's resource types."""
    sys.path.insert(0, str(REPO))
    from plan.harness import run_stack

    recording = run_stack("dev")
    lines = ["import pulumi", "import pulumi_gcp", "import pulumi_kubernetes"]
    for token in recording.invokes:
        package, module, name = token.split(":")
        if package == "gcp":
            function = re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()
            lines.append(f"pulumi_gcp.{module.split('/')[0]}.{function}")
    for type_ in sorted({resource.type for resource in recording.resources}):
        package, module, name = type_.split(":")
        if package == "gcp":
            lines.append(f"pulumi_gcp.{module.split('/')[0]}.{name}")
        elif package == "kubernetes":
            group, version = module.rsplit("/", 1)
            if group in ("core", "apps", "batch", "rbac.authorization.k8s.io", "networking", "storage", "meta"):
                lines.append(f"import pulumi_kubernetes.{group.split('.')[0]}.{version} as m; m.{name}")
            else:
                lines.append("pulumi_kubernetes.apiextensions.CustomResource")
        elif type_ == "pulumi:providers:kubernetes":
            lines.append("pulumi_kubernetes.Provider")
        elif type_.startswith("pulumi-python:dynamic"):
            lines.append("import pulumi.dynamic; pulumi.dynamic.Resource")
    return "\n".join(lines)


def compare(label: str, candidate: list[str], floor: list[str], target: float) -> bool:
    """Run candidate and floor alternately; print medians, spread and the ratio."""
    candidate_times, floor_times = [], []
    for _ in range(PAIRS):
        floor_times.append(_timed(floor))
        candidate_times.append(_timed(candidate))
    ratios = sorted(c / f for c, f in zip(candidate_times, floor_times, strict=False))
    median = statistics.median(ratios)
    low, high = ratios[len(ratios) // 4], ratios[(3 * len(ratios)) // 4]
    verdict = "ok" if high <= target else ("ok (median)" if median <= target else "OVER TARGET")
    print(
        f"{label}: median {statistics.median(candidate_times):.2f}s vs floor {statistics.median(floor_times):.2f}s;"
        f" ratio median {median:.2f}x (interquartile {low:.2f}-{high:.2f}x, {PAIRS} pairs), target <= {target}x: {verdict}"
    )
    return median <= target


def first_plan_on_fresh_clone() -> bool:
    """Time `make plan` in a fresh clone of the committed tree (it builds its own venv)."""
    with tempfile.TemporaryDirectory(prefix="grpo-bench-") as scratch:
        clone = Path(scratch) / "clone"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        seconds = _timed(["make", "plan"], cwd=clone)
        shutil.rmtree(clone)
    verdict = "ok" if seconds < FIRST_PLAN_TARGET_S else "OVER TARGET"
    print(f"first `make plan` on a fresh clone: {seconds:.1f}s, target < {FIRST_PLAN_TARGET_S:.0f}s: {verdict}")
    return seconds < FIRST_PLAN_TARGET_S


def main() -> int:
    """Run every benchmark; exit 1 when one misses its target."""
    floor_file = Path(tempfile.mkdtemp(prefix="grpo-floor-")) / "floor.py"
    floor_file.write_text(sdk_floor_script())
    out_dir = Path(tempfile.mkdtemp(prefix="grpo-plan-"))
    results = [
        compare(
            "python -m infra plan --stack dev",
            [PYTHON, "-m", "infra", "plan", "--stack", "dev", "--out", str(out_dir)],
            [PYTHON, str(floor_file)],
            PLAN_TARGET,
        )
    ]
    if os.environ.get("BENCH_SKIP_FRESH_CLONE") != "1":
        results.append(first_plan_on_fresh_clone())
    jobs_bench = REPO / "benchmarks" / "bench_jobs.py"
    if jobs_bench.is_file():
        results.append(subprocess.run([PYTHON, str(jobs_bench)], cwd=REPO).returncode == 0)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
