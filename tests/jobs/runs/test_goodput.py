"""Goodput, time lost to preemptions and dollars per step from recorded attempts and step lines.

Every expected figure is computed by hand in the test's comments; times are seconds after T0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jobs.demo.stand_in_trainer import write_archive
from jobs.runs.goodput import Attempt, StepDone, complete_checkpoints, measure, steps_done

T0 = 1_796_100_000.0


def verl_lines(*steps: tuple[float, int]) -> list[tuple[float, str]]:
    """verl step lines, each `(seconds after T0, step)`, with a console line between them."""
    lines = []
    for offset, step in steps:
        lines.append((T0 + offset - 1, "(TaskRunner pid=812) Training Progress:  5%"))
        line = f"(TaskRunner pid=812) step:{step} - critic/score/mean:np.float64(0.5) - timing_s/step:81.2"
        lines.append((T0 + offset, line))
    return lines


def nemo_rl_lines(*steps: tuple[float, int]) -> list[tuple[float, str]]:
    """NeMo-RL's banner 50 s before each `(seconds after T0, step)` and its Avg Reward line at that time."""
    lines = []
    for offset, step in steps:
        lines.append((T0 + offset - 50, f"========================= Step {step}/500 ========================="))
        lines.append((T0 + offset - 10, "  • Loss: 0.0123"))
        lines.append((T0 + offset, "  • Avg Reward: 0.2031"))
    return lines


def attempt(number: int, submitted: float, start: float | None, end: float | None, status: str, **extra) -> Attempt:
    """An attempt with times in seconds after T0."""
    return Attempt(
        number=number,
        submitted=T0 + submitted,
        start=None if start is None else T0 + start,
        end=None if end is None else T0 + end,
        status=status,
        **extra,
    )


# One preemption, resumed from checkpoint 2 (verl, $100/h):
# attempt 1 runs 60..950, steps 1-4 at 600, 700, 800, 900, checkpoint 2, loses its GPUs at 950;
# attempt 2 runs 1200..1800 from step 2, steps 3, 4, 5 at 1500, 1600, 1700.
PREEMPTED = [
    attempt(1, 0, 60, 950, "FAILED", failure="gpu-capacity-lost"),
    attempt(2, 1000, 1200, 1800, "SUCCEEDED", resumed_from=2),
]
PREEMPTED_STEPS = steps_done(
    verl_lines((600, 1), (700, 2), (800, 3), (900, 4), (1500, 3), (1600, 4), (1700, 5)), "verl"
)


def test_a_preemption_costs_the_work_after_the_checkpoint_and_the_restart_until_the_first_new_step():
    figures = measure(PREEMPTED, PREEMPTED_STEPS, [2], gpu_hourly=100.0, now=T0 + 5000)
    (loss,) = figures.losses
    # checkpoint step 2 was done at 700, the failure at 950: 250 s;
    # attempt 2 started at 1200, its first step at 1500: 300 s.
    assert (loss.attempt, loss.failure, loss.last_step, loss.checkpoint) == (1, "gpu-capacity-lost", 4, 2)
    assert (loss.after_checkpoint_s, loss.restart_s, loss.total_s) == (250.0, 300.0, 550.0)


def test_the_step_the_next_attempt_resumed_from_is_what_was_kept_even_when_its_checkpoint_is_gone():
    # verl's checkpoint keep limit may have removed checkpoint 2 from the run directory since; attempt 2
    # still resumed from it, so attempt 1 lost 950 - 700 = 250 s, not its whole 890 s.
    (loss,) = measure(PREEMPTED, PREEMPTED_STEPS, [], gpu_hourly=100.0, now=T0 + 5000).losses
    assert (loss.checkpoint, loss.after_checkpoint_s) == (2, 250.0)


def test_the_run_figures_across_a_preemption_and_its_resume():
    figures = measure(PREEMPTED, PREEMPTED_STEPS, [2], gpu_hourly=100.0, now=T0 + 5000)
    # GPU time 890 + 600 = 1490 s; progress kept: 600..700 (step 2) and 1500..1800: 400 s.
    # $100/h: 1490 s is $41.3889, the 550 s lost $15.2778, over 5 steps $8.2778 a step;
    # the run ended 1800 s after its submission: 5 steps in half an hour, 10 per hour.
    assert figures.as_json() == {
        "dollars": 41.3889,
        "dollars_lost": 15.2778,
        "dollars_per_step": 8.2778,
        "first_step_after_s": 600.0,
        "goodput": 0.2685,
        "gpu_s": 1490.0,
        "losses": [
            {
                "after_checkpoint_s": 250.0,
                "attempt": 1,
                "checkpoint": 2,
                "failure": "gpu-capacity-lost",
                "last_step": 4,
                "lost_s": 550.0,
                "restart_s": 300.0,
            }
        ],
        "progress_s": 400.0,
        "steps_done": 5,
        "steps_per_hour": 10.0,
    }
    assert figures.lines() == [
        "first step: 10m 00s after submission",
        "steps: 5 done, 10.0 per hour",
        "preemption of attempt 1 at step 4: lost 9m 10s (4m 10s since checkpoint step 2, 5m 00s restart)",
        "goodput: 26.8% of 24m 50s GPU time made progress",
        "cost: $41.39 so far, $15.28 lost, $8.28 per step",
    ]


