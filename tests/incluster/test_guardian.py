"""The guardian's policy, `decide(state)`, one rule at a time with a case it fires and one it does not; the
backoff; the settings file's one-line errors."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from incluster.guardian.command import main
from incluster.guardian.policy import PARK_TRIES, Action, AttemptView, Backoff, NodeView, State, decide
from incluster.guardian.settings import GuardError, ParkTarget, Settings, read_settings, settings_from
from jobs.guardian.settings import guardian_settings
from tests.conftest import LUSTRE, config_of

T0 = 1796126400.0
"""When the attempts of these cases started."""

END = T0 + 600
"""When they ended."""


@pytest.fixture(scope="module")
def settings() -> Settings:
    """The dev stack's settings with 2 recoveries at most and 15 idle minutes."""
    values = guardian_settings(config_of("dev", job={"maxRecoveries": 2}))
    return settings_from(values, "test")


GPU_NODE = NodeView("gpu-1", alive=True, gpus=8)
HEAD = NodeView("head", alive=True, gpus=0)


def state(settings, status="FAILED", now=END + 1, recorded=(), **changes) -> State:
    """The state after attempt 1 ended with `status` at END, the GPU node up, `recorded` events in the record."""
    attempt = changes.pop("attempt", {})
    newest = AttemptView(1, status, start=T0, end=None if status in ("PENDING", "RUNNING") else END, **attempt)
    entries = {event: {"event": event, "attempt": 1, "reason": f"{event} reason", **extra} for event, extra in recorded}
    base = State(now=now, settings=settings, newest=newest, nodes=(HEAD, GPU_NODE), recorded=entries, settle=60,
                 backoff=Backoff(30, 600), can_export=True, can_scale=True)  # fmt: skip
    return replace(base, **changes)


CAPACITY = ("failed", {"details": {"cause": "gpu-capacity-lost"}, "last_lines": ["x"]})
OTHER = ("failed", {"details": {"cause": "other"}, "last_lines": ["Traceback", "ValueError: bad"]})


def test_no_attempt_and_a_live_attempt_are_waits(settings):
    assert decide(replace(state(settings), newest=None)).kind == "wait"
    for status in ("PENDING", "RUNNING"):
        assert decide(state(settings, status)).kind == "wait"
    assert decide(state(settings, "FAILED", now=END + 61)).kind != "wait"


def test_a_gpu_node_that_died_while_the_attempt_ran_is_lost_capacity(settings):
    dead = NodeView("gpu-1", alive=False, gpus=8, end=END + 4)
    action = decide(state(settings, nodes=(HEAD, dead, replace(GPU_NODE, node_id="gpu-2"))))
    assert (action.kind, action.event, action.details) == ("record", "failed", {"cause": "gpu-capacity-lost"})
    assert action.reason == "Ray node gpu-1 with 8 GPUs died while attempt 1 ran"
    before = NodeView("gpu-0", alive=False, gpus=8, end=T0 - 100)
    assert decide(state(settings, nodes=(HEAD, before, GPU_NODE))).kind == "wait"


def test_a_message_naming_a_dead_node_or_a_preempted_pod_is_lost_capacity(settings):
    message = "ray.exceptions.ActorDiedError: The actor died because its node has died. Node Id: abc"
    action = decide(state(settings, attempt={"message": "Job entrypoint command failed", "last_lines": (message,)}))
    assert action.details == {"cause": "gpu-capacity-lost"} and "because its node has died" in action.reason
    bug = decide(state(settings, now=END + 61, attempt={"message": "ValueError: bad batch size"}))
    assert bug.details == {"cause": "other"} and bug.reason == "ValueError: bad batch size"


def test_fewer_full_gpu_nodes_than_gpu_nodes_is_lost_capacity(settings):
    action = decide(state(settings, nodes=(HEAD, replace(GPU_NODE, gpus=4))))
    assert action.details == {"cause": "gpu-capacity-lost"} and action.reason.startswith("GPU nodes went away: 0 of 1")
    assert decide(state(settings)).kind == "wait"


