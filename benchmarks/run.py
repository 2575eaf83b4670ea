"""`make bench`: speed targets, measured as ratios of runs taken alternately (the machine is noisy).

1. The offline plan of the dev stack beside the floor of importing and touching the SDK
   classes the program uses (target: at most 1.2x).
2. The first `make plan` on a fresh clone beside a plain `pip install -r requirements.txt` into an
   empty venv, measured in the same run with empty download caches (target: at most 0.5x; and under
   a minute). The install dominates the first plan: `make plan` installs with uv, falling back to pip.
3. The critical path of each shipped stack beside the serial sum, and its time to the first training step from
   `up` and after a preemption with the image pulled whole, streamed and from a disk cache
   (benchmarks/critical_path.py; an estimate from cited figures, not a measurement).
4. The job layer's own benchmark (benchmarks/bench_jobs.py) when it is present.
"""

from __future__ import annotations

import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
"""The repository root."""
sys.path.insert(0, str(REPO))

from plan.harness import run_stack  # noqa: E402

PYTHON = sys.executable
"""The venv's interpreter, used for every timed run."""
PAIRS = int(os.environ.get("BENCH_PAIRS", "9"))
"""Alternating pairs of runs per measurement (BENCH_PAIRS)."""
PLAN_TARGET = 1.2
"""Largest accepted ratio of the dev plan to the SDK import floor."""
FIRST_PLAN_TARGET_S = 60.0
"""Longest accepted first `make plan` on a fresh clone, in seconds."""
FIRST_PLAN_RATIO_TARGET = 0.5
"""Largest accepted ratio of the first `make plan` to a plain pip install of requirements.txt."""
SYSTEM_PYTHON = os.environ.get("PYTHON", "python3")
"""The interpreter `make plan` builds its venv from (the Makefile's PYTHON), used for the pip baseline too."""


def _timed(command: list[str], cwd: Path = REPO) -> float:
    start = time.perf_counter()
    subprocess.run(command, cwd=cwd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def sdk_floor_script() -> str:
    """A script that imports and touches every SDK class behind the dev plan's resource types."""
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


def _cold_environment(scratch: Path) -> dict[str, str]:
    """The environment of a cold install: empty pip and uv caches of its own under `scratch`."""
    return {**os.environ, "PIP_CACHE_DIR": str(scratch / "pip-cache"), "UV_CACHE_DIR": str(scratch / "uv-cache")}


def _timed_cold(command: list[str], cwd: Path, scratch: Path) -> float:
    start = time.perf_counter()
    subprocess.run(
        command,
        cwd=cwd,
        env=_cold_environment(scratch),
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def first_plan_on_fresh_clone() -> bool:
    """Time `make plan` in a fresh clone of the committed tree (it builds its own venv) beside a plain
    `pip install -r requirements.txt` into an empty venv, each with empty download caches."""
    with tempfile.TemporaryDirectory(prefix="grpo-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        clone = scratch / "clone"
        subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
        plan_seconds = _timed_cold(["make", "plan"], clone, scratch / "plan")
        baseline = scratch / "pip-venv"
        pip_seconds = _timed_cold(
            [
                "sh",
                "-c",
                f"{SYSTEM_PYTHON} -m venv {baseline} && {baseline}/bin/python -m pip install"
                " --quiet --disable-pip-version-check -r requirements.txt",
            ],
            clone,
            scratch / "pip",
        )
    ratio = plan_seconds / pip_seconds
    fast = plan_seconds < FIRST_PLAN_TARGET_S
    print(
        f"first `make plan` on a fresh clone: {plan_seconds:.1f}s, target < {FIRST_PLAN_TARGET_S:.0f}s:"
        f" {'ok' if fast else 'OVER TARGET'}"
    )
    print(
        f"  beside `pip install -r requirements.txt` into an empty venv: {pip_seconds:.1f}s; ratio {ratio:.2f}x,"
        f" target <= {FIRST_PLAN_RATIO_TARGET}x: {'ok' if ratio <= FIRST_PLAN_RATIO_TARGET else 'OVER TARGET'}"
    )
    return fast and ratio <= FIRST_PLAN_RATIO_TARGET


def main() -> int:
    """Run every benchmark; exit 1 when one misses its target."""
    floor_file = Path(tempfile.mkdtemp(prefix="grpo-floor-")) / "floor.py"
    floor_file.write_text(sdk_floor_script())
    out_dir = Path(tempfile.mkdtemp(prefix="grpo-plan-"))
    results = [
        compare(
            "python -m plan --stack dev",
            [PYTHON, "-m", "plan", "--stack", "dev", "--out", str(out_dir)],
            [PYTHON, str(floor_file)],
            PLAN_TARGET,
        )
    ]
    if os.environ.get("BENCH_SKIP_FRESH_CLONE") != "1":
        results.append(first_plan_on_fresh_clone())
    results.append(subprocess.run([PYTHON, str(REPO / "benchmarks" / "critical_path.py")], cwd=REPO).returncode == 0)
    jobs_bench = REPO / "benchmarks" / "bench_jobs.py"
    if jobs_bench.is_file():
        results.append(subprocess.run([PYTHON, str(jobs_bench)], cwd=REPO).returncode == 0)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())
