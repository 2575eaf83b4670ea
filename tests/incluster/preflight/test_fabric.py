"""The fabric preflight's pure parts: bus bandwidth per collective, the sweep and its average, the floor verdict,
the network NCCL chose, and the pair search's schedule and findings."""

from __future__ import annotations

import subprocess
import sys

import pytest

from core.facts.fabric import FABRIC_FLOOR_BUSBW_GBPS
from incluster.preflight import fabric, fabric_search
from incluster.preflight.fabric_search import PairOutcome
from tests.incluster.preflight.conftest import recorded

GIB_LOG = """\
vm-0:606:642 [6] NCCL INFO NET/gIB : Initializing gIB v1.0.5
vm-0:606:642 [6] NCCL INFO Using network gIB
"""
"""The two lines Google names as the proof that NCCL/gIB is enabled (DOC-NCCL-VM, "Enable NCCL/gIB")."""

SOCKET_LOG = """\
vm-1:611:650 [2] NCCL INFO NET/IB : No device found.
vm-1:611:650 [2] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.3<0>
vm-1:611:650 [2] NCCL INFO Using network Socket
"""
"""NCCL without an RDMA network: its core falls back to TCP sockets and says so at init."""


def group(nodes: list[str], busbw: dict[str, float], ranks: int = 16, correct: bool = True) -> dict:
    """A measured group whose every size reached `busbw[collective]` GB/s (the shape measure_fabric() returns)."""
    return {
        "nodes": nodes,
        "ranks": ranks,
        "collectives": {
            collective: [
                {"size_bytes": size, "seconds": 1.0, "algbw_gbps": value, "busbw_gbps": value, "correct": correct}
                for size in fabric.sweep_sizes()
            ]
            for collective, value in busbw.items()
        },
    }


def report(
    nodes: list[str],
    busbw: dict[str, float],
    networks: dict | None = None,
    search: list | None = None,
    correct: bool = True,
) -> dict:
    """A fabric report over `nodes` with the whole group at `busbw`."""
    return {
        "nodes": nodes,
        "backend": "nccl",
        "group": group(nodes, busbw, ranks=8 * len(nodes), correct=correct),
        "search": search or [],
        "networks": {node: ["gIB"] for node in nodes} if networks is None else networks,
    }


HEALTHY = {"all_gather": 180.0, "all_reduce": 240.0}
"""Bus bandwidth averages above the 100 GB/s floor."""


def test_bus_bandwidth_is_algorithm_bandwidth_times_the_collectives_factor():
    assert fabric.bus_bandwidth_factor("all_reduce", 2) == 1.0
    assert fabric.bus_bandwidth_factor("all_reduce", 16) == 2 * 15 / 16
    assert fabric.bus_bandwidth_factor("all_gather", 2) == 0.5
    assert fabric.bus_bandwidth_factor("all_gather", 16) == 15 / 16
    assert fabric.bandwidths("all_reduce", 8 << 30, 0.02, 16) == pytest.approx((429.4967296, 805.30636800))


def test_the_figures_match_what_nccl_tests_printed_on_two_a4_nodes():
    # DOC-NCCL-VM: all_gather_perf on 2 x A4 (16 ranks), 8589934592 B in 21434 us: algbw 400.77, busbw 375.72
    # (the time is printed rounded to the microsecond, hence the tolerance).
    assert fabric.bandwidths("all_gather", 8589934592, 21434e-6, 16) == pytest.approx((400.77, 375.72), abs=0.02)


def test_a_collective_without_a_formula_or_with_one_rank_is_refused():
    with pytest.raises(ValueError, match="no bus bandwidth formula for 'broadcast'"):
        fabric.bus_bandwidth_factor("broadcast", 16)
    with pytest.raises(ValueError, match="over 1 rank has no bus bandwidth"):
        fabric.bus_bandwidth_factor("all_gather", 1)


def test_the_default_sweep_is_the_gates_1_kib_to_8_gib_doubling():
    sizes = fabric.sweep_sizes()
    assert (sizes[0], sizes[-1], len(sizes)) == (1024, 8 << 30, 24)
    assert all(larger == 2 * smaller for smaller, larger in zip(sizes, sizes[1:], strict=False))
    assert fabric.sweep_sizes(4096, 16384) == [4096, 8192, 16384]