def test_without_evidence_a_failure_waits_for_ray_to_mark_lost_nodes_then_is_not_capacity(settings):
    waiting = decide(state(settings, now=END + 20))
    assert (waiting.kind, waiting.wait_s) == ("wait", 40)
    judged = decide(state(settings, now=END + 60, attempt={"last_lines": ("a", "b")}))
    assert (judged.event, judged.details, judged.last_lines) == ("failed", {"cause": "other"}, ("a", "b"))


def test_a_refused_attempt_is_judged_refused_even_with_gpu_nodes_missing(settings):
    line = "grpo-gke attempt 2: refused: /data/x has 1 checkpoint(s) and none is complete"
    action = decide(state(settings, nodes=(HEAD,), attempt={"last_lines": ("before", line)}))
    assert (action.event, action.reason, action.details) == ("failed", line, {"cause": "refused"})
    other = decide(state(settings, nodes=(HEAD,), attempt={"last_lines": ("refused: by someone",)}))
    assert other.details == {"cause": "gpu-capacity-lost"}


def test_a_stopped_attempt_is_judged_at_once_and_not_retried(settings):
    action = decide(state(settings, "STOPPED", now=END + 1))
    assert (action.event, action.details) == ("failed", {"cause": "stopped"})
    after = decide(state(settings, "STOPPED", recorded=[("failed", {"details": {"cause": "stopped"}})]))
    assert after.event == "not-retried"


def test_any_failure_but_lost_capacity_is_not_retried_with_its_last_lines(settings):
    action = decide(state(settings, recorded=[OTHER]))
    assert (action.kind, action.event, action.reason) == ("record", "not-retried", "failed reason")
    assert action.last_lines == ("Traceback", "ValueError: bad")
    assert decide(state(settings, recorded=[CAPACITY])).event == "recovering"


def test_lost_capacity_recovers_after_a_doubling_backoff_up_to_max_recoveries_then_gives_up(settings):
    first = decide(state(settings, recorded=[CAPACITY], recoveries=0))
    assert (first.event, first.details) == ("recovering", {"backoff_s": 30})
    second = decide(state(settings, recorded=[CAPACITY], recoveries=1))
    assert second.details == {"backoff_s": 60} and second.reason.startswith("recovery 2 of 2 in 60 s")
    over = decide(state(settings, recorded=[CAPACITY], recoveries=2))
    assert (over.event, over.last_lines) == ("gave-up", ("x",))
    assert over.reason == "2 of job.maxRecoveries=2 recoveries used: failed reason"
    assert Backoff(30, 600).delay(4) == 480 and Backoff(30, 600).delay(5) == 600


def test_the_recovery_waits_out_its_backoff_then_submits(settings):
    recovering = ("recovering", {"details": {"backoff_s": 30}})
    waiting = decide(state(settings, now=END + 10, recorded=[CAPACITY, recovering]))
    assert (waiting.kind, waiting.wait_s) == ("wait", 20)
    action = decide(state(settings, now=END + 30, recorded=[CAPACITY, recovering]))
    assert (action.kind, action.attempt) == ("recover", 1)


def test_success_is_recorded_then_exported_then_scaled_to_zero_after_the_idle_minutes(settings):
    assert decide(state(settings, "SUCCEEDED")).event == "succeeded"
    done = [("succeeded", {})]
    assert decide(state(settings, "SUCCEEDED", recorded=done)).kind == "export"
    exported = [*done, ("export-submitted", {})]
    waiting = decide(state(settings, "SUCCEEDED", now=END + 60, recorded=exported))
    assert (waiting.kind, waiting.wait_s) == ("wait", 15 * 60 - 60)
    scale = decide(state(settings, "SUCCEEDED", now=END + 15 * 60, recorded=exported))
    assert scale.kind == "scale-to-zero"
    # the idle bill that runs from then, as `pulumi up` priced it (the settings' idleBill), for the entry to keep
    assert scale.details == settings.idle_rate.details()
    assert scale.details["idleHourly"] == guardian_settings(config_of("dev"))["idleBill"]["hourly"] > 0
    scaled = [*exported, ("scaled-to-zero", {})]
    assert decide(state(settings, "SUCCEEDED", now=END + 16 * 60, recorded=scaled)).kind == "done"