def test_the_json_text_is_sorted_and_deterministic():
    first = measure(PREEMPTED, PREEMPTED_STEPS, [2], gpu_hourly=100.0, now=T0 + 5000).json_text()
    again = measure(list(reversed(PREEMPTED)), list(reversed(PREEMPTED_STEPS)), [2], gpu_hourly=100.0, now=T0 + 5000)
    assert first == again.json_text()
    assert first == json.dumps(json.loads(first), sort_keys=True, indent=2)
    assert list(json.loads(first)) == sorted(json.loads(first))


def test_a_failed_attempt_not_yet_resumed_loses_back_to_its_newest_checkpoint_at_or_before_its_last_step():
    # Checkpoints 2 and 6 are written (6 is past the attempt's last step, 4): its work is kept until step 2,
    # done at 700: 950 - 700 = 250 s lost, and no restart has happened yet.
    alone = [attempt(1, 0, 60, 950, "FAILED", failure="other")]
    steps = steps_done(verl_lines((600, 1), (700, 2), (800, 3), (900, 4)), "verl")
    figures = measure(alone, steps, [6, 2], gpu_hourly=100.0, now=T0 + 2000)
    (loss,) = figures.losses
    assert (loss.failure, loss.checkpoint, loss.after_checkpoint_s, loss.restart_s) == ("other", 2, 250.0, 0.0)
    assert figures.lines()[2] == (
        "failure of attempt 1 at step 4: lost 4m 10s (4m 10s since checkpoint step 2, 0s restart)"
    )


# Two preemptions in a row (NeMo-RL, $36/h): attempt 1 runs 100..650, steps 1-3 done at 400, 500, 600,
# checkpoint 2; attempt 2 runs 800..1000 from step 2 and reaches no step; attempt 3 runs from 1200,
# from step 2, steps 3 and 4 done at 1500 and 1600, still running at 1700.
RESUMED = [
    attempt(1, 0, 100, 650, "FAILED", failure="gpu-capacity-lost"),
    attempt(2, 700, 800, 1000, "FAILED", failure="gpu-capacity-lost", resumed_from=2),
    attempt(3, 1100, 1200, None, "RUNNING", resumed_from=2),
]
RESUMED_STEPS = steps_done(nemo_rl_lines((400, 1), (500, 2), (600, 3), (1500, 3), (1600, 4)), "nemo-rl")


def test_a_restart_that_is_preempted_before_its_first_step_is_counted_once():
    figures = measure(RESUMED, RESUMED_STEPS, [2], gpu_hourly=36.0, now=T0 + 1700)
    first, second = figures.losses
    # attempt 1: 650 - 500 = 150 s after checkpoint 2; its restart, attempt 2, reached no step: 1000 - 800 = 200 s.
    assert (first.last_step, first.checkpoint, first.after_checkpoint_s, first.restart_s) == (3, 2, 150.0, 200.0)
    # attempt 2: all of its time is already the first loss's restart; its own restart is attempt 3's 1200..1500.
    assert (second.last_step, second.checkpoint, second.after_checkpoint_s, second.restart_s) == (None, 2, 0.0, 300.0)