def test_an_empty_sweep_is_refused():
    with pytest.raises(ValueError, match="sweep from 4096 to 1024 bytes is empty"):
        fabric.sweep_sizes(4096, 1024)


def test_the_sweep_average_is_the_mean_bus_bandwidth_over_its_sizes():
    points = [{"busbw_gbps": value} for value in (0.06, 8.39, 375.72, 16.55)]
    assert fabric.average_bus_bandwidth(points) == pytest.approx(100.18)
    with pytest.raises(ValueError, match="empty sweep"):
        fabric.average_bus_bandwidth([])


def test_the_floor_is_the_gates_100_gb_per_s():
    assert FABRIC_FLOOR_BUSBW_GBPS == 100.0
    assert fabric.group_passes(group(["a", "b"], {"all_gather": 100.0, "all_reduce": 250.0}), 100.0)
    assert not fabric.group_passes(group(["a", "b"], {"all_gather": 99.9, "all_reduce": 250.0}), 100.0)


def test_the_network_nccl_names_at_init_is_read_from_its_log():
    assert fabric.networks_in_log(GIB_LOG) == ["gIB"]
    assert fabric.networks_in_log(SOCKET_LOG) == ["Socket"]
    assert fabric.networks_in_log("NCCL INFO NET/gIB : Initializing gIB v1.0.5\n") == []


def test_a_real_h200_without_rdma_logged_its_fallback_to_sockets_and_fails():
    # NCCL 2.28.9 on a one-GPU H200 with no RDMA NIC (benchmarks/fabric_nccl_log_device.py, 2026-12-01).
    used = fabric.networks_in_log(recorded("h200-nccl-socket.log"))
    assert used == ["Socket"]
    verdict = fabric.judge_fabric(report(["a", "b"], HEALTHY, networks={"a": ["gIB"], "b": used}))
    assert verdict.lines()[1:] == ["b: FAIL NCCL used network Socket, not gIB (NCCL fell back to TCP sockets)"]


def test_a_healthy_fabric_over_gib_passes():
    verdict = fabric.judge_fabric(report(["a", "b"], HEALTHY))
    assert verdict.passed and verdict.lines() == ["fabric across 2 nodes: PASS"]


def test_a_fabric_that_fell_back_to_sockets_never_passes_however_fast():
    verdict = fabric.judge_fabric(report(["a", "b"], HEALTHY, networks={"a": ["gIB"], "b": ["Socket"]}))
    assert not verdict.passed
    assert verdict.lines() == [
        "fabric across 2 nodes: FAIL",
        "b: FAIL NCCL used network Socket, not gIB (NCCL fell back to TCP sockets)",
    ]


def test_a_node_whose_log_names_no_network_is_unproven():
    verdict = fabric.judge_fabric(report(["a", "b"], HEALTHY, networks={"a": ["gIB"], "b": []}))
    assert verdict.lines()[1:] == [
        "b: FAIL NCCL's log names no network ('Using network ...' at NCCL_DEBUG=INFO), so gIB is unproven"
    ]


def test_a_report_without_nccl_logs_passes_only_when_no_network_is_expected():
    gloo = {**report(["a", "b"], HEALTHY), "backend": "gloo", "networks": None}
    assert fabric.judge_fabric(gloo).lines()[1:] == [
        "fabric: FAIL NCCL's log was not read (backend gloo), so the gIB network is unproven"
    ]
    assert fabric.judge_fabric(gloo, expected_network=None).passed


def test_wrong_data_fails_the_fabric():
    verdict = fabric.judge_fabric(report(["a", "b"], HEALTHY, correct=False))
    assert not verdict.passed and verdict.lines()[1].startswith(
        "fabric across 2 nodes: FAIL wrong data received: all_gather of 1 KiB, all_gather of 2 KiB"
    )


def test_a_slow_two_node_fabric_fails_and_says_a_third_node_is_needed():
    verdict = fabric.judge_fabric(report(["a", "b"], {"all_gather": 41.25, "all_reduce": 240.0}))
    assert verdict.lines() == [
        "fabric across 2 nodes: FAIL",
        "fabric across 2 nodes: FAIL all_gather averages 41.2 GB/s bus bandwidth over 1 KiB-8 GiB, "
        "below the floor 100 GB/s",
        "a and b: note with two nodes the only pair is the whole group: a third node is needed to tell which is slow",
    ]