def test_nothing_scales_to_zero_while_a_job_is_live_nor_with_idle_minutes_0_nor_unwired(settings):
    exported = [("succeeded", {}), ("export-submitted", {})]
    late = END + 3600
    assert decide(state(settings, "SUCCEEDED", now=late, recorded=exported, anything_live=True)).kind == "wait"
    off = replace(settings, idle_minutes=0)
    assert decide(state(off, "SUCCEEDED", now=late, recorded=exported)).kind == "done"
    assert decide(state(settings, "SUCCEEDED", now=late, recorded=exported, can_scale=False)).kind == "done"
    assert decide(state(settings, "SUCCEEDED", recorded=[("succeeded", {})], can_export=False)).kind == "wait"


def test_with_the_gpu_workers_at_zero_the_run_is_parked_once_while_nothing_is_live(settings):
    scaled = [("succeeded", {}), ("export-submitted", {}), ("scaled-to-zero", {})]
    late = END + 16 * 60
    park = decide(state(settings, "SUCCEEDED", now=late, recorded=scaled, can_park=True))
    assert (park.kind, park.attempt) == ("park", 1)
    assert park.reason == ("attempt 1 SUCCEEDED; the GPU workers are at zero: parking the run (storage.parkWhenIdle)")
    live = decide(state(settings, "SUCCEEDED", now=late, recorded=scaled, can_park=True, anything_live=True))
    assert (live.kind, live.reason) == (
        "wait",
        "attempt 1 SUCCEEDED; a job is live on the cluster, so the run is not parked yet",
    )
    for over in ("parked", "park-failed"):
        assert decide(state(settings, "SUCCEEDED", now=late, recorded=[*scaled, (over, {})], can_park=True)).kind == (
            "done"
        )
    assert decide(state(settings, "SUCCEEDED", now=late, recorded=scaled, can_park=False)).kind == "done"
    failed = [OTHER, ("not-retried", {}), ("scaled-to-zero", {})]
    assert decide(state(settings, now=late, recorded=failed, can_park=True)).kind == "park"
    not_yet = [("succeeded", {}), ("export-submitted", {})]
    assert decide(state(settings, "SUCCEEDED", now=END + 60, recorded=not_yet, can_park=True)).kind == "wait"


def test_a_failed_park_is_tried_again_after_the_backoff_then_left_to_jobs_park_after_park_tries(settings):
    scaled = [("succeeded", {}), ("export-submitted", {}), ("scaled-to-zero", {})]
    late = END + 16 * 60

    def after(tries: int, now: float) -> Action:
        failed = ("park-failed", {"details": {"tries": tries, "at": late}})
        return decide(state(settings, "SUCCEEDED", now=now, recorded=[*scaled, failed], can_park=True))

    first = decide(state(settings, "SUCCEEDED", now=late, recorded=scaled, can_park=True))
    assert first.details == {"tries": 1}
    waiting = after(1, late + 10)
    assert (waiting.kind, waiting.wait_s) == ("wait", 20)
    assert waiting.reason.endswith("parking failed (1 of 3 tries): trying again in 20 s")
    again = after(1, late + 30)
    assert (again.kind, again.details) == ("park", {"tries": 2}) and again.reason.endswith("try 2 of 3")
    assert after(2, late + 59).kind == "wait" and after(2, late + 60).details == {"tries": 3}
    given_up = after(PARK_TRIES, late + 3600)
    assert (given_up.kind, given_up.reason) == (
        "done",
        "attempt 1 SUCCEEDED; parking failed 3 times: python -m jobs park parks it by hand",
    )


