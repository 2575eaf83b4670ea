"""The preflight Ray job's driver: `python3 -m incluster.preflight.driver SETTINGS_JSON`, run on the Ray head.

Pod-side code (stdlib, Ray and, in the tasks, torch): it reaches the cluster as Ray `py_modules` with the rest of
the in-cluster package (incluster/shipping.py; incluster/preflight/run.py adds them at submission time).

1. One placement group of a bundle per GPU node (`gpus_per_node` GPUs and one CPU each, `strategy` STRICT_SPREAD:
   never two bundles on one node), waited for at most `placement_timeout_s`.
2. One task per bundle holding all its GPUs runs the measurement (`measure`, `module:function`, by default
   measure.measure_node) and returns the node's report; a task that fails leaves a report saying why.
3. For `mode` full, one task per GPU (the bundle's GPUs, one each) joins one torch.distributed process group across
   the nodes, with the stack's NCCL environment (`fabric.env`), and runs fabric_measure.measure_fabric(); ranks that
   do not finish within `fabric.timeout_s` (a hung NCCL) fail the fabric, with the reason, instead of the preflight.
4. Each node is judged (verdict.judge_node) and the fabric (fabric.judge_fabric); the result is written to
   `<results_dir>/<stamp>.json`, `<results_dir>/newest` names it, and the last line of the log is RESULT_MARKER and
   the result as one JSON line, which the submitting side reads.
"""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
from pathlib import Path
from typing import Any

from core.facts.gpu_health import GPU_HEALTH_REFERENCES
from incluster.preflight import fabric, verdict
from incluster.preflight.fabric_measure import measure_fabric

RESULT_MARKER = "grpo-gke preflight result: "
"""Starts the driver's last log line, followed by the result as one JSON object."""

NEWEST = "newest"
"""File in the results directory that holds the name of the newest result."""


def say(line: str) -> None:
    """One progress line in the job's log."""
    print(f"preflight: {line}", flush=True)


def resolve(entry: str) -> Any:
    """The function `module:function` names."""
    module, _, name = entry.partition(":")
    return getattr(importlib.import_module(module), name)


def measure_on_node(entry: str) -> dict[str, Any]:
    """Body of a node task: the node's report from `entry`, with the Ray node it ran on."""
    import ray  # lazy: every `python -m jobs` start imports this module (via the guardian); ray adds ~0.5 s

    report = resolve(entry)()
    report["ray_node_id"] = ray.get_runtime_context().get_node_id()
    report["ip"] = ray.util.get_node_ip_address()
    return report


def free_port() -> tuple[str, int]:
    """Body of the rendezvous task on the first bundle: this node's address and a port free on it now."""
    import ray  # lazy: every `python -m jobs` start imports this module (via the guardian); ray adds ~0.5 s

    with socket.socket() as probe:
        probe.bind(("", 0))
        return ray.util.get_node_ip_address(), probe.getsockname()[1]


def fabric_rank(
    rank: int, node_of_rank: list[str], init_method: str, options: dict[str, Any], gpus_per_node: int
) -> dict[str, Any]:
    """Body of one fabric rank: fabric_measure.measure_fabric() on the GPU Ray gave this task.

    With NCCL every GPU of the node is made visible again (Ray shows a task only its own; the bundle holds the whole
    node, so they are all this preflight's) and the rank uses its own by index: NCCL then reaches the node's other
    ranks over NVLink, as training does, not through host memory as it must between GPUs it cannot see.
    """
    import ray  # lazy: every `python -m jobs` start imports this module (via the guardian); ray adds ~0.5 s

    options = dict(options)
    if options.get("backend") == "nccl":
        own = int(ray.get_gpu_ids()[0])
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(index) for index in range(gpus_per_node))
        options["device"] = f"cuda:{own}"
    return measure_fabric(rank, node_of_rank, init_method, **options)


def _node_reports(ray: Any, group: Any, settings: dict[str, Any]) -> list[dict[str, Any]]:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # lazy: as `import ray` in run()

    task = ray.remote(measure_on_node)
    pending = [
        task.options(
            num_cpus=1,
            num_gpus=settings["gpus_per_node"],
            scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index),
        ).remote(settings["measure"])
        for index in range(settings["nodes"])
    ]
    reports = []
    for index, ref in enumerate(pending):
        try:
            reports.append(ray.get(ref, timeout=settings["task_timeout_s"]))
        except Exception as error:  # noqa: BLE001 - a lost node, a timeout or the measurement's own error
            failed = f"the node's task failed: {_last_line(error)}"
            reports.append({"node": f"GPU node {index}", "gpus": [], "smi_error": failed})
    return reports


