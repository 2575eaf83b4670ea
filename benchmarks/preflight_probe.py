"""Why the preflight matmul figure is what it is: the same 8192^3 bf16 product under variations, on one GPU.

Run on a GPU machine: `PYTHONPATH=. python3 benchmarks/preflight_probe.py OUT_DIR`. Each variant is timed as
incluster/preflight/measure.py times (CUDA events, median of `repetitions` timings of 10 products) while
`nvidia-smi` samples SM clock and power every 100 ms; writes OUT_DIR/preflight-probe.json.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import torch

from incluster.preflight import measure

SIZE = measure.MATMUL_SIZE
"""The preflight's problem size."""


def timed(a: torch.Tensor, b: torch.Tensor, use_out: bool, warmups: int, repetitions: int) -> float:
    """TFLOP/s of a @ b, median of `repetitions` timings of 10 products after `warmups` products."""
    out = torch.empty_like(a)
    operation = (lambda: torch.matmul(a, b, out=out)) if use_out else (lambda: torch.matmul(a, b))
    seconds = measure._median_seconds(torch, a.device, operation, warmups, repetitions, 10)
    return round(2 * SIZE**3 / seconds / 1e12, 1)


def main(out: Path) -> None:
    """Time each variant, sampling clocks and power meanwhile."""
    device = torch.device("cuda", 0)
    data = {
        "randn": [torch.randn(SIZE, SIZE, device=device, dtype=torch.bfloat16) for _ in range(2)],
        "rand": [torch.rand(SIZE, SIZE, device=device, dtype=torch.bfloat16) for _ in range(2)],
    }
    sampler = subprocess.Popen(
        [
            "nvidia-smi",
            "--query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active",
            "--format=csv,noheader",
            "-lms",
            "100",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    rows = []
    for name, warmups, repetitions, use_out, kind in (
        ("preflight method (randn, out=, 3 warm-ups, 10 timings)", 3, 10, True, "randn"),
        ("randn without out=", 3, 10, False, "randn"),
        ("rand (uniform 0..1)", 3, 10, True, "rand"),
        ("randn, 200 warm-ups (~0.3 s), 10 timings", 200, 10, True, "randn"),
        ("randn, 3 warm-ups, 100 timings (~1.6 s)", 3, 100, True, "randn"),
        ("preflight method again", 3, 10, True, "randn"),
    ):
        began = time.time()
        rate = timed(*data[kind], use_out, warmups, repetitions)
        rows.append({"variant": name, "tflops": rate, "began": began, "ended": time.time()})
        print(f"{rate:8.1f} TFLOP/s  {name}", flush=True)
        time.sleep(0.5)
    sampler.terminate()
    samples = sampler.communicate(timeout=10)[0].splitlines()
    result = {"torch": torch.__version__, "variants": rows, "smi_samples": samples}
    (out / "preflight-probe.json").write_text(json.dumps(result, indent=2) + "\n")
    print("\n".join(samples[-60:]))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