def test_gpu_workers_that_came_back_after_the_scale_to_zero_are_scaled_to_zero_again_once_nothing_is_live(settings):
    """A RayCluster made anew by `pulumi up` (a replacement, an unpark) starts with its GPU workers: after the run's
    scale to zero the record alone would leave them billing at the running rate."""
    scaled = [("succeeded", {}), ("export-submitted", {}), ("scaled-to-zero", {})]
    late = END + 3 * 3600
    again = decide(state(settings, "SUCCEEDED", now=late, recorded=scaled, gpu_workers_up=True, can_park=True))
    assert (again.kind, again.details) == ("scale-to-zero", settings.idle_rate.details())
    assert again.reason == (
        "attempt 1 SUCCEEDED; the GPU workers are up again with nothing live (a RayCluster made anew, or an unpark)"
    )
    live = decide(state(settings, "SUCCEEDED", now=late, recorded=scaled, gpu_workers_up=True, anything_live=True))
    assert (live.kind, live.reason) == ("wait", "attempt 1 SUCCEEDED; the GPU workers are up again and a job is live")
    unwired = decide(state(settings, "SUCCEEDED", now=late, recorded=scaled, gpu_workers_up=True, can_scale=False))
    assert unwired.kind == "done"
    assert decide(state(settings, "SUCCEEDED", now=late, recorded=scaled)).kind == "done"


def test_a_run_that_is_not_retried_or_gave_up_scales_to_zero_too(settings):
    for over in ("not-retried", "gave-up"):
        recorded = [OTHER, (over, {})]
        assert decide(state(settings, now=END + 15 * 60, recorded=recorded)).kind == "scale-to-zero"
        assert decide(state(settings, now=END + 60, recorded=recorded)).kind == "wait"


def test_a_succeeded_run_asked_for_more_steps_is_extended_before_any_export(settings):
    longer = replace(settings, submission={**settings.submission, "metadata": {**settings.submission["metadata"],
                                                                               "maxSteps": "20"}})  # fmt: skip
    ran = {"metadata": {"maxSteps": "10", "epochs": "1"}}
    action = decide(state(longer, "SUCCEEDED", recorded=[("succeeded", {})], attempt=ran))
    assert action.kind == "extend" and "maxSteps 10 -> 20" in action.reason
    same = {"metadata": {"maxSteps": "20", "epochs": "1"}}
    assert decide(state(longer, "SUCCEEDED", recorded=[("succeeded", {})], attempt=same)).kind == "export"


def test_a_deadline_stop_before_the_schedules_end_is_recorded_then_resumed_without_spending_a_recovery(settings):
    stopped = {"metadata": {"maxSteps": "10", "epochs": "1"}, "deadline_stop": 4}
    action = decide(state(settings, "SUCCEEDED", attempt=stopped))
    assert (action.kind, action.event, action.details) == ("record", "deadline-stop", {"step": 4})
    assert action.reason == "attempt 1 stopped at its deadline after saving step 4, before its schedule's end (10)"
    spent = {"recoveries": 2}
    resume = decide(state(settings, "SUCCEEDED", recorded=[("deadline-stop", {})], attempt=stopped, **spent))
    assert (resume.kind, resume.attempt) == ("resume", 1)
    assert (
        resume.reason
        == "attempt 1 stopped at its deadline after saving step 4; the next attempt resumes from it on the next capacity"
    )
    waiting = decide(
        state(settings, "SUCCEEDED", recorded=[("deadline-stop", {})], attempt=stopped, next_capacity_in=600)
    )
    assert (waiting.kind, waiting.wait_s) == ("wait", 600)
    assert waiting.reason.endswith("the GPU nodes' capacity ends in 600 s: waiting for the next")
    refused = [("deadline-stop", {}), ("not-retried", {})]
    assert decide(state(settings, "SUCCEEDED", now=END + 60, recorded=refused, attempt=stopped)).kind == "wait"


