"""The preflight as a Ray job: its submission (pure, from the settings jobs/preflight/settings.py makes), submitting
it and reading its result, the report (a table per node and the verdict) and the lines that name each bad node or
NIC. Without the typed config or Pulumi, so the in-cluster guardian can run it from its settings alone.

The driver (incluster/preflight/driver.py) and what it imports are pod-side code: `incluster/` and `core`'s pure modules reach the cluster
as the job's runtime_env `py_modules`, added here at submission time (Ray zips and uploads them,
content-addressed), never part of the settings, so nothing of the code lands in Pulumi's state or a plan.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from core.facts.gpu_health import GPU_HEALTH_REFERENCES, GpuHealthReference
from incluster import shipping
from incluster.job_client import DEADLINES, TERMINAL, JobError, last_lines, status_of
from incluster.preflight import fabric, verdict
from incluster.preflight.driver import RESULT_MARKER, verdicts
from incluster.readiness import REPORT_EVERY_SECONDS

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

POD_PYTHON = "python3"
"""The Python of the framework images, which runs the driver."""

POLL_SECONDS = 2.0
"""How often the submitting side asks for the preflight job's status."""


class PreflightError(JobError):
    """The preflight could not run or produced no result; one line."""


def stamp_now() -> str:
    """The UTC time of a preflight, as a file name: `20261201T121314.123Z`."""
    now = datetime.now(UTC)
    return now.strftime("%Y%m%dT%H%M%S.") + f"{now.microsecond // 1000:03d}Z"


def preflight_submission(settings: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of JobSubmissionClient.submit_job for the preflight (without its py_modules). Its
    metadata names the stack under `preflightOf`, not `stack`, so it is never taken for an attempt of the run."""
    stamp = settings["stamp"].lower().replace(".", "")
    command = [
        POD_PYTHON,
        "-m",
        "incluster.preflight.driver",
        json.dumps(settings, sort_keys=True, separators=(",", ":")),
    ]
    return {
        "entrypoint": shlex.join(command),
        "submission_id": f"{settings['stack']}-preflight-{stamp}",
        "metadata": {"preflightOf": settings["stack"], "mode": settings["mode"]},
        "runtime_env": {},
    }


def with_code(submission: dict[str, Any], modules: list[str]) -> dict[str, Any]:
    """`submission` with the shipped packages (incluster/shipping.py py_modules) as `py_modules`: added only when it
    is submitted."""
    runtime_env = {**submission["runtime_env"], "py_modules": modules}
    return {**submission, "runtime_env": runtime_env}


def result_in_log(log: str) -> dict[str, Any] | None:
    """The result the driver printed as its log's last marked line, or None."""
    for line in reversed(log.splitlines()):
        if line.startswith(RESULT_MARKER):
            return json.loads(line[len(RESULT_MARKER) :])
    return None


def run_preflight(
    client: JobSubmissionClient,
    settings: dict[str, Any],
    report: Callable[[str], None],
    poll: float = POLL_SECONDS,
) -> PreflightReport:
    """Submit the preflight, wait for it (at most DEADLINES.preflight, a progress line as it goes), and judge it.

    PreflightError when Ray refuses it, it fails or it outlasts its deadline (then it is stopped).
    """
    submission = preflight_submission(settings)
    job_id = submission["submission_id"]
    try:
        with shipping.py_modules() as modules:
            client.submit_job(**with_code(submission, modules))
    except JobError:
        raise
    except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
        raise PreflightError(f"Ray refused the preflight {job_id}: {_first_line(error)}") from None
    began = time.monotonic()
    deadline = began + DEADLINES.preflight
    reported, reported_at = "", 0.0
    while (status := status_of(client, job_id)) not in TERMINAL:
        now = time.monotonic()
        if now > deadline:
            client.stop_job(job_id)
            raise PreflightError(f"the preflight {job_id} took more than {DEADLINES.preflight:g} s; stopped it")
        marked = [line for line in last_lines(client, job_id, 5) if line.startswith("preflight: ")]
        step = marked[-1].removeprefix("preflight: ") if marked else "starting"
        if step != reported or now - reported_at >= REPORT_EVERY_SECONDS:
            report(f"preflight {status} for {now - began:.0f} s: {step}; {deadline - now:.0f} s left")
            reported, reported_at = step, now
        time.sleep(poll)
    result = result_in_log(client.get_job_logs(job_id)) if status == "SUCCEEDED" else None
    if result is None:
        tail = last_lines(client, job_id, 1)
        line = tail[-1] if tail else "no log"
        raise PreflightError(f"the preflight {job_id} {status} without a result: {line}{missing_module_hint(line)}")
    return judge_result(settings, result)


def missing_module_hint(line: str) -> str:
    """What the head needs when the driver's last line says `python3` there lacks a module (a Ray head started
    outside the framework image, such as one on this machine), else nothing."""
    missing = re.search(r"No module named '([\w.]+)'", line)
    if missing is None:
        return ""
    return (
        f": the Ray head runs the preflight's driver with {POD_PYTHON} (the framework image's, with Ray and torch),"
        f" and there {POD_PYTHON} has no {missing.group(1)}; on a head of your own, start it with a PATH whose"
        f" {POD_PYTHON} has Ray and torch (PATH=$PWD/.venv/bin:$PATH .venv/bin/ray start --head ...); the preflight"
        " measures GPUs, so it needs the stack's GPU nodes"
    )


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0][:200]


