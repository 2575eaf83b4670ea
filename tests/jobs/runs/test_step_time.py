"""Where a run's time goes: each step's seconds by stage from verl's step line and NeMo-RL's Timing lines (as each
release prints them: jobs/runs/step_time.py cites where), the mean step's breakdown as `status` prints it, and the
run's wall time by kind from its attempts, steps and record. Times are seconds after T0."""

from __future__ import annotations

import pytest

from jobs.runs.goodput import Attempt
from jobs.runs.step_time import (
    STAGE_KEYS,
    StepTime,
    breakdown,
    nemo_rl_step_times,
    step_times,
    verl_step_time,
    wall_time,
)
from tests.jobs.runs.test_observed import T0, record_line

VERL_LINE = (
    "(TaskRunner pid=9) step:3 - training/global_step:3 - critic/score/mean:np.float64(0.5) - timing_s/gen:12.0"
    " - timing_s/reward:0.5 - timing_s/old_log_prob:3.0 - timing_s/ref:2.0 - timing_s/adv:0.25"
    " - timing_s/update_actor:8.0 - timing_s/update_weights:1.25 - timing_s/save_checkpoint:20.0"
    " - timing_s/step:47.0 - timing_per_token_ms/gen:0.01 - perf/total_num_tokens:96000"
    " - perf/time_per_step:47.0 - perf/throughput:250.0"
)
"""A verl 0.9.1 step line of a save step with a reference policy (keys as its V1 sync trainer logs them)."""


def test_a_verl_step_line_gives_each_stage_other_and_the_throughput_per_gpu():
    item = verl_step_time(1, T0, VERL_LINE)
    assert item == StepTime(
        attempt=1,
        step=3,
        time=T0,
        total_s=47.0,
        stages={"generation": 12.0, "log-probs": 5.0, "training": 8.0, "weight sync": 1.25, "checkpoint save": 20.0},
        tokens_per_gpu_s=250.0,
    )
    assert item.other_s == pytest.approx(0.75)  # reward and adv
    assert verl_step_time(1, T0, "Training Progress: 10%") is None


def test_a_verl_line_without_timings_has_no_total_and_no_stage():
    item = verl_step_time(2, T0, "step:1 - critic/score/mean:0.5")
    assert item is not None and (item.total_s, item.stages, item.tokens_per_gpu_s, item.other_s) == (None, {}, None, 0)


def nemo_step(offset: float, step: int, *, saved: bool, throughput: bool = True) -> list[tuple[float, str]]:
    """One NeMo-RL v0.7.0 step's console lines as grpo_train and print_performance_metrics print them (the timers
    sorted by seconds, nested ones among them)."""
    timers = [
        ("generation", 30.0),
        *([("checkpointing", 15.0)] if saved else []),
        ("policy_training", 20.0),
        ("policy_and_reference_logprobs", 6.0),
        ("prepare_for_generation/total", 4.0),
        ("prepare_for_generation/transfer_and_update_weights", 3.5),
        ("policy_training/sharding_data", 1.0),
        ("training_prep", 1.0),
        ("logprob_inference_prep", 0.5),
        ("data_processing", 0.25),
        ("reward_calculation", 0.25),
    ]
    total = 62.0 + (15.0 if saved else 0.0)
    lines = [
        f"========================= Step {step}/20 =========================",
        "▶ Preparing batch...",
        "📊 Training Results:",
        "  • Loss: 0.1234",
        "  • Avg Reward: 0.5000",
        "  • Mean Generation Length: 231.0000",
        "⏱️  Timing:",
        f"  • Total step time: {total:.2f}s",
        *(f"  • {name}: {seconds:.2f}s ({seconds / total * 100:.1f}%)" for name, seconds in timers),
        "🔍 Performance Metrics:",
        "  • Throughputs (per GPU):",
        "    - E2E (Samples/sec/gpu): 0.50",
        *(["    - E2E (Tokens/sec/gpu): 812.25"] if throughput else []),
        "    - Policy Training (Tokens/sec/gpu): 2400.00",
    ]
    return [(T0 + offset + index, line) for index, line in enumerate(lines)]


def test_nemo_rl_timing_lines_make_each_stage_without_counting_a_nested_timer_twice():
    lines = nemo_step(100, 1, saved=False) + nemo_step(200, 2, saved=True)
    found = nemo_rl_step_times(1, lines)
    stages = {"generation": 30.0, "log-probs": 6.5, "training": 21.0, "weight sync": 4.0}
    assert found == [
        StepTime(1, 1, T0 + 100 + 17, 62.0, stages, 812.25),
        StepTime(1, 2, T0 + 200 + 18, 77.0, {**stages, "checkpoint save": 15.0}, 812.25),
    ]
    assert found[0].other_s == pytest.approx(0.5)  # data processing and reward


