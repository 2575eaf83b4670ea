"""The search for the slow node when the whole group's fabric result is below the floor: which node pairs to measure,
and what their results say. Pure: node names and pass/fail outcomes in, pairs and findings out.

Schedule (every round's pairs are disjoint, so one round measures all its pairs at once):
1. `first_round()`: the nodes in disjoint pairs in rank order (n0+n1, n2+n3, ...), each pair the gate's 2-node shape.
   A pair that passes clears both its nodes.
2. `confirm_rounds()`: every node not cleared (both nodes of a failing pair, and an odd node left out) is paired with
   a distinct cleared node; a node below the floor beside a healthy partner is the slow one.
Two rounds name any number of slow nodes while at least one pair passes; with more suspects than cleared nodes the
second step takes several rounds.
"""

from __future__ import annotations

from dataclasses import dataclass

from jobs.preflight.verdict import Finding

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


def first_round(nodes: list[str]) -> list[Pair]:
    """Disjoint pairs of the nodes in order; with an odd count the last node waits for `confirm_rounds()`.
    Empty for fewer than three nodes: two nodes' only pair is the whole group, already measured."""
    if len(nodes) < 3:
        return []
    return [(nodes[index], nodes[index + 1]) for index in range(0, len(nodes) - 1, 2)]


def cleared_nodes(nodes: list[str], outcomes: list[PairOutcome]) -> list[str]:
    """The nodes, in order, that are in at least one pair that passed."""
    passed = {node for outcome in outcomes if outcome.passed for node in outcome.nodes}
    return [node for node in nodes if node in passed]


def confirm_rounds(nodes: list[str], first: list[PairOutcome]) -> list[list[Pair]]:
    """Rounds of disjoint pairs, each putting one node the first round did not clear beside a distinct cleared node.
    Empty when every node is cleared, or when none is (no healthy partner exists to compare with)."""
    cleared = cleared_nodes(nodes, first)
    suspects = [node for node in nodes if node not in cleared]
    if not cleared:
        return []
    return [
        list(zip(suspects[start:start + len(cleared)], cleared))
        for start in range(0, len(suspects), len(cleared))
    ]


def interpret(nodes: list[str], outcomes: list[PairOutcome]) -> list[Finding]:
    """Findings of the search, given that the whole group failed: a `fail` naming each node below the floor beside a
    healthy partner, a `note` for what the pairs could not decide, in node order."""
    if len(nodes) < 3:
        return [Finding(" and ".join(nodes), None, "note", "with two nodes the only pair is the whole group: "
                                                           "a third node is needed to tell which is slow")]
    if not outcomes:
        return [Finding("fabric", None, "note", "the pair search did not run")]
    cleared = cleared_nodes(nodes, outcomes)
    if not cleared:
        return [Finding("fabric", None, "note",
                        "every pair is below the floor: the fabric as a whole (or every node) is slow, "
                        "no healthy node is left to compare with")]
    if len(cleared) == len(nodes):
        return [Finding("fabric", None, "note",
                        "every pair reaches the floor but the whole group does not: the limit lies between the "
                        "nodes (switches, topology, placement), not in one node")]
    findings = []
    for node in nodes:
        if node in cleared:
            continue
        beside_healthy = [
            outcome for outcome in outcomes
            if node in outcome.nodes and not outcome.passed and _partner(outcome.nodes, node) in cleared
        ]
        if beside_healthy:
            partners = " and ".join(_partner(outcome.nodes, node) for outcome in beside_healthy)
            findings.append(Finding(node, None, "fail", f"slow: beside healthy {partners}, "
                                                        f"{beside_healthy[-1].shortfall}"))
        else:
            pairs = ", ".join("+".join(outcome.nodes) for outcome in outcomes if node in outcome.nodes)
            findings.append(Finding(node, None, "note", f"not cleared: no pair beside a healthy node was measured "
                                                        f"(pairs: {pairs or 'none'})"))
    return findings


def _partner(pair: Pair, node: str) -> str:
    return pair[1] if pair[0] == node else pair[0]
