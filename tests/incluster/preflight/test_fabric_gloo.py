"""The fabric measurement for real: torch.distributed with the gloo backend across four processes on 127.0.0.1,
each rank standing for one node, one of them slowed on purpose; the pair search must name it.

torch is not in requirements.txt (the preflight runs inside the GPU image): requirements-test.txt pins the CPU wheel
that `make test` installs; without torch this test is skipped and says why.
"""

from __future__ import annotations

import importlib.util
import json
import multiprocessing
import re
import statistics
import time
from pathlib import Path

import pytest

from incluster.preflight import fabric
from tests.incluster.preflight import fabric_ranks

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="torch is not installed (requirements-test.txt, installed by `make test`): the gloo fabric run is skipped",
)

WORLD_SIZE = 4
"""Ranks, one per stand-in node."""

SLOW_RANK = 2
"""The rank made slow on purpose: node-2."""

DEADLINE_S = 90
"""Longest the four ranks may take (about 10 s on an idle two-core machine)."""

SLOW_BOUND_GBPS = max(
    fabric.bus_bandwidth_factor("all_gather", ranks)
    * statistics.mean(fabric_ranks.SIZES)
    / fabric_ranks.SLOW_DELAY_S
    / fabric.BYTES_PER_GB
    for ranks in (2, WORLD_SIZE)
)
"""The most all_gather bus bandwidth a group holding the slow rank can average: each of its collectives takes at
least the slow rank's sleep."""

FLOOR_GBPS = 1.2 * SLOW_BOUND_GBPS
"""The test's floor: just above what a group with the slow rank can reach, far below what gloo does on loopback."""


def run_ranks(work_dir: Path, target, world_size: int, *rest) -> None:
    """Run `target(rank, world_size, work_dir, *rest)` for every rank, each in its own process, within DEADLINE_S;
    every rank must exit 0 (a rank still running at the deadline is killed and fails the test)."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "tests.incluster.preflight.fabric_ranks"])
    processes = [
        context.Process(target=target, args=(rank, world_size, str(work_dir), *rest)) for rank in range(world_size)
    ]
    for process in processes:
        process.start()
    deadline = time.monotonic() + DEADLINE_S
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    late = [process for process in processes if process.is_alive()]
    for process in late:
        process.kill()
        process.join()
    assert not late, f"{len(late)} ranks still ran after {DEADLINE_S} s"
    assert [process.exitcode for process in processes] == [0] * world_size


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Rank 0's reports of both runs (every rank returns the same)."""
    work_dir = tmp_path_factory.mktemp("fabric-gloo")
    run_ranks(work_dir, fabric_ranks.run_rank, WORLD_SIZE, SLOW_RANK, FLOOR_GBPS)
    by_rank = [json.loads((work_dir / f"rank{rank}.json").read_text()) for rank in range(WORLD_SIZE)]
    assert all(report["slow"]["nodes"] == by_rank[0]["slow"]["nodes"] for report in by_rank)
    return by_rank[0]


def test_a_healthy_group_passes_without_a_search(reports):
    healthy = reports["healthy"]
    verdict = fabric.judge_fabric(healthy, floor_gbps=FLOOR_GBPS, expected_network=None)
    assert verdict.lines() == ["fabric across 4 nodes: PASS"]
    assert healthy["search"] == [] and healthy["networks"] is None
    sweep = healthy["group"]["collectives"]
    assert list(sweep) == ["all_gather", "all_reduce"]
    assert [point["size_bytes"] for point in sweep["all_gather"]] == list(fabric_ranks.SIZES)
    assert all(point["correct"] for points in sweep.values() for point in points)


def test_the_figures_follow_the_formula_of_each_collective(reports):
    for collective, points in reports["healthy"]["group"]["collectives"].items():
        for point in points:
            algbw, busbw = fabric.bandwidths(collective, point["size_bytes"], point["seconds"], WORLD_SIZE)
            assert (point["algbw_gbps"], point["busbw_gbps"]) == pytest.approx((algbw, busbw))


def test_a_slow_node_fails_the_group_and_the_pair_search_names_it(reports):
    slow = reports["slow"]
    assert [[pair["nodes"] for pair in round_] for round_ in slow["search"]] == [
        [["node-0", "node-1"], ["node-2", "node-3"]],
        [["node-2", "node-0"], ["node-3", "node-1"]],
    ]
    assert all(
        point["correct"]
        for round_ in slow["search"]
        for pair in round_
        for points in pair["collectives"].values()
        for point in points
    )
    lines = fabric.judge_fabric(slow, floor_gbps=FLOOR_GBPS, expected_network=None).lines()
    assert lines[0] == "fabric across 4 nodes: FAIL"
    assert re.fullmatch(r"fabric across 4 nodes: FAIL all_gather averages [0-9.]+ GB/s .*", lines[1])
    assert len(lines) == 3 and re.fullmatch(
        r"node-2: FAIL slow: beside healthy node-3 and node-0, all_gather averages [0-9.]+ GB/s .*"
        r"bus bandwidth over 8 MiB-16 MiB, below the floor [0-9.]+ GB/s",
        lines[2],
    ), lines


RAIL_WORLD_SIZE = 3 * fabric_ranks.RANKS_PER_NODE
"""Three stand-in nodes of two ranks each."""

SLOW_RAIL_RANK = 3
"""node-1's second rank: one slow rail (NIC) of one node."""

RAIL_FLOOR_GBPS = 1.2 * max(
    fabric.bus_bandwidth_factor("all_gather", ranks)
    * statistics.mean(fabric_ranks.SIZES)
    / fabric_ranks.SLOW_DELAY_S
    / fabric.BYTES_PER_GB
    for ranks in (2, 4, RAIL_WORLD_SIZE)
)
"""Just above what a group holding the slow rank can reach (the groups of the rail run: 2, 4 and 6 ranks)."""


@pytest.fixture(scope="module")
def rail_report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """Rank 0's report of the rail run (every rank returns the same)."""
    work_dir = tmp_path_factory.mktemp("fabric-gloo-rails")
    run_ranks(work_dir, fabric_ranks.run_rail_rank, RAIL_WORLD_SIZE, SLOW_RAIL_RANK, RAIL_FLOOR_GBPS)
    return json.loads((work_dir / "rails-rank0.json").read_text())


def test_the_rails_of_the_slow_node_name_its_slow_nic(rail_report):
    assert [[pair["nodes"] for pair in round_] for round_ in rail_report["search"]] == [
        [["node-0", "node-1"]],
        [["node-0", "node-2"]],
    ]
    (rails,) = rail_report["rails"]
    assert (rails["node"], rails["partner"]) == ("node-1", "node-0")
    assert [pair["nodes"] for pair in rails["pairs"]] == [["node-1/0", "node-0/0"], ["node-1/1", "node-0/1"]]
    lines = fabric.judge_fabric(rail_report, floor_gbps=RAIL_FLOOR_GBPS, expected_network=None).lines()
    assert lines[0] == "fabric across 3 nodes: FAIL"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "fabric across 3 nodes",
        "node-1",
        "node-1 NIC of GPU 1 (rail 1)",
    ]
    assert re.fullmatch(
        r"node-1 NIC of GPU 1 \(rail 1\): FAIL slow: its rail beside node-0's GPU 1 averages [0-9.e-]+ GB/s "
        r"all_(gather|reduce) bus bandwidth, [0-9]+% of the node's median rail [0-9.e-]+ GB/s \(threshold 80%\)",
        lines[-1],
    ), lines
