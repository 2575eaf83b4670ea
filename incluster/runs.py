"""Attempts of a run as plain data: the attempt's submission id, its submit_job kwargs and GRPO_*
environment, and whether a new schedule extends a SUCCEEDED attempt.

Stdlib only, so the in-cluster guardian (incluster/shipping.py) carries it
without the typed config. Pure: no Ray, no I/O.
"""

from __future__ import annotations

RUN_ENV = ("GRPO_RUN", "GRPO_ATTEMPT", "GRPO_RUN_DIR")
"""Environment of each attempt's driver: the run id, the attempt number and the run directory
(set per attempt, after the run's hash)."""

VERL_METRICS_ROOT = "VERL_FILE_LOGGER_ROOT"
"""verl's file logger writes <root>/<project>/<experiment>.jsonl, creating the directory itself
(VERL_FILE_LOGGER_PATH is opened as-is, before the run directory exists), and truncates the
file when training starts: each attempt therefore gets a root of its own."""

TENSORBOARD_DIR = "TENSORBOARD_DIR"
"""Where verl's tensorboard logger writes its event files (verl/utils/tracking.py _TensorboardAdapter,
default `tensorboard_log/<project>/<experiment>`); every attempt of a run writes `<run dir>/tensorboard`."""

WANDB_RUN_ID = "WANDB_RUN_ID"
"""The W&B run of one attempt: its submission id (wandb/wandb wandb/env.py L47 RUN_ID; wandb.init reads it when
called without `id`, as verl v0.9.1 verl/utils/tracking.py L85 and NeMo-RL v0.7.0 nemo_rl/utils/logger.py L209 call
it)."""

WANDB_RUN_GROUP = "WANDB_RUN_GROUP"
"""The W&B group of a run's attempts: the run id (wandb/env.py L49 RUN_GROUP; docs.wandb.ai/guides/runs/grouping,
"Set a group environment variable"). Set only with tracking on (jobs/spec/training.py tracking_env)."""


def attempt_id(run: str, attempt: int) -> str:
    """Ray submission id of attempt `attempt` (1, 2, ...) of `run`."""
    return f"{run}-{attempt}"


def run_dir_of(submission: dict) -> str:
    """The run directory a submission names (its GRPO_RUN_DIR)."""
    return submission["runtime_env"]["env_vars"]["GRPO_RUN_DIR"]


def for_attempt(submission: dict, attempt: int) -> dict:
    """The submit_job kwargs of attempt `attempt` of the run `submission` names: its own id,
    metadata and GRPO_* environment, with W&B on its own W&B run in the run's group and, for verl, its own
    metrics file and the run's TensorBoard directory under the run directory.

    The run directory is the submission's GRPO_RUN_DIR (the spec's on the shared storage, or a local
    one for a run on this machine), kept for every attempt.
    """
    run = submission["metadata"]["run"]
    env_vars = dict(submission["runtime_env"]["env_vars"])
    run_dir = env_vars["GRPO_RUN_DIR"]
    env_vars.update(zip(RUN_ENV, (run, str(attempt), run_dir), strict=True))
    if WANDB_RUN_GROUP in env_vars:
        env_vars[WANDB_RUN_ID] = attempt_id(run, attempt)
    if submission["metadata"]["framework"] == "verl":
        env_vars[VERL_METRICS_ROOT] = f"{run_dir}/metrics/attempt-{attempt}"
        env_vars[TENSORBOARD_DIR] = f"{run_dir}/tensorboard"
    return {
        **submission,
        "submission_id": attempt_id(run, attempt),
        "runtime_env": {**submission["runtime_env"], "env_vars": dict(sorted(env_vars.items()))},
        "metadata": {**submission["metadata"], "attempt": str(attempt)},
    }


def extends(done: dict[str, str], wanted: dict[str, str]) -> bool:
    """Whether the schedule `wanted` asks for more training than the SUCCEEDED attempt's `done`
    (both job metadata from spec.schedule_of): more epochs, or more steps ("" is unlimited). An attempt
    that recorded no schedule is never extended."""
    if "maxSteps" not in done or "epochs" not in done:
        return False
    steps_done, steps_wanted = (float(item["maxSteps"] or "inf") for item in (done, wanted))
    return steps_wanted > steps_done or int(wanted["epochs"]) > int(done["epochs"])


def schedule_done(done: dict[str, str], step: int) -> bool:
    """Whether an attempt of the schedule `done` (job metadata) that stopped at its deadline after saving `step`
    had nothing left to train: its maxSteps reached. NeMo-RL v0.7.0 checks its timeout before its step limit
    (nemo_rl/algorithms/grpo.py L3123-3133), so a deadline at the last step prints only the timeout line, not
    "Max number of steps has been reached, stopping training early" (L3128-3131); an attempt that ended with that
    line, or with its epochs (L2228, no line), has no deadline line and is the end of the run."""
    max_steps = done.get("maxSteps", "")
    return max_steps.isdigit() and step >= int(max_steps)
