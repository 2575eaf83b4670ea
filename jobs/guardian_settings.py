"""What the in-cluster run guardian needs: its settings (plain, deterministic JSON) and its code (the
import-closed set of modules it runs, from /opt/grpo-gke).

The stack renders both into ConfigMaps (settings at /etc/grpo-gke/guardian/settings.json, code under
/opt/grpo-gke) and runs `python3 -m jobs guard --settings /etc/grpo-gke/guardian/settings.json --address
http://<head service>:8265` with PYTHONPATH=/opt/grpo-gke, in an image that ships Ray, requests and PyYAML
(the Ray images do), without Pulumi or the typed config.
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from core import names
from core.config.model import StackConfig
from core.facts.platform import GPUS_PER_NODE
from jobs.control import POD_MODULES, PROJECT_DIR
from jobs.export import export_submission
from jobs.preflight.settings import preflight_template
from jobs.spec import submission_for, training_spec
from workloads.raycluster import WORKER_GROUP

GUARDIAN_ROOTS = (
    "jobs/__main__.py",
    "jobs/guardian.py",
    *POD_MODULES,
    "jobs/export_run.py",
    "jobs/scaling.py",
    "jobs/deadline.py",
    "jobs/preflight/gate.py",
    "jobs/preflight/driver.py",
    "jobs/preflight/measure.py",
    "jobs/preflight/fabric_measure.py",
)
"""The modules the in-cluster guardian starts from: the entry point, the loop, the attempt wrapper's modules it
sends with every attempt it submits, and the preflight it runs on a fresh RayCluster (the gate, and the driver
and measurements it sends as py_modules: the driver loads them by name, so no import names them)."""

PROJECT_PACKAGES = ("core", "jobs", "workloads")
"""Top-level packages of this project a guardian module may import."""


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
        "preflight": preflight_template(config),
        "export": export_submission(config, training_spec(config)),
        "flexStart": config.gpu.provisioning == "flex-start",
        "cordonBadNodes": config.job.cordon_bad_nodes,
    }


def _module_path(module: str) -> str | None:
    """The project file of a dotted module name (a package's __init__.py), or None outside the project or for
    a namespace package."""
    if module.split(".")[0] not in PROJECT_PACKAGES:
        return None
    base = module.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py"):
        if (PROJECT_DIR / candidate).is_file():
            return candidate
    if (PROJECT_DIR / base).is_dir():
        return None  # a namespace package: no file of its own
    raise ValueError(f"the guardian imports {module}, which is not a module of this project")


def _top_level_imports(path: str) -> set[str]:
    """Project modules `path` imports when it is loaded: the imports of its module body (functions' own imports
    and `if TYPE_CHECKING:` blocks run later or never), with the packages above each."""
    tree = ast.parse((PROJECT_DIR / path).read_text(), filename=path)
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # `from package import name`: a submodule when such a file exists, else a name of the package.
            submodules = [f"{node.module}.{alias.name}" for alias in node.names]
            modules = [node.module] + [name for name in submodules if _is_project_module(name)]
        else:
            continue
        for module in modules:
            parts = module.split(".")
            found.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return {file for module in found if (file := _module_path(module)) is not None}


def _is_project_module(module: str) -> bool:
    base = module.replace(".", "/")
    return module.split(".")[0] in PROJECT_PACKAGES and any(
        (PROJECT_DIR / candidate).is_file() for candidate in (f"{base}.py", f"{base}/__init__.py")
    )


@functools.cache
def _guardian_module_paths() -> tuple[str, ...]:
    # Parsing every module for its imports took a sixth of a mocked run (0.17 of 1.06 s), and the checkout's
    # modules do not change while a process runs: the closure is computed once, the texts read on every call.
    wanted, seen = list(GUARDIAN_ROOTS), set()
    while wanted:
        path = wanted.pop()
        if path in seen:
            continue
        seen.add(path)
        wanted.extend(_top_level_imports(path) - seen)
    return tuple(sorted(seen))


def guardian_code_files() -> dict[str, str]:
    """Every module the in-cluster guardian loads, by path relative to the project directory, with its text:
    GUARDIAN_ROOTS and what their module bodies import, transitively."""
    return {path: (PROJECT_DIR / path).read_text() for path in _guardian_module_paths()}
