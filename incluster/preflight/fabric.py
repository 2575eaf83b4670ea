"""The fabric preflight's figures and verdict: bus bandwidth per collective, the sweep's average against the floor,
the network NCCL chose, and the slow node the pair search named.

Pure: plain data in (a report of `fabric_measure.measure_fabric()`), plain data out; imports without torch.
Bandwidths are in GB/s of 10^9 bytes, as nccl-tests prints them. Every finding is one line naming what it is about,
`gke-pool-1a2b: FAIL in a pair with a healthy node, all_gather averages 41.2 GB/s ...`, in verdict.Finding's form.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from typing import Any

from core.facts.fabric import (
    FABRIC_EXPECTED_NETWORK,
    FABRIC_FLOOR_BUSBW_GBPS,
    FABRIC_NIC_MIN_SHARE,
    FABRIC_SWEEP_MAX_BYTES,
    FABRIC_SWEEP_MIN_BYTES,
)
from incluster.preflight import fabric_search
from incluster.preflight.verdict import Finding

COLLECTIVES = ("all_gather", "all_reduce")
"""The collectives the preflight sweeps: all_gather (the gate's) and all_reduce (the bulk of training traffic)."""

BYTES_PER_GB = 1e9
"""nccl-tests divides by 1.0E9: its GB/s are decimal gigabytes (src/*.cu GetBw)."""

_USING_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")

_NET_DEVICES = re.compile(r"NCCL INFO NET/(\S+) : Using ((?:\[\d+\]\S+ ?)+)")
"""The devices a net plugin offers, "NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:..." (NCCL
src/transport/net_ib.cc ncclIbInit, which the gIB plugin's init follows; the Socket plugin prints "[0]eth0:<addr>")."""

_CHANNEL_NET = re.compile(
    r"NCCL INFO Channel \d+/\d+ : (\d+)\[(\d+)\] -> (\d+)\[(\d+)\] \[(?:send|receive)\] via NET/([^/\s]+)/(\d+)"
)
"""A channel's connection through the network: "Channel 00/0 : 0[0] -> 8[0] [send] via NET/gIB/0/GDRDMA" (NCCL
src/transport/net.cc sendSetup and recvSetup: rank[nvmlDev] -> peer[nvmlDev], then NET/<plugin>/<netDev>, and
"(<proxyRank>)" after it when PXN sends through another GPU's NIC)."""


def bus_bandwidth_factor(collective: str, ranks: int) -> float:
    """nccl-tests' correction from algorithm to bus bandwidth for `ranks` ranks (doc/PERFORMANCE.md, "Summary"):
    all_reduce 2(n-1)/n, all_gather (n-1)/n."""
    if ranks < 2:
        raise ValueError(f"a collective over {ranks} rank has no bus bandwidth")
    if collective == "all_reduce":
        return 2 * (ranks - 1) / ranks
    if collective == "all_gather":
        return (ranks - 1) / ranks
    raise ValueError(f"no bus bandwidth formula for {collective!r}; known: {', '.join(COLLECTIVES)}")


def bandwidths(collective: str, size_bytes: int, seconds: float, ranks: int) -> tuple[float, float]:
    """(algorithm, bus) bandwidth in GB/s of one `collective` moving `size_bytes` in `seconds` over `ranks` ranks.

    `size_bytes` is the whole buffer: for all_gather the gathered output (each rank sends size/n), as nccl-tests
    counts it; algbw = size / time (PERFORMANCE.md "Algorithm bandwidth").
    """
    algbw = size_bytes / seconds / BYTES_PER_GB
    return algbw, algbw * bus_bandwidth_factor(collective, ranks)


def sweep_sizes(min_bytes: int = FABRIC_SWEEP_MIN_BYTES, max_bytes: int = FABRIC_SWEEP_MAX_BYTES) -> list[int]:
    """Message sizes of the sweep: `min_bytes` doubling up to `max_bytes` (nccl-tests `-b MIN -e MAX -f 2`)."""
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"sweep from {min_bytes} to {max_bytes} bytes is empty")
    sizes = []
    size = min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= 2
    return sizes


def average_bus_bandwidth(points: list[dict[str, Any]]) -> float:
    """Arithmetic mean of the bus bandwidth over the sweep's sizes: nccl-tests' `# Avg bus bandwidth`, the figure
    the gate compares (common.cu adds each printed busbw to bw[0] and divides by their count)."""
    if not points:
        raise ValueError("an empty sweep has no average")
    return sum(point["busbw_gbps"] for point in points) / len(points)


