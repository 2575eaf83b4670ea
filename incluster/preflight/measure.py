"""Per-GPU measurement of a preflight: bf16 matrix-multiply rate, device-memory copy bandwidth, nvidia-smi.

`measure_node()` is the entry a Ray task placed on one GPU node calls; it returns plain data that
`verdict.judge_node()` judges. torch is imported inside the functions, so the package imports without it.

Method (the same as the H200 reference in core/facts/gpu_health.py was taken with):
- matmul: C = A @ B on random bf16 N x N matrices (N = 8192), 2 N^3 floating-point operations each;
  `warmups` products first, then `repetitions` timings of `inner` back-to-back products, each timed
  with CUDA events; the figure is the median timing's rate.
- copy: a device-to-device copy of a `copy_bytes` buffer into another; the bytes counted are read
  plus written (2 x copy_bytes per copy); warm-ups, repetitions and median as above.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import time
from collections.abc import Callable
from typing import Any

from incluster.preflight import smi

MATMUL_SIZE = 8192
"""N of the N x N x N bf16 matrix product (the size the references were measured at)."""

COPY_BYTES = 4 << 30
"""Size of the copied buffer: 4 GiB, many times any GPU's L2, so the copy runs from HBM."""

WARMUPS = 3
"""Untimed runs before timing: module load, cuBLAS handle and heuristics stay out of the figures."""

REPETITIONS = 10
"""Timings per figure; the figure is their median."""

INNER = 10
"""Back-to-back operations per timing, so that one timing runs well past launch overhead."""


def _median_seconds(
    torch: Any, device: Any, operation: Callable[[], None], warmups: int, repetitions: int, inner: int
) -> float:
    """Median seconds of one `operation` on `device`: CUDA events on a GPU, a synchronised clock on the CPU."""
    for _ in range(warmups):
        operation()
    timings = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        for _ in range(repetitions):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(inner):
                operation()
            end.record()
            end.synchronize()
            timings.append(start.elapsed_time(end) / 1000 / inner)
    else:
        for _ in range(repetitions):
            began = time.perf_counter()
            for _ in range(inner):
                operation()
            timings.append((time.perf_counter() - began) / inner)
    return statistics.median(timings)


def _on(torch: Any, device: Any) -> Any:
    """Make `device` current, so that CUDA events record on its stream (nothing to do on the CPU)."""
    return torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()


def matmul_tflops(
    device: Any, size: int = MATMUL_SIZE, warmups: int = WARMUPS, repetitions: int = REPETITIONS, inner: int = INNER
) -> float:
    """bf16 TFLOP/s of a size x size x size matrix product on random data (2 size^3 operations each)."""
    import torch  # lazy: the package imports without torch (~1.8 s); only the GPU node's task needs it

    generator = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=generator)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16, generator=generator)
    out = torch.empty(size, size, device=device, dtype=torch.bfloat16)
    with _on(torch, device):
        seconds = _median_seconds(torch, device, lambda: torch.matmul(a, b, out=out), warmups, repetitions, inner)
    return 2 * size**3 / seconds / 1e12


def copy_tbps(
    device: Any,
    copy_bytes: int = COPY_BYTES,
    warmups: int = WARMUPS,
    repetitions: int = REPETITIONS,
    inner: int = INNER,
) -> float:
    """Device-to-device copy bandwidth in TB/s, counting bytes read plus bytes written (2 x copy_bytes a copy)."""
    import torch  # lazy: the package imports without torch (~1.8 s); only the GPU node's task needs it

    source = torch.empty(copy_bytes, device=device, dtype=torch.uint8).random_(0, 256)
    target = torch.empty_like(source)
    with _on(torch, device):
        seconds = _median_seconds(torch, device, lambda: target.copy_(source), warmups, repetitions, inner)
    if not torch.equal(target[:4096], source[:4096]):
        raise RuntimeError("the copied buffer differs from its source")
    return 2 * copy_bytes / seconds / 1e12


def measure_gpu(device: Any, size: int = MATMUL_SIZE, copy_bytes: int = COPY_BYTES) -> dict[str, Any]:
    """One GPU's measured figures (or the error that stopped them), and the UUID that ties them to nvidia-smi."""
    import torch  # lazy: the package imports without torch (~1.8 s); only the GPU node's task needs it

    figures: dict[str, Any] = {"device": str(device)}
    if device.type == "cuda":
        properties = torch.cuda.get_device_properties(device)
        figures["torch_name"] = properties.name
        uuid = getattr(properties, "uuid", None)
        figures["uuid"] = f"GPU-{uuid}" if uuid is not None else None
    try:
        figures["bf16_matmul_tflops"] = round(matmul_tflops(device, size), 1)
        figures["copy_tbps"] = round(copy_tbps(device, copy_bytes), 3)
    except (RuntimeError, torch.cuda.OutOfMemoryError) as error:
        figures["error"] = str(error).splitlines()[0]
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return figures


def read_smi(run: Callable[[list[str]], str] = smi.run) -> dict[str, Any]:
    """What nvidia-smi and the kernel log report on this node (each command run by `run`); each part that
    could not be read says why."""
    report: dict[str, Any] = {}
    try:
        report["gpus"] = smi.parse_query_csv(run(smi.query_command()))
    except smi.SmiError as error:
        report["gpus"], report["smi_error"] = [], str(error)
    try:
        report.update(smi.parse_xml_versions(run(smi.xml_command())))
    except smi.SmiError as error:
        report["driver_version"], report["cuda_version"] = None, None
        report["smi_xml_error"] = str(error)
    try:
        report["xid_events"] = smi.parse_xid_events(run(smi.kernel_log_command()))
    except smi.SmiError as error:
        report["xid_events"], report["xid_unreadable"] = None, str(error)
    return report


def measure_node(
    node: str | None = None,
    size: int = MATMUL_SIZE,
    copy_bytes: int = COPY_BYTES,
    run: Callable[[list[str]], str] = smi.run,
) -> dict[str, Any]:
    """Measure every GPU this process sees, then read nvidia-smi (through `run`): what `verdict.judge_node()` takes.

    nvidia-smi is read after the measurements, so its clocks and clock-event reasons show the GPUs just
    after full load. The measured figures are joined to nvidia-smi's GPUs by UUID (torch and nvidia-smi may number them
    differently); a GPU nvidia-smi lists but this process cannot see keeps no figures and fails the verdict.
    """
    import torch  # lazy: the package imports without torch (~1.8 s); only the GPU node's task needs it

    devices = [torch.device("cuda", index) for index in range(torch.cuda.device_count())]
    measured = [measure_gpu(device, size, copy_bytes) for device in devices]
    report = read_smi(run)
    report["node"] = node or socket.gethostname()
    report["method"] = {
        "matmul_size": size,
        "copy_bytes": copy_bytes,
        "warmups": WARMUPS,
        "repetitions": REPETITIONS,
        "inner": INNER,
        "torch": torch.__version__,
    }
    by_uuid = {figures.get("uuid"): figures for figures in measured}
    for gpu in report["gpus"]:
        gpu.update({key: value for key, value in by_uuid.pop(gpu.get("uuid"), {}).items() if key != "uuid"})
    report["unmatched_measurements"] = list(by_uuid.values())
    return report