def test_a_deadline_stop_at_the_schedules_last_step_is_a_success(settings):
    ten = replace(settings, submission={**settings.submission, "metadata": {**settings.submission["metadata"],
                                                                            "maxSteps": "10"}})  # fmt: skip
    last = {"metadata": {"maxSteps": "10", "epochs": ten.submission["metadata"]["epochs"]}, "deadline_stop": 10}
    assert decide(state(ten, "SUCCEEDED", attempt=last)).event == "succeeded"
    assert decide(state(ten, "SUCCEEDED", recorded=[("succeeded", {})], attempt=last)).kind == "export"


def test_a_verl_attempt_is_stopped_after_the_last_checkpoint_that_completes_before_its_deadline_then_resumed(settings):
    from incluster.deadline import Saved

    running = {"now": T0 + 900, "save_by": T0 + 1000}
    fits = state(settings, "RUNNING", saves=(Saved(2, T0 + 400),), **running)
    assert decide(fits).kind == "wait"
    due = state(settings, "RUNNING", saves=(Saved(2, T0 + 400), Saved(4, T0 + 800)), **running)
    action = decide(due)
    assert (action.kind, action.event, action.details) == ("record", "deadline-stop", {"step": 4})
    assert action.reason.startswith("attempt 1 saved step 4, the last checkpoint that completes before 2026-")
    stopping = decide(state(settings, "RUNNING", recorded=[("deadline-stop", {"details": {"step": 4}})], **running))
    assert stopping.kind == "stop"
    stopped = decide(state(settings, "STOPPED", recorded=[("deadline-stop", {"details": {"step": 4}})]))
    assert (stopped.kind, stopped.reason) == ("resume", "attempt 1 stopped at its deadline after saving step 4;"
                                              " the next attempt resumes from it on the next capacity")  # fmt: skip
    assert decide(state(settings, "RUNNING", saves=due.saves, now=T0 + 900)).kind == "wait"


def test_every_action_is_one_of_the_known_kinds_and_every_record_event_is_known(settings):
    from incluster.record import EVENTS

    cases = [state(settings, recorded=recorded) for recorded in ([], [OTHER], [CAPACITY])]
    for case in cases:
        action: Action = decide(case)
        assert action.kind in (
            "wait",
            "done",
            "record",
            "recover",
            "extend",
            "resume",
            "stop",
            "export",
            "scale-to-zero",
            "park",
        )
        assert action.kind != "record" or action.event in EVENTS


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda values: values.pop("maxRecoveries"), "the key 'maxRecoveries' is missing"),
        (lambda values: values.update(gpuNodes="1"), "'gpuNodes' must be int, got '1'"),
        (lambda values: values.update(idleMinutes=True), "'idleMinutes' must be a number, got True"),
        (lambda values: values["submission"]["runtime_env"].pop("env_vars"), "'submission' has no runtime_env"),
        (lambda values: values.update(park=[]), r"'park' must be an object or null, got \[\]"),
        (lambda values: values["park"].pop("bucket"), "'park.bucket' must be str, got None"),
        (lambda values: values["park"].update(deadlineSeconds="6h"), "'park.deadlineSeconds' must be a number"),
    ],
)
def test_bad_settings_are_one_line_naming_the_file_and_key(tmp_path, change, message):
    values = guardian_settings(config_of("dev", storage={**LUSTRE, "parkWhenIdle": True}))
    change(values)
    path = tmp_path / "settings.json"
    path.write_text(json.dumps(values))
    with pytest.raises(GuardError, match=message) as caught:
        read_settings(str(path))
    assert str(caught.value).startswith(f"{path}: ") and "\n" not in str(caught.value)


