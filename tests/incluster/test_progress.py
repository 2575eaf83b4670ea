"""The progress line parsed from verl's and NeMo-RL's console logs."""

from __future__ import annotations

from incluster.progress import Progress, advance, parse_verl_metrics


def progress_of(text: str, framework: str) -> Progress:
    """Progress after every line of `text`, as the follower advances it line by line."""
    progress = Progress()
    for line in text.splitlines():
        progress = advance(progress, line, framework)
    return progress


VERL_LOG = """\
(TaskRunner pid=812) Training Progress:   0%|          | 0/58
(TaskRunner pid=812) step:1 - global_seqlen/mean:5120.0 - critic/score/mean:0.125 - actor/pg_loss:np.float64(0.15) - timing_s/step:81.2
(TaskRunner pid=812) step:2 - critic/score/mean:np.float64(0.40625) - actor/kl_loss:np.float32(1.5e-03) - response_length/mean:231.5
(TaskRunner pid=812) ("Final validation metrics: {'val-core/openai/gsm8k/reward/mean@1': 0.71}")
"""

NEMO_RL_LOG = """\
========================= Step 1/500 =========================
▶ Generating responses for batch of size 256...
📊 Training Results:
  • Loss: 0.0123
  • Avg Reward: 0.2031
  • Mean Generation Length: 812.5
========================= Step 2/500 =========================
  • Avg Reward: 0.3125
Saving checkpoint for step 2...
"""


def test_verl_step_line_yields_every_metric_with_numpy_wrappers_removed():
    metrics = parse_verl_metrics(VERL_LOG.splitlines()[2])
    assert metrics == {
        "step": 2.0,
        "critic/score/mean": 0.40625,
        "actor/kl_loss": 0.0015,
        "response_length/mean": 231.5,
    }


def test_lines_that_are_not_step_lines_yield_nothing():
    for line in (VERL_LOG.splitlines()[0], VERL_LOG.splitlines()[3], "warmup step:3 skipped", ""):
        assert parse_verl_metrics(line) is None
    assert progress_of(VERL_LOG.splitlines()[0], "verl") == Progress()


def test_verl_progress_is_the_last_step_and_its_score():
    progress = progress_of(VERL_LOG, "verl")
    assert progress == Progress(step=2, total_steps=None, reward=0.40625)
    assert progress.line("verl") == "step 2  critic/score/mean 0.4062"


def test_nemo_rl_progress_is_the_last_step_of_all_and_its_average_reward():
    progress = progress_of(NEMO_RL_LOG, "nemo-rl")
    assert progress == Progress(step=2, total_steps=500, reward=0.3125)
    assert progress.line("nemo-rl") == "step 2/500  avg reward 0.3125"


def test_a_new_nemo_rl_step_clears_the_previous_reward():
    progress = advance(Progress(step=1, total_steps=500, reward=0.2), "===== Step 2/500 =====", "nemo-rl")
    assert progress == Progress(step=2, total_steps=500, reward=None)
    assert progress.line("nemo-rl") == "step 2/500  avg reward -"


def test_no_step_yet_says_so():
    assert Progress().line("verl") == "waiting for the first training step"
