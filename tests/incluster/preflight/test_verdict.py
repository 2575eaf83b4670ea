"""The preflight verdict over reports measured on a real H200, and over the same report with one thing wrong."""

from __future__ import annotations

import copy
import statistics

import pytest

from core.facts.gpu_health import GPU_HEALTH_REFERENCES, PREFLIGHT_MIN_SHARE
from incluster.preflight import verdict
from tests.incluster.preflight.conftest import device_run

H200 = GPU_HEALTH_REFERENCES["h200"]
"""The H200 reference in facts."""

RUNS = [device_run("run1-preflight.json"), device_run("run2-preflight.json")]
"""Both device runs of 2026-12-01 (two H200 machines)."""

HEALTHY = RUNS[1]["reports"]["healthy"][0]
"""A healthy H200 as measure_node() reported it (one GPU, driver 580.159.04, CUDA 13.0)."""


def judge(report: dict, required_cuda: str = "12.8", gpus_expected: int = 1) -> verdict.NodeVerdict:
    """The verdict on a report against the H200 reference."""
    return verdict.judge_node(report, H200, required_cuda=required_cuda, gpus_expected=gpus_expected)


def with_gpu(**changes) -> dict:
    """The healthy report with its GPU's fields changed (None removes one)."""
    report = copy.deepcopy(HEALTHY)
    gpu = report["gpus"][0]
    for key, value in changes.items():
        if value is None:
            gpu.pop(key, None)
        else:
            gpu[key] = value
    return report


def eight_gpu_node() -> dict:
    """An 8-GPU node made of the healthy H200 at eight PCI addresses."""
    report = copy.deepcopy(HEALTHY)
    report["node"] = "gke-grpo-h200-pool-1a2b"
    gpu = report["gpus"][0]
    report["gpus"] = [
        {**gpu, "index": index, "pci_bus_id": f"00000000:{0x04 + index:02X}:00.0", "uuid": f"GPU-{index}"}
        for index in range(8)
    ]
    return report


def test_the_h200_reference_is_the_median_of_the_recorded_healthy_runs():
    healthy = [report["gpus"][0] for run in RUNS for report in run["reports"]["healthy"]]
    assert len(healthy) == 6
    assert H200.bf16_matmul_tflops == round(statistics.median(gpu["bf16_matmul_tflops"] for gpu in healthy))
    assert H200.copy_tbps == round(statistics.median(gpu["copy_tbps"] for gpu in healthy), 2)


def test_the_reference_sits_below_the_datasheet_and_the_threshold_is_80_percent():
    assert PREFLIGHT_MIN_SHARE == 0.8
    for reference in GPU_HEALTH_REFERENCES.values():
        assert reference.bf16_matmul_tflops < reference.datasheet_bf16_tflops
        assert reference.copy_tbps < reference.datasheet_hbm_tbps


@pytest.mark.parametrize("run", [0, 1])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_every_recorded_healthy_h200_passes(run, which):
    node = judge(RUNS[run]["reports"]["healthy"][which])
    assert node.passed and node.gpus == {0: True}


@pytest.mark.parametrize("run", [0, 1])
def test_a_recorded_h200_slowed_by_a_second_process_fails(run):
    report = RUNS[run]["reports"]["slowed_by_contender"]
    gpu = report["gpus"][0]
    node = judge(report)
    assert not node.passed and node.gpus == {0: False}
    matmul, copy_ = gpu["bf16_matmul_tflops"], gpu["copy_tbps"]
    assert [finding.line() for finding in node.findings if finding.severity == "fail"] == [
        f"vm GPU 0: FAIL bf16 matmul {matmul:g} TFLOP/s is {matmul / 698:.1%} of the NVIDIA H200 reference "
        "698 TFLOP/s (threshold 80%)",
        f"vm GPU 0: FAIL device copy (read+write) {copy_:g} TB/s is {copy_ / 4.26:.1%} of the NVIDIA H200 "
        "reference 4.26 TB/s (threshold 80%)",
    ]


