"""Stand-in, on branch h-deploy, for engineer guard's module of this name (the shared contract): the guardian's
settings and code files, so the stack renders the guardian's objects before the two branches meet. At the merge
guard's module replaces this one whole (same two functions); the golden files are then regenerated on purpose.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from core import names
from core.config.model import StackConfig
from core.facts.platform import GPUS_PER_NODE
from jobs.spec import submission_for
from workloads.raycluster import WORKER_GROUP

PROJECT_DIR = Path(__file__).resolve().parents[1]
"""The directory holding the `jobs` package."""

GUARDIAN_ROOTS = ("jobs/__init__.py",)
"""The modules shipped to the guardian until guard's loop exists."""


def guardian_settings(config: StackConfig) -> dict[str, Any]:
    """The guardian's settings for `config`'s run: plain data, the same for the same config."""
    submission = submission_for(config)
    return {
        "stack": config.stack,
        "run": submission["metadata"]["run"],
        "submission": submission,
        "gpuNodes": config.gpu.nodes,
        "maxRecoveries": config.job.max_recoveries,
        "idleMinutes": config.job.idle_minutes,
        "readyTimeoutSeconds": config.job.ready_timeout_seconds,
        "framework": config.workload.framework,
        "worldSize": GPUS_PER_NODE * config.gpu.nodes,
        "namespace": names.NAMESPACE,
        "rayCluster": names.RAY_CLUSTER,
        "gpuWorkerGroup": WORKER_GROUP,
    }


def guardian_code_files() -> dict[str, str]:
    """The guardian's code files by path relative to the project directory, with their text."""
    return {path: (PROJECT_DIR / path).read_text() for path in GUARDIAN_ROOTS}
