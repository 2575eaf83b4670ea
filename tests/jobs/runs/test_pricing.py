"""Each attempt's GPU $/h by the rungs its nodes ran on (the guardian's gpu-rungs entries), the stack's price for an
attempt without one, and the lines that say which; figures worked out by hand in the comments."""

from __future__ import annotations

import pytest

from incluster.budget import rungs_of
from incluster.record import parse
from jobs.runs.goodput import measure
from jobs.runs.observed import RayAttempt, attempt_lines, goodput_attempts, run_steps
from jobs.runs.pricing import AttemptPrice, attempt_prices, pricing_lines
from tests.jobs.runs.test_observed import FILES, RAY, T0, view

RATES = {"reservation": 60.0, "flex-start": 90.0, "spot": 40.0, "on-demand": 90.0}
"""$/h of one node per rung (flex-start at the on-demand rate, its most)."""


def rungs_entry(attempt: int, **rungs: int) -> dict:
    return {"attempt": attempt, "event": "gpu-rungs", "details": {"rungs": dict(rungs), "otherNodes": 0}}


def test_a_recorded_attempt_is_priced_node_by_node_and_another_at_the_stacks_price():
    record = [rungs_entry(2, spot=1, **{"on-demand": 1}), rungs_entry(2, spot=2)]  # the first entry counts
    prices = attempt_prices([1, 2], record, RATES, {"spot": 2}, 80.0)
    assert prices == (
        AttemptPrice(1, {"spot": 2}, 80.0, recorded=False),
        AttemptPrice(2, {"spot": 1, "on-demand": 1}, 130.0, recorded=True),  # 40 + 90
    )
    assert pricing_lines(prices) == [
        "attempt 1: 2 spot, $80.00/h (not recorded: gpu.nodes on gpu.provisioning)",
        "attempt 2: 1 spot + 1 on-demand, $130.00/h (the guardian's record)",
    ]


def test_flex_start_is_at_most_the_on_demand_rate_and_a_rung_without_a_price_has_none():
    flex = attempt_prices([1], [rungs_entry(1, spot=1, **{"flex-start": 1})], RATES, {"spot": 2}, 80.0)
    assert flex[0].rungs == {"flex-start": 1, "spot": 1}  # RUNGS' order
    assert (flex[0].hourly, flex[0].at_most) == (130.0, True)
    assert pricing_lines(flex) == [
        "attempt 1: 1 flex-start + 1 spot, at most $130.00/h (the guardian's record)",
        "flex-start at the on-demand rate, the most it bills (up to the catalog's discount below it)",
    ]
    unpriced = attempt_prices([1], [rungs_entry(1, reservation=2)], {**RATES, "reservation": None}, {"spot": 2}, 80.0)
    assert unpriced[0].hourly is None and unpriced[0].text() == "2 reservation, no price (the guardian's record)"


def test_attempts_priced_alike_share_a_line_and_a_malformed_entry_is_no_record():
    malformed = {"attempt": 5, "event": "gpu-rungs", "details": {"rungs": "spot"}}
    record = [rungs_entry(3, spot=1), malformed, rungs_entry(4, gpu=2), rungs_entry(6, spot=0)]
    assert rungs_of(record) == {3: {"spot": 1}}
    prices = attempt_prices([1, 2, 4], record, RATES, {"spot": 1}, 40.0)
    assert pricing_lines(prices) == ["attempts 1, 2, 4: 1 spot, $40.00/h (not recorded: gpu.nodes on gpu.provisioning)"]
    assert pricing_lines(attempt_prices([1, 2, 3], record, RATES, {"spot": 1}, 40.0)) == [
        "attempts 1-2: 1 spot, $40.00/h (not recorded: gpu.nodes on gpu.provisioning)",
        "attempt 3: 1 spot, $40.00/h (the guardian's record)",
    ]


def test_each_attempts_hours_and_losses_are_at_its_own_price():
    """Attempt 1 (60..950 s, $100/h) lost 250 s after checkpoint 2; attempt 2 (1200..1800 s, $300/h) restarted for
    300 s: dollars 100 * 890 / 3600 + 300 * 600 / 3600; lost 100 * 250 / 3600 + 300 * 300 / 3600."""
    lines = attempt_lines(FILES, RAY)
    attempts = goodput_attempts(RAY, parse(FILES["attempts.jsonl"]), lines)  # attempt 2 resumed from step 2
    steps = run_steps(lines, "verl")
    figures = measure(attempts, steps, [2], 100.0, T0 + 5000, hourly_of={2: 300.0})
    assert figures.dollars == pytest.approx((100 * 890 + 300 * 600) / 3600)
    assert figures.dollars_lost == pytest.approx((100 * 250 + 300 * 300) / 3600)
    uniform = measure(attempts, steps, [2], 100.0, T0 + 5000, hourly_of={1: 100.0, 2: 100.0})
    assert uniform == measure(attempts, steps, [2], 100.0, T0 + 5000)


def test_the_view_prices_by_the_record_and_says_at_most_for_flex_start_and_which_rung_has_no_price():
    from dataclasses import replace

    from tests.jobs.runs.test_observed import record_line

    record = "\n".join([record_line(1010, 2, "gpu-rungs", details={"rungs": {"flex-start": 1}, "otherNodes": 0})])
    shown = replace(view(hourly=40.0), record=tuple(parse(record)), node_hourly=RATES, stack_rungs={"spot": 1})
    assert [price.hourly for price in shown.prices()] == [40.0, 90.0]
    assert shown.at_most() and shown.unpriced() is None
    lines = shown.goodput(now=T0 + 5000).lines(shown.unpriced(), shown.at_most())
    assert lines[-1].startswith("cost: at most $")
    assert shown.pricing_lines()[1:] == [
        "  attempt 1: 1 spot, $40.00/h (not recorded: gpu.nodes on gpu.provisioning)",
        "  attempt 2: 1 flex-start, at most $90.00/h (the guardian's record)",
        "  flex-start at the on-demand rate, the most it bills (up to the catalog's discount below it)",
    ]
    lacking = replace(shown, node_hourly={**RATES, "flex-start": None})
    assert lacking.unpriced() == (
        "no list price for the rungs attempt 2 ran on (flex-start) in core/facts/prices.json (dated 2026-12-01)"
    )
    assert replace(shown, attempts=(RayAttempt(1, "PENDING", None, None),)).pricing_lines() == []