def test_the_run_figures_across_two_preemptions_while_the_third_attempt_runs():
    figures = measure(RESUMED, RESUMED_STEPS, [2], gpu_hourly=36.0, now=T0 + 1700)
    # GPU time 550 + 200 + 500 = 1250 s; progress kept 400..500 and 1500..1700: 300 s, 24%.
    # $36/h is $0.01/s: $12.50 so far, 650 s lost is $6.50, 4 steps: $3.125 a step.
    # 4 steps in the 1700 s since the submission: 8.47 per hour.
    assert figures.as_json() == {
        "dollars": 12.5,
        "dollars_lost": 6.5,
        "dollars_per_step": 3.125,
        "first_step_after_s": 400.0,
        "goodput": 0.24,
        "gpu_s": 1250.0,
        "losses": [
            {
                "after_checkpoint_s": 150.0,
                "attempt": 1,
                "checkpoint": 2,
                "failure": "gpu-capacity-lost",
                "last_step": 3,
                "lost_s": 350.0,
                "restart_s": 200.0,
            },
            {
                "after_checkpoint_s": 0.0,
                "attempt": 2,
                "checkpoint": 2,
                "failure": "gpu-capacity-lost",
                "last_step": None,
                "lost_s": 300.0,
                "restart_s": 300.0,
            },
        ],
        "progress_s": 300.0,
        "steps_done": 4,
        "steps_per_hour": 8.47,
    }
    assert figures.lines()[3] == (
        "preemption of attempt 2 before step 1: lost 5m 00s (0s since checkpoint step 2, 5m 00s restart)"
    )


def test_a_run_that_never_reached_step_1():
    # Attempt 1 ran 300..900 and failed before any step; attempt 2 waits for GPUs (no GPU time yet); $36/h.
    # NeMo-RL opened step 1 at 400 but never reported it: 0 steps. All 600 s of GPU time are lost, $6.00.
    never = [
        attempt(1, 0, 300, 900, "FAILED", failure="other"),
        attempt(2, 1000, None, None, "PENDING"),
    ]
    lines = nemo_rl_lines() + [(T0 + 400, "========================= Step 1/500 =========================")]
    figures = measure(never, steps_done(lines, "nemo-rl"), [], gpu_hourly=36.0, now=T0 + 1200)
    assert figures.as_json() == {
        "dollars": 6.0,
        "dollars_lost": 6.0,
        "dollars_per_step": None,
        "first_step_after_s": None,
        "goodput": 0.0,
        "gpu_s": 600.0,
        "losses": [
            {
                "after_checkpoint_s": 600.0,
                "attempt": 1,
                "checkpoint": None,
                "failure": "other",
                "last_step": None,
                "lost_s": 600.0,
                "restart_s": 0.0,
            }
        ],
        "progress_s": 0.0,
        "steps_done": 0,
        "steps_per_hour": None,
    }
    assert figures.lines() == [
        "first step: not reached yet",
        "steps: 0 done",
        "failure of attempt 1 before step 1: lost 10m 00s (10m 00s since the attempt's start, 0s restart)",
        "goodput: 0.0% of 10m 00s GPU time made progress",
        "cost: $6.00 so far, $6.00 lost, - per step",
    ]


def test_a_run_not_started_has_no_gpu_time_and_no_goodput():
    figures = measure([attempt(1, 0, None, None, "PENDING")], [], [], gpu_hourly=36.0, now=T0 + 60)
    assert (figures.gpu_s, figures.goodput, figures.dollars, figures.losses) == (0.0, None, 0.0, ())
    assert figures.lines()[-2] == "goodput: - of 0s GPU time made progress"


def test_step_lines_of_each_framework_are_the_steps_done_at_their_time():
    assert steps_done(verl_lines((600, 1), (700, 2)), "verl") == [StepDone(1, T0 + 600), StepDone(2, T0 + 700)]
    # NeMo-RL's banner opens a step; its Avg Reward line says it is done (a second one is not another step).
    lines = nemo_rl_lines((400, 1)) + [(T0 + 401, "  • Avg Reward: 0.3")] + [(T0 + 450, "===== Step 2/500 =====")]
    assert steps_done(lines, "nemo-rl") == [StepDone(1, T0 + 400)]


@pytest.mark.parametrize("framework", ["verl", "nemo-rl"])
def test_only_complete_checkpoints_count(tmp_path: Path, framework: str):
    if framework == "verl":
        for step in (2, 4):
            shards = [f"actor/{kind}_world_size_1_rank_0.pt" for kind in ("model", "optim", "extra_state")]
            names = shards + ["actor/fsdp_config.json"] + (["data.pt"] if step == 2 else [])
            for name in names:
                (tmp_path / f"global_step_{step}" / name).parent.mkdir(parents=True, exist_ok=True)
                if name.endswith(".pt"):
                    write_archive(tmp_path / f"global_step_{step}" / name, {"step": step})
                else:
                    (tmp_path / f"global_step_{step}" / name).write_text("{}")
    else:
        for name in ("step_2", "tmp_step_4"):
            (tmp_path / name / "policy" / "weights").mkdir(parents=True)
            (tmp_path / name / "training_info.json").write_text("{}")
    assert complete_checkpoints(tmp_path, framework, world_size=1) == [2]
