"""Goodput's inputs from what a run leaves behind: Ray's attempts, the record attempts.jsonl and the attempts'
timestamped logs; the figures of a preempted and resumed run, of a run that never reached step 1, and the
plot's per-step points. Times are seconds after T0 (2026-12-01T10:00:00Z)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from incluster.record import parse
from incluster.run_files import read_local_run_files
from jobs.runs.goodput import measure
from jobs.runs.observe import RunView, dollars_so_far
from jobs.runs.observed import (
    RUN_FILE_LINES,
    RayAttempt,
    StepPoint,
    attempt_lines,
    file_names,
    goodput_attempts,
    ray_attempts,
    run_steps,
    step_points,
)

T0 = datetime(2026, 12, 1, 10, 0, tzinfo=UTC).timestamp()


def stamp(offset: float) -> str:
    """The attempt wrapper's UTC time of T0 + offset."""
    moment = datetime.fromtimestamp(T0 + offset, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def record_line(offset: float, attempt: int, event: str, reason: str = "", resumed: int | None = None, **extra) -> str:
    """One line of attempts.jsonl as the contract writes it (sorted keys)."""
    item = {"time": stamp(offset), "attempt": attempt, "event": event, "reason": reason, "resumed_from_step": resumed}
    return json.dumps({**item, **extra}, sort_keys=True)


VERL_STAGES = (
    "timing_s/gen:50.0 - timing_s/reward:1.0 - timing_s/old_log_prob:10.0 - timing_s/ref:5.0 - timing_s/adv:0.5"
    " - timing_s/update_actor:20.0 - timing_s/update_weights:3.0"
)
"""The stage timings of each step of `verl_log`, keys as verl 0.9.1's V1 sync trainer logs them (88 s of stages,
1.5 s of them no stage's: jobs/runs/step_time.py)."""


def verl_log(*steps: tuple[float, int, float]) -> str:
    """A timestamped verl log: each `(offset, step, score)` step line after a console line; step N takes 90 + N
    seconds, at 400 tokens per second per GPU."""
    lines = []
    for offset, step, score in steps:
        lines.append(f"{stamp(offset - 1)}\t(TaskRunner pid=9) Training Progress: 10%")
        metrics = (
            f"step:{step} - critic/score/mean:np.float64({score}) - {VERL_STAGES} - timing_s/step:{90.0 + step}"
            " - perf/throughput:400.0"
        )
        lines.append(f"{stamp(offset)}\t(TaskRunner pid=9) {metrics}")
    return "\n".join(lines) + "\n"


def nemo_log(*steps: tuple[float, int, float]) -> str:
    """A timestamped NeMo-RL log: the banner 50 s before each `(offset, step, reward)` and the reward line."""
    lines = []
    for offset, step, reward in steps:
        lines.append(f"{stamp(offset - 50)}\t========================= Step {step}/100 =========================")
        lines.append(f"{stamp(offset)}\t  • Avg Reward: {reward}")
    return "\n".join(lines) + "\n"


# Attempt 1 runs 60..950, steps 1-4 at 600..900, loses its GPUs at 950 (the guardian's failed event says
# gpu-capacity-lost); attempt 2 runs 1200..1800 from checkpoint 2, steps 3-5 at 1500, 1600, 1700.
RAY = [RayAttempt(1, "FAILED", T0 + 60, T0 + 950), RayAttempt(2, "SUCCEEDED", T0 + 1200, T0 + 1800)]
RECORD = "\n".join(
    [
        record_line(0, 1, "submitted"),
        record_line(
            951, 1, "failed", "GPU node gke-gpu-1 died while attempt 1 ran", details={"cause": "gpu-capacity-lost"}
        ),
        record_line(952, 1, "recovering", "resubmitting"),
        record_line(1000, 2, "submitted", resumed=2),
        record_line(1801, 2, "succeeded"),
    ]
)
FILES = {
    "attempts.jsonl": RECORD,
    "logs/attempt-1.log": verl_log((600, 1, 0.1), (700, 2, 0.2), (800, 3, 0.3), (900, 4, 0.4)),
    "logs/attempt-2.log": verl_log((1500, 3, 0.35), (1600, 4, 0.45), (1700, 5, 0.5)),
}


def view(files=FILES, ray=RAY, framework="verl", hourly: float | None = 100.0, checkpoints=(2,)) -> RunView:
    return RunView(
        run="dev-abc",
        framework=framework,
        attempts=tuple(ray),
        record=tuple(parse(files.get("attempts.jsonl") or "")),
        lines=attempt_lines(files, ray),
        checkpoints=checkpoints,
        gpu_hourly=hourly,
    )


def test_the_record_gives_each_attempt_its_submission_resume_and_preemption():
    first, second = goodput_attempts(RAY, parse(RECORD))
    assert (first.submitted, first.start, first.failure, first.resumed_from) == (T0, T0 + 60, "gpu-capacity-lost", None)
    assert (second.submitted, second.failure, second.resumed_from) == (T0 + 1000, None, 2)


def test_a_failure_the_record_does_not_call_a_preemption_is_another_failure():
    record = parse(record_line(951, 1, "failed", "exit code 1"))
    assert goodput_attempts(RAY[:1], record)[0].failure == "other"


def test_the_figures_of_a_preempted_and_resumed_run_from_its_files():
    figures = view().goodput(now=T0 + 5000)
    (loss,) = figures.losses
    # checkpoint step 2 at 700, the failure at 950: 250 s; attempt 2 from 1200 to its first step at 1500: 300 s.
    assert (loss.attempt, loss.failure, loss.last_step, loss.checkpoint) == (1, "gpu-capacity-lost", 4, 2)
    assert (loss.after_checkpoint_s, loss.restart_s) == (250.0, 300.0)
    # first step 600 s after the first submission; 5 steps over 0..1800 s is 10 per hour; GPU time 890 + 600 s.
    assert (figures.first_step_after_s, figures.steps_done, figures.steps_per_hour) == (600.0, 5, 10.0)
    assert figures.gpu_s == 1490.0
    # progress kept: 600..700 (step 2) and 1500..1800: 400 s.
    assert figures.goodput == pytest.approx(400 / 1490)
    assert figures.dollars == pytest.approx(100 * 1490 / 3600)
    assert figures.dollars_lost == pytest.approx(100 * 550 / 3600)
    assert figures.dollars_per_step == pytest.approx(100 * 1490 / 3600 / 5)
    assert (
        figures.lines()[2]
        == "preemption of attempt 1 at step 4: lost 9m 10s (4m 10s since checkpoint step 2, 5m 00s restart)"
    )


def test_a_run_that_never_reached_step_1():
    ray = [RayAttempt(1, "RUNNING", T0 + 60, None)]
    files = {
        "attempts.jsonl": record_line(0, 1, "submitted"),
        "logs/attempt-1.log": f"{stamp(70)}\tloading the model\n",
    }
    figures = view(files, ray).goodput(now=T0 + 660)
    assert (figures.first_step_after_s, figures.steps_done, figures.gpu_s, figures.goodput) == (None, 0, 600.0, 0.0)
    assert figures.dollars_per_step is None
    assert figures.lines()[:2] == ["first step: not reached yet", "steps: 0 done"]
    assert figures.lines()[-1] == "cost: $16.67 so far, $0.00 lost, - per step"


def test_an_attempt_without_a_log_or_a_record_still_counts_its_gpu_time():
    ray = [RayAttempt(1, "FAILED", T0, T0 + 360)]
    figures = view({}, ray).goodput(now=T0 + 1000)
    assert (figures.gpu_s, figures.steps_done, len(figures.losses)) == (360.0, 0, 1)
    assert figures.losses[0].failure == "other"


def test_the_nemo_rl_steps_come_from_the_reward_line_after_the_banner():
    files = {"logs/attempt-1.log": nemo_log((600, 1, 0.2), (700, 2, 0.25))}
    ray = [RayAttempt(1, "RUNNING", T0 + 60, None)]
    steps = run_steps(attempt_lines(files, ray), "nemo-rl")
    assert [(done.step, done.time) for done in steps] == [(1, T0 + 600), (2, T0 + 700)]
    assert step_points(attempt_lines(files, ray), "nemo-rl") == [
        StepPoint(1, 1, T0 + 600, 0.2, None),
        StepPoint(1, 2, T0 + 700, 0.25, 100.0),
    ]


def test_the_verl_points_carry_the_score_and_verls_own_step_time():
    points = step_points(attempt_lines(FILES, RAY), "verl")
    assert [(p.attempt, p.step, p.reward, p.step_s) for p in points] == [
        (1, 1, 0.1, 91.0),
        (1, 2, 0.2, 92.0),
        (1, 3, 0.3, 93.0),
        (1, 4, 0.4, 94.0),
        (2, 3, 0.35, 93.0),
        (2, 4, 0.45, 94.0),
        (2, 5, 0.5, 95.0),
    ]


def test_no_gpu_price_shows_why_instead_of_dollars():
    shown = view(hourly=None)
    assert shown.unpriced().startswith("no list price for the stack's GPU nodes in core/facts/prices.json")
    assert shown.goodput(now=T0 + 5000).lines(shown.unpriced())[-1] == f"cost: {shown.unpriced()}"


def test_the_files_read_are_the_record_and_each_attempts_log(tmp_path):
    assert file_names(RAY) == ["attempts.jsonl", "logs/attempt-1.log", "logs/attempt-2.log"]
    (tmp_path / "logs").mkdir()
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    kept = read_local_run_files(tmp_path, file_names(RAY), RUN_FILE_LINES)
    assert parse(kept["attempts.jsonl"]) == parse(RECORD)
    assert "Training Progress" not in kept["logs/attempt-1.log"]
    assert view(kept).goodput(now=T0 + 5000) == view().goodput(now=T0 + 5000)


def test_ray_attempts_reads_the_job_details():
    jobs = [
        SimpleNamespace(metadata={"attempt": "2"}, status="RUNNING", start_time=2_000, end_time=None),
        SimpleNamespace(
            metadata={"attempt": "1"}, status=SimpleNamespace(value="FAILED"), start_time=1_000, end_time=1_500
        ),
    ]
    assert ray_attempts(jobs) == [RayAttempt(1, "FAILED", 1.0, 1.5), RayAttempt(2, "RUNNING", 2.0, None)]


def test_dollars_so_far_counts_every_attempt_and_the_live_one_until_now():
    assert dollars_so_far(RAY + [RayAttempt(3, "RUNNING", T0 + 2000, None)], 36.0, now=T0 + 2100) == pytest.approx(
        36.0 * (890 + 600 + 100) / 3600
    )


def test_measure_is_what_the_view_computes():
    attempts = goodput_attempts(RAY, parse(RECORD))
    assert view().goodput(now=T0 + 5000) == measure(
        attempts, run_steps(attempt_lines(FILES, RAY), "verl"), [2], 100.0, T0 + 5000
    )
