"""The preflight verdict: a node's report (measure.measure_node()) against references -> pass/fail per GPU and node.

Pure: plain data in, a NodeVerdict out. Every finding is one line naming the node and, where it is about
one GPU, its nvidia-smi index: `gke-pool-1a2b GPU 3: FAIL bf16 matmul 512.0 TFLOP/s is 65% of ...`.
A `fail` finding fails its GPU (or, without a GPU, the whole node); a `note` is reported and fails nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from core.facts.gpu_health import (
    PREFLIGHT_FAILING_CLOCK_EVENTS,
    PREFLIGHT_HARDWARE_XIDS,
    PREFLIGHT_MIN_SHARE,
    PREFLIGHT_NORMAL_CLOCK_EVENTS,
    GpuHealthReference,
)
from incluster.preflight.smi import pci_key


@dataclass(frozen=True)
class Finding:
    """One thing the preflight found on a node."""

    node: str
    """The node's name."""
    gpu: int | None
    """nvidia-smi index of the GPU it is about, or None for the node as a whole."""
    severity: Literal["fail", "note"]
    """`fail` fails the GPU (or node); `note` is only reported."""
    message: str
    """What was found and what it was compared with."""

    def line(self) -> str:
        """The finding as one readable line."""
        where = self.node if self.gpu is None else f"{self.node} GPU {self.gpu}"
        return f"{where}: {'FAIL' if self.severity == 'fail' else 'note'} {self.message}"


@dataclass(frozen=True)
class NodeVerdict:
    """Pass/fail of one node and of each of its GPUs, with the findings behind them."""

    node: str
    """The node's name."""
    gpus: dict[int, bool]
    """nvidia-smi index -> the GPU passed."""
    findings: list[Finding] = field(default_factory=list)
    """Every finding, in the order the checks ran."""

    @property
    def passed(self) -> bool:
        """The node passes: it has every GPU expected, each passed, and no node-wide failure."""
        return not any(finding.severity == "fail" for finding in self.findings)

    def lines(self) -> list[str]:
        """A summary line, then one line per finding."""
        failed = sorted(index for index, ok in self.gpus.items() if not ok)
        passing = len(self.gpus) - len(failed)
        summary = f"{self.node}: {'PASS' if self.passed else 'FAIL'} ({passing} of {len(self.gpus)} GPUs pass"
        summary += f"; failing GPUs {', '.join(map(str, failed))})" if failed else ")"
        return [summary, *(finding.line() for finding in self.findings)]


def cuda_at_least(available: str, required: str) -> bool:
    """The driver's CUDA version (`13.0`) is at least the image's need (`12.8`), compared as major.minor."""

    def key(version: str) -> tuple[int, ...]:
        return tuple(int(part) for part in version.split(".")[:2])

    return key(available) >= key(required)


def _xid_severity(code: int) -> Literal["fail", "note"]:
    return "fail" if code in PREFLIGHT_HARDWARE_XIDS else "note"


def _share_check(
    node: str, gpu: dict[str, Any], key: str, label: str, unit: str, reference: float, gpu_name: str, threshold: float
) -> Finding | None:
    value = gpu.get(key)
    if value is None:
        return Finding(node, gpu["index"], "fail", f"{label} was not measured")
    if value >= threshold * reference:
        return None
    share = value / reference
    return Finding(
        node,
        gpu["index"],
        "fail",
        f"{label} {value:g} {unit} is {share:.1%} of the {gpu_name} reference {reference:g} {unit} "
        f"(threshold {threshold:.0%})",
    )


