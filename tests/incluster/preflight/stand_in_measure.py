"""Stands in for measure.measure_node() on a local Ray head without GPUs: a node task reports the healthy H200
measured on 2026-12-01 (benchmarks/results/preflight-h200/run2-preflight.json), named after the GPU Ray gave it,
and the node holding SLOW_GPU reports that GPU's matmul slowed to SLOW_TFLOPS.

Runs inside Ray tasks: it finds the recorded file from its own path in the checkout (the test's job puts the
checkout on PYTHONPATH).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

RECORDED = Path(__file__).resolve().parents[3] / "benchmarks" / "results" / "preflight-h200" / "run2-preflight.json"
"""The device run whose first healthy report every stand-in node returns."""

SLOW_GPU = "1"
"""Ray's id of the GPU whose node reports a slow matmul."""

SLOW_TFLOPS = 512.0
"""The slowed matmul figure: 73% of the H200 reference, below the 80% threshold."""


def node_name(gpu_id: str) -> str:
    """The stand-in node's name for the GPU Ray assigned to its task."""
    return f"gke-grpo-h200-pool-{gpu_id}"


def measure_node() -> dict:
    """The recorded healthy report, as the node of this task's GPU."""
    import ray

    gpu_id = ray.get_runtime_context().get_accelerator_ids()["GPU"][0]
    report = copy.deepcopy(json.loads(RECORDED.read_text())["reports"]["healthy"][0])
    report["node"] = node_name(gpu_id)
    if gpu_id == SLOW_GPU:
        report["gpus"][0]["bf16_matmul_tflops"] = SLOW_TFLOPS
    return report
