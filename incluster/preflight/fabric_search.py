"""The search for the slow node when the whole group's fabric result is below the floor: which node pairs to measure,
and what their results say. Pure: node names and pass/fail outcomes in, pairs and findings out.

Schedule (`next_round()`; every round's pairs are disjoint, so one round measures all its pairs at once, each pair
the gate's 2-node shape): the nodes in pairs in rank order; a pair that passes clears both its nodes. Then every node
not cleared (both nodes of a failing pair, an odd node left out) is paired with a distinct cleared node; a node below
the floor beside a healthy partner is the slow one. Two rounds name any number of slow nodes while a pair of the first
passes; while none has passed, pairs not yet measured together are tried first, up to as many pairs as nodes.
"""

from __future__ import annotations

from dataclasses import dataclass

from incluster.preflight.verdict import Finding

Pair = tuple[str, str]
"""Two node names measured together."""


@dataclass(frozen=True)
class PairOutcome:
    """What one measured pair showed."""

    nodes: Pair
    """The pair's two nodes."""
    passed: bool
    """Every collective averaged at least the floor."""
    shortfall: str
    """Which collectives fell below the floor and by how much (empty when it passed)."""


def _new_disjoint_pairs(nodes: list[str], measured: set[frozenset[str]]) -> list[Pair]:
    """Disjoint pairs of nodes never measured together, taken greedily in node order."""
    taken: set[str] = set()
    pairs = []
    for index, first in enumerate(nodes):
        if first in taken:
            continue
        partners = [
            other for other in nodes[index + 1 :] if other not in taken and frozenset((first, other)) not in measured
        ]
        if partners:
            pairs.append((first, partners[0]))
            taken |= {first, partners[0]}
    return pairs


def cleared_nodes(nodes: list[str], outcomes: list[PairOutcome]) -> list[str]:
    """The nodes, in order, that are in at least one pair that passed."""
    passed = {node for outcome in outcomes if outcome.passed for node in outcome.nodes}
    return [node for node in nodes if node in passed]


def _decided(node: str, outcomes: list[PairOutcome], cleared: list[str]) -> bool:
    return any(
        node in outcome.nodes and not outcome.passed and _partner(outcome.nodes, node) in cleared
        for outcome in outcomes
    )


def next_round(nodes: list[str], outcomes: list[PairOutcome]) -> list[Pair]:
    """The next round's disjoint pairs, given the outcome of every pair measured so far; empty when the search is done.

    While no pair has passed: pairs of nodes not yet measured together, in node order (the first round n0+n1, n2+n3,
    ...), until as many pairs as nodes were measured. Then each node neither cleared nor yet measured beside a cleared
    node is paired with a distinct cleared node. Two nodes' only pair is the whole group, already measured.
    """
    if len(nodes) < 3:
        return []
    cleared = cleared_nodes(nodes, outcomes)
    if not cleared:
        measured = {frozenset(outcome.nodes) for outcome in outcomes}
        return _new_disjoint_pairs(nodes, measured) if len(measured) < len(nodes) else []
    pending = [node for node in nodes if node not in cleared and not _decided(node, outcomes, cleared)]
    return list(zip(pending, cleared, strict=False))


def interpret(nodes: list[str], outcomes: list[PairOutcome]) -> list[Finding]:
    """Findings of the search, given that the whole group failed: a `fail` naming each node below the floor beside a
    healthy partner, a `note` for what the pairs could not decide, in node order."""
    if len(nodes) < 3:
        return [
            Finding(
                " and ".join(nodes),
                None,
                "note",
                "with two nodes the only pair is the whole group: a third node is needed to tell which is slow",
            )
        ]
    if not outcomes:
        return [Finding("fabric", None, "note", "the pair search did not run")]
    cleared = cleared_nodes(nodes, outcomes)
    if not cleared:
        return [
            Finding(
                "fabric",
                None,
                "note",
                "every pair is below the floor: the fabric as a whole (or every node) is slow, "
                "no healthy node is left to compare with",
            )
        ]
    if len(cleared) == len(nodes):
        return [
            Finding(
                "fabric",
                None,
                "note",
                "every pair reaches the floor but the whole group does not: the limit lies between the "
                "nodes (switches, topology, placement), not in one node",
            )
        ]
    findings = []
    for node in nodes:
        if node in cleared:
            continue
        beside_healthy = [
            outcome
            for outcome in outcomes
            if node in outcome.nodes and not outcome.passed and _partner(outcome.nodes, node) in cleared
        ]
        if beside_healthy:
            partners = " and ".join(_partner(outcome.nodes, node) for outcome in beside_healthy)
            findings.append(
                Finding(node, None, "fail", f"slow: beside healthy {partners}, {beside_healthy[-1].shortfall}")
            )
        else:
            pairs = ", ".join("+".join(outcome.nodes) for outcome in outcomes if node in outcome.nodes)
            findings.append(
                Finding(
                    node,
                    None,
                    "note",
                    f"not cleared: no pair beside a healthy node was measured (pairs: {pairs or 'none'})",
                )
            )
    return findings


def slow_beside_healthy(nodes: list[str], outcomes: list[PairOutcome]) -> list[Pair]:
    """(slow node, its first healthy partner) for each node `interpret` names slow, in node order: whose rails (GPU i
    beside the partner's GPU i) are measured next to name the NIC."""
    cleared = cleared_nodes(nodes, outcomes)
    found = []
    for node in nodes:
        partners = [
            _partner(outcome.nodes, node)
            for outcome in outcomes
            if node in outcome.nodes and not outcome.passed and _partner(outcome.nodes, node) in cleared
        ]
        if node not in cleared and partners:
            found.append((node, partners[0]))
    return found


def _partner(pair: Pair, node: str) -> str:
    return pair[1] if pair[0] == node else pair[0]