def group_averages(group: dict[str, Any]) -> dict[str, float]:
    """Collective -> average bus bandwidth of one measured group (a `measure_fabric()` group result)."""
    return {collective: average_bus_bandwidth(points) for collective, points in group["collectives"].items()}


def group_passes(group: dict[str, Any], floor_gbps: float) -> bool:
    """Every collective of the measured group averages at least `floor_gbps` bus bandwidth."""
    return all(average >= floor_gbps for average in group_averages(group).values())


def networks_in_log(text: str) -> list[str]:
    """The networks NCCL says it uses, one per communicator it created ("NCCL INFO Using network gIB"), in order."""
    return _USING_NETWORK.findall(text)


def net_devices_in_log(text: str) -> list[str]:
    """The devices the net plugin NCCL chose offers, by index ("mlx5_0:1/RoCE" as `mlx5_0`), from its last
    "NET/<plugin> : Using [i]<device>..." line; empty when none was logged."""
    found = _NET_DEVICES.findall(text)
    if not found:
        return []
    entries = re.findall(r"\[(\d+)\]([^\s:;]+)", found[-1][1])
    return [name for _, name in sorted(entries, key=lambda entry: int(entry[0]))]


def channel_net_devices(text: str) -> dict[int, list[int]]:
    """GPU (nvidia-smi index, NCCL's nvmlDev) -> the net devices its channels use through the network, in order."""
    used: dict[int, list[int]] = {}
    for _rank, gpu, _peer, _peer_gpu, _plugin, device in _CHANNEL_NET.findall(text):
        devices = used.setdefault(int(gpu), [])
        if int(device) not in devices:
            devices.append(int(device))
    return dict(sorted(used.items()))


def nic_label(report: dict[str, Any], node: str, local_rank: int) -> str:
    """How a finding names the NIC of `node`'s `local_rank`-th GPU: the net devices NCCL's log shows its channels
    use (index and device name), else the GPU's own rail."""
    nics = (report.get("nics") or {}).get(node) or {}
    devices = nics.get("devices") or []
    used = (nics.get("rank_devices") or {}).get(str(local_rank)) or []
    if not used:
        return f"of GPU {local_rank} (rail {local_rank})"
    named = [f"{index} ({devices[index]})" if index < len(devices) else str(index) for index in used]
    return f"of GPU {local_rank} (NCCL net device {', '.join(named)})"


def _rail_findings(report: dict[str, Any], min_share: float) -> list[Finding]:
    """One finding per NIC of a slow node whose rail falls below `min_share` of the node's median rail, in the
    collective where it falls furthest."""
    findings = []
    for entry in report.get("rails") or []:
        node, partner = entry["node"], entry["partner"]
        averages = [group_averages(pair) for pair in entry["pairs"]]
        medians = {collective: statistics.median(rail[collective] for rail in averages) for collective in averages[0]}
        for local_rank, rail in enumerate(averages):
            collective = min(rail, key=lambda name: rail[name] / medians[name])
            share = rail[collective] / medians[collective]
            if share < min_share:
                findings.append(
                    Finding(
                        f"{node} NIC {nic_label(report, node, local_rank)}",
                        None,
                        "fail",
                        f"slow: its rail beside {partner}'s GPU {local_rank} averages {rail[collective]:.3g} GB/s "
                        f"{collective} bus bandwidth, {share:.0%} of the node's median rail "
                        f"{medians[collective]:.3g} GB/s (threshold {min_share:.0%})",
                    )
                )
    return findings


def _device_count_findings(report: dict[str, Any]) -> list[Finding]:
    nics = report.get("nics") or {}
    counts = {node: len(nics[node].get("devices") or []) for node in report["nodes"] if node in nics}
    most = max(counts.values(), default=0)
    return [
        Finding(
            node, None, "fail", f"NCCL's net plugin lists {count} devices, the other nodes {most}: a NIC is missing"
        )
        for node, count in counts.items()
        if count < most
    ]


