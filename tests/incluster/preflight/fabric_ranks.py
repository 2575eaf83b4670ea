"""What each process of the gloo fabric test runs: one rank standing for one node, on 127.0.0.1 only.

A separate module (not a test file), so that the forkserver imports it, and torch, once before forking the ranks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from incluster.preflight.fabric_measure import measure_fabric

SIZES = (8 << 20, 16 << 20)
"""The test's sweep, 8 and 16 MiB: large enough that gloo over loopback is bandwidth-bound, small enough to be quick."""

SLOW_DELAY_S = 0.4
"""Seconds the slow rank sleeps before each timed collective."""


def run_rank(rank: int, world_size: int, work_dir: str, slow_rank: int, floor_gbps: float) -> None:
    """Measure the fabric twice, all ranks healthy and then with `slow_rank` slowed; write this rank's reports."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    import torch

    torch.set_num_threads(1)
    nodes = [f"node-{index}" for index in range(world_size)]
    reports = {}
    for scenario, delay in (("healthy", 0.0), ("slow", SLOW_DELAY_S if rank == slow_rank else 0.0)):
        reports[scenario] = measure_fabric(
            rank,
            nodes,
            f"file://{work_dir}/{scenario}.rendezvous",
            backend="gloo",
            device="cpu",
            min_bytes=SIZES[0],
            max_bytes=SIZES[-1],
            warmups=1,
            iterations=1,
            floor_gbps=floor_gbps,
            inject_delay_s=delay,
            timeout_s=60,
        )
    Path(work_dir, f"rank{rank}.json").write_text(json.dumps(reports))


RANKS_PER_NODE = 2
"""Ranks of each stand-in node in the rail run: two GPUs, two rails."""


def run_rail_rank(rank: int, world_size: int, work_dir: str, slow_rank: int, floor_gbps: float) -> None:
    """Measure the fabric once with RANKS_PER_NODE ranks a node and `slow_rank` slowed (one slow rail of one node);
    write this rank's report."""
    os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    import torch

    torch.set_num_threads(1)
    nodes = [f"node-{index // RANKS_PER_NODE}" for index in range(world_size)]
    report = measure_fabric(
        rank,
        nodes,
        f"file://{work_dir}/rails.rendezvous",
        backend="gloo",
        device="cpu",
        min_bytes=SIZES[0],
        max_bytes=SIZES[-1],
        warmups=1,
        iterations=1,
        floor_gbps=floor_gbps,
        inject_delay_s=SLOW_DELAY_S if rank == slow_rank else 0.0,
        timeout_s=60,
    )
    Path(work_dir, f"rails-rank{rank}.json").write_text(json.dumps(report))
