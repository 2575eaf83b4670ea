"""The run guardian against the real two-node Ray cluster (tests/support/two_node_ray.py, shared with
test_two_node_ray.py): a lost GPU node (a real node loss: its process group killed) recovered from the newest
complete step on the node started again, then the export and the
scale-to-zero decisions (recording stand-ins); an extended schedule continuing a SUCCEEDED run; a refused
attempt and a deterministic failure not retried; maxRecoveries honoured past the ninth attempt; a NeMo-RL-style
deadline stop (exit 0 before the schedule's end) resumed as the next attempt, one that saved nothing not retried,
and a verl attempt stopped by the guardian before a known end and resumed."""

from __future__ import annotations

import functools
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from incluster import job_client, record, run_submission, shipping
from incluster.guardian.loop import ExportDone, ExportRequest, Guardian, Hooks
from incluster.guardian.policy import Action, Backoff, decide
from incluster.guardian.settings import Settings, settings_from
from incluster.runs import for_attempt
from incluster.wandb_summary import WandbTarget
from jobs.demo.stand_in_trainer import STEPS_ENV, TRACKER
from jobs.guardian.settings import guardian_settings
from jobs.runs.observe import run_view
from jobs.spec.training import on_data_root, submission_of, training_spec
from tests.conftest import config_of
from tests.incluster.test_two_node_ray import WORLD_SIZE, steps_in, wait_until
from tests.ray_fixtures import stand_in_trainer

pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[default]' (requirements.txt)")

GUARD_SECONDS = 240.0
"""Longest run of one guardian in these tests."""

MAINTENANCE_LABEL = "cloud.google.com/scheduled-maintenance-time"
"""GKE's label of a node's coming host maintenance (core/facts/job.py SCHEDULED_MAINTENANCE_LABEL)."""

QUICK = Backoff(1, 1)
"""The tests' backoff: 1 s before each recovery."""


class Recorded:
    """Recording stand-ins for the export job, the scale-to-zero and the park (the stack's deployment wires the real
    ones; tests/incluster/test_guardian_park.py runs the real park hook against the Lustre stand-in)."""

    def __init__(self) -> None:
        self.exports: list[tuple[int, int | None]] = []
        self.scaled: list[str] = []
        self.parked: list[str] = []

    def export(self, request: ExportRequest) -> ExportDone:
        self.exports.append((request.attempt, request.step))
        return ExportDone(None, f"export of step {request.step} recorded (no job submitted)")

    def scale_to_zero(self, settings: Settings) -> str:
        self.scaled.append(settings.run)
        return "GPU workers at 0"

    def park(self, settings: Settings) -> dict:
        self.parked.append(settings.run)
        return {"state": "parked", "run": settings.run, "step": None, "objects": {"/checkpoints": 3}, "prefix": "p/"}

    def hooks(self, park: bool = False) -> Hooks:
        return Hooks(export=self.export, scale_to_zero=self.scale_to_zero, park=self.park if park else None)


