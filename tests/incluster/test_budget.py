"""The run's budget, pure (incluster/budget.py): what the attempts spent at their rungs' prices, when spending on
crosses a limit, whether a raised budget lets a stopped run resume, and the line `status` prints."""

from __future__ import annotations

import pytest

from incluster import budget
from incluster.budget import Span, Spent

PRICES = {"spot": 30.0, "on-demand": 90.0, "flex-start": None}
"""$/h of one GPU node per rung (flex-start without a price here)."""

T0 = 1796126400.0


def test_each_attempt_counts_its_wall_time_times_its_own_rungs_price_and_a_live_one_until_now():
    record = [
        {"attempt": 1, "event": "gpu-rungs", "details": {"rungs": {"spot": 2}}},
        {"attempt": 1, "event": "gpu-rungs", "details": {"rungs": {"on-demand": 2}}},  # only the first counts
        {"attempt": 2, "event": "gpu-rungs", "details": {"rungs": {"spot": 1, "on-demand": 1}}},
    ]
    spans = [Span(1, T0, T0 + 3600), Span(2, T0 + 7200, None), Span(3, T0 + 9000, T0 + 9000)]
    used = budget.spent(spans[:2], record, PRICES, {"spot": 2}, now=T0 + 9000, gpus_per_node=8)
    # attempt 1: 1 h x 2 spot x $30; attempt 2: 0.5 h x ($30 + $90), live until now
    assert used == Spent(dollars=60.0 + 60.0, gpu_hours=16 + 8, hourly=120.0, gpus=16)
    stack = budget.spent([spans[2], spans[0]], [], PRICES, {"on-demand": 1}, now=T0 + 9000, gpus_per_node=8)
    assert (stack.dollars, stack.gpu_hours, stack.hourly, stack.gpus) == (90.0, 8.0, 90.0, 8)


def test_gpu_hours_count_the_gpus_of_the_stacks_machine():
    used = budget.spent([Span(1, T0, T0 + 3600)], [], PRICES, {"spot": 2}, now=T0 + 3600, gpus_per_node=1)
    assert (used.gpu_hours, used.gpus) == (2.0, 2)


def test_a_rung_without_a_price_counts_nothing_and_says_so():
    used = budget.spent([Span(1, T0, T0 + 3600)], [], PRICES, {"flex-start": 1}, now=T0 + 3600, gpus_per_node=8)
    assert (used.dollars, used.gpu_hours, used.unpriced) == (0.0, 8.0, True)
    assert budget.crossing({"maxCost": 10.0, "maxGpuHours": None}, used, T0) is None


def test_the_crossing_is_the_first_limit_spending_at_the_newest_attempts_rate_reaches():
    used = Spent(dollars=40.0, gpu_hours=4.0, hourly=120.0, gpus=16)
    assert budget.crossing({"maxCost": 100.0, "maxGpuHours": None}, used, T0) == (T0 + 1800, "maxCost")
    assert budget.crossing({"maxCost": 100.0, "maxGpuHours": 6.0}, used, T0) == (T0 + 450, "maxGpuHours")
    assert budget.crossing({"maxCost": 30.0, "maxGpuHours": None}, used, T0) == (T0 - 300, "maxCost")
    assert budget.crossing({"maxCost": None, "maxGpuHours": None}, used, T0) is None


STOPPED = {"step": 4, "limit": "maxCost", "maxCost": 40.0, "maxGpuHours": 10.0, "spent": 39.0, "gpuHours": 3.0}


@pytest.mark.parametrize(
    ("wanted", "raised"),
    [
        ({"maxCost": "60.0", "maxGpuHours": "10.0"}, True),
        ({"maxGpuHours": "10.0"}, True),  # the limit that stopped it is gone
        ({"maxCost": "60.0", "maxGpuHours": "20"}, True),
        ({"maxCost": "40.0", "maxGpuHours": "10.0"}, False),  # kept
        ({"maxCost": "30", "maxGpuHours": "10.0"}, False),  # lowered
        ({"maxCost": "60.0", "maxGpuHours": "5"}, False),  # the other limit lowered
        ({"maxCost": "40.0", "maxGpuHours": "90"}, False),  # only the other limit raised
    ],
)
def test_a_budget_stop_is_resumable_only_once_the_limit_that_stopped_it_is_raised(wanted, raised):
    assert budget.raised(STOPPED, wanted) is raised