def test_the_whole_output_of_a_node_with_one_slow_gpu():
    report = eight_gpu_node()
    report["gpus"][3]["bf16_matmul_tflops"] = 512.0
    node = judge(report, gpus_expected=8)
    assert node.lines() == [
        "gke-grpo-h200-pool-1a2b: FAIL (7 of 8 GPUs pass; failing GPUs 3)",
        "gke-grpo-h200-pool-1a2b GPU 3: FAIL bf16 matmul 512 TFLOP/s is 73.4% of the NVIDIA H200 reference "
        "698 TFLOP/s (threshold 80%)",
    ]
    assert node.gpus == {index: index != 3 for index in range(8)}


def test_a_healthy_eight_gpu_node_prints_one_line():
    assert judge(eight_gpu_node(), gpus_expected=8).lines() == ["gke-grpo-h200-pool-1a2b: PASS (8 of 8 GPUs pass)"]


def test_exactly_the_threshold_passes_and_just_below_fails():
    assert judge(with_gpu(bf16_matmul_tflops=0.8 * 698, copy_tbps=0.8 * 4.26)).passed
    assert not judge(with_gpu(bf16_matmul_tflops=0.799 * 698)).passed
    assert not judge(with_gpu(copy_tbps=0.799 * 4.26)).passed


def fails(report: dict, **kwargs) -> list[str]:
    """The fail lines of a report's verdict."""
    return [finding.line() for finding in judge(report, **kwargs).findings if finding.severity == "fail"]


def notes(report: dict, **kwargs) -> list[str]:
    """The note lines of a report's verdict."""
    return [finding.line() for finding in judge(report, **kwargs).findings if finding.severity == "note"]


def test_a_figure_not_measured_or_a_failed_measurement_fails():
    assert fails(with_gpu(copy_tbps=None)) == ["vm GPU 0: FAIL device copy (read+write) was not measured"]
    assert fails(with_gpu(error="CUDA error: an illegal memory access was encountered")) == [
        "vm GPU 0: FAIL measurement failed: CUDA error: an illegal memory access was encountered"
    ]


def test_another_gpu_model_fails():
    assert fails(with_gpu(name="NVIDIA H100 80GB HBM3")) == [
        "vm GPU 0: FAIL is a 'NVIDIA H100 80GB HBM3', not the expected 'NVIDIA H200'"
    ]


def test_ecc_disabled_or_uncorrected_errors_since_load_fail_lifetime_errors_are_noted():
    assert fails(with_gpu(ecc_mode="Disabled")) == ["vm GPU 0: FAIL ECC mode is Disabled, expected Enabled"]
    assert fails(with_gpu(ecc_uncorrected_volatile=2)) == [
        "vm GPU 0: FAIL 2 uncorrected ECC errors since the last driver load (drain and reset the GPU)"
    ]
    lifetime = with_gpu(ecc_uncorrected_aggregate=1)
    assert judge(lifetime).passed
    assert "vm GPU 0: note 1 uncorrected ECC errors over the GPU's lifetime" in notes(lifetime)


def test_pending_or_failed_remapping_and_pending_retirement_fail_not_applicable_passes():
    assert fails(with_gpu(remapped_rows_pending=True)) == [
        "vm GPU 0: FAIL a memory row remapping is pending (reset the GPU to apply it)"
    ]
    assert fails(with_gpu(remapped_rows_failure=True)) == [
        "vm GPU 0: FAIL a memory row remapping failed (the GPU needs service)"
    ]
    assert fails(with_gpu(retired_pages_pending=True)) == [
        "vm GPU 0: FAIL a page retirement is pending (reset the GPU to apply it)"
    ]
    assert HEALTHY["gpus"][0]["retired_pages_pending"] is None and judge(HEALTHY).passed


def test_hardware_slowdown_fails_software_thermal_slowdown_is_noted_the_power_cap_is_normal():
    assert fails(with_gpu(clock_events=["hw_thermal_slowdown"], clock_sm_mhz=900)) == [
        "vm GPU 0: FAIL clocks slowed by the hardware: hw_thermal_slowdown (SM 900 of 1980 MHz)"
    ]
    hot = with_gpu(clock_events=["sw_power_cap", "sw_thermal_slowdown"], clock_sm_mhz=1650)
    assert judge(hot).passed
    assert notes(hot) == ["vm GPU 0: note clock events sw_thermal_slowdown (SM 1650 of 1980 MHz)"]
    assert HEALTHY["gpus"][0]["clock_events"] == ["sw_power_cap"]
    assert judge(HEALTHY).lines() == ["vm: PASS (1 of 1 GPUs pass)"]