def test_the_first_round_pairs_the_nodes_in_order():
    assert fabric_search.next_round(["a", "b", "c", "d"], []) == [("a", "b"), ("c", "d")]
    assert fabric_search.next_round(["a", "b", "c", "d", "e"], []) == [("a", "b"), ("c", "d")]


def test_two_nodes_have_no_pair_to_search():
    assert fabric_search.next_round(["a", "b"], []) == []


def test_each_uncleared_node_is_paired_with_a_distinct_cleared_one_until_all_are_decided():
    nodes = ["a", "b", "c", "d", "e"]
    outcomes = [PairOutcome(("a", "b"), True, ""), PairOutcome(("c", "d"), False, "slow")]
    assert fabric_search.next_round(nodes, outcomes) == [("c", "a"), ("d", "b")]
    outcomes += [PairOutcome(("c", "a"), False, "slow"), PairOutcome(("d", "b"), True, "")]
    assert fabric_search.next_round(nodes, outcomes) == [("e", "a")]
    outcomes += [PairOutcome(("e", "a"), True, "")]
    assert fabric_search.next_round(nodes, outcomes) == []


def test_when_every_node_is_cleared_the_search_ends():
    outcomes = [PairOutcome(("a", "b"), True, ""), PairOutcome(("c", "d"), True, "")]
    assert fabric_search.next_round(["a", "b", "c", "d"], outcomes) == []


def test_while_no_pair_passes_new_pairs_are_tried_up_to_as_many_as_nodes():
    nodes = ["a", "b", "c", "d"]
    outcomes = [PairOutcome(("a", "b"), False, "x"), PairOutcome(("c", "d"), False, "x")]
    assert fabric_search.next_round(nodes, outcomes) == [("a", "c"), ("b", "d")]
    outcomes += [PairOutcome(("a", "c"), False, "x"), PairOutcome(("b", "d"), False, "x")]
    assert fabric_search.next_round(nodes, outcomes) == []


def _search(nodes: list[str], slow: set[str]) -> tuple[int, list[str]]:
    """Run the schedule against nodes of which `slow` are slow: (rounds taken, the nodes the findings fail)."""
    outcomes: list[PairOutcome] = []
    rounds = 0
    while pairs := fabric_search.next_round(nodes, outcomes):
        rounds += 1
        outcomes += [PairOutcome(pair, not slow & set(pair), "below") for pair in pairs]
    return rounds, [finding.node for finding in fabric_search.interpret(nodes, outcomes) if finding.severity == "fail"]


@pytest.mark.parametrize("count", [3, 4, 5, 8])
def test_any_one_slow_node_is_named_whichever_it_is(count):
    nodes = [f"n{index}" for index in range(count)]
    for slow in nodes:
        rounds, named = _search(nodes, {slow})
        assert named == [slow] and rounds <= 3, (slow, rounds)


def test_two_slow_nodes_are_both_named_in_two_rounds():
    nodes = [f"n{index}" for index in range(8)]
    assert _search(nodes, {"n2", "n5"}) == (2, ["n2", "n5"])
    assert _search(nodes, {"n2", "n3"}) == (2, ["n2", "n3"])


def test_the_search_names_the_slow_node_in_one_line():
    slow = {"all_gather": 38.5, "all_reduce": 240.0}
    search = [
        [group(["n0", "n1"], HEALTHY), group(["n2", "n3"], slow)],
        [group(["n2", "n0"], slow), group(["n3", "n1"], HEALTHY)],
    ]
    verdict = fabric.judge_fabric(report(["n0", "n1", "n2", "n3"], slow, search=search))
    assert verdict.lines() == [
        "fabric across 4 nodes: FAIL",
        "fabric across 4 nodes: FAIL all_gather averages 38.5 GB/s bus bandwidth over 1 KiB-8 GiB, "
        "below the floor 100 GB/s",
        "n2: FAIL slow: beside healthy n3 and n0, all_gather averages 38.5 GB/s bus bandwidth over 1 KiB-8 GiB, "
        "below the floor 100 GB/s",
    ]


