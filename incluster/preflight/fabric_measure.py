"""The fabric preflight's measurement, run by every rank of one torch.distributed process group across the GPU nodes.

`measure_fabric()` is what each rank calls (one Ray task per GPU worker node, later); it returns plain data that
`fabric.judge_fabric()` judges. torch is imported inside the functions, so the package imports without it.

Method (nccl-tests' as the gate runs it, `all_gather_perf -b 1K -e 8G -f 2 -w 5 --iters 100`, float32 data):
for each collective and each message size, `warmups` untimed collectives, then `iterations` back-to-back collectives
timed by the wall clock from a barrier to the device's completion; the time per collective is the slowest rank's.
The size is the whole buffer (for all_gather the gathered output: each rank sends size/n). If any collective's
sweep average is below the floor, the nodes are measured again in pairs (`fabric_search`) to name the slow one.
Each node the search names slow is then measured rail by rail (its i-th GPU beside the healthy partner's i-th GPU, all
rails at once) to name the NIC. With the NCCL backend, NCCL logs at INFO level into a file per rank: the network it
names, the devices its net plugin lists and the net device of each rank's channels are reported per node.
"""

from __future__ import annotations

import datetime
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.facts.fabric import (
    FABRIC_FLOOR_BUSBW_GBPS,
    FABRIC_ITERATIONS,
    FABRIC_SWEEP_MAX_BYTES,
    FABRIC_SWEEP_MIN_BYTES,
    FABRIC_WARMUPS,
)
from incluster.preflight import fabric, fabric_search

FLOAT_BYTES = 4
"""Bytes per element: float32, nccl-tests' default data type (`-d float`)."""

TIMEOUT_S = 600
"""Deadline of the process group's rendezvous and of each collective: an unreachable or hung rank fails the
preflight instead of holding it (an 8 GiB all_reduce over a healthy fabric takes well under a second)."""