@dataclass(frozen=True)
class PreflightReport:
    """A judged preflight: every node's verdict, the fabric's, and where the result was written."""

    mode: str
    """`full` or `gpu`."""
    reference: GpuHealthReference
    """The GPU type's reference the nodes were judged by."""
    reports: list[dict[str, Any]]
    """Each node's measured report, in bundle order."""
    nodes: list[verdict.NodeVerdict]
    """Each node's verdict, in the same order."""
    fabric: fabric.FabricVerdict | None
    """The fabric's verdict (full only)."""
    fabric_report: dict[str, Any] | None
    """The fabric's measured report (full only)."""
    path: str
    """The result file on the shared storage."""

    @property
    def passed(self) -> bool:
        """Every node and the fabric pass."""
        return all(node.passed for node in self.nodes) and (self.fabric is None or self.fabric.passed)

    def bad_nodes(self) -> list[str]:
        """The nodes a failure names, in order: a failing GPU check, or the fabric's finding about that node."""
        known = [node.node for node in self.nodes]
        failed = {node.node for node in self.nodes if not node.passed}
        if self.fabric is not None:
            failed |= {finding.node.split(" NIC ")[0] for finding in self.fabric.findings if finding.severity == "fail"}
        return [name for name in known if name in failed]

    def failure_lines(self) -> list[str]:
        """One line per bad node (each of its failing checks), then one per fabric finding that is not about a
        node as a whole (a NIC, or the group)."""
        by_node: dict[str, list[str]] = {}
        others: list[str] = []
        findings = [finding for node in self.nodes for finding in node.findings]
        findings += self.fabric.findings if self.fabric is not None else []
        known = {node.node for node in self.nodes}
        for finding in findings:
            if finding.severity != "fail":
                continue
            if finding.node in known:
                gpu = "" if finding.gpu is None else f"GPU {finding.gpu} "
                by_node.setdefault(finding.node, []).append(gpu + finding.message)
            else:
                others.append(finding.line())
        lines = [f"{node}: FAIL {'; '.join(by_node[node])}" for node in self.bad_nodes() if node in by_node]
        return lines + others

    def table(self) -> list[str]:
        """A table per node (its GPUs' figures against the reference, what nvidia-smi found), the fabric, the verdict."""
        lines: list[str] = []
        for report, node in zip(self.reports, self.nodes, strict=True):
            lines += node_table(report, node, self.reference)
        if self.fabric is not None and self.fabric_report is not None:
            lines += fabric_table(self.fabric_report, self.fabric)
        lines.append(f"verdict: {'PASS' if self.passed else 'FAIL'} ({self.mode} preflight of {len(self.nodes)} nodes)")
        return lines


