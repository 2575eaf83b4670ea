"""Take the H200 preflight reference on a real GPU and show the verdict tells a healthy GPU from a slowed one.

Run on a GPU machine: `PYTHONPATH=. python3 benchmarks/preflight_device.py OUT_DIR`. It writes to OUT_DIR:
- preflight-h200.json: the machine, the method, three healthy measure_node() reports, a slowed report
  (a second process runs bf16 matmuls on the same GPU throughout, so the GPU is time-sliced between the
  two, the way a stray process slows a node), a report at a 2048^3 problem size, and the verdict of each
  against the facts reference and against a reference made of this run's own median;
- smi-query.csv, smi.xml, help-query-gpu.txt, dmesg.txt: what nvidia-smi and the kernel log printed, raw.
The card is measured as found; nothing here changes its clocks, power limit or any other setting.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from core.facts.gpu_health import GPU_HEALTH_REFERENCES, GpuHealthReference
from incluster.preflight import measure, smi, verdict

CONTENDER = """
import sys, time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
for _ in range(20):
    torch.matmul(a, b)
torch.cuda.synchronize()
print("ready", flush=True)
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    for _ in range(20):
        torch.matmul(a, b)
    torch.cuda.synchronize()
"""
"""A second process that keeps the GPU busy with bf16 matmuls for argv[1] seconds."""


def raw(command: list[str]) -> str:
    """What a command printed (stdout, then stderr and exit status when it failed), with a deadline."""
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    except (FileNotFoundError, subprocess.TimeoutExpired) as error:
        return f"<{error}>"
    if result.returncode:
        return f"{result.stdout}\n<exit {result.returncode}> {result.stderr}"
    return result.stdout


def judged(report: dict, reference: GpuHealthReference) -> dict:
    """The verdict on a one-GPU machine, as data and lines."""
    node = verdict.judge_node(report, reference, required_cuda="12.8", gpus_expected=1)
    return {"passed": node.passed, "gpus": node.gpus, "lines": node.lines()}


def main(out: Path) -> None:
    """Measure, judge and write the results under `out`."""
    out.mkdir(parents=True, exist_ok=True)
    help_text = raw(["nvidia-smi", "--help-query-gpu"])
    (out / "help-query-gpu.txt").write_text(help_text)
    unknown = [name for name in smi.QUERY_FIELDS.values() if f'"{name}"' not in help_text]
    print("query fields not in --help-query-gpu:", unknown or "none", flush=True)
    (out / "smi-query.csv").write_text(raw(smi.query_command()))
    (out / "smi.xml").write_text(raw(smi.xml_command()))
    (out / "dmesg.txt").write_text(raw(smi.kernel_log_command())[-20000:])

    started = time.time()
    healthy = [measure.measure_node() for _ in range(3)]
    contender = subprocess.Popen([sys.executable, "-c", CONTENDER, "60"], stdout=subprocess.PIPE, text=True)
    try:
        ready = contender.stdout.readline().strip()
        slowed = measure.measure_node()
    finally:
        contender.terminate()
        contender.wait(timeout=30)
    small = measure.measure_node(size=2048)

    gpu_figures = [report["gpus"][0] for report in healthy]
    matmul_median = statistics.median(figures["bf16_matmul_tflops"] for figures in gpu_figures)
    copy_median = statistics.median(figures["copy_tbps"] for figures in gpu_figures)
    measured_reference = dataclasses.replace(
        GPU_HEALTH_REFERENCES["h200"], bf16_matmul_tflops=matmul_median, copy_tbps=copy_median
    )
    result = {
        "taken": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(0),
        "contender": ready,
        "reference_measured": dataclasses.asdict(measured_reference),
        "reference_facts": dataclasses.asdict(GPU_HEALTH_REFERENCES["h200"]),
        "reports": {"healthy": healthy, "slowed_by_contender": slowed, "matmul_2048": small},
        "verdicts": {
            name: {
                "facts": judged(report, GPU_HEALTH_REFERENCES["h200"]),
                "measured": judged(report, measured_reference),
            }
            for name, report in (
                ("healthy_1", healthy[0]),
                ("healthy_2", healthy[1]),
                ("healthy_3", healthy[2]),
                ("slowed_by_contender", slowed),
                ("matmul_2048", small),
            )
        },
    }
    (out / "preflight-h200.json").write_text(json.dumps(result, indent=2, sort_keys=True) + "\n")
    for name, report in (
        ("healthy", healthy[0]),
        ("healthy", healthy[1]),
        ("healthy", healthy[2]),
        ("slowed", slowed),
        ("2048", small),
    ):
        gpu = report["gpus"][0]
        print(
            f"{name:8} matmul {gpu.get('bf16_matmul_tflops')} TFLOP/s  copy {gpu.get('copy_tbps')} TB/s  "
            f"clocks {gpu.get('clock_sm_mhz')}/{gpu.get('clock_sm_max_mhz')} events {gpu.get('clock_events')}"
        )
    for name, verdicts in result["verdicts"].items():
        for against, judgement in verdicts.items():
            print(f"--- {name} against the {against} reference")
            print("\n".join(judgement["lines"]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