def test_a_hardware_xid_fails_its_gpu_only_an_application_xid_is_noted():
    report = eight_gpu_node()
    report["xid_events"] = [
        {"pci": "0000:06:00", "code": 79, "text": "GPU has fallen off the bus."},
        {"pci": "0000:07:00", "code": 13, "text": "Graphics SM Warp Exception"},
    ]
    node = judge(report, gpus_expected=8)
    assert node.gpus == {index: index != 2 for index in range(8)}
    assert node.lines() == [
        "gke-grpo-h200-pool-1a2b: FAIL (7 of 8 GPUs pass; failing GPUs 2)",
        "gke-grpo-h200-pool-1a2b GPU 2: FAIL XID 79 in the kernel log: GPU has fallen off the bus.",
        "gke-grpo-h200-pool-1a2b GPU 3: note XID 13 in the kernel log: Graphics SM Warp Exception",
    ]


def test_a_hardware_xid_on_a_gpu_nvidia_smi_does_not_list_fails_the_node():
    report = copy.deepcopy(HEALTHY)
    report["xid_events"] = [{"pci": "0000:9a:00", "code": 48, "text": "DBE (double bit error) ECC error"}]
    assert fails(report) == [
        "vm: FAIL XID 48 on PCI 0000:9a:00, which nvidia-smi does not list: DBE (double bit error) ECC error"
    ]


def test_an_unreadable_kernel_log_is_noted_not_failed():
    report = copy.deepcopy(HEALTHY)
    report["xid_events"], report["xid_unreadable"] = None, "dmesg exited 1: dmesg: read kernel buffer failed"
    assert judge(report).passed
    assert notes(report) == ["vm: note XID events not visible: dmesg exited 1: dmesg: read kernel buffer failed"]


def test_the_driver_must_support_the_images_cuda():
    assert judge(HEALTHY, required_cuda="13.0").passed and judge(HEALTHY, required_cuda="12.8").passed
    assert fails(HEALTHY, required_cuda="13.1") == [
        "vm: FAIL driver 580.159.04 supports CUDA 13.0, the image needs CUDA 13.1"
    ]
    unreadable = copy.deepcopy(HEALTHY)
    unreadable["cuda_version"], unreadable["smi_xml_error"] = None, "nvidia-smi -q did not answer within 60 s"
    assert fails(unreadable) == [
        "vm: FAIL the driver's CUDA version could not be read (nvidia-smi -q did not answer within 60 s)"
    ]


def test_cuda_versions_compare_numerically():
    assert verdict.cuda_at_least("13.0", "12.10") and not verdict.cuda_at_least("12.9", "12.10")


def test_a_missing_gpu_or_unreadable_nvidia_smi_fails_the_node():
    assert fails(HEALTHY, gpus_expected=8) == ["vm: FAIL nvidia-smi lists 1 GPUs, expected 8"]
    broken = {
        "node": "vm",
        "gpus": [],
        "smi_error": "nvidia-smi exited 9: NVIDIA-SMI has failed",
        "driver_version": None,
        "cuda_version": None,
        "xid_events": [],
    }
    assert fails(broken)[:2] == [
        "vm: FAIL nvidia-smi could not be read: nvidia-smi exited 9: NVIDIA-SMI has failed",
        "vm: FAIL nvidia-smi lists 0 GPUs, expected 1",
    ]


def test_a_b200_node_is_judged_against_the_b200_reference():
    b200 = GPU_HEALTH_REFERENCES["b200"]
    report = with_gpu(
        name="NVIDIA B200", bf16_matmul_tflops=0.9 * b200.bf16_matmul_tflops, copy_tbps=0.7 * b200.copy_tbps
    )
    node = verdict.judge_node(report, b200, required_cuda="12.8", gpus_expected=1)
    assert [finding.line() for finding in node.findings] == [
        f"vm GPU 0: FAIL device copy (read+write) {0.7 * b200.copy_tbps:g} TB/s is 70.0% of the NVIDIA B200 "
        f"reference {b200.copy_tbps:g} TB/s (threshold 80%)"
    ]