def _fabric_report(ray: Any, group: Any, settings: dict[str, Any], names: list[str]) -> dict[str, Any]:
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy  # lazy: as `import ray` in run()

    per_node = settings["gpus_per_node"]

    def placed(index: int, cpus: float, gpus: float) -> dict[str, Any]:
        strategy = PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=index)
        return {"num_cpus": cpus, "num_gpus": gpus, "scheduling_strategy": strategy}

    host, port = ray.get(ray.remote(free_port).options(**placed(0, 0, 0)).remote(), timeout=settings["task_timeout_s"])
    node_of_rank = [name for name in names for _ in range(per_node)]
    options = dict(settings["fabric"]["measure"])
    task = ray.remote(fabric_rank)
    pending = [
        task.options(**placed(rank // per_node, 0, 1), runtime_env={"env_vars": settings["fabric"]["env"]}).remote(
            rank, node_of_rank, f"tcp://{host}:{port}", options, per_node
        )
        for rank in range(len(node_of_rank))
    ]
    try:
        return ray.get(pending, timeout=settings["fabric"]["timeout_s"])[0]
    except Exception as error:  # noqa: BLE001 - a rendezvous or collective past its deadline, a lost rank: a finding
        for ref in pending:
            ray.cancel(ref, force=True)
        return {"nodes": names, "error": _last_line(error)}


def _last_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[-1][:300]


def verdicts(
    settings: dict[str, Any], reports: list[dict[str, Any]], fabric_report: dict[str, Any] | None
) -> tuple[list[verdict.NodeVerdict], fabric.FabricVerdict | None]:
    """Each node's verdict against its GPU type's reference, and the fabric's (NCCL's network checked only when the
    backend is NCCL)."""
    reference = GPU_HEALTH_REFERENCES[settings["gpu_type"]]
    nodes = [
        verdict.judge_node(
            report, reference, settings["required_cuda"], settings["gpus_per_node"], settings["threshold"]
        )
        for report in reports
    ]
    if fabric_report is None:
        return nodes, None
    if "error" in fabric_report:
        where = f"fabric across {len(fabric_report['nodes'])} nodes"
        failed = verdict.Finding(where, None, "fail", f"the measurement did not finish: {fabric_report['error']}")
        return nodes, fabric.FabricVerdict(nodes=fabric_report["nodes"], findings=[failed])
    measure = settings["fabric"]["measure"]
    expected = settings["fabric"]["network"] if measure["backend"] == "nccl" else None
    return nodes, fabric.judge_fabric(fabric_report, measure["floor_gbps"], expected)


def judge(
    settings: dict[str, Any], reports: list[dict[str, Any]], fabric_report: dict[str, Any] | None
) -> dict[str, Any]:
    """The verdict on the measured nodes and fabric, as plain data: every line, pass/fail."""
    nodes, judged = verdicts(settings, reports, fabric_report)
    result: dict[str, Any] = {
        "nodes": [{"node": node.node, "passed": node.passed, "lines": node.lines()} for node in nodes]
    }
    if judged is not None:
        result["fabric"] = {"passed": judged.passed, "lines": judged.lines()}
    result["passed"] = all(node.passed for node in nodes) and (judged is None or judged.passed)
    return result


def write_result(results_dir: str, stamp: str, result: dict[str, Any]) -> str:
    """Write `result` to `<results_dir>/<stamp>.json` and name it in `<results_dir>/newest`; return its path."""
    directory = Path(results_dir)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{stamp}.json"
    for target, text in (
        (path, json.dumps(result, indent=1, sort_keys=True) + "\n"),
        (directory / NEWEST, path.name + "\n"),
    ):
        partial = target.with_name(f".{target.name}.partial")
        partial.write_text(text)
        os.replace(partial, target)
    return str(path)


def run(settings: dict[str, Any]) -> dict[str, Any]:
    """The whole preflight on the cluster this driver runs in; the result, as written."""
    import ray  # lazy: every `python -m jobs` start imports this module (via the guardian); ray adds ~0.5 s
    from ray.util.placement_group import placement_group, remove_placement_group  # lazy: as `import ray` above

    ray.init()
    nodes, per_node = settings["nodes"], settings["gpus_per_node"]
    say(f"placing {nodes} bundles of {per_node} GPUs ({settings['strategy']})")
    group = placement_group([{"CPU": 1, "GPU": per_node}] * nodes, strategy=settings["strategy"])
    try:
        try:
            ray.get(group.ready(), timeout=settings["placement_timeout_s"])
        except ray.exceptions.GetTimeoutError:
            say(
                f"could not place {nodes} bundles of {per_node} GPUs ({settings['strategy']}) within "
                f"{settings['placement_timeout_s']:g} s: fewer GPU nodes with free GPUs are in Ray"
            )
            raise SystemExit(1) from None
        say(f"measuring the GPUs of {nodes} nodes")
        reports = _node_reports(ray, group, settings)
        fabric_report = None
        if settings["mode"] == "full":
            say(f"measuring the fabric across {nodes} nodes, {nodes * per_node} ranks")
            fabric_report = _fabric_report(ray, group, settings, [report["node"] for report in reports])
    finally:
        remove_placement_group(group)
    result = {
        "stamp": settings["stamp"],
        "stack": settings["stack"],
        "mode": settings["mode"],
        "reports": reports,
        "fabric_report": fabric_report,
        "verdict": judge(settings, reports, fabric_report),
        # The driver of a Ray job runs on the head: a fresh RayCluster has another head (incluster/guardian/loop.py).
        "rayHead": ray.get_runtime_context().get_node_id(),
    }
    result["path"] = write_result(settings["results_dir"], settings["stamp"], result)
    return result


def main(argv: list[str]) -> int:
    """Run the preflight the JSON settings in `argv[0]` describe; print the result as the log's last line."""
    result = run(json.loads(argv[0]))
    say(f"{'PASS' if result['verdict']['passed'] else 'FAIL'}; written to {result['path']}")
    print(RESULT_MARKER + json.dumps(result, sort_keys=True), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
