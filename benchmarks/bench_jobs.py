"""Submit-to-RUNNING latency of `python -m jobs submit` beside `ray job submit --no-wait`, on one local Ray head.

Each side runs as a fresh process (as a user would run it) and is timed from its start until the
job shows RUNNING; the two are taken in alternating pairs and compared by the median ratio. The
CLI side includes what it adds: loading and checking the stack config, the GPU readiness gate and
the run/attempt lookup. Both submit the same trivial entrypoint (the trainer cannot run here).
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
"""The repository root (put on sys.path for the imports below)."""
sys.path.insert(0, str(REPO))

from incluster.job_client import TERMINAL, connect, endpoint_for_address  # noqa: E402
from jobs.demo.gpu_node import GPUS  # noqa: E402
from jobs.submit import local_head  # noqa: E402

PAIRS = int(os.environ.get("BENCH_PAIRS", "7"))
"""Alternating pairs of submissions (BENCH_PAIRS)."""
TARGET = 1.5
"""The CLI may take at most this many times as long as `ray job submit --no-wait`."""


def _until_running(client, submission_id: str, started: float) -> float:
    while (status := client.get_job_status(submission_id).value) != "RUNNING":
        if status in TERMINAL:
            raise SystemExit(f"{submission_id} ended {status} before RUNNING: {client.get_job_logs(submission_id)}")
        time.sleep(0.02)
    return time.perf_counter() - started


def _ray_cli(client, address: str, index: int) -> float:
    submission_id = f"bench-ray-{index}"
    started = time.perf_counter()
    subprocess.run(
        [str(Path(sys.executable).with_name("ray")), "job", "submit", "--no-wait", "--address", address,
         "--submission-id", submission_id, "--", "sleep", "60"],
        check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    elapsed = _until_running(client, submission_id, started)
    client.stop_job(submission_id)
    return elapsed


def _jobs_cli(client, address: str, stacks: Path, index: int) -> float:
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "submit", "--stack", "bench", "--dir", str(stacks), "--address", address,
         "--entrypoint", f"sleep 60 && echo {index}"],
        check=True, capture_output=True, text=True, cwd=REPO,
    )  # fmt: skip
    submission_id = result.stdout.strip()
    elapsed = _until_running(client, submission_id, started)
    client.stop_job(submission_id)
    return elapsed


def main() -> int:
    """Print both medians and their ratio; exit 1 when the ratio misses TARGET."""
    stacks = Path(tempfile.mkdtemp(prefix="grpo-bench-jobs-"))
    document = yaml.safe_load((REPO / "Pulumi.dev.yaml").read_text())
    document["config"]["grpo-gke:gpu"]["nodes"] = 1
    (stacks / "Pulumi.bench.yaml").write_text(yaml.safe_dump(document))
    head = local_head.start(num_cpus=4, num_gpus=GPUS)
    try:
        client = connect(endpoint_for_address(head.dashboard_url))
        ours, theirs = [], []
        for index in range(PAIRS):
            theirs.append(_ray_cli(client, head.dashboard_url, index))
            ours.append(_jobs_cli(client, head.dashboard_url, stacks, index))
    finally:
        head.stop()
        shutil.rmtree(stacks, ignore_errors=True)
    ratios = sorted(mine / ray for mine, ray in zip(ours, theirs, strict=False))
    ratio = statistics.median(ratios)
    verdict = "ok" if ratio <= TARGET else "OVER TARGET"
    print(
        f"submit to RUNNING: python -m jobs submit median {statistics.median(ours):.2f}s vs"
        f" ray job submit --no-wait {statistics.median(theirs):.2f}s; ratio median {ratio:.2f}x"
        f" (range {ratios[0]:.2f}-{ratios[-1]:.2f}x, {PAIRS} pairs), target <= {TARGET}x: {verdict}"
    )
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
