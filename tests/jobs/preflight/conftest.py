"""Preflight fixtures: what nvidia-smi printed on a real H200 and the reports measured there."""

from __future__ import annotations

import json
from pathlib import Path

from plan.harness import REPO_ROOT

DATA = Path(__file__).with_name("data")
"""nvidia-smi's output on an H200 (driver 580.159.04), recorded by benchmarks/preflight_device.py on 2026-12-01,
and NCCL's INFO log on an H200 without RDMA (h200-nccl-socket.log, benchmarks/fabric_nccl_log_device.py, same day)."""

RESULTS = REPO_ROOT / "benchmarks" / "results" / "preflight-h200"
"""The device runs' results: measure_node() reports of healthy and slowed H200s."""


def recorded(name: str) -> str:
    """A recorded nvidia-smi output file."""
    return (DATA / name).read_text()


def device_run(name: str) -> dict:
    """One device run's result file (run1-preflight.json, run2-preflight.json)."""
    return json.loads((RESULTS / name).read_text())
