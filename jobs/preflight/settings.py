"""The preflight's settings from the stack's config: plain, deterministic data that the post-deploy step keeps in its
inputs and the guardian in its settings (incluster/preflight/run.py runs them; the driver reads them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core import names
from core.config.model import StackConfig
from core.facts.fabric import (
    FABRIC_EXPECTED_NETWORK,
    FABRIC_FLOOR_BUSBW_GBPS,
    FABRIC_ITERATIONS,
    FABRIC_SWEEP_MAX_BYTES,
    FABRIC_SWEEP_MIN_BYTES,
    FABRIC_WARMUPS,
)
from core.facts.gpu_health import PREFLIGHT_MIN_SHARE
from jobs.spec.defaults import preflight_mode
from jobs.spec.training import training_spec
from workloads.raycluster import worker_env

MEASURE = "incluster.preflight.measure:measure_node"
"""What each node task calls for its GPUs' report."""

PLACEMENT_TIMEOUT_S = 300.0
"""How long the driver waits for a bundle on every GPU node: the nodes are already in Ray (the readiness gate ran)."""

TASK_TIMEOUT_S = 900.0
"""How long one node's GPU measurement (8 GPUs one after another) may take in the driver."""

FABRIC_TIMEOUT_S = 1200.0
"""How long the fabric ranks may take in the driver: the sweep to 8 GiB of both collectives and the pair rounds."""


def results_dir(config: StackConfig, data_root: str | None = None) -> str:
    """`<run dir>/preflight`, beside the run's record; under `data_root` for a local run (the shared storage's
    `/data/x` becomes `<data_root>/x`, as jobs/spec/training.py on_data_root maps it)."""
    directory = f"{training_spec(config).run_dir}/preflight"
    if data_root is None:
        return directory
    return str(Path(data_root) / Path(directory).relative_to(names.DATA_MOUNT))


def fabric_env(config: StackConfig) -> dict[str, str]:
    """The NCCL environment of the stack's GPU workers (the same entries their pods get) with NCCL_NET=gIB, and the
    Gloo interface: set again on each fabric rank, so the check uses exactly what training will."""
    plain = {item["name"]: item["value"] for item in worker_env(config) if "value" in item}
    env = {name: value for name, value in plain.items() if name.startswith("NCCL_") or name == "GLOO_SOCKET_IFNAME"}
    env["NCCL_NET"] = FABRIC_EXPECTED_NETWORK
    return dict(sorted(env.items()))


def preflight_settings(config: StackConfig, mode: str, directory: str, stamp: str) -> dict[str, Any]:
    """What the driver runs (plain, deterministic for a given `stamp`): `mode` full or gpu on the stack's GPU nodes,
    the references it judges by, where it writes its result."""
    if mode not in ("full", "gpu"):
        raise ValueError(f"no preflight to run in mode {mode!r}")
    return {
        "stack": config.stack,
        "stamp": stamp,
        "mode": mode,
        "nodes": config.gpu.nodes,
        "gpus_per_node": config.gpus_per_node,
        "strategy": "STRICT_SPREAD",
        "measure": MEASURE,
        "gpu_type": config.gpu.type,
        # An image of unstated CUDA (workload.image without cudaVersion) has no need to check the driver against.
        "required_cuda": config.workload.resolved_image().cuda_version or "0",
        "threshold": PREFLIGHT_MIN_SHARE,
        "placement_timeout_s": PLACEMENT_TIMEOUT_S,
        "task_timeout_s": TASK_TIMEOUT_S,
        "results_dir": directory,
        "fabric": {
            "env": fabric_env(config),
            "network": FABRIC_EXPECTED_NETWORK,
            "timeout_s": FABRIC_TIMEOUT_S,
            "measure": {
                "backend": "nccl",
                "min_bytes": FABRIC_SWEEP_MIN_BYTES,
                "max_bytes": FABRIC_SWEEP_MAX_BYTES,
                "warmups": FABRIC_WARMUPS,
                "iterations": FABRIC_ITERATIONS,
                "floor_gbps": FABRIC_FLOOR_BUSBW_GBPS,
            },
        },
    }


def preflight_template(config: StackConfig) -> dict[str, Any] | None:
    """The stack's preflight settings without their time (plain, deterministic: fit for Pulumi's state and the
    guardian's settings), or None when job.preflight is off; incluster/preflight/gate.py adds the time when it runs."""
    mode, _ = preflight_mode(config)
    if mode == "off":
        return None
    return preflight_settings(config, mode, results_dir(config), stamp="")