def _gpu_findings(
    node: str, gpu: dict[str, Any], reference: GpuHealthReference, threshold: float, xids: list[dict[str, Any]]
) -> list[Finding]:
    index = gpu["index"]
    findings: list[Finding] = []

    def add(severity: Literal["fail", "note"], message: str) -> None:
        findings.append(Finding(node, index, severity, message))

    if gpu.get("name") != reference.smi_name:
        add("fail", f"is a {gpu.get('name')!r}, not the expected {reference.smi_name!r}")
    if gpu.get("error"):
        add("fail", f"measurement failed: {gpu['error']}")
    else:
        for key, label, unit, figure in (
            ("bf16_matmul_tflops", "bf16 matmul", "TFLOP/s", reference.bf16_matmul_tflops),
            ("copy_tbps", "device copy (read+write)", "TB/s", reference.copy_tbps),
        ):
            finding = _share_check(node, gpu, key, label, unit, figure, reference.smi_name, threshold)
            if finding:
                findings.append(finding)
    if gpu.get("ecc_mode") != "Enabled":
        add("fail", f"ECC mode is {gpu.get('ecc_mode') or 'not reported'}, expected Enabled")
    if gpu.get("ecc_uncorrected_volatile"):
        add(
            "fail",
            f"{gpu['ecc_uncorrected_volatile']} uncorrected ECC errors since the last driver load "
            "(drain and reset the GPU)",
        )
    if gpu.get("ecc_uncorrected_aggregate"):
        add("note", f"{gpu['ecc_uncorrected_aggregate']} uncorrected ECC errors over the GPU's lifetime")
    if gpu.get("remapped_rows_pending"):
        add("fail", "a memory row remapping is pending (reset the GPU to apply it)")
    if gpu.get("remapped_rows_failure"):
        add("fail", "a memory row remapping failed (the GPU needs service)")
    if gpu.get("retired_pages_pending"):
        add("fail", "a page retirement is pending (reset the GPU to apply it)")
    hardware_events = [event for event in gpu.get("clock_events", []) if event in PREFLIGHT_FAILING_CLOCK_EVENTS]
    if hardware_events:
        add(
            "fail",
            f"clocks slowed by the hardware: {', '.join(hardware_events)} "
            f"(SM {gpu.get('clock_sm_mhz')} of {gpu.get('clock_sm_max_mhz')} MHz)",
        )
    other_events = [
        event
        for event in gpu.get("clock_events", [])
        if event not in PREFLIGHT_FAILING_CLOCK_EVENTS + PREFLIGHT_NORMAL_CLOCK_EVENTS
    ]
    if other_events:
        add(
            "note",
            f"clock events {', '.join(other_events)} (SM {gpu.get('clock_sm_mhz')} of "
            f"{gpu.get('clock_sm_max_mhz')} MHz)",
        )
    for event in xids:
        add(_xid_severity(event["code"]), f"XID {event['code']} in the kernel log: {event['text']}")
    return findings


def judge_node(
    report: dict[str, Any],
    reference: GpuHealthReference,
    required_cuda: str,
    gpus_expected: int,
    threshold: float = PREFLIGHT_MIN_SHARE,
) -> NodeVerdict:
    """Judge one node's report: every GPU against `reference` at `threshold`, the driver against `required_cuda`."""
    node = report["node"]
    findings: list[Finding] = []
    if report.get("smi_error"):
        findings.append(Finding(node, None, "fail", f"nvidia-smi could not be read: {report['smi_error']}"))
    gpus = report.get("gpus", [])
    if len(gpus) != gpus_expected:
        findings.append(Finding(node, None, "fail", f"nvidia-smi lists {len(gpus)} GPUs, expected {gpus_expected}"))
    cuda = report.get("cuda_version")
    if cuda is None:
        findings.append(
            Finding(
                node,
                None,
                "fail",
                f"the driver's CUDA version could not be read ({report.get('smi_xml_error', 'not in the XML report')})",
            )
        )
    elif not cuda_at_least(cuda, required_cuda):
        findings.append(
            Finding(
                node,
                None,
                "fail",
                f"driver {report.get('driver_version')} supports CUDA {cuda}, the image needs CUDA {required_cuda}",
            )
        )
    xid_events = report.get("xid_events")
    if xid_events is None:
        findings.append(Finding(node, None, "note", f"XID events not visible: {report.get('xid_unreadable')}"))
    for figures in report.get("unmatched_measurements", []):
        findings.append(
            Finding(
                node,
                None,
                "note",
                f"measured {figures.get('device')} ({figures.get('uuid')}) matches no GPU nvidia-smi lists",
            )
        )
    pci_of = {gpu["index"]: pci_key(gpu["pci_bus_id"]) for gpu in gpus if gpu.get("pci_bus_id")}
    for event in xid_events or []:
        if event["pci"] not in pci_of.values():
            findings.append(
                Finding(
                    node,
                    None,
                    _xid_severity(event["code"]),
                    f"XID {event['code']} on PCI {event['pci']}, which nvidia-smi does not list: {event['text']}",
                )
            )
    verdicts: dict[int, bool] = {}
    for gpu in gpus:
        xids = [event for event in xid_events or [] if event["pci"] == pci_of.get(gpu["index"])]
        gpu_findings = _gpu_findings(node, gpu, reference, threshold, xids)
        verdicts[gpu["index"]] = not any(finding.severity == "fail" for finding in gpu_findings)
        findings.extend(gpu_findings)
    return NodeVerdict(node=node, gpus=verdicts, findings=findings)
