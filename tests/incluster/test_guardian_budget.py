"""The guardian's budget rules, pure (incluster/guardian/policy.py `_before_budget`, `_after_budget_stop`): the stop
right after the last checkpoint that completes within job.maxCost or job.maxGpuHours, the stop of an attempt that
crossed it before saving, and after the stop an export, the scale to zero, or a resume once the budget is raised;
and the settings' prices a budget needs."""

from __future__ import annotations

import pytest

from incluster.budget import Spent
from incluster.deadline import Saved
from incluster.guardian.policy import decide
from incluster.guardian.settings import GuardError, Settings, settings_from
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of
from tests.incluster.test_guardian import END, T0, state

USED = Spent(dollars=31.5, gpu_hours=2.5, hourly=120.0, gpus=16)
"""What the run spent when these cases look."""


@pytest.fixture(scope="module")
def budgeted() -> Settings:
    """The dev stack's settings with job.maxCost 40."""
    return settings_from(guardian_settings(config_of("dev", job={"maxCost": 40})), "test")


def running(settings: Settings, saves: tuple[Saved, ...], now: float, crossing: float):
    """Attempt 1 RUNNING since T0 at `now`, with the run's `saves` and the budget crossed at `crossing`."""
    return state(settings, "RUNNING", now=now, saves=saves, budget_by=(crossing, "maxCost"), spent=USED)


def test_the_attempt_goes_on_while_the_next_save_completes_within_the_budget(budgeted):
    assert decide(running(budgeted, (Saved(2, T0 + 400),), now=T0 + 500, crossing=T0 + 1000)).kind == "wait"
    assert decide(running(budgeted, (), now=T0 + 500, crossing=T0 + 1000)).kind == "wait"
    assert decide(state(budgeted, "RUNNING", now=T0 + 500, saves=(Saved(2, T0 + 400),))).kind == "wait"


def test_the_attempt_stops_after_the_last_checkpoint_that_completes_within_the_budget(budgeted):
    saves = (Saved(2, T0 + 400), Saved(4, T0 + 800))
    action = decide(running(budgeted, saves, now=T0 + 850, crossing=T0 + 1000))
    assert (action.kind, action.event) == ("record", "budget-stop")
    assert action.details == {"step": 4, "limit": "maxCost", "maxCost": 40.0, "maxGpuHours": None, "spent": 31.5,
                              "gpuHours": 2.5}  # fmt: skip
    assert action.reason == (
        "attempt 1 saved step 4, the last checkpoint that completes within job.maxCost ($40.00; $31.50 and 2.50 GPU"
        " hours spent, the next save would pass it at 2026-12-01T12:16:40.000Z)"
    )
    recorded = [("budget-stop", {"details": action.details})]
    stopping = decide(state(budgeted, "RUNNING", now=T0 + 851, recorded=recorded))
    assert (stopping.kind, stopping.reason) == ("stop", "attempt 1 stops at the run's budget")


def test_an_attempt_that_crosses_the_budget_before_saving_stops_at_once_keeping_the_runs_checkpoint(budgeted):
    earlier = (Saved(6, T0 - 100),)  # the previous attempt's
    action = decide(running(budgeted, earlier, now=T0 + 300, crossing=T0 + 200))
    assert (action.kind, action.event, action.details["step"]) == ("record", "budget-stop", 6)
    assert action.reason.startswith(
        "attempt 1 crossed job.maxCost before saving; the run keeps the run's checkpoint of"
    )
    assert decide(running(budgeted, (), now=T0 + 300, crossing=T0 + 200)).details["step"] is None


STOP = ("budget-stop", {"details": {"step": 4, "limit": "maxCost", "maxCost": 40.0, "maxGpuHours": None}})


def test_after_the_stop_the_run_is_exported_then_scaled_to_zero_like_a_success(budgeted):
    stopped = decide(state(budgeted, "STOPPED", recorded=[STOP]))
    why = "attempt 1 stopped at the run's budget (job.maxCost) after saving step 4"
    assert (stopped.kind, stopped.reason) == ("export", why)
    exported = [STOP, ("export-submitted", {"details": {"step": 4, "submission": "x"}})]
    assert decide(state(budgeted, "STOPPED", recorded=exported, export_status="SUCCEEDED")).event == "exported"
    idle = decide(state(budgeted, "STOPPED", recorded=[*exported, ("exported", {})], now=END + 15 * 60 + 1))
    assert (idle.kind, idle.reason) == ("scale-to-zero", f"{why}; idle for job.idleMinutes=15")


def test_a_raised_budget_resumes_the_run_and_one_kept_does_not(budgeted):
    raised = settings_from(guardian_settings(config_of("dev", job={"maxCost": 80})), "test")
    resumed = decide(state(raised, "STOPPED", recorded=[STOP, ("scaled-to-zero", {})]))
    assert (resumed.kind, resumed.reason) == (
        "resume",
        "the run's budget was raised: the next attempt resumes from step 4",
    )
    assert decide(state(budgeted, "STOPPED", recorded=[STOP, ("exported", {}), ("export-submitted", {}),
                                                        ("scaled-to-zero", {})])).kind == "done"  # fmt: skip