class GuardedRun:
    """One run of the real spec with `entrypoint`, its shared-storage paths under `data_root`, and its guardian
    (job.preflight off: the stand-in node has no GPU to measure; tests/incluster/test_guardian_preflight.py covers it)."""

    def __init__(self, cluster, stack: str, data_root: Path, entrypoint: str, steps: int | None = None, **job) -> None:
        self.cluster, self.entrypoint = cluster, entrypoint
        self.config = config_of("dev", stack=stack, grpo={"maxSteps": steps}, job={"preflight": "off", **job})
        submission = on_data_root(submission_of(self.config, training_spec(self.config, entrypoint), 1), str(data_root))
        if steps is not None:
            submission["runtime_env"]["env_vars"][STEPS_ENV] = str(steps)
        self.submission = submission
        self.id = submission["metadata"]["run"]
        self.dir = Path(submission["runtime_env"]["env_vars"]["GRPO_RUN_DIR"])
        self.client = cluster.call(job_client.connect, cluster.endpoint)
        self.lines: list[str] = []

    def settings(self, **changes) -> Settings:
        """The guardian's settings of this run (guardian_settings with the test's submission)."""
        values = {**guardian_settings(self.config), "run": self.id, "submission": self.submission, **changes}
        return settings_from(values, "test")

    def submit_first(self) -> str:
        """Attempt 1, as `pulumi up` submits it."""
        known = functools.partial(run_submission.local_view, self.dir)
        return self.cluster.call(run_submission.ensure_run, self.client, self.submission, known).submission_id

    def submit_as(self, attempt: int) -> str:
        """Attempt `attempt` as the run's first on the cluster, its wrapper's modules sent as run_submission.ensure_run
        sends them."""

        def submit() -> str:
            kwargs = for_attempt(self.submission, attempt)
            with shipping.py_modules() as modules:
                runtime_env = {**kwargs["runtime_env"], "py_modules": modules}
                return self.client.submit_job(**{**kwargs, "runtime_env": runtime_env})

        return self.cluster.call(submit)

    def guard(
        self, hooks: Hooks, settle: float = 10.0, backoff: Backoff = QUICK, wandb: WandbTarget | None = None, **changes
    ) -> Action:
        """Run the guardian (inside the head's namespace) until the run is over and nothing is left to do."""

        def inside() -> Action:
            guardian = Guardian(self.settings(**changes), self.cluster.endpoint, hooks, self.lines.append,
                                backoff=backoff, settle=settle, wandb=wandb)  # fmt: skip
            return guardian.run(poll=0.5)

        return self.cluster.call(inside, timeout=GUARD_SECONDS)

    def guard_in_background(self, hooks: Hooks, **changes) -> Callable[[], Action]:
        """Start the guardian in a thread; the returned function joins it and returns its last action."""
        outcome: dict[str, object] = {}

        def body() -> None:
            try:
                outcome["action"] = self.guard(hooks, **changes)
            except BaseException as error:  # noqa: BLE001 - re-raised by the joining test
                outcome["error"] = error

        thread = threading.Thread(target=body, name=f"guardian-{self.id}", daemon=True)
        thread.start()

        def join() -> Action:
            thread.join(GUARD_SECONDS + 10)
            assert not thread.is_alive(), f"the guardian of {self.id} still runs; its last lines: {self.lines[-5:]}"
            if "error" in outcome:
                raise outcome["error"]  # type: ignore[misc]
            return outcome["action"]  # type: ignore[return-value]

        return join

    def events(self) -> list[tuple[int, str]]:
        """(attempt, event) of every line of the run's record."""
        return [(item["attempt"], item["event"]) for item in record.read(self.dir)]

    def entry(self, attempt: int, event: str) -> dict:
        """The record's line of `event` for `attempt`."""
        return next(item for item in record.read(self.dir) if (item["attempt"], item["event"]) == (attempt, event))

    def logs(self, attempt: int) -> str:
        """The attempt's whole log, as Ray keeps it."""
        return self.cluster.call(self.client.get_job_logs, f"{self.id}-{attempt}")

    def attempt_ids(self) -> list[str]:
        """The run's attempts on the cluster, in the order incluster.job_client sorts them."""
        return [job.submission_id for job in self.cluster.call(job_client.attempts, self.client, self.id)]


