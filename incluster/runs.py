"""Attempts of a run as plain data: the attempt's submission id, its submit_job kwargs and GRPO_*
environment, whether a new schedule extends a SUCCEEDED attempt, the newest attempt number the run has used (the one
numbering of every submitter) and whether its record says it is over.

Stdlib only, so the in-cluster guardian (incluster/shipping.py) carries it
without the typed config. Pure: no Ray, no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

RUN_ENV = ("GRPO_RUN", "GRPO_ATTEMPT", "GRPO_RUN_DIR")
"""Environment of each attempt's driver: the run id, the attempt number and the run directory
(set per attempt, after the run's hash)."""

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
    metadata and GRPO_* environment, with W&B on its own W&B run in the run's group and, for verl, the run's TensorBoard
    directory under the run directory (read only where `trainer.logger` has `tensorboard`: jobs/spec/training.py).

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


OVER_EVENTS = ("succeeded", "not-retried", "gave-up")
"""Record events that end a run at their attempt: the guardian's policy then only idles, scales to zero and parks
(incluster/guardian/policy.py `decide` and `_after_deadline_stop` hand each to `_idle`), `status` counts the idle bill
from them (jobs/runs/idle.py), and docs/up-and-destroy.md says such a run stays over after an unpark. `succeeded` ends
it unless the schedule now asks for more (`extends`)."""

ATTEMPT_LOG = re.compile(r"attempt-([0-9]+)\.log")
"""The name of an attempt's log in `<run dir>/logs/` (incluster/attempt.py log_path), with the attempt's number."""


def logged_attempts(names: Iterable[str]) -> list[int]:
    """The attempt numbers of the attempt logs among the file names `names` (every attempt's wrapper writes
    `logs/attempt-N.log`, whoever submitted it); other names are left out."""
    return [int(found[1]) for name in names if (found := ATTEMPT_LOG.fullmatch(name))]


def newest_attempt(listed: Iterable[int], entries: Iterable[dict], logged: Iterable[int]) -> int:
    """The newest attempt number the run has used, 0 for none: the newest of Ray's table (`listed`), the run's record
    (`entries`) and its attempt logs (`logged`). Every submitter numbers the next attempt one past it: a new Ray head
    lists none of the run's attempts (no GCS fault tolerance) and accepts an id it has not seen, so Ray's table alone
    would hand out attempt 1 again."""
    recorded = (item.get("attempt") for item in entries)
    return max((*listed, *(number for number in recorded if isinstance(number, int)), *logged), default=0)


def over_entry(entries: Iterable[dict], attempt: int) -> dict | None:
    """The record's entry that ended the run at `attempt` (OVER_EVENTS: `not-retried` or `gave-up` before
    `succeeded`), or None while the run goes on."""
    found = {item.get("event"): item for item in entries if item.get("attempt") == attempt}
    return next((found[event] for event in reversed(OVER_EVENTS) if event in found), None)


def schedule_of(metadata: dict[str, str]) -> dict[str, str]:
    """The schedule an attempt ran (its `maxSteps` and `epochs` job metadata), as `extends` reads it; kept in the
    record's `succeeded` entry, so that a Ray head which lists the attempt no more can still tell an extension."""
    return {key: metadata[key] for key in ("maxSteps", "epochs") if key in metadata}