def test_a_budget_stop_without_a_known_limit_is_never_resumed_by_a_budget():
    assert not budget.raised({"step": 4}, {"maxCost": "1000"})


def test_limits_are_read_from_the_job_metadata_and_the_status_line_shows_only_those_set():
    assert budget.limits_of({"maxCost": "12.5", "maxSteps": "4"}) == {"maxCost": 12.5, "maxGpuHours": None}
    used = Spent(dollars=12.4, gpu_hours=9.87, hourly=120.0, gpus=16)
    assert budget.budget_line({"maxCost": 50.0, "maxGpuHours": None}, used) == (
        "budget: $12.40 of $50.00 spent, $37.60 left"
    )
    assert budget.budget_line({"maxCost": 10.0, "maxGpuHours": 64.0}, used) == (
        "budget: $12.40 of $10.00 spent, $0.00 left; 9.9 of 64.0 GPU hours, 54.1 left"
    )
    assert budget.budget_line({"maxCost": None, "maxGpuHours": None}, used) is None


def test_the_projection_is_the_steps_left_at_the_median_of_the_newest_step_times_at_the_current_rate():
    times = [100.0] * 5 + [30.0, 31.0, 29.0, 30.0, 32.0, 28.0, 30.0, 30.0, 31.0, 29.0]  # warm-up steps left out
    found = budget.projected_end(times, steps_done=15, max_steps=75, hourly=120.0)
    assert found == budget.Projection(75, 60, 60 * 30.0, 120.0 * 1800 / 3600, 0, 0.0)
    assert budget.projection_line(found, 120.0, T0) == (
        "projected end: step 75 in ~30m 00s (2026-12-01T12:30:00.000Z), ~$60.00 more at $120.00/h"
    )
    assert budget.projected_end([30.0, 40.0], steps_done=2, max_steps=4, hourly=1.0).seconds == 2 * 35.0


def test_once_a_preemption_happened_its_measured_recovery_is_folded_in_per_step_left():
    found = budget.projected_end([30.0] * 20, steps_done=20, max_steps=60, hourly=120.0, recoveries=[500.0, 700.0])
    # 40 steps left at 30 s, and 2 preemptions in 20 steps: 4 more expected, 600 s each
    assert (found.seconds, found.dollars, found.preemptions, found.recovery_s) == (1200 + 2400, 120.0, 2, 600.0)
    assert budget.projection_line(found, 120.0, T0).endswith(
        "~$120.00 more at $120.00/h, with 2 preemptions so far at 10m 00s of recovery each folded in"
    )


def test_the_last_step_of_an_epochs_only_schedule_is_the_epochs_whole_batches_of_the_training_split():
    # verl's GSM8K quickstart: 7473 rows // 256 prompts = 29 steps an epoch (the partial batch dropped), 2 epochs
    assert budget.last_step(None, 2, 7473, 256) == 58
    assert budget.last_step(None, 1, 40315, 32) == 1259
    assert budget.last_step(10, 2, 7473, 256) == 10  # a step limit is the last step, whatever the epochs
    assert budget.last_step(None, 2, None, 256) is None  # a data set of unknown size: none
    assert budget.last_step(10, 2, None, 256) == 10


def test_an_attempts_last_step_is_read_from_its_metadata_and_none_where_unknown():
    assert budget.scheduled_last_step({"maxSteps": "", "epochs": "2", "lastStep": "58"}) == 58
    assert budget.scheduled_last_step({"maxSteps": "", "epochs": "2", "lastStep": ""}) is None
    assert budget.scheduled_last_step({"maxSteps": "10", "epochs": "1"}) is None


def test_an_epochs_only_schedule_is_projected_to_its_last_step():
    found = budget.projected_end([30.0] * 10, steps_done=8, max_steps=budget.last_step(None, 2, 7473, 256), hourly=60.0)
    assert budget.projection_line(found, 60.0, T0) == (
        "projected end: step 58 in ~25m 00s (2026-12-01T12:25:00.000Z), ~$25.00 more at $60.00/h"
    )


def test_no_projection_without_a_step_limit_or_a_measured_step_and_none_left_at_the_end():
    assert budget.projected_end([30.0], steps_done=1, max_steps=None, hourly=1.0) is None
    assert budget.projected_end([], steps_done=0, max_steps=10, hourly=1.0) is None
    done = budget.projected_end([30.0], steps_done=10, max_steps=10, hourly=1.0)
    assert budget.projection_line(done, 1.0, T0) == "projected end: step 10 reached"