def test_a_nemo_rl_step_cut_before_its_throughput_line_still_counts_and_one_without_its_total_does_not():
    cut = nemo_step(100, 1, saved=False, throughput=False)
    untimed = [
        (T0 + 300, "========================= Step 2/20 ========================="),
        (T0 + 301, "  • Avg Reward: 0.5"),
    ]
    found = step_times({1: cut + untimed}, "nemo-rl")
    assert [(item.step, item.total_s, item.tokens_per_gpu_s) for item in found] == [(1, 62.0, None)]


def test_every_stage_has_keys_for_both_frameworks():
    assert all(set(keys) == set(STAGE_KEYS["verl"]) for keys in STAGE_KEYS.values())


def test_the_breakdown_is_the_mean_step_whose_stages_add_up_and_status_prints_it():
    times = [
        StepTime(1, 1, T0, 30.0, {"generation": 12.0, "log-probs": 5.0, "training": 8.0, "weight sync": 1.0}, 200.0),
        StepTime(
            1,
            2,
            T0,
            50.0,
            {"generation": 12.0, "log-probs": 5.0, "training": 8.0, "weight sync": 1.0, "checkpoint save": 20.0},
            300.0,
        ),  # fmt: skip
        StepTime(2, 3, T0, None, {}, None),  # logged no timings: not counted
    ]
    figures = breakdown(times, "verl")
    assert figures is not None
    assert sum(figures.mean_s.values()) == pytest.approx(figures.total_s)
    assert figures.lines() == [
        "step time by stage (mean of 2 steps, verl's timing_s/*):",
        "  generation         12.0s   30%",
        "  log-probs          5.00s   12%",
        "  training           8.00s   20%",
        "  weight sync        1.00s    2%",
        "  checkpoint save    10.0s   25% (saved on 1 of 2 steps)",
        "  other              4.00s   10%",
        "  whole step         40.0s",
        "tokens per second per GPU: 250.0 (median; perf/throughput)",
    ]
    assert figures.as_json()["meanSeconds"]["checkpoint save"] == 10.0
    assert breakdown([StepTime(1, 1, T0, None)], "verl") is None


def attempt(number, submitted, start, end, status, failure=None) -> Attempt:
    return Attempt(number, T0 + submitted, T0 + start, None if end is None else T0 + end, status, None, failure)


def parsed(*lines: str) -> list[dict]:
    from incluster.record import parse

    return parse("\n".join(lines))


def step(attempt_number: int, offset: float, seconds: float, save: float = 0.0) -> StepTime:
    return StepTime(attempt_number, 0, T0 + offset, seconds, {"checkpoint save": save} if save else {})


def test_the_wall_time_of_a_preempted_run_that_waited_for_capacity_and_went_to_zero():
    # attempt 1: submitted at 0, runs 60..950, steps end at 600 (100 s each) .. 900, the save of step 2 took 30 s;
    # preempted at 950; the gate waited on the ladder from 1000 (since) to 1100; attempt 2 submitted at 1100, runs
    # 1150..1800, its first step ends at 1400 (100 s); the run is over at 1800 and at zero from 1850; now 2000.
    attempts = [
        attempt(1, 0, 60, 950, "FAILED", "gpu-capacity-lost"),
        attempt(2, 1100, 1150, 1800, "SUCCEEDED"),
    ]
    times = [step(1, 600, 100), step(1, 700, 100, save=30), step(1, 900, 100), step(2, 1400, 100), step(2, 1700, 90)]
    record = parsed(
        record_line(951, 1, "failed", details={"cause": "gpu-capacity-lost"}),
        record_line(952, 1, "recovering"),
        record_line(1100, 1, "capacity", "rung spot", details={"rung": "spot", "since": "2026-12-01T10:16:40Z"}),
        record_line(1100, 2, "submitted", resumed=2),
        record_line(1801, 2, "succeeded"),
        record_line(1850, 2, "scaled-to-zero"),
    )
    figures = wall_time(attempts, times, record, T0 + 2000)
    assert figures is not None
    assert figures.seconds == {
        "setup": 500.0,  # 0 .. 500, step 1's start
        "training": 450.0 + 500.0 - 30.0,  # 500 .. 950 and 1300 .. 1800, less the save
        "checkpointing": 30.0,
        "recovery": 250.0,  # 950 .. 1300, less the wait
        "waiting for capacity": 100.0,  # 1000 .. 1100
        "idle, GPUs up": 50.0,  # 1800 .. 1850
        "idle at zero": 150.0,  # 1850 .. 2000
    }
    assert figures.total_s == 2000.0
    assert figures.lines() == [
        "wall time by kind (33m 20s since the first submission):",
        "  setup                  8m 20s   25%",
        "  training              15m 20s   46%",
        "  checkpointing             30s    2%",
        "  recovery               4m 10s   12%",
        "  waiting for capacity   1m 40s    5%",
        "  idle, GPUs up             50s    2%",
        "  idle at zero           2m 30s    8%",
    ]