def test_a_lost_gpu_node_is_recovered_from_the_newest_complete_step_then_exported_scaled_and_extended(
    two_nodes, tmp_path
):
    run = GuardedRun(two_nodes, "guard-loss", tmp_path, stand_in_trainer("--save-every", "2", "--async-save",
                     "--half-save-at", "6", "--hold-seconds", "90"), steps=8, maxRecoveries=1)  # fmt: skip
    stand_ins = Recorded()
    assert run.submit_first() == f"{run.id}-1"
    join = run.guard_in_background(stand_ins.hooks(), idleMinutes=0.01)
    half = run.dir / "global_step_6" / "actor"
    wait_until(lambda: len(list(half.glob("*.pt"))) == 3 * WORLD_SIZE // 2, "attempt 1 half-writing step 6", 90)

    lost = two_nodes.kill_gpu_node()
    wait_until(lambda: (1, "recovering") in run.events(), "the guardian deciding to recover", 60)
    wait_until(lambda: any("waiting for GPU nodes: 0 of 1" in line for line in run.lines), "the readiness gate", 30)
    assert run.attempt_ids() == [f"{run.id}-1"]
    two_nodes.wait_for_state(lost, "DEAD")
    assert {node["NodeID"]: node["Alive"] for node in two_nodes.ray_nodes()}[lost] is False
    assert steps_in(run.logs(1)) == [1, 2, 3, 4, 5]
    complete = [step for step in (2, 4, 6) if (run.dir / f"global_step_{step}" / "data.pt").is_file()]
    assert complete == [2, 4] and not (run.dir / TRACKER).exists()
    back = two_nodes.restart_gpu_node()
    assert back != lost
    join()

    assert run.events() == [(1, "failed"), (1, "recovering"), (2, "submitted"), (2, "succeeded"),
                            (2, "export-submitted"), (2, "scaled-to-zero")]  # fmt: skip
    failed = run.entry(1, "failed")
    assert failed["details"] == {"cause": "gpu-capacity-lost"}
    assert failed["reason"].startswith((f"Ray node {lost} ", "GPU capacity went away: ", "GPU nodes went away: "))
    assert run.entry(1, "recovering")["details"] == {"backoff_s": 1}
    assert run.entry(2, "submitted")["resumed_from_step"] == 4
    log = run.logs(2)
    assert f"grpo-gke attempt 2: resuming from global_step_4 (step 4) in {run.dir}" in log
    assert f"Resuming from {run.dir}/global_step_4" in log and steps_in(log) == [5, 6, 7, 8]
    assert f"GPU worker on node {back} GPUs 0,1,2,3,4,5,6,7" in log
    assert [path.name.split("-")[0] for path in (run.dir / "incomplete").iterdir()] == ["global_step_6"]
    # Under async_save the trainer writes no tracker: it names what the wrapper chose; step 8 is complete.
    assert (run.dir / TRACKER).read_text() == "4" and (run.dir / "global_step_8" / "data.pt").is_file()
    logged = (run.dir / "logs" / "attempt-2.log").read_text().splitlines()
    assert any(line.split("\t", 1)[1].startswith("step:8 ") for line in logged)
    assert stand_ins.exports == [(2, 8)] and stand_ins.scaled == [run.id]
    assert run.attempt_ids() == [f"{run.id}-1", f"{run.id}-2"]

    # Raising maxSteps on the SUCCEEDED run: the guardian continues it as attempt 3 from its last checkpoint.
    longer = GuardedRun(two_nodes, "guard-loss", tmp_path, run.entrypoint, steps=10, maxRecoveries=1)
    assert longer.id == run.id
    longer.guard(stand_ins.hooks(), idleMinutes=0.01)
    assert longer.events()[6:] == [(3, "submitted"), (3, "succeeded"), (3, "export-submitted"), (3, "scaled-to-zero")]
    assert longer.entry(3, "submitted")["resumed_from_step"] == 8
    assert "the schedule asks for more (maxSteps 8 -> 10" in longer.entry(3, "submitted")["reason"]
    assert steps_in(longer.logs(3)) == [9, 10] and stand_ins.exports[-1] == (3, 10)


def test_a_refused_attempt_is_not_retried(two_nodes, tmp_path):
    run = GuardedRun(two_nodes, "guard-refused", tmp_path, stand_in_trainer("--save-every", "2"), steps=2)
    (run.dir / "global_step_2" / "actor").mkdir(parents=True)
    stand_ins = Recorded()
    run.submit_first()
    run.guard(stand_ins.hooks(), idleMinutes=0)
    assert run.events() == [(1, "failed"), (1, "not-retried")]
    refusal = run.entry(1, "not-retried")
    assert refusal["reason"].startswith("grpo-gke attempt 1: refused: ") and "none is complete" in refusal["reason"]
    assert refusal["last_lines"][-1] == refusal["reason"]
    assert run.attempt_ids() == [f"{run.id}-1"] and stand_ins.exports == [] and stand_ins.scaled == []


def test_a_deterministic_failure_is_not_retried_and_the_workers_scale_to_zero_after_the_idle_minutes_then_it_parks(
    two_nodes, tmp_path
):
    """The crash logs verl's evicted-samples metric on every step (verl 0.9.1 V1 trainer, replay_buffer.py L367) and
    the text of a preemption: words are no evidence of lost capacity, so it is not retried. With a park hook
    (storage.parkWhenIdle) the run is parked once the workers are at zero, and then nothing is left to do."""
    run = GuardedRun(two_nodes, "guard-bug", tmp_path, stand_in_trainer("--save-every", "2", "--fail-at", "3",
                     "--exit-code", "7", "--evicted-samples", "3"), steps=4)  # fmt: skip
    stand_ins = Recorded()
    run.submit_first()
    target = {"instance": "projects/p/locations/z/instances/i", "bucket": "b", "runPath": "/checkpoints/r",
              "exportsPath": "/exports/r", "deadlineSeconds": 60}  # fmt: skip
    run.guard(stand_ins.hooks(park=True), settle=1.0, idleMinutes=0.02, park=target)
    assert run.events() == [(1, "failed"), (1, "not-retried"), (1, "scaled-to-zero"), (1, "parked")]
    assert run.entry(1, "parked")["details"] == {"bucket": "b", "step": None, "objects": 3}
    assert stand_ins.parked == [run.id]
    not_retried = run.entry(1, "not-retried")
    assert "exit code 7" in not_retried["reason"]
    assert "stand-in trainer: deterministic failure at step 3 (exit code 7)" in not_retried["last_lines"]
    assert any("training/off_policy/evicted_samples:3" in line for line in not_retried["last_lines"])
    assert run.entry(1, "failed")["details"] == {"cause": "other"}
    assert run.attempt_ids() == [f"{run.id}-1"] and stand_ins.exports == [] and stand_ins.scaled == [run.id]


def test_an_ended_attempts_w_and_b_run_gets_the_projected_end_in_its_summary(two_nodes, tmp_path):
    """The attempt fails at step 3 of 6 (not retried); the guardian gives its W&B run (the W&B stand-in, served inside
    the head's namespace, holding the summary the trainer left) the projected end from the attempt's own log, merged
    with that summary, and reports it in one line."""
    from contextlib import ExitStack

    from incluster.attempt import logged_lines
    from incluster.budget import verl_pace
    from incluster.guardian.loop import PROJECTION_LINES
    from tests.support.wandb_stand_in import StandInWandb, wandb_stand_in

    run = GuardedRun(two_nodes, "guard-wandb", tmp_path, stand_in_trainer("--save-every", "2", "--fail-at", "3",
                     "--exit-code", "7"), steps=6)  # fmt: skip
    key = ("stand-in-team", "grpo", f"{run.id}-1")
    state = StandInWandb(summaries={key: {"critic/score/mean": 0.25}})
    with ExitStack() as stack:
        url = two_nodes.call(lambda: stack.enter_context(wandb_stand_in(state)))
        run.submit_first()
        run.guard(Recorded().hooks(), wandb=WandbTarget("grpo", None, state.api_key, url), idleMinutes=0)
        wait_until(lambda: bool(state.writes), "the W&B summary write", timeout=30)
    assert run.events()[:2] == [(1, "failed"), (1, "not-retried")]
    times, done = verl_pace(logged_lines(run.dir, 1, PROJECTION_LINES))
    assert done == 2 and len(times) == 2
    summary = state.summaries[key]
    assert summary["critic/score/mean"] == 0.25 and summary["grpo/steps_left"] == 4
    assert summary["grpo/projected_end_s"] == round(4 * sum(times) / 2, 1)
    assert ("grpo/projected_cost_usd" in summary) == (run.settings().gpu_prices is not None)
    wait_until(lambda: any("summary has the projected end" in line for line in run.lines), "the report", timeout=10)
    assert f"{run.id}: W&B run {run.id}-1's summary has the projected end (4 steps left)" in run.lines


PREEMPTED = (
    "echo 'ray.exceptions.ActorDiedError: The actor died because its node has died."
    " (a stand-in for a preempted GPU worker pod)'; exit 1"
)
"""An attempt that fails the way a preempted worker pod makes verl fail, at once."""


def test_max_recoveries_is_honoured_and_attempts_past_the_ninth_order_by_number(two_nodes, tmp_path):
    """The run's first attempt on the cluster is attempt 8, so two recoveries (job.maxRecoveries=2) reach attempt 10:
    a third recovery (the limit off by one or ignored) submits attempt 11, and attempts sorted as text put 10 first."""
    run = GuardedRun(two_nodes, "guard-max", tmp_path, PREEMPTED, maxRecoveries=2)
    assert run.submit_as(8) == f"{run.id}-8"
    run.guard(Hooks(), backoff=Backoff(0, 0))
    ids = [f"{run.id}-{number}" for number in range(8, 11)]
    assert run.attempt_ids() == ids
    events = run.events()
    assert [attempt for attempt, event in events if event == "submitted"] == [9, 10]
    assert sum(1 for _, event in events if event == "recovering") == 2
    assert events[-2:] == [(10, "failed"), (10, "gave-up")]
    assert run.entry(10, "gave-up")["reason"].startswith("2 of job.maxRecoveries=2 recoveries used: ")


def test_a_nemo_rl_style_deadline_stop_before_the_schedules_end_resumes_as_the_next_attempt_not_a_recovery(
    two_nodes, tmp_path
):
    """The stand-in stops after step 3 as NeMo-RL v0.7.0 stops at checkpoint_must_save_by (saves, prints its
    timeout line, exits 0: the job SUCCEEDED); with job.maxRecoveries=0 a recovery would give up."""
    run = GuardedRun(two_nodes, "guard-deadline", tmp_path, stand_in_trainer("--save-every", "4",
                     "--deadline-stop-after", "3"), steps=6, maxRecoveries=0)  # fmt: skip
    stand_ins = Recorded()
    run.submit_first()
    run.guard(stand_ins.hooks(), idleMinutes=0)
    assert run.events() == [(1, "deadline-stop"), (2, "submitted"), (2, "succeeded"), (2, "export-submitted")]
    stop = run.entry(1, "deadline-stop")
    assert stop["details"] == {"step": 3} and stop["reason"].endswith("before its schedule's end (6)")
    assert run.entry(2, "submitted")["resumed_from_step"] == 3
    first = run.logs(1)
    assert job_client.status_text(run.cluster.call(run.client.get_job_status, f"{run.id}-1")) == "SUCCEEDED"
    assert steps_in(first) == [1, 2, 3] and "Timeout has been reached, stopping training early\n" in first
    assert (
        first.rstrip("\n")
        .splitlines()[-1]
        .startswith("grpo-gke attempt 1: stopped at its deadline after saving step 3")
    )
    assert steps_in(run.logs(2)) == [4, 5, 6] and stand_ins.exports == [(2, 6)]
    # where the time went, as `status` reads it from this run's own files (jobs/runs/step_time.py): the stand-in's
    # verl stage timings of every step, saves at 3 (the deadline), 4 and 6; the time from the deadline stop to attempt
    # 2's submission is waiting for capacity, none of it recovery
    view = run.cluster.call(run_view, run.client, run.config, run.id, "verl", tmp_path, lambda line: None)
    figures, wall = view.breakdown(), view.wall_time(time.time())
    assert figures is not None and (figures.steps, figures.saves) == (6, 3)
    assert set(figures.mean_s) == {"generation", "log-probs", "training", "weight sync", "checkpoint save", "other"}
    assert wall is not None and wall.seconds["waiting for capacity"] > 0 and wall.seconds["recovery"] == 0


def test_a_deadline_stop_that_saved_nothing_is_a_failed_attempt_not_a_success(two_nodes, tmp_path):
    run = GuardedRun(two_nodes, "guard-deadline-unsaved", tmp_path, stand_in_trainer("--save-every", "4",
                     "--deadline-stop-after", "3", "--checkpointing-off"), steps=6)  # fmt: skip
    stand_ins = Recorded()
    run.submit_first()
    run.guard(stand_ins.hooks(), settle=1.0, idleMinutes=0)
    assert run.events() == [(1, "failed"), (1, "not-retried")]
    # the reason is the attempt's error line, as status shows it (the wrapper's, incluster/attempt.py
    # UNSAVED_STOP_EXIT), not Ray's "Job entrypoint command failed with exit code 4, ..." message
    reason = "grpo-gke attempt 1: failed: the framework stopped at its deadline ('Timeout has been reached, stopping"
    assert run.entry(1, "not-retried")["reason"].startswith(reason) and run.entry(1, "failed")["reason"].startswith(
        reason
    )
    assert run.entry(1, "not-retried")["last_lines"][-1].startswith("grpo-gke attempt 1: failed: the framework stopped")
    assert stand_ins.exports == [] and run.attempt_ids() == [f"{run.id}-1"]


def test_a_verl_attempt_is_stopped_by_the_guardian_after_its_last_checkpoint_before_a_known_end_then_resumed(
    two_nodes, tmp_path, monkeypatch
):
    """verl 0.9.1's default trainer reads no deadline: the guardian, told by the API server (a stand-in here) that
    the GPU node's host maintenance comes 8 s past the save margin, stops attempt 1 after the newest checkpoint that
    completes before it, and once a node without that end is up (the next capacity), resumes from that step."""
    import time

    from core.facts.job import DEADLINE_SAVE_MARGIN_SECONDS
    from incluster.endpoint import Endpoint
    from incluster.guardian import loop

    run = GuardedRun(two_nodes, "guard-verl-deadline", tmp_path, stand_in_trainer("--save-every", "2",
                     "--step-seconds", "1"), steps=12, maxRecoveries=0)  # fmt: skip
    ends: list[int] = []

    def gpu_nodes_of(_api: Endpoint) -> list[dict]:
        if any(event == "deadline-stop" for _, event in run.events()):
            return [{"metadata": {"name": "gpu-next", "labels": {}}}]
        ends[:] = ends or [int(time.time()) + DEADLINE_SAVE_MARGIN_SECONDS + 8]
        return [{"metadata": {"name": "gpu-ending", "labels": {MAINTENANCE_LABEL: str(ends[0])}}}]

    monkeypatch.setattr(loop, "api_endpoint", lambda endpoint: Endpoint(address="https://api.invalid", headers={}))
    monkeypatch.setattr(loop, "gpu_nodes_of", gpu_nodes_of)
    stand_ins = Recorded()
    run.submit_first()
    run.guard(stand_ins.hooks(), idleMinutes=0)
    events = run.events()
    assert events == [(1, "deadline-stop"), (2, "submitted"), (2, "succeeded"), (2, "export-submitted")]
    step = run.entry(1, "deadline-stop")["details"]["step"]
    assert 2 <= step < 12 and step % 2 == 0
    assert job_client.status_text(run.cluster.call(run.client.get_job_status, f"{run.id}-1")) == "STOPPED"
    assert run.entry(2, "submitted")["resumed_from_step"] == step
    assert steps_in(run.logs(2)) == list(range(step + 1, 13)) and stand_ins.exports == [(2, 12)]


def test_a_lost_ray_head_is_lost_capacity_and_the_next_attempt_continues_the_record_on_the_new_head(
    two_nodes, tmp_path
):
    """The head dies while attempt 1 runs (its process group killed: the GCS, the dashboard, the driver); the GPU node's
    raylet exits once it cannot reach the GCS (GPU_NODE_ENV); a new head comes up with an empty job table and the GPU
    node rejoins it. The guardian judges attempt 1 lost from the run's record and log, waits for the GPU node, and
    submits attempt 2 (not attempt 1 again) from the newest complete step."""
    run = GuardedRun(two_nodes, "guard-head", tmp_path, stand_in_trainer("--save-every", "2", "--hold-after", "4",
                     "--hold-seconds", "90"), steps=6, maxRecoveries=1)  # fmt: skip
    stand_ins = Recorded()
    run.submit_first()
    join = run.guard_in_background(stand_ins.hooks(), idleMinutes=0)
    wait_until(lambda: (run.dir / "global_step_4" / "data.pt").is_file(), "attempt 1 saving step 4", 90)
    wait_until(lambda: any(line.startswith("step:4 ") for line in run.logs(1).splitlines()), "step 4's line", 30)
    two_nodes.kill_head()
    two_nodes.wait_for_gpu_node_exit()
    two_nodes.start_head()
    assert run.attempt_ids() == []
    wait_until(lambda: (1, "recovering") in run.events(), "the guardian judging attempt 1 lost with the head", 60)
    wait_until(lambda: any("waiting for GPU nodes: 0 of 1" in line for line in run.lines), "the readiness gate", 30)
    back = two_nodes.start_gpu_node()
    join()

    assert run.events() == [(1, "failed"), (1, "recovering"), (2, "submitted"), (2, "succeeded"),
                            (2, "export-submitted")]  # fmt: skip
    failed = run.entry(1, "failed")
    assert failed["details"] == {"cause": "gpu-capacity-lost"}
    assert failed["reason"].startswith("attempt 1 is not on the Ray head: a new head")
    assert run.entry(2, "submitted")["resumed_from_step"] == 4
    assert run.attempt_ids() == [f"{run.id}-2"]
    log = run.logs(2)
    assert f"grpo-gke attempt 2: resuming from global_step_4 (step 4) in {run.dir}" in log
    assert steps_in(log) == [5, 6] and f"GPU worker on node {back} GPUs 0,1,2,3,4,5,6,7" in log
    assert (run.dir / "logs" / "attempt-1.log").is_file() and (run.dir / "logs" / "attempt-2.log").is_file()
    assert stand_ins.exports == [(2, 6)]


LOST_ONCE = (
    'if [ "$GRPO_ATTEMPT" = 1 ]; then echo "ray.exceptions.ActorDiedError: The actor died because its node has died.'
    ' (a stand-in for a preempted GPU worker pod)"; exit 1; fi; echo "attempt $GRPO_ATTEMPT holds"; sleep 120'
)
"""Attempt 1 fails at once as a preempted GPU worker pod makes verl fail; every later attempt holds (a run going on)."""


def provider_props(run: GuardedRun, cluster_uid: str, ready_timeout: float) -> dict:
    """The post-deploy step's inputs for `run` (jobs/stack.py build_job) through the head's plain address."""
    return {"submission": run.submission, "kubeconfig": "", "address": run.cluster.dashboard_url, "gpu_nodes": 1,
            "gpus_per_node": 8, "ready_timeout_seconds": ready_timeout, "cluster_uid": cluster_uid, "run": None,
            "submission_id": None}  # fmt: skip


def test_on_a_new_head_the_provider_and_submit_number_past_the_guardians_record_and_leave_an_over_run_alone(
    two_nodes, tmp_path, make_stack, capsys
):
    """Two runs the guardian followed on the old head: `done` SUCCEEDED (the guardian recorded it, and its schedule),
    `going` lost attempt 1 with its capacity and the guardian recovered it as attempt 2, which runs. The head is
    replaced (killed; a new one, with an empty job table, and the GPU node rejoining it), as `pulumi up` replaces the
    RayCluster or an unpark makes it anew. Then `python -m jobs submit` and the provider's create (an unpark) leave
    `done` over, waiting for no GPU node (it is down), and the provider's update (a replacement) submits `going`'s
    attempt 3, reading the record and logs through the new head: not attempt 1 again, whose log and verl metrics it
    would reuse, and whose record would be applied to it."""
    from jobs.submit.provider import JobProvider

    done = GuardedRun(two_nodes, "new-head-done", tmp_path, stand_in_trainer("--save-every", "1"), steps=1)
    done.submit_first()
    done.guard(Hooks(), idleMinutes=0)
    assert done.events() == [(1, "succeeded")]
    assert done.entry(1, "succeeded")["details"] == {"maxSteps": "1", "epochs": done.submission["metadata"]["epochs"]}

    going = GuardedRun(two_nodes, "new-head-going", tmp_path, LOST_ONCE, maxRecoveries=2)
    going.submit_first()
    guardian = two_nodes.call(Guardian, going.settings(), two_nodes.endpoint, Hooks(), going.lines.append,
                              backoff=QUICK, settle=1.0)  # fmt: skip
    while (2, "submitted") not in going.events():
        action = two_nodes.call(lambda: decide(guardian.observe()))
        if action.kind == "wait":
            time.sleep(0.5)
        else:
            two_nodes.call(guardian.apply, action, timeout=GUARD_SECONDS)
    assert going.events() == [(1, "failed"), (1, "recovering"), (2, "submitted")]
    wait_until(lambda: "attempt 2 holds" in going.logs(2), "attempt 2 running", 60)

    two_nodes.kill_head()
    two_nodes.wait_for_gpu_node_exit()
    two_nodes.start_head()
    assert going.attempt_ids() == [] and done.attempt_ids() == []
    provider = JobProvider()

    name, directory = make_stack("new-head-done", grpo={"maxSteps": 1}, job={"preflight": "off"})
    submitted = two_nodes.cli("submit", "--stack", name, "--dir", str(directory), "--address", two_nodes.dashboard_url,
                              "--data-root", str(tmp_path), "--entrypoint", done.entrypoint)  # fmt: skip
    over = f"{done.id}-1 already SUCCEEDED; nothing submitted (raise grpo.maxSteps to extend the run, or submit --fresh"
    assert (submitted.returncode, submitted.stdout, submitted.stderr) == (
        0,
        f"{done.id}-1\n",
        f"{over} for a new one)\n",
    )
    capsys.readouterr()
    created = two_nodes.call(provider.create, provider_props(done, "uid-2", ready_timeout=1), timeout=GUARD_SECONDS)
    assert created.outs["submission_id"] == f"{done.id}-1"
    assert capsys.readouterr().err.splitlines()[-1] == f"grpo-gke job: {over} for a new one)"
    assert done.attempt_ids() == [] and done.events() == [(1, "succeeded")]

    two_nodes.start_gpu_node()
    olds = provider_props(going, "uid-1", ready_timeout=60)
    updated = two_nodes.call(provider.update, "new-head-going", olds, {**olds, "cluster_uid": "uid-2"},
                             timeout=GUARD_SECONDS)  # fmt: skip
    assert updated.outs["submission_id"] == f"{going.id}-3"
    said = capsys.readouterr().err.splitlines()
    assert said[0].startswith(f"reading 2 files of {going.dir} through the Ray head")
    assert said[-1] == (
        f"grpo-gke job: submitted {going.id}-3: the run's directory knows attempt 2, which this Ray head does not list"
        " (a new head), and the run continues from its checkpoints"
    )
    assert going.attempt_ids() == [f"{going.id}-3"]
    wait_until(lambda: "attempt 3 holds" in going.logs(3), "attempt 3 running", 60)
    assert [path.name for path in sorted((going.dir / "logs").iterdir())] == [f"attempt-{n}.log" for n in (1, 2, 3)]
    assert going.events() == [(1, "failed"), (1, "recovering"), (2, "submitted")]
    stopped = two_nodes.call(job_client.stop_jobs, going.client, two_nodes.call(job_client.attempts, going.client,
                             going.id))  # fmt: skip
    assert stopped == [f"{going.id}-3"]


BUDGET_STEPS = 24
"""The budgeted run's schedule: steps of half a second, a save every 2."""


def test_a_run_stopped_at_its_budget_after_its_last_save_within_it_is_exported_scaled_and_resumed_once_raised(
    two_nodes, tmp_path, make_stack, capsys
):
    """Once attempt 1 logged its first step, job.maxCost is set to what it spent so far and 5 s more of the dev stack's
    spot node (its price in the guardian's settings; a start-up that takes long on a loaded machine then changes
    nothing), less than the schedule: the guardian stops attempt 1 right after the last save that completes within it,
    records why, exports it and scales the GPU workers to zero (the recording stand-ins); `python -m jobs status`
    says so in one line, and the provider (pulumi up's post-deploy step) submits nothing more; with job.maxCost
    raised it resumes the run from that save, and the guardian with the raised settings follows it to its end."""
    from jobs.submit.provider import JobProvider

    entrypoint = stand_in_trainer("--save-every", "2", "--step-seconds", "0.5")
    first = GuardedRun(two_nodes, "guard-budget", tmp_path, entrypoint, steps=BUDGET_STEPS, maxCost=100)
    first.submit_first()
    wait_until(lambda: steps_in(first.logs(1)) != [], "attempt 1's first step", 60)
    started = two_nodes.call(first.client.get_job_info, f"{first.id}-1").start_time / 1000
    hourly = guardian_settings(first.config)["gpuPrices"]["nodeHourly"]["spot"]
    cost = round((time.time() - started + 5) * hourly / 3600, 4)
    stopped_run = GuardedRun(two_nodes, "guard-budget", tmp_path, entrypoint, steps=BUDGET_STEPS, maxCost=cost)
    stand_ins = Recorded()
    stopped_run.guard(stand_ins.hooks(), idleMinutes=0.02)
    assert stopped_run.events() == [(1, "budget-stop"), (1, "export-submitted"), (1, "scaled-to-zero")]
    details = stopped_run.entry(1, "budget-stop")["details"]
    step = details["step"]
    assert step is not None, (stopped_run.entry(1, "budget-stop")["reason"], stopped_run.logs(1)[-1500:])
    assert 2 <= step < BUDGET_STEPS and step % 2 == 0 and details["limit"] == "maxCost"
    assert details["maxCost"] == cost and 0 < details["spent"] < cost
    assert job_client.status_text(two_nodes.call(first.client.get_job_status, f"{first.id}-1")) == "STOPPED"
    assert stand_ins.exports == [(1, step)] and stand_ins.scaled == [first.id]

    name, directory = make_stack("guard-budget", grpo={"maxSteps": BUDGET_STEPS}, job={"preflight": "off",
                                 "maxCost": cost})  # fmt: skip
    where = ("--stack", name, "--dir", str(directory), "--address", two_nodes.dashboard_url)
    status = two_nodes.cli("status", *where, "--data-root", str(tmp_path))
    assert status.returncode == 0, status.stderr
    said = [line for line in status.stdout.splitlines() if line.startswith("  budget: ")]
    assert len(said) == 1 and re.fullmatch(
        rf"  budget: \$0\.\d\d of \${cost:,.2f} spent, \$0\.\d\d left: the guardian stopped attempt 1 at"
        rf" job\.maxCost after saving step {step}; raise job\.maxCost and pulumi up to resume",
        said[0],
    ), status.stdout

    provider = JobProvider()
    kept = provider_props(stopped_run, "uid-1", ready_timeout=30)
    capsys.readouterr()
    unchanged = two_nodes.call(provider.update, name, kept, kept, timeout=GUARD_SECONDS)
    assert unchanged.outs["submission_id"] == f"{first.id}-1" and first.attempt_ids() == [f"{first.id}-1"]
    assert "nothing submitted (raise job.maxCost or job.maxGpuHours and pulumi up" in capsys.readouterr().err

    raised = GuardedRun(two_nodes, "guard-budget", tmp_path, entrypoint, steps=BUDGET_STEPS, maxCost=5)
    assert raised.id == first.id
    updated = two_nodes.call(provider.update, name, kept, provider_props(raised, "uid-1", ready_timeout=30),
                             timeout=GUARD_SECONDS)  # fmt: skip
    assert updated.outs["submission_id"] == f"{raised.id}-2"
    raised.guard(stand_ins.hooks(), idleMinutes=0.02)
    assert raised.events()[3:] == [(2, "succeeded"), (2, "export-submitted"), (2, "scaled-to-zero")]
    assert steps_in(raised.logs(2)) == list(range(step + 1, BUDGET_STEPS + 1))
    assert stand_ins.exports == [(1, step), (2, BUDGET_STEPS)]