def judge_result(settings: dict[str, Any], result: dict[str, Any]) -> PreflightReport:
    """The driver's `result` judged as the driver judged it (driver.verdicts), kept as verdicts for the report."""
    nodes, judged = verdicts(settings, result["reports"], result.get("fabric_report"))
    return PreflightReport(
        mode=result["mode"],
        reference=GPU_HEALTH_REFERENCES[settings["gpu_type"]],
        reports=result["reports"],
        nodes=nodes,
        fabric=judged,
        fabric_report=result.get("fabric_report"),
        path=result["path"],
    )


def _share(value: float | None, reference: float) -> str:
    return "-" if value is None else f"{value:g} ({value / reference:.0%})"


def node_table(report: dict[str, Any], node: verdict.NodeVerdict, reference: GpuHealthReference) -> list[str]:
    """One node: its summary, a row per GPU (each figure with its share of the reference, ECC mode, row remapping,
    SM clock of its maximum), the driver and XID events, then every finding."""
    lines = [f"node {node.lines()[0]}"]
    gpus = report.get("gpus", [])
    if gpus:
        matmul = f"bf16 TFLOP/s (ref {reference.bf16_matmul_tflops:g})"
        copy = f"copy TB/s (ref {reference.copy_tbps:g})"
        lines.append(f"  {'GPU':<4}{matmul:<24}{copy:<22}{'ECC':<10}{'remap':<8}{'SM MHz':<12}result")
    for gpu in gpus:
        matmul = _share(gpu.get("bf16_matmul_tflops"), reference.bf16_matmul_tflops)
        copy = _share(gpu.get("copy_tbps"), reference.copy_tbps)
        remap = (
            "pending" if gpu.get("remapped_rows_pending") else "failed" if gpu.get("remapped_rows_failure") else "ok"
        )
        clocks = f"{gpu.get('clock_sm_mhz')}/{gpu.get('clock_sm_max_mhz')}"
        result = "PASS" if node.gpus.get(gpu["index"]) else "FAIL"
        ecc = gpu.get("ecc_mode") or "-"
        lines.append(f"  {gpu['index']:<4}{matmul:<24}{copy:<22}{ecc:<10}{remap:<8}{clocks:<12}{result}")
    xids = report.get("xid_events")
    seen = "not visible" if xids is None else str(len(xids))
    lines.append(f"  driver {report.get('driver_version')}, CUDA {report.get('cuda_version')}; XID events: {seen}")
    lines += [f"  {line}" for line in node.lines()[1:]]
    return lines


def fabric_table(report: dict[str, Any], judged: fabric.FabricVerdict) -> list[str]:
    """The fabric: each collective's average bus bandwidth against the floor, the network and NICs NCCL names per
    node, the findings (a slow node, a slow NIC)."""
    if "error" in report:
        return judged.lines()
    lines = [judged.lines()[0]]
    floor = report["method"]["floor_gbps"]
    for collective, average in fabric.group_averages(report["group"]).items():
        lines.append(f"  {collective}: {average:.3g} GB/s average bus bandwidth (floor {floor:g} GB/s)")
    nics = report.get("nics") or {}
    for node, used in (report.get("networks") or {}).items():
        devices = (nics.get(node) or {}).get("devices") or []
        listed = f"; its net plugin lists {len(devices)} devices ({', '.join(devices)})" if devices else ""
        lines.append(f"  {node}: NCCL network {', '.join(used) or 'none named'}{listed}")
    lines += [f"  {line}" for line in judged.lines()[1:]]
    return lines