def test_two_slow_nodes_of_one_pair_are_both_named():
    outcomes = [
        PairOutcome(("n0", "n1"), True, ""),
        PairOutcome(("n2", "n3"), False, "x"),
        PairOutcome(("n2", "n0"), False, "all_gather 40"),
        PairOutcome(("n3", "n1"), False, "all_gather 45"),
    ]
    assert [finding.line() for finding in fabric_search.interpret(["n0", "n1", "n2", "n3"], outcomes)] == [
        "n2: FAIL slow: beside healthy n0, all_gather 40",
        "n3: FAIL slow: beside healthy n1, all_gather 45",
    ]


def test_when_every_pair_fails_the_fabric_itself_is_suspect():
    outcomes = [PairOutcome(("n0", "n1"), False, "x"), PairOutcome(("n2", "n3"), False, "x")]
    (finding,) = fabric_search.interpret(["n0", "n1", "n2", "n3"], outcomes)
    assert finding.line() == (
        "fabric: note every pair is below the floor: the fabric as a whole (or every node) is "
        "slow, no healthy node is left to compare with"
    )


def test_when_every_pair_passes_the_limit_lies_between_the_nodes():
    outcomes = [PairOutcome(("n0", "n1"), True, ""), PairOutcome(("n2", "n3"), True, "")]
    (finding,) = fabric_search.interpret(["n0", "n1", "n2", "n3"], outcomes)
    assert finding.severity == "note" and "every pair reaches the floor but the whole group does not" in finding.line()


def test_a_partner_cleared_later_makes_its_failing_pair_evidence():
    outcomes = [
        PairOutcome(("n0", "n1"), True, ""),
        PairOutcome(("n2", "n3"), False, "all_gather 40"),
        PairOutcome(("n2", "n0"), True, ""),
    ]
    assert [finding.line() for finding in fabric_search.interpret(["n0", "n1", "n2", "n3"], outcomes)] == [
        "n3: FAIL slow: beside healthy n2, all_gather 40",
    ]


def test_a_suspect_never_measured_beside_a_healthy_node_is_not_named_slow():
    outcomes = [PairOutcome(("n0", "n1"), True, ""), PairOutcome(("n2", "n3"), False, "x")]
    assert [finding.line() for finding in fabric_search.interpret(["n0", "n1", "n2", "n3"], outcomes)] == [
        "n2: note not cleared: no pair beside a healthy node was measured (pairs: n2+n3)",
        "n3: note not cleared: no pair beside a healthy node was measured (pairs: n2+n3)",
    ]


def test_the_fabric_modules_import_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None; "
        "import incluster.preflight.fabric, incluster.preflight.fabric_search, incluster.preflight.fabric_measure; "
        "print('imported')"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert (result.returncode, result.stdout, result.stderr) == (0, "imported\n", "")


def test_a_measured_pair_becomes_an_outcome_against_the_floor():
    assert fabric.pair_outcome(group(["a", "b"], HEALTHY), 100.0) == PairOutcome(("a", "b"), True, "")
    assert fabric.pair_outcome(group(["a", "c"], {"all_gather": 180.0, "all_reduce": 62.5}), 100.0) == PairOutcome(
        ("a", "c"), False, "all_reduce averages 62.5 GB/s bus bandwidth over 1 KiB-8 GiB, below the floor 100 GB/s"
    )


# --- per-NIC findings ---------------------------------------------------------------------------------------------

IB_STYLE_LOG = """\
n2:700:720 [3] NCCL INFO NET/gIB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE [2]mlx5_2:1/RoCE [3]mlx5_3:1/RoCE ; OOB eth0:10.0.0.4<0>
n2:700:720 [3] NCCL INFO Channel 00/0 : 19[3] -> 3[3] [send] via NET/gIB/3/GDRDMA
n2:700:720 [3] NCCL INFO Channel 01/0 : 3[3] -> 19[3] [receive] via NET/gIB/3/GDRDMA(PCI)/Shared
n2:700:720 [3] NCCL INFO Channel 02/0 : 19[3] -> 3[3] [send] via NET/gIB/2(18)/GDRDMA
"""
"""NCCL's device list and channel lines in the formats of its source (net_ib.cc ncclIbInit's "NET/<plugin> : Using
[i]<dev>:<port>/<link> ; OOB ..."; net.cc's "Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/%s/%d...", the
"(18)" a PXN proxy rank): written for this test, not recorded on a GPU node."""


