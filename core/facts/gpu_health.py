"""The preflight's GPU health references (issue 14).

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuHealthReference:
    """What one healthy GPU of a type reaches in the preflight's measurements, beside its datasheet figures."""

    smi_name: str
    """The GPU's name as nvidia-smi and CUDA report it."""
    datasheet_bf16_tflops: float
    """Vendor datasheet dense bf16 Tensor Core rate in TFLOP/s (half the with-sparsity figure)."""
    datasheet_hbm_tbps: float
    """Vendor datasheet HBM bandwidth in TB/s."""
    bf16_matmul_tflops: float
    """8192^3 bf16 matmul rate a healthy GPU reaches (incluster/preflight/measure.py's method), TFLOP/s."""
    copy_tbps: float
    """Device-to-device copy bandwidth a healthy GPU reaches, read plus write, TB/s (same method)."""


H200_DATASHEET_BF16_TFLOPS = 989.0
"""NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 Tensor Core 1,979 TFLOPS with sparsity, so about 989
dense; the same rate as the H100 SXM (../shared/reference/day-two-operations.md "Fabric and GPU health";
the device tool's H200.md)."""

H200_DATASHEET_HBM_TBPS = 4.8
"""NVIDIA H200 datasheet: 141 GB HBM3e at 4.8 TB/s (same sources)."""

H200_MEASURED_BF16_TFLOPS = 698.0
"""8192^3 bf16 matmul on a real H200 (SXM, 'NVIDIA H200', driver 580.159.04 / CUDA 13.0, torch 2.11.0+cu130),
measured 2026-12-01 with incluster/preflight/measure.py (random normal data, CUDA events, median of 10 timings of 10
products after 3 warm-ups): the median of six measure_node() runs on two such machines, 667-730 TFLOP/s
(benchmarks/results/preflight-h200/). The GPU runs at its 700 W cap (`SW Power Cap`, SM clock down to 1,350-1,560
MHz under load), so the figure depends on the data: uniform [0, 1) data gave 765 (run2-probe.json), as in the
lab's earlier 769-803 (day-two-operations.md)."""

H200_MEASURED_COPY_TBPS = 4.26
"""Device-to-device copy of a 4 GiB buffer on those H200s, bytes read plus written, median of the same six runs,
4.256-4.273 TB/s (benchmarks/results/preflight-h200/; the lab's earlier 4.24-4.28, day-two-operations.md)."""

B200_DATASHEET_BF16_TFLOPS = 2250.0
"""NVIDIA HGX B200 (1,000 W): BF16 Tensor Core 4.5 PFLOPS with sparsity per GPU, so 2.25 PFLOP/s dense
(NVIDIA HGX platform datasheet; day-two-operations.md; glennklockwood.com/garden/processors/B200)."""

B200_DATASHEET_HBM_TBPS = 8.0
"""NVIDIA HGX B200: HBM3e at 8 TB/s per GPU (same sources; pytorch/ao#4002 reads a 7,680-bit bus at 3,996 MHz
off a real B200, 7.67 TB/s)."""

L4_DATASHEET_BF16_TFLOPS = 121.0
"""NVIDIA L4 Tensor Core GPU datasheet: BF16 Tensor Core 242 TFLOPS with sparsity, so about 121 dense (assumed from
the datasheet's figures as commonly quoted; the datasheet itself was not read here)."""

L4_DATASHEET_HBM_TBPS = 0.3
"""NVIDIA L4: 24 GB GDDR6 at 300 GB/s, 72 W (fpsbench.com's L4 specification page, read 2026-12-07: 300.1 GB/s on a
192-bit bus, TDP 72 W; NVIDIA's datasheet not read here)."""

GPU_HEALTH_REFERENCES: dict[str, GpuHealthReference] = {
    "h200": GpuHealthReference(
        smi_name="NVIDIA H200",
        datasheet_bf16_tflops=H200_DATASHEET_BF16_TFLOPS,
        datasheet_hbm_tbps=H200_DATASHEET_HBM_TBPS,
        bf16_matmul_tflops=H200_MEASURED_BF16_TFLOPS,
        copy_tbps=H200_MEASURED_COPY_TBPS,
    ),
    # Not yet measured on a B200: its datasheet figures scaled by the share of them the H200 reaches in the
    # same measurement. Replace with a B200 measurement when one is made.
    "b200": GpuHealthReference(
        smi_name="NVIDIA B200",
        datasheet_bf16_tflops=B200_DATASHEET_BF16_TFLOPS,
        datasheet_hbm_tbps=B200_DATASHEET_HBM_TBPS,
        bf16_matmul_tflops=float(
            round(B200_DATASHEET_BF16_TFLOPS * H200_MEASURED_BF16_TFLOPS / H200_DATASHEET_BF16_TFLOPS)
        ),
        copy_tbps=round(B200_DATASHEET_HBM_TBPS * H200_MEASURED_COPY_TBPS / H200_DATASHEET_HBM_TBPS, 2),
    ),
    # Not yet measured on an L4, and not scaled as the B200's: the L4's 72 W cap (its datasheet's max power) keeps its
    # sustained matmul well below the datasheet, by how much no source read here says. Set low on purpose (half the
    # dense bf16 rate, three quarters of the bandwidth) so a healthy L4 is not failed, at the cost of passing a slow
    # one; replace with an L4 measurement (benchmarks/results/preflight-*) when one is made.
    "l4": GpuHealthReference(
        smi_name="NVIDIA L4",
        datasheet_bf16_tflops=L4_DATASHEET_BF16_TFLOPS,
        datasheet_hbm_tbps=L4_DATASHEET_HBM_TBPS,
        bf16_matmul_tflops=L4_DATASHEET_BF16_TFLOPS / 2,
        copy_tbps=L4_DATASHEET_HBM_TBPS * 3 / 4,
    ),
}
"""Preflight reference of each `gpu.type`."""

PREFLIGHT_MIN_SHARE = 0.8
"""A GPU whose measured figure is below this share of its reference fails its node (issue 14)."""

PREFLIGHT_FAILING_CLOCK_EVENTS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
"""Clock-event reasons that mean the hardware is slowing the GPU (overheating, power brake); nvidia-smi
`--help-query-gpu` "clocks_event_reasons.hw_*" (driver 580.159.04: "reducing the core clocks by a factor of 2 or more")."""

PREFLIGHT_NORMAL_CLOCK_EVENTS = ("sw_power_cap",)
"""Clock-event reasons a healthy GPU shows right after full load, left out of the findings: every healthy H200
measured here read `SW Power Cap` after the matmul (benchmarks/results/preflight-h200/), the driver holding it at
its power limit. Any other reason not in PREFLIGHT_FAILING_CLOCK_EVENTS is noted."""

PREFLIGHT_HARDWARE_XIDS = (46, 48, 63, 64, 79)
"""XID codes that take a GPU out of a run: 46 GPU stopped processing and 48 double-bit ECC error (NVIDIA
Health Validation, checks/xid: CRITICAL, drain), 63/64 a page retired or row remapped / its failure, which a
GPU reset must activate (NVIDIA Dynamic Page Retirement, "Visibility"; Xid catalog), 79 GPU fallen off the bus
(NVIDIA GPU Operational Events release notes; Xid catalog). Other XIDs, often an application's fault (13, 31,
43), are only noted."""