def _collective(
    torch: Any, dist: Any, collective: str, size_bytes: int, ranks: int, rank_in_group: int, device: Any, group: Any
) -> tuple[int, Callable[[], None], Callable[[], bool]]:
    """The whole-buffer size actually moved, one call of `collective`, and a check of the first call's result."""
    if collective == "all_gather":
        count = max(1, size_bytes // (FLOAT_BYTES * ranks))
        sent = torch.full((count,), float(rank_in_group), device=device, dtype=torch.float32)
        gathered = torch.empty(count * ranks, device=device, dtype=torch.float32)

        def check() -> bool:
            expected = torch.arange(ranks, device=device, dtype=torch.float32)
            return bool(torch.equal(gathered.view(ranks, count)[:, 0], expected))

        # torch 2.13 renames all_gather_into_tensor (same signature); the GPU image's torch may predate the new name.
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        return count * ranks * FLOAT_BYTES, lambda: gather(gathered, sent, group=group), check
    if collective == "all_reduce":
        count = max(1, size_bytes // FLOAT_BYTES)
        buffer = torch.ones(count, device=device, dtype=torch.float32)

        def check() -> bool:
            correct = bool(torch.all(buffer == ranks))
            buffer.zero_()
            return correct

        return count * FLOAT_BYTES, lambda: dist.all_reduce(buffer, group=group), check
    raise ValueError(f"unknown collective {collective!r}; known: {', '.join(fabric.COLLECTIVES)}")


def _synchronize(torch: Any, device: Any) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _point(collective: str, moved: int, seconds: float, ranks: int, correct: bool) -> dict[str, Any]:
    algbw, busbw = fabric.bandwidths(collective, moved, seconds, ranks)
    return {"size_bytes": moved, "seconds": seconds, "algbw_gbps": algbw, "busbw_gbps": busbw, "correct": correct}


def sweep(
    group: Any,
    device: Any,
    sizes: list[int],
    collectives: tuple[str, ...],
    warmups: int,
    iterations: int,
    inject_delay_s: float = 0.0,
) -> dict[str, list[dict[str, Any]]]:
    """Collective -> one point per size (size, seconds per collective, algbw, busbw, result correct) on `group`.

    The first warm-up's result is checked (`correct`), so `warmups` is at least 1. `inject_delay_s` makes this rank
    sleep before each timed collective: a stand-in for a slow node in tests.
    """
    import torch  # lazy: the driver and the guardian import this module without torch (~1.8 s); only ranks need it
    import torch.distributed as dist  # lazy: as torch

    if warmups < 1:
        raise ValueError("the sweep needs at least one warm-up, whose result it checks")
    ranks = dist.get_world_size(group=group)
    rank_in_group = dist.get_rank(group=group)
    results: dict[str, list[dict[str, Any]]] = {}
    for collective in collectives:
        points = []
        for size in sizes:
            moved, operation, check = _collective(torch, dist, collective, size, ranks, rank_in_group, device, group)
            operation()
            _synchronize(torch, device)
            correct = check()
            for _ in range(warmups - 1):
                operation()
            _synchronize(torch, device)
            dist.barrier(group=group)
            began = time.perf_counter()
            for _ in range(iterations):
                if inject_delay_s:
                    time.sleep(inject_delay_s)
                operation()
            _synchronize(torch, device)
            slowest = torch.tensor(
                [(time.perf_counter() - began) / iterations, 0.0 if correct else 1.0],
                device=device,
                dtype=torch.float64,
            )
            dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)
            seconds, wrong = slowest.tolist()
            points.append(_point(collective, moved, seconds, ranks, not wrong))
        results[collective] = points
    return results


def _measure_round(
    groups: list[tuple[str, ...]],
    ranks_of: dict[str, list[int]],
    device: Any,
    sizes: list[int],
    collectives: tuple[str, ...],
    warmups: int,
    iterations: int,
    inject_delay_s: float,
) -> list[dict[str, Any]]:
    """Measure disjoint node groups at once: every rank takes part in creating every group (torch requires it),
    measures only its own, and learns every group's figures through one sum over all ranks."""
    import torch  # lazy: the driver and the guardian import this module without torch (~1.8 s); only ranks need it
    import torch.distributed as dist  # lazy: as torch

    rank = dist.get_rank()
    figures = torch.zeros(len(groups), len(collectives), len(sizes), 3, dtype=torch.float64, device=device)
    members = [sorted(member for node in nodes for member in ranks_of[node]) for nodes in groups]
    for index, group_ranks in enumerate(members):
        group = dist.new_group(ranks=group_ranks)
        if rank in group_ranks:
            measured = sweep(group, device, sizes, collectives, warmups, iterations, inject_delay_s)
            if rank == group_ranks[0]:
                for row, collective in enumerate(collectives):
                    for column, point in enumerate(measured[collective]):
                        figures[index, row, column] = torch.tensor(
                            [point["size_bytes"], point["seconds"], float(point["correct"])], dtype=torch.float64
                        )
    dist.all_reduce(figures)
    values = figures.tolist()
    return [
        {
            "nodes": list(nodes),
            "ranks": len(group_ranks),
            "collectives": {
                collective: [
                    _point(collective, int(moved), seconds, len(group_ranks), bool(correct))
                    for moved, seconds, correct in values[index][row]
                ]
                for row, collective in enumerate(collectives)
            },
        }
        for index, (nodes, group_ranks) in enumerate(zip(groups, members, strict=False))
    ]


def _share_text(text: str, device: Any, width: int = 256) -> list[str]:
    """Every rank's `text` (at most `width` UTF-8 bytes), by rank: one sum over all ranks of a row per rank."""
    import torch  # lazy: the driver and the guardian import this module without torch (~1.8 s); only ranks need it
    import torch.distributed as dist  # lazy: as torch

    rows = torch.zeros(dist.get_world_size(), width, dtype=torch.int32, device=device)
    encoded = list(text.encode()[:width])
    rows[dist.get_rank(), : len(encoded)] = torch.tensor(encoded, dtype=torch.int32)
    dist.all_reduce(rows)
    return [bytes(value for value in row if value).decode(errors="replace") for row in rows.tolist()]


def _measure_rails(
    node: str, partner: str, ranks_of: dict[str, list[int]], device: Any, measure: dict[str, Any]
) -> list[dict[str, Any]]:
    """The rails of a slow `node` at once: its i-th rank beside `partner`'s i-th rank, one 2-rank group each
    (NCCL_CROSS_NIC=0 keeps it rail-aligned: the same NIC index on both nodes), so a slow NIC shows as one slow rail."""
    rails = {f"{name}/{index}": [member] for name in (node, partner) for index, member in enumerate(ranks_of[name])}
    groups = [(f"{node}/{index}", f"{partner}/{index}") for index in range(len(ranks_of[node]))]
    return _measure_round(groups, rails, device, **measure)


def _nics(text: str, ranks_of: dict[str, list[int]], nodes: list[str], device: Any) -> dict[str, Any]:
    """Node -> the devices its net plugin lists, and each local rank's net devices (from its channels), gathered
    from every rank's NCCL log."""
    mine = {
        "d": fabric.net_devices_in_log(text),
        "u": sorted({dev for devs in fabric.channel_net_devices(text).values() for dev in devs}),
    }
    shared = [
        json.loads(item) if item else {"d": [], "u": []}
        for item in _share_text(json.dumps(mine, separators=(",", ":")), device, width=512)
    ]
    return {
        name: {
            "devices": shared[ranks_of[name][0]]["d"],
            "rank_devices": {str(local): shared[member]["u"] for local, member in enumerate(ranks_of[name])},
        }
        for name in nodes
    }


def _nccl_logging(log_dir: Path, rank: int) -> Path:
    """Have NCCL log its init and network choice at INFO level into a file of this rank (read before NCCL starts)."""
    path = log_dir / f"nccl-rank{rank}.log"
    os.environ.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": str(path)})
    return path


def measure_fabric(
    rank: int,
    node_of_rank: list[str],
    init_method: str,
    backend: str = "nccl",
    device: str = "cuda:0",
    min_bytes: int = FABRIC_SWEEP_MIN_BYTES,
    max_bytes: int = FABRIC_SWEEP_MAX_BYTES,
    collectives: tuple[str, ...] = fabric.COLLECTIVES,
    warmups: int = FABRIC_WARMUPS,
    iterations: int = FABRIC_ITERATIONS,
    floor_gbps: float = FABRIC_FLOOR_BUSBW_GBPS,
    inject_delay_s: float = 0.0,
    timeout_s: float = TIMEOUT_S,
) -> dict[str, Any]:
    """This rank's part of the fabric preflight; every rank returns the same report.

    `node_of_rank` names the node of every rank (the same list on every rank; a node's ranks consecutive), so the
    world size is its length. The whole group sweeps every collective; when a collective averages below
    `floor_gbps`, the nodes are measured in pairs. `device` is this rank's device (`cuda:N` for NCCL, `cpu` for
    gloo); `inject_delay_s` stands in a slow node in tests.
    """
    import torch  # lazy: the driver and the guardian import this module without torch (~1.8 s); only ranks need it
    import torch.distributed as dist  # lazy: as torch

    nodes = list(dict.fromkeys(node_of_rank))
    ranks_of = {name: [index for index, owner in enumerate(node_of_rank) if owner == name] for name in nodes}
    sizes = fabric.sweep_sizes(min_bytes, max_bytes)
    measure = {
        "sizes": sizes,
        "collectives": collectives,
        "warmups": warmups,
        "iterations": iterations,
        "inject_delay_s": inject_delay_s,
    }
    with tempfile.TemporaryDirectory(prefix="fabric-preflight-") as log_dir:
        log_path = _nccl_logging(Path(log_dir), rank) if backend == "nccl" else None
        torch_device = torch.device(device)
        if torch_device.type == "cuda":
            torch.cuda.set_device(torch_device)
        dist.init_process_group(
            backend,
            init_method=init_method,
            rank=rank,
            world_size=len(node_of_rank),
            timeout=datetime.timedelta(seconds=timeout_s),
        )
        try:
            whole = _measure_round([tuple(nodes)], ranks_of, torch_device, **measure)[0]
            search: list[list[dict[str, Any]]] = []
            outcomes: list[fabric_search.PairOutcome] = []
            failed = not fabric.group_passes(whole, floor_gbps)
            while failed and (pairs := fabric_search.next_round(nodes, outcomes)):
                search.append(_measure_round(pairs, ranks_of, torch_device, **measure))
                outcomes += [fabric.pair_outcome(pair, floor_gbps) for pair in search[-1]]
            # Rails need nodes of the same number of ranks, more than one each (a single rail is its node).
            rails = []
            if len({len(ranks) for ranks in ranks_of.values()}) == 1 and len(ranks_of[nodes[0]]) > 1:
                rails = [
                    {
                        "node": node,
                        "partner": partner,
                        "pairs": _measure_rails(node, partner, ranks_of, torch_device, measure),
                    }
                    for node, partner in fabric_search.slow_beside_healthy(nodes, outcomes)
                ]
            networks = nics = None
            if log_path is not None:
                text = log_path.read_text() if log_path.exists() else ""
                per_rank = _share_text(",".join(sorted(set(fabric.networks_in_log(text)))), torch_device)
                networks = {
                    name: sorted({net for index in ranks_of[name] for net in per_rank[index].split(",") if net})
                    for name in nodes
                }
                nics = _nics(text, ranks_of, nodes, torch_device)
        finally:
            dist.destroy_process_group()
    return {
        "nodes": nodes,
        "backend": backend,
        "group": whole,
        "search": search,
        "rails": rails,
        "networks": networks,
        "nics": nics,
        "method": {
            "min_bytes": min_bytes,
            "max_bytes": max_bytes,
            "warmups": warmups,
            "iterations": iterations,
            "dtype": "float32",
            "floor_gbps": floor_gbps,
            "torch": torch.__version__,
        },
    }