def test_a_lustre_stack_that_parks_when_idle_tells_the_guardian_what_to_export_and_where():
    settings = settings_from(guardian_settings(config_of("dev", storage={**LUSTRE, "parkWhenIdle": True})), "t")
    run = settings.run
    assert settings.park == ParkTarget(
        instance="projects/my-grpo-project/locations/us-central1-b/instances/grpo-dev-lustre",
        bucket=config_of("dev", storage=LUSTRE).parked_bucket_name,
        run_path=f"/checkpoints/{run}",
        exports_path=f"/exports/{run}",
        deadline_seconds=6 * 3600,
    )
    assert str(settings.run_dir) == f"/data/checkpoints/{run}"
    for other in ({"storage": LUSTRE}, {}):
        assert settings_from(guardian_settings(config_of("dev", **other)), "t").park is None


def test_the_in_cluster_command_refuses_the_foreground_form_in_one_line(capsys):
    assert main(["--stack", "dev"]) == 2
    assert capsys.readouterr().err == (
        "error: --stack is the foreground form: run it as .venv/bin/python -m jobs guard --stack NAME\n"
    )


def test_a_fresh_run_is_another_run_whose_guardian_waits_for_its_first_attempt():
    base = settings_from(guardian_settings(config_of("dev")), "test")
    fresh = settings_from(guardian_settings(config_of("dev", job={"runGeneration": 1})), "test")
    assert fresh.run != base.run and fresh.run_dir != base.run_dir
    action = decide(State(now=END, settings=fresh, newest=None))
    assert (action.kind, action.attempt) == ("wait", 0) and fresh.run in action.reason


def test_nothing_is_left_to_do_only_once_the_export_the_guardian_submitted_has_ended(settings):
    """Without a scale-to-zero hook (a Ray head on this machine) the run is done after its export, not while the export
    runs: its end is the guardian's to record. An export that ended otherwise is said in the last reason."""
    local = {"can_scale": False}
    submitted = [("succeeded", {}), ("export-submitted", {"details": {"step": 4, "submission": "r-export-step-4"}})]
    for status in ("PENDING", "RUNNING"):
        live = decide(state(settings, "SUCCEEDED", recorded=submitted, export_status=status, **local))
        assert (live.kind, live.reason) == ("wait", f"attempt 1 SUCCEEDED; the export r-export-step-4 is {status}")
    failed = decide(state(settings, "SUCCEEDED", recorded=submitted, export_status="FAILED", **local))
    assert (failed.kind, failed.details) == ("done", {"outcome": "succeeded"})
    assert failed.reason == (
        "attempt 1 SUCCEEDED; the export r-export-step-4 FAILED: python -m jobs export --step 4 tries it again"
    )
    exported = decide(state(settings, "SUCCEEDED", recorded=[*submitted, ("exported", {})], **local))
    assert (exported.kind, exported.reason) == ("done", "attempt 1 SUCCEEDED")


def test_a_run_over_says_how_it_ended_for_the_foreground_guardians_exit_status(settings):
    """`outcome` of the done decision: succeeded, or the record's event that ended the run."""
    local = {"can_scale": False, "can_export": False}
    budget = ("budget-stop", {"details": {"step": 4, "limit": "maxCost", "maxCost": 40.0, "maxGpuHours": None}})
    budgeted = settings_from(guardian_settings(config_of("dev", job={"maxCost": 40})), "test")
    cases = {
        "succeeded": state(settings, "SUCCEEDED", recorded=[("succeeded", {})], **local),
        "not-retried": state(settings, recorded=[OTHER, ("not-retried", {})], **local),
        "gave-up": state(settings, recorded=[CAPACITY, ("gave-up", {})], **local),
        "budget-stop": state(budgeted, "STOPPED", recorded=[budget], **local),
    }
    for outcome, over in cases.items():
        done = decide(over)
        assert (done.kind, done.details) == ("done", {"outcome": outcome}), outcome