def describe_shortfall(group: dict[str, Any], floor_gbps: float) -> str:
    """Which collectives of a measured group average below the floor, as one clause."""
    sizes = [point["size_bytes"] for point in next(iter(group["collectives"].values()))]
    below = [
        f"{collective} averages {average:.3g} GB/s"
        for collective, average in group_averages(group).items()
        if average < floor_gbps
    ]
    return (
        f"{' and '.join(below)} bus bandwidth over {_bytes(min(sizes))}-{_bytes(max(sizes))}, "
        f"below the floor {floor_gbps:g} GB/s"
    )


def _bytes(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and size % (1 << shift) == 0:
            return f"{size >> shift} {unit}"
    return f"{size} B"


@dataclass(frozen=True)
class FabricVerdict:
    """Pass/fail of the fabric across a run's GPU nodes, with the findings behind it."""

    nodes: list[str]
    """The measured nodes, in rank order."""
    findings: list[Finding] = field(default_factory=list)
    """Every finding: the transport, the whole group, then what the pair search named."""

    @property
    def passed(self) -> bool:
        """The fabric passes: NCCL used the expected network and no collective fell below the floor."""
        return not any(finding.severity == "fail" for finding in self.findings)

    def lines(self) -> list[str]:
        """A summary line, then one line per finding."""
        summary = f"fabric across {len(self.nodes)} nodes: {'PASS' if self.passed else 'FAIL'}"
        return [summary, *(finding.line() for finding in self.findings)]


def _transport_findings(report: dict[str, Any], expected_network: str) -> list[Finding]:
    networks = report.get("networks")
    if networks is None:
        return [
            Finding(
                "fabric",
                None,
                "fail",
                f"NCCL's log was not read (backend {report.get('backend')}), so "
                f"the {expected_network} network is unproven",
            )
        ]
    findings = []
    for node in report["nodes"]:
        used = networks.get(node) or []
        others = sorted(set(used) - {expected_network})
        if not used:
            findings.append(
                Finding(
                    node,
                    None,
                    "fail",
                    "NCCL's log names no network ('Using network ...' at "
                    f"NCCL_DEBUG=INFO), so {expected_network} is unproven",
                )
            )
        elif others:
            fallback = " (NCCL fell back to TCP sockets)" if "Socket" in others else ""
            findings.append(
                Finding(node, None, "fail", f"NCCL used network {', '.join(others)}, not {expected_network}{fallback}")
            )
    return findings


def pair_outcome(pair: dict[str, Any], floor_gbps: float) -> fabric_search.PairOutcome:
    """What a measured pair (a `measure_fabric()` search entry) showed against `floor_gbps`."""
    passed = group_passes(pair, floor_gbps)
    return fabric_search.PairOutcome(
        nodes=(pair["nodes"][0], pair["nodes"][1]),
        passed=passed,
        shortfall="" if passed else describe_shortfall(pair, floor_gbps),
    )


def judge_fabric(
    report: dict[str, Any],
    floor_gbps: float = FABRIC_FLOOR_BUSBW_GBPS,
    expected_network: str | None = FABRIC_EXPECTED_NETWORK,
    nic_min_share: float = FABRIC_NIC_MIN_SHARE,
) -> FabricVerdict:
    """Judge a `measure_fabric()` report: the network NCCL used on every node (unless `expected_network` is None,
    for a backend without NCCL) and the devices its net plugin lists, each collective's sweep average against
    `floor_gbps`, the pair search, and the rails of each slow node (a NIC below `nic_min_share` of its node's
    median rail)."""
    nodes = report["nodes"]
    findings = _transport_findings(report, expected_network) if expected_network else []
    group = report["group"]
    wrong = [
        f"{collective} of {_bytes(point['size_bytes'])}"
        for collective, points in group["collectives"].items()
        for point in points
        if not point["correct"]
    ]
    if wrong:
        findings.append(
            Finding(f"fabric across {len(nodes)} nodes", None, "fail", f"wrong data received: {', '.join(wrong)}")
        )
    findings.extend(_device_count_findings(report))
    if not group_passes(group, floor_gbps):
        findings.append(
            Finding(f"fabric across {len(nodes)} nodes", None, "fail", describe_shortfall(group, floor_gbps))
        )
        outcomes = [pair_outcome(pair, floor_gbps) for round_ in report.get("search", []) for pair in round_]
        findings.extend(fabric_search.interpret(nodes, outcomes))
        findings.extend(_rail_findings(report, nic_min_share))
    return FabricVerdict(nodes=nodes, findings=findings)
