"""The measurement entry: nvidia-smi read through a stand-in runner over recorded output, and the torch
measurements run on the CPU where torch is installed (torch is not in requirements.txt: skipped otherwise)."""

from __future__ import annotations

import importlib.util

import pytest

from core.facts.gpu_health import GPU_HEALTH_REFERENCES
from incluster.preflight import measure, smi, verdict
from tests.incluster.preflight.conftest import recorded

NO_TORCH = importlib.util.find_spec("torch") is None
"""torch is absent (it is not in requirements.txt; the preflight runs inside the GPU image, which has it)."""

needs_torch = pytest.mark.skipif(
    NO_TORCH, reason="torch is not installed (not in requirements.txt): the CPU run of the measurement code is skipped"
)
"""Marks a test that runs the torch measurement code on the CPU."""


def recorded_h200(command: list[str]) -> str:
    """What the H200 printed for each command measure_node() runs; its kernel log held no XID."""
    if command == smi.query_command():
        return recorded("h200-smi-query.csv")
    if command == smi.xml_command():
        return recorded("h200-smi.xml")
    if command == smi.kernel_log_command():
        return "[    0.018296] setup_percpu: NR_CPUS:256 nr_cpumask_bits:16\n"
    raise AssertionError(f"unexpected command {command}")


def test_read_smi_gathers_the_gpus_the_versions_and_the_xid_events():
    report = measure.read_smi(recorded_h200)
    assert [gpu["uuid"] for gpu in report["gpus"]] == ["GPU-2333c02f-1b3f-69e3-b0fb-d54405098fce"]
    assert (report["driver_version"], report["cuda_version"], report["xid_events"]) == ("580.159.04", "13.0", [])


def test_each_part_nvidia_smi_could_not_give_says_why():
    def refusing(command: list[str]) -> str:
        raise smi.SmiError(f"{command[0]} exited 1: Operation not permitted")

    assert measure.read_smi(refusing) == {
        "gpus": [],
        "smi_error": "nvidia-smi exited 1: Operation not permitted",
        "driver_version": None,
        "cuda_version": None,
        "smi_xml_error": "nvidia-smi exited 1: Operation not permitted",
        "xid_events": None,
        "xid_unreadable": "dmesg exited 1: Operation not permitted",
    }


@needs_torch
def test_the_matmul_and_copy_figures_come_out_on_the_cpu():
    import torch

    cpu = torch.device("cpu")
    assert measure.matmul_tflops(cpu, size=128, warmups=1, repetitions=3, inner=2) > 0
    assert measure.copy_tbps(cpu, copy_bytes=1 << 20, warmups=1, repetitions=3, inner=2) > 0
    figures = measure.measure_gpu(cpu, size=64, copy_bytes=1 << 16)
    assert set(figures) == {"device", "bf16_matmul_tflops", "copy_tbps"} and figures["device"] == "cpu"


@needs_torch
def test_the_copy_figure_counts_bytes_read_and_written(monkeypatch):
    import torch

    monkeypatch.setattr(measure, "_median_seconds", lambda torch, device, operation, *counts: (operation(), 0.001)[1])
    assert measure.copy_tbps(torch.device("cpu"), copy_bytes=1 << 20) == pytest.approx(2 * (1 << 20) / 0.001 / 1e12)
    assert measure.matmul_tflops(torch.device("cpu"), size=64) == pytest.approx(2 * 64**3 / 0.001 / 1e12)


@needs_torch
def test_a_gpu_nvidia_smi_lists_but_the_task_cannot_see_fails_unmeasured():
    import torch

    assert torch.cuda.device_count() == 0
    report = measure.measure_node("cpu-node", run=recorded_h200)
    assert report["method"]["matmul_size"] == measure.MATMUL_SIZE and report["unmatched_measurements"] == []
    node = verdict.judge_node(report, GPU_HEALTH_REFERENCES["h200"], required_cuda="12.8", gpus_expected=1)
    assert node.lines() == [
        "cpu-node: FAIL (0 of 1 GPUs pass; failing GPUs 0)",
        "cpu-node GPU 0: FAIL bf16 matmul was not measured",
        "cpu-node GPU 0: FAIL device copy (read+write) was not measured",
    ]


def test_the_package_imports_without_torch():
    import subprocess
    import sys

    code = (
        "import sys; sys.modules['torch'] = None; "
        "import incluster.preflight.measure, incluster.preflight.smi, incluster.preflight.verdict; print('imported')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "imported\n", "")