def test_the_net_plugins_devices_and_each_gpus_channel_devices_are_read_from_the_log():
    assert fabric.net_devices_in_log(IB_STYLE_LOG) == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert fabric.channel_net_devices(IB_STYLE_LOG) == {3: [3, 2]}
    assert fabric.net_devices_in_log(recorded("h200-nccl-socket.log")) == ["eth0"]
    assert fabric.net_devices_in_log("NCCL INFO NET/IB : Using [RO]; OOB eth0:192.0.2.2<0>") == []
    assert fabric.channel_net_devices(recorded("h200-nccl-socket.log")) == {}


def rails_report(slow_rail: int | None, nics: dict | None = None) -> dict:
    """Three nodes of two GPUs, n1 slow beside healthy n0 and n2; its rails measured beside n0, `slow_rail` slow."""
    slow = {"all_gather": 38.5, "all_reduce": 240.0}
    search = [[group(["n0", "n1"], slow, ranks=4)], [group(["n0", "n2"], HEALTHY, ranks=4)]]
    rails = [
        group(
            [f"n1/{index}", f"n0/{index}"], {"all_gather": 12.0 if index == slow_rail else 45.0, "all_reduce": 45.0}, 2
        )
        for index in range(2)
    ]
    made = report(["n0", "n1", "n2"], slow, search=search)
    return {**made, "rails": [{"node": "n1", "partner": "n0", "pairs": rails}], "nics": nics}


def test_a_slow_nodes_slow_rail_names_its_nic_in_one_line_with_the_node():
    nics = {
        node: {"devices": ["mlx5_0", "mlx5_1"], "rank_devices": {"0": [0], "1": [1]}} for node in ("n0", "n1", "n2")
    }
    lines = fabric.judge_fabric(rails_report(1, nics)).lines()
    assert lines[-2:] == [
        "n1: FAIL slow: beside healthy n0, all_gather averages 38.5 GB/s bus bandwidth over 1 KiB-8 GiB, "
        "below the floor 100 GB/s",
        "n1 NIC of GPU 1 (NCCL net device 1 (mlx5_1)): FAIL slow: its rail beside n0's GPU 1 averages 12 GB/s "
        "all_gather bus bandwidth, 42% of the node's median rail 28.5 GB/s (threshold 80%)",
    ]
    without_logs = fabric.judge_fabric(rails_report(1)).lines()
    assert without_logs[-1].startswith("n1 NIC of GPU 1 (rail 1): FAIL slow: its rail beside n0's GPU 1 averages 12")


def test_rails_that_measure_alike_name_no_nic():
    lines = fabric.judge_fabric(rails_report(None)).lines()
    assert not any(" NIC " in line for line in lines)
    assert lines[-1].startswith("n1: FAIL slow: beside healthy n0")


def test_a_node_whose_net_plugin_lists_fewer_devices_than_the_others_fails():
    nics = {node: {"devices": ["mlx5_0", "mlx5_1"], "rank_devices": {}} for node in ("n0", "n1")}
    nics["n1"]["devices"] = ["mlx5_0"]
    verdict = fabric.judge_fabric({**report(["n0", "n1"], HEALTHY), "nics": nics})
    assert verdict.lines() == [
        "fabric across 2 nodes: FAIL",
        "n1: FAIL NCCL's net plugin lists 1 devices, the other nodes 2: a NIC is missing",
    ]


def test_the_slow_node_and_its_healthy_partner_are_what_the_rails_are_measured_beside():
    outcomes = [
        PairOutcome(("n0", "n1"), False, "slow"),
        PairOutcome(("n2", "n3"), True, ""),
        PairOutcome(("n0", "n2"), True, ""),
        PairOutcome(("n1", "n3"), False, "slow"),
    ]
    assert fabric_search.slow_beside_healthy(["n0", "n1", "n2", "n3"], outcomes) == [("n1", "n0")]
    assert fabric_search.slow_beside_healthy(["n0", "n1", "n2"], outcomes[:1]) == []
