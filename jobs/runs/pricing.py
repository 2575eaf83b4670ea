"""What each attempt's GPU hours cost per hour: the rungs its GPU nodes ran on, each node at its own rung's $/h.

The rungs come from the run's record: the guardian's `gpu-rungs` entry, written once per attempt when it first saw
the attempt RUNNING (incluster/record.py). An attempt without one (submitted before the guardian recorded rungs, or
while it could not reach the API server) is priced at the stack's gpu.nodes on gpu.provisioning, and said so.
Flex-start has no list price: its nodes count at the on-demand rate, the most it bills (core/prices.py
gpu_node_ceiling), and the figure says "at most". Pure: the record and the rates in, prices and lines out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from incluster.budget import rungs_of


@dataclass(frozen=True)
class AttemptPrice:
    """What one attempt's GPU nodes cost per hour, and from what."""

    attempt: int
    """The attempt's number."""
    rungs: dict[str, int]
    """Its GPU nodes per rung, in RUNGS' order."""
    hourly: float | None
    """$/h of those nodes; None when a rung among them has no price."""
    recorded: bool
    """The rungs are the guardian's record of the attempt's nodes; False: the stack's gpu.nodes on gpu.provisioning."""

    @property
    def at_most(self) -> bool:
        """Flex-start nodes are among them, counted at the on-demand rate: the figure is the most it cost."""
        return "flex-start" in self.rungs

    def text(self) -> str:
        """`1 spot + 1 on-demand, $81.64/h (recorded)`, the price left out when there is none."""
        nodes = " + ".join(f"{count} {rung}" for rung, count in self.rungs.items()) or "no GPU node"
        price = "no price" if self.hourly is None else f"{'at most ' if self.at_most else ''}${self.hourly:,.2f}/h"
        source = "the guardian's record" if self.recorded else "not recorded: gpu.nodes on gpu.provisioning"
        return f"{nodes}, {price} ({source})"


def attempt_prices(
    attempts: Iterable[int],
    record: Iterable[Mapping[str, Any]],
    node_hourly: Mapping[str, float | None],
    stack_rungs: Mapping[str, int],
    stack_hourly: float | None,
) -> tuple[AttemptPrice, ...]:
    """The price of each of `attempts`: its recorded rungs, each node at `node_hourly` of its rung; else the stack's
    `stack_rungs` (gpu.nodes on gpu.provisioning) at `stack_hourly`."""
    recorded = rungs_of(record)
    prices = []
    for number in sorted(attempts):
        rungs = recorded.get(number)
        if rungs is None:
            prices.append(AttemptPrice(number, dict(stack_rungs), stack_hourly, recorded=False))
            continue
        rates = {rung: node_hourly.get(rung) for rung in rungs}
        priced = None not in rates.values()
        hourly = sum(count * (rates[rung] or 0.0) for rung, count in rungs.items()) if priced else None
        prices.append(AttemptPrice(number, rungs, hourly, recorded=True))
    return tuple(prices)


def pricing_lines(prices: Sequence[AttemptPrice]) -> list[str]:
    """Which rungs the dollars used: one line per run of consecutive attempts priced alike, the oldest first."""
    groups: list[list[AttemptPrice]] = []
    for price in prices:
        if groups and groups[-1][-1].text() == price.text():
            groups[-1].append(price)
        else:
            groups.append([price])
    lines = []
    for group in groups:
        numbers = [price.attempt for price in group]
        if len(numbers) == 1:
            which = f"attempt {numbers[0]}"
        elif numbers == list(range(numbers[0], numbers[-1] + 1)):
            which = f"attempts {numbers[0]}-{numbers[-1]}"
        else:
            which = "attempts " + ", ".join(map(str, numbers))
        lines.append(f"{which}: {group[0].text()}")
    if any(price.at_most for price in prices):
        lines.append("flex-start at the on-demand rate, the most it bills (up to the catalog's discount below it)")
    return lines