def test_a_budget_needs_the_gpu_prices_in_the_settings_and_a_run_without_one_needs_none():
    values = guardian_settings(config_of("dev", job={"maxGpuHours": 10}))
    prices = values["gpuPrices"]
    assert prices["stackRungs"] == {"spot": 1} and set(prices["nodeHourly"]) == {"reservation", "on-demand", "spot",
                                                                                   "flex-start"}  # fmt: skip
    assert settings_from(values, "s.json").gpu_prices.node_hourly["spot"] == prices["nodeHourly"]["spot"]
    assert settings_from(values, "s.json").gpu_prices.gpus_per_node == prices["gpusPerNode"] == 8  # a3-ultragpu-8g
    assert "gpuPrices" not in guardian_settings(config_of("dev"))
    with pytest.raises(GuardError, match=r"^s.json: the run has a budget and 'gpuPrices' is None;"):
        settings_from({**values, "gpuPrices": None}, "s.json")
    with pytest.raises(GuardError, match=r"'gpuPrices.nodeHourly' must map each rung to \$/h or null"):
        settings_from({**values, "gpuPrices": {**prices, "nodeHourly": {"spot": "30"}}}, "s.json")
    with pytest.raises(GuardError, match="'gpuPrices.stackRungs' must map a rung to its GPU nodes"):
        settings_from({**values, "gpuPrices": {**prices, "stackRungs": {"spot": 0}}}, "s.json")
    with pytest.raises(GuardError, match="'gpuPrices.gpusPerNode' must be the GPUs of one GPU node"):
        settings_from({**values, "gpuPrices": {**prices, "gpusPerNode": 0}}, "s.json")
    with pytest.raises(GuardError, match="'gpuPrices.catalogDate' must be the price catalog's date"):
        settings_from({**values, "gpuPrices": {**prices, "catalogDate": 1}}, "s.json")


def test_the_waiting_line_of_a_running_attempt_carries_its_projected_end(budgeted):
    line = "projected end: step 10 in ~7m 45s (2026-12-01T12:17:45.000Z)"
    assert decide(state(budgeted, "RUNNING", now=T0 + 500, projected=line)).reason == f"attempt 1 is RUNNING; {line}"
    assert decide(state(budgeted, "RUNNING", now=T0 + 500)).reason == "attempt 1 is RUNNING"


def test_the_guardian_projects_a_running_attempts_end_from_its_logs_step_lines_every_few_minutes(tmp_path):
    """The attempt wrapper's own log (incluster/attempt.py AttemptLog) holds verl step lines with timing_s/step 90 and
    96 s; the schedule asks for 10 steps; the budgeted run's settings price the stack's spot node. The projection is
    made again only after PROJECTION_REFRESH_SECONDS."""
    from dataclasses import replace

    from incluster.attempt import AttemptLog
    from incluster.guardian import loop
    from incluster.guardian.loop import Guardian
    from incluster.guardian.policy import AttemptView
    from tests.incluster.test_guardian_preflight import _with_run_dir

    values = settings_from(guardian_settings(config_of("dev", grpo={"maxSteps": 10}, job={"maxCost": 40})), "test")
    settings = replace(values, submission=_with_run_dir(values.submission, tmp_path))
    log = AttemptLog(tmp_path, "1")
    for step, took in ((1, 90.0), (2, 96.0)):
        log.write(f"step:{step} - critic/score/mean:np.float64(0.1) - timing_s/step:{took}\n".encode())
    log.close()
    clock = [T0]
    guard = object.__new__(Guardian)
    guard.settings, guard.clock, guard._projected = settings, lambda: clock[0], (0, float("-inf"), None)
    running = AttemptView(1, "RUNNING", start=T0 - 200)
    spot = settings.gpu_prices.node_hourly["spot"]
    expected = (
        f"projected end: step 10 in ~12m 24s (2026-12-01T12:12:24.000Z), ~${spot * 744 / 3600:.2f} more at"
        f" ${spot:.2f}/h"
    )
    assert guard.projection_view(running, {}) == expected  # 8 steps left at 93 s
    rungs = {"gpu-rungs": {"attempt": 1, "event": "gpu-rungs", "details": {"rungs": {"on-demand": 1}}}}
    clock[0] = T0 + loop.PROJECTION_REFRESH_SECONDS - 1
    assert guard.projection_view(running, rungs) == expected
    clock[0] = T0 + loop.PROJECTION_REFRESH_SECONDS
    on_demand = settings.gpu_prices.node_hourly["on-demand"]
    assert guard.projection_view(running, rungs).endswith(f"more at ${on_demand:.2f}/h")
    assert guard.projection_view(replace(running, status="PENDING"), {}) is None


def test_the_guardian_projects_an_epochs_only_schedule_to_the_last_step_its_settings_carry(tmp_path):
    """Issue 33 item 3: dev's schedule without grpo.maxSteps, one epoch of GSM8K, whose last step the guardian's
    settings carry (the submission's `lastStep` metadata: 7473 training rows // 64 prompts = 116); the log holds
    steps 1 and 2 at timing_s/step 90 and 96 s: 114 steps left at 93 s."""
    from dataclasses import replace

    from incluster.attempt import AttemptLog
    from incluster.guardian.loop import Guardian
    from incluster.guardian.policy import AttemptView
    from tests.incluster.test_guardian_preflight import _with_run_dir

    values = settings_from(guardian_settings(config_of("dev", job={"maxCost": 40})), "test")
    assert values.submission["metadata"]["lastStep"] == "116"
    settings = replace(values, submission=_with_run_dir(values.submission, tmp_path))
    log = AttemptLog(tmp_path, "1")
    for step, took in ((1, 90.0), (2, 96.0)):
        log.write(f"step:{step} - critic/score/mean:np.float64(0.1) - timing_s/step:{took}\n".encode())
    log.close()
    guard = object.__new__(Guardian)
    guard.settings, guard.clock, guard._projected = settings, lambda: T0, (0, float("-inf"), None)
    spot = settings.gpu_prices.node_hourly["spot"]
    assert guard.projection_view(AttemptView(1, "RUNNING", start=T0 - 200), {}) == (
        f"projected end: step 116 in ~2h 56m (2026-12-01T14:56:42.000Z), ~${spot * 114 * 93 / 3600:.2f} more at"
        f" ${spot:.2f}/h"
    )