def test_after_a_deadline_stop_the_run_waits_for_capacity_until_the_next_submission():
    attempts = [attempt(1, 0, 10, 500, "SUCCEEDED"), attempt(2, 800, 810, None, "RUNNING")]
    times = [step(1, 110, 100), step(1, 400, 100), step(2, 1000, 100)]
    record = parsed(record_line(450, 1, "deadline-stop", details={"step": 2}), record_line(800, 2, "submitted"))
    figures = wall_time(attempts, times, record, T0 + 1100)
    assert figures is not None
    assert figures.seconds["waiting for capacity"] == 300.0  # 500 .. 800
    assert figures.seconds["setup"] == 10.0 + 100.0  # 0 .. 10, and 800 .. 900
    assert figures.seconds["training"] == 490.0 + 200.0  # 10 .. 500 and 900 .. 1100 (a step in progress)
    assert figures.seconds["recovery"] == 0.0


def test_a_failed_last_attempt_is_recovery_until_the_record_gives_up_then_idle():
    attempts = [attempt(1, 0, 10, 500, "FAILED", "other")]
    times = [step(1, 110, 100)]
    figures = wall_time(attempts, times, [], T0 + 600)
    assert figures is not None and figures.seconds["recovery"] == 100.0
    given_up = parsed(record_line(510, 1, "gave-up"))
    figures = wall_time(attempts, times, given_up, T0 + 600)
    assert figures is not None and figures.seconds["recovery"] == 0.0 and figures.seconds["idle, GPUs up"] == 100.0


def test_no_attempt_no_wall_time():
    assert wall_time([], [], [], T0) is None


def test_the_stand_in_trainers_step_line_is_read_as_verls():
    """jobs/demo/stand_in_trainer.py logs verl 0.9.1's metric names: its stage timers, the whole step, and the
    throughput per GPU as metric_utils.py L687 computes it."""
    from jobs.demo.stand_in_trainer import TOKENS_PER_STEP, metric_line

    timing = {"gen": 0.5, "old_log_prob": 0.25, "update_actor": 0.125, "save_checkpoint": 1.0,
              "update_weights": 0.0625, "step": 2.0}  # fmt: skip
    item = verl_step_time(1, T0, metric_line(4, 0, timing, world_size=16))
    assert item is not None and (item.step, item.total_s) == (4, 2.0)
    assert item.stages == {
        "generation": 0.5, "log-probs": 0.25, "training": 0.125, "weight sync": 0.0625, "checkpoint save": 1.0,
    }  # fmt: skip
    assert item.tokens_per_gpu_s == TOKENS_PER_STEP / (2.0 * 16)


def test_the_run_file_filter_keeps_nemo_rls_timing_lines_and_travels_as_ascii():
    import re

    from jobs.runs.observed import RUN_FILE_LINES

    keep = re.compile(RUN_FILE_LINES)
    kept = [line for _, line in nemo_step(0, 1, saved=True) if keep.search(line)]
    assert RUN_FILE_LINES.isascii()
    assert kept[0].startswith("=====") and "  • Avg Reward: 0.5000" in kept
    assert "  • Total step time: 77.00s" in kept and "    - E2E (Tokens/sec/gpu): 812.25" in kept
    assert sum(1 for line in kept if line.endswith("%)")) == 11 and "  • Loss: 0.1234" not in kept
    timed = [(T0 + index, line) for index, line in enumerate(kept)]
    assert nemo_rl_step_times(1, timed)[0].stages["checkpoint save"] == 15.0


def test_a_log_without_stage_timings_shows_the_whole_step_only_and_nemo_rl_names_its_lines():
    only_total = breakdown([StepTime(1, 1, T0, 91.0), StepTime(1, 2, T0, 93.0)], "verl")
    assert only_total is not None
    assert only_total.lines() == ["step time: 1m 32s (mean of 2 steps; no stage timings in the log)"]
    nemo = breakdown(nemo_rl_step_times(1, nemo_step(100, 1, saved=False)), "nemo-rl")
    assert nemo is not None
    assert nemo.lines()[0] == "step time by stage (mean of 1 step, NeMo-RL's Timing lines):"
    assert nemo.lines()[-1] == "tokens per second per GPU: 812.2 (median; E2E (Tokens/sec/gpu))"
