"""The guardian's whole policy, pure: what it looks at (State and its views of the attempt, the Ray nodes, the
GPU worker pods and the GPU nodes), what it may decide (Action), and `decide(state) -> Action` with its judgement
of a failure (capacity_lost: facts only). The rules are the package's (incluster/guardian/__init__.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from incluster import budget, job_client, readiness, record
from incluster.attempt import REFUSED_LINE
from incluster.deadline import stop_due
from incluster.guardian.settings import Settings
from incluster.runs import extends, schedule_done, schedule_of

SETTLE_SECONDS = 60.0
"""Seconds after a failure before it counts as not caused by lost capacity: Ray marks a lost node dead after
its health checks fail (about 15 s by default, ray_config_def.h), KubeRay deletes a preempted pod later."""


RAY_NODE_DIED_TEXTS = ("The actor died because its node has died.",)
"""Ray's own sentences that say a node was lost under the attempt, matched exactly (case and all) in the job's message
and the attempt's last lines: the GCS writes this one into every ActorDiedError whose actor's node died, whatever the
node's death reason (ray-project/ray src/ray/gcs/gcs_server/gcs_actor_manager.cc GcsActorManager::GenNodeDiedCause,
read at 9033414, the stored copy; the installed 2.60.0 wheel is b7f4259e), and the job supervisor's own death repeats
it ("Job supervisor actor died: {e}", ray 2.60.0 python/ray/dashboard/modules/job/job_manager.py L304). Words such as
"evicted" or "preempted" are no evidence: verl 0.9.1 logs `<prefix>/off_policy/evicted_samples` as a metric on every
step with stale samples (verl/trainer/ppo/v1/replay_buffer.py L367) and vLLM warns of KV-cache preemption."""

NODE_SHUTDOWN_REASONS = ("Terminated", "NodeShutdown")
"""A pod's status.reason when the kubelet's graceful node shutdown ended it (`Terminated`, "Pod was terminated in
response to imminent node shutdown.") or refused it on a node shutting down (`NodeShutdown`): kubernetes/kubernetes
pkg/kubelet/nodeshutdown/nodeshutdown_manager.go nodeShutdownReason, NodeShutdownNotAdmittedReason (~L85-90, read at
0946995, the stored copy; the consts are the same since v1.21). GKE sends a reclaimed Spot VM's preemption notice to the
kubelet, whose graceful node shutdown gives the pods a Failed phase and the Terminated reason (GKE docs
kubernetes-engine/docs/concepts/spot-vms "Termination and graceful shutdown of Spot VMs", how-to/preemptible-vms)."""

NODE_LOSS_DISRUPTIONS = ("TerminationByKubelet", "DeletionByPodGC", "DeletionByTaintManager")
"""Reasons of a pod's DisruptionTarget condition that mean its node went away: the kubelet's node shutdown
(podManager.killPods sets v1.PodReasonTerminationByKubelet, nodeshutdown_manager.go), the pod GC of a deleted node, the
taint manager of an unreachable one (k8s.io/api core/v1 types.go PodReason* constants). Not `PreemptionByScheduler`:
the scheduler's priority preemption (its `Preempted` event) takes the pod for another, it reclaims no VM."""


@dataclass(frozen=True)
class Backoff:
    """The wait before each recovery: `first` seconds, doubling with every recovery of the run, at most `most`."""

    first: float = 30.0
    """Seconds before the first recovery."""
    most: float = 600.0
    """The longest wait."""

    def delay(self, recoveries_before: int) -> float:
        """Seconds to wait before a recovery when the run already had `recoveries_before`."""
        return min(self.first * 2**recoveries_before, self.most)


BACKOFF = Backoff()
"""The guardian's backoff: 30 s doubling to 10 min."""

PARK_TRIES = 3
"""How many times the guardian tries to park a run before it leaves it to `python -m jobs park`; a park-failed entry
without its try count (written before the count was) counts as the last."""


@dataclass(frozen=True)
class AttemptView:
    """The newest attempt as the guardian sees it (times in seconds since the epoch)."""

    number: int
    """Attempt number."""
    status: str
    """PENDING, RUNNING, SUCCEEDED, FAILED or STOPPED."""
    start: float | None = None
    """When it started; None before."""
    end: float | None = None
    """When it ended; None while live."""
    message: str = ""
    """Ray's message about it (for a failure, the exit code and the last logs)."""
    last_lines: tuple[str, ...] = ()
    """Its last log lines (read only when a failure must be judged)."""
    metadata: dict[str, str] = field(default_factory=dict)
    """Its Ray metadata (the schedule it ran)."""
    deadline_stop: int | None = None
    """For a SUCCEEDED attempt that stopped at its deadline: the step it saved (its wrapper's last line)."""
    gone_from_ray: bool = False
    """The run's record knows it and the Ray head does not: a new head, whose job table started empty."""
    error: str | None = None
    """The line that says why it failed, as `python -m jobs status` finds it (read only when a failure must be
    judged; None when no line says)."""


@dataclass(frozen=True)
class NodeView:
    """One Ray node as the state API lists it."""

    node_id: str
    """Ray's node id."""
    alive: bool
    """ALIVE (else DEAD)."""
    gpus: float
    """GPUs it declared."""
    end: float | None = None
    """When it died (seconds since the epoch); None while alive or unknown."""


@dataclass(frozen=True)
class PodView:
    """One GPU worker pod as the API server lists it: what Kubernetes recorded about how it ended."""

    name: str
    """The pod's name."""
    phase: str
    """status.phase (Pending, Running, Succeeded, Failed, Unknown)."""
    reason: str = ""
    """status.reason (`Terminated` after a graceful node shutdown)."""
    message: str = ""
    """status.message."""
    disruption: str = ""
    """The reason of its DisruptionTarget condition when that is True, else ""."""
    since: float | None = None
    """When that condition turned True (seconds since the epoch); None without one."""


@dataclass(frozen=True)
class KubeNodeView:
    """One GPU node as the API server lists it: its Ready condition."""

    name: str
    """The node's name."""
    ready: str
    """The Ready condition's status: True, False or Unknown ("" when it has none)."""
    since: float | None = None
    """When Ready last changed (seconds since the epoch)."""
    why: str = ""
    """The Ready condition's reason and message."""


@dataclass(frozen=True)
class State:
    """Everything `decide` looks at."""

    now: float
    """Seconds since the epoch."""
    settings: Settings
    """What the guardian follows."""
    newest: AttemptView | None
    """The run's newest attempt (by number); None before the first."""
    nodes: tuple[NodeView, ...] = ()
    """Ray's nodes, dead ones included."""
    recoveries: int = 0
    """`recovering` decisions in the run's record."""
    worker_pods: tuple[PodView, ...] = ()
    """The GPU worker pods as the API server lists them (read only when a failure must be judged)."""
    kube_nodes: tuple[KubeNodeView, ...] = ()
    """The GPU nodes as the API server lists them (read only when a failure must be judged)."""
    recorded: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The record's newest entry of each event for the newest attempt."""
    anything_live: bool = False
    """Whether any job on the cluster is PENDING or RUNNING."""
    backoff: Backoff = BACKOFF
    """The wait before each recovery."""
    settle: float = SETTLE_SECONDS
    """Seconds after a failure before it is judged without evidence of lost capacity."""
    can_export: bool = False
    """Whether an export hook is wired."""
    can_scale: bool = False
    """Whether a scale-to-zero hook is wired."""
    can_park: bool = False
    """Whether a park hook is wired (storage.parkWhenIdle)."""
    export_status: str | None = None
    """After `export-submitted` and before `exported`: the export job's status on the Ray head; else None."""
    gpu_workers_up: bool = False
    """After the scale to zero: whether the RayCluster keeps GPU workers again (a RayCluster made anew by `pulumi
    up`, or an unpark); False when not read."""
    save_by: float | None = None
    """For a live verl attempt: when it must have saved (a known end of its GPU nodes less the margin); else None."""
    saves: tuple[Any, ...] = ()
    """With `save_by`: the run's complete checkpoints and when each completed (incluster/deadline.py Saved)."""
    next_capacity_in: float = 0.0
    """After a deadline stop: seconds until the GPU nodes whose known end stopped it are gone (0: resume now)."""
    budget_by: tuple[float, str] | None = None
    """For a RUNNING attempt of a run with a budget: when spending on at the attempt's rate crosses it, and the key
    (`maxCost` or `maxGpuHours`; incluster/budget.py crossing); else None."""
    spent: Any = None
    """With `budget_by`: what the run's attempts have used (incluster/budget.py Spent)."""
    projected: str | None = None
    """For a RUNNING verl attempt of a run whose last step is known (grpo.maxSteps, or its epochs of a data set of
    known size): its projected end (incluster/budget.py
    projection_line), shown in the guardian's waiting line; None otherwise."""
    gpu_rungs: dict[str, Any] | None = None
    """For a RUNNING attempt whose `gpu-rungs` the record lacks: its Ready GPU nodes per rung, as the entry's details
    (incluster/guardian/cluster.py gpu_rungs); None when not read (no API server, or it refused)."""


@dataclass(frozen=True)
class Action:
    """One decision: `wait` or `done` (nothing to do now), `record` (append `event`), or one of `recover`,
    `extend`, `resume`, `stop`, `export`, `scale-to-zero`, `park` (act, then record)."""

    kind: str
    """wait, done, record, recover, extend, resume, stop, export, scale-to-zero or park."""
    attempt: int
    """The attempt it is about (0 before the first)."""
    reason: str
    """One line: why."""
    event: str = ""
    """For `record`: the record event."""
    wait_s: float = 0.0
    """For `wait`: seconds until something is due (0: just poll)."""
    last_lines: tuple[str, ...] = ()
    """For `record`: log lines kept with it."""
    details: dict[str, Any] = field(default_factory=dict)
    """For `record`: the event's details; for `scale-to-zero`, the idle bill the `scaled-to-zero` entry keeps; for
    `done`, how the run ended (`outcome`: ended_as)."""


def capacity_lost(state: State) -> str | None:
    """Why the newest (failed) attempt lost its GPU capacity, or None without evidence. Facts only: the attempt gone
    with the Ray head, a Ray GPU node dead while it ran, Ray's own node-died sentence, a worker pod that Kubernetes
    ended with its node, a GPU node that stopped being Ready while it ran, fewer full GPU nodes than gpu.nodes."""
    newest, settings = state.newest, state.settings
    assert newest is not None and newest.end is not None
    if newest.gone_from_ray:
        return (
            f"attempt {newest.number} is not on the Ray head: a new head, whose job table started empty"
            " (the RayCluster has no GCS fault tolerance)"
        )
    started = newest.start if newest.start is not None else newest.end

    def within(moment: float | None) -> bool:
        return moment is not None and started <= moment <= newest.end + state.settle

    for node in state.nodes:
        if not node.alive and node.gpus > 0 and within(node.end):
            return f"Ray node {node.node_id} with {node.gpus:g} GPUs died while attempt {newest.number} ran"
    for line in (*newest.message.splitlines(), *newest.last_lines):
        if any(text in line for text in RAY_NODE_DIED_TEXTS):
            return f"GPU capacity went away: {one_line(line)}"
    for pod in state.worker_pods:
        shut_down = pod.phase == "Failed" and pod.reason in NODE_SHUTDOWN_REASONS
        if (shut_down or pod.disruption in NODE_LOSS_DISRUPTIONS) and within(pod.since):
            what = pod.message or pod.disruption or pod.reason
            return f"GPU worker pod {pod.name} ended with its node: {one_line(what)}"
    for kube_node in state.kube_nodes:
        if kube_node.ready != "True" and within(kube_node.since):
            return f"GPU node {kube_node.name} stopped being Ready ({kube_node.ready}): {one_line(kube_node.why)}"
    alive = [node.gpus for node in state.nodes if node.alive]
    missing = readiness.readiness(alive, settings.gpu_nodes, settings.gpus_per_node)
    return f"GPU nodes went away: {missing}" if missing else None


def one_line(text: str) -> str:
    """`text` on one line, its whitespace collapsed, at most 300 characters (a record reason)."""
    words = " ".join(text.split())
    return words if len(words) <= 300 else words[:297] + "..."


def _refusal(newest: AttemptView) -> str | None:
    return next((line for line in reversed(newest.last_lines) if REFUSED_LINE.match(line)), None)


def _judge_failure(state: State) -> Action:
    """The `failed` entry of a FAILED or STOPPED attempt, or a wait while the evidence may still come."""
    newest = state.newest
    assert newest is not None and newest.end is not None
    lines = newest.last_lines
    refused = _refusal(newest)
    if refused:
        return Action("record", newest.number, refused, "failed", last_lines=lines, details={"cause": "refused"})
    if newest.status == "STOPPED":
        reason = f"attempt {newest.number} was STOPPED (python -m jobs stop, or pulumi up replaced the run)"
        return Action("record", newest.number, reason, "failed", last_lines=lines, details={"cause": "stopped"})
    lost = capacity_lost(state)
    if lost:
        return Action(
            "record", newest.number, lost, "failed", last_lines=lines, details={"cause": record.GPU_CAPACITY_LOST}
        )
    left = newest.end + state.settle - state.now
    if left > 0:
        return Action("wait", newest.number, f"attempt {newest.number} FAILED; judging it in {left:.0f} s", wait_s=left)
    reason = one_line(newest.error or newest.message) or f"attempt {newest.number} FAILED"
    return Action("record", newest.number, reason, "failed", last_lines=lines, details={"cause": "other"})


def _after_failure(state: State) -> Action:
    newest, settings, recorded = state.newest, state.settings, state.recorded
    assert newest is not None and newest.end is not None
    failed = recorded["failed"]
    cause = failed.get("details", {}).get("cause")
    lines = tuple(failed.get("last_lines", ()))
    if cause != "gpu-capacity-lost":
        return Action("record", newest.number, failed["reason"], "not-retried", last_lines=lines)
    if "recovering" not in recorded:
        if state.recoveries >= settings.max_recoveries:
            reason = (
                f"{state.recoveries} of job.maxRecoveries={settings.max_recoveries} recoveries used: {failed['reason']}"
            )
            return Action("record", newest.number, reason, "gave-up", last_lines=lines)
        delay = state.backoff.delay(state.recoveries)
        reason = f"recovery {state.recoveries + 1} of {settings.max_recoveries} in {delay:g} s: {failed['reason']}"
        return Action("record", newest.number, reason, "recovering", details={"backoff_s": delay})
    left = newest.end + float(recorded["recovering"].get("details", {}).get("backoff_s", 0)) - state.now
    if left > 0:
        return Action(
            "wait", newest.number, f"recovering attempt {newest.number} in {left:.0f} s (backoff)", wait_s=left
        )
    return Action("recover", newest.number, f"attempt {newest.number + 1} after lost GPU capacity")


def _idle(state: State, why: str) -> Action:
    """After the run is over: scale to zero once nothing has been live for idleMinutes, then park (`_park`), else
    done. The scale to zero carries the idle bill that bills on from then (Settings.idle_rate) for the
    `scaled-to-zero` entry."""
    newest, settings = state.newest, state.settings
    assert newest is not None and newest.end is not None
    if "scaled-to-zero" in state.recorded:
        if state.gpu_workers_up and state.can_scale:
            if state.anything_live:
                return Action("wait", newest.number, f"{why}; the GPU workers are up again and a job is live")
            again = f"{why}; the GPU workers are up again with nothing live (a RayCluster made anew, or an unpark)"
            return Action("scale-to-zero", newest.number, again, details=settings.idle_rate.details())
        return _park(state, why)
    if not state.can_scale or settings.idle_minutes <= 0:
        return _done(state, why)
    if state.anything_live:
        return Action("wait", newest.number, f"{why}; a job is live on the cluster, so the GPU workers stay")
    left = newest.end + settings.idle_minutes * 60 - state.now
    if left > 0:
        return Action("wait", newest.number, f"{why}; GPU workers scale to zero in {left:.0f} s", wait_s=left)
    reason = f"{why}; idle for job.idleMinutes={settings.idle_minutes:g}"
    return Action("scale-to-zero", newest.number, reason, details=settings.idle_rate.details())


def ended_as(state: State) -> str:
    """How a run that is over ended: `succeeded` (its newest attempt SUCCEEDED at its schedule's end), else the record's
    event that ended it (`not-retried`, `gave-up`, `budget-stop`)."""
    newest, recorded = state.newest, state.recorded
    assert newest is not None
    over = next((event for event in ("not-retried", "gave-up", "budget-stop") if event in recorded), None)
    return over or ("succeeded" if newest.status == "SUCCEEDED" else newest.status.lower())


def _done(state: State, why: str) -> Action:
    """Nothing left to do for the run: `why`, and how it ended (ended_as) for the foreground guardian's exit status."""
    assert state.newest is not None
    return Action("done", state.newest.number, why, details={"outcome": ended_as(state)})


def _park(state: State, why: str) -> Action:
    """With the GPU workers at zero: park the run (storage.parkWhenIdle) while no job is live (a live job may still
    write to the run's directory); done without a park hook or once parked. A failed park is tried again after the
    backoff, PARK_TRIES times in all (a try picks up the export still running in the cloud:
    incluster/lustre_transfer.py RestTransfers._start); then done, the last `park-failed` entry saying why and that
    `python -m jobs park` parks by hand."""
    newest, recorded = state.newest, state.recorded
    assert newest is not None
    if not state.can_park or "parked" in recorded:
        return _done(state, why)
    failed = recorded.get("park-failed")
    tries = int((failed.get("details") or {}).get("tries", PARK_TRIES)) if failed else 0
    if tries >= PARK_TRIES:
        return _done(state, f"{why}; parking failed {tries} times: python -m jobs park parks it by hand")
    if failed:
        left = float((failed.get("details") or {}).get("at", 0)) + state.backoff.delay(tries - 1) - state.now
        if left > 0:
            reason = f"{why}; parking failed ({tries} of {PARK_TRIES} tries): trying again in {left:.0f} s"
            return Action("wait", newest.number, reason, wait_s=left)
    if state.anything_live:
        return Action("wait", newest.number, f"{why}; a job is live on the cluster, so the run is not parked yet")
    reason = f"{why}; the GPU workers are at zero: parking the run (storage.parkWhenIdle)"
    return Action("park", newest.number, reason + (f", try {tries + 1} of {PARK_TRIES}" if tries else ""),
                  details={"tries": tries + 1})  # fmt: skip


def _after_deadline_stop(state: State, step: int) -> Action:
    """After an attempt stopped at its deadline, having saved `step`, before its schedule's end: record it, then
    resume the run as the next attempt (unless a preflight refused the cluster meanwhile)."""
    newest, recorded = state.newest, state.recorded
    assert newest is not None
    why = f"attempt {newest.number} stopped at its deadline after saving step {step}"
    if "deadline-stop" not in recorded:
        schedule = newest.metadata.get("maxSteps") or "no step limit"
        return Action("record", newest.number, f"{why}, before its schedule's end ({schedule})", "deadline-stop",
                      details={"step": step})  # fmt: skip
    for over in ("not-retried", "gave-up"):
        if over in recorded:
            return _idle(state, f"attempt {newest.number} {over}: {recorded[over]['reason']}")
    if state.next_capacity_in > 0:
        left = state.next_capacity_in
        return Action("wait", newest.number, f"{why}; the GPU nodes' capacity ends in {left:.0f} s: waiting for the next",
                      wait_s=left)  # fmt: skip
    return Action("resume", newest.number, f"{why}; the next attempt resumes from it on the next capacity")


def _before_deadline(state: State) -> Action | None:
    """For a live verl attempt with a known save-by time: `deadline-stop` once its newest checkpoint is the last that
    completes before that time, then `stop` it; None otherwise."""
    newest, recorded = state.newest, state.recorded
    assert newest is not None
    if "deadline-stop" in recorded:
        return Action("stop", newest.number, f"attempt {newest.number} stops at its deadline")
    if state.save_by is None or newest.status != "RUNNING" or newest.start is None:
        return None
    due = stop_due(list(state.saves), newest.start, state.save_by)
    if due is None:
        return None
    reason = (f"attempt {newest.number} saved step {due.step}, the last checkpoint that completes before"
              f" {record.utc_stamp(state.save_by)} (a known end of its GPU nodes less the save margin)")  # fmt: skip
    return Action("record", newest.number, reason, "deadline-stop", details={"step": due.step})


def _before_budget(state: State) -> Action | None:
    """For a live verl attempt of a run with a budget: `budget-stop` once its newest checkpoint is the last that
    completes before spending crosses the budget (`stop_due`, the next save as far apart as the last two), or, when
    it is crossed before the attempt saved anything, at once; then `stop` it. None otherwise."""
    newest, recorded = state.newest, state.recorded
    assert newest is not None
    if "budget-stop" in recorded:
        return Action("stop", newest.number, f"attempt {newest.number} stops at the run's budget")
    if state.budget_by is None or newest.status != "RUNNING" or newest.start is None:
        return None
    at, limit = state.budget_by
    due = stop_due(list(state.saves), newest.start, at)
    if due is None and state.now < at:
        return None
    step = due.step if due is not None else max((item.step for item in state.saves), default=None)
    limits = budget.limits_of(state.settings.submission["metadata"])
    used = state.spent
    shown = f"${limits[limit]:,.2f}" if limit == "maxCost" else f"{limits[limit]:g} GPU hours"
    spent_now = f"${used.dollars:,.2f} and {used.gpu_hours:,.2f} GPU hours spent"
    if due is not None:
        why = f"attempt {newest.number} saved step {due.step}, the last checkpoint that completes within job.{limit}"
    else:
        kept = "no checkpoint" if step is None else f"the run's checkpoint of step {step}"
        why = f"attempt {newest.number} crossed job.{limit} before saving; the run keeps {kept}"
    reason = f"{why} ({shown}; {spent_now}, the next save would pass it at {record.utc_stamp(at)})"
    details = {"step": step, "limit": limit, **limits, "spent": round(used.dollars, 4),
               "gpuHours": round(used.gpu_hours, 4)}  # fmt: skip
    return Action("record", newest.number, reason, "budget-stop", details=details)


def _after_budget_stop(state: State) -> Action:
    """After the guardian stopped an attempt at the run's budget: the next attempt once the settings raise that budget
    (a `pulumi up` with a higher job.maxCost or job.maxGpuHours rolls the guardian with them; incluster/budget.py
    raised), else the run is over: export, scale to zero and park as after a success."""
    newest, recorded = state.newest, state.recorded
    assert newest is not None
    details = recorded["budget-stop"].get("details") or {}
    step = details.get("step")
    saved = "no checkpoint" if step is None else f"step {step}"
    if budget.raised(details, state.settings.submission["metadata"]):
        return Action("resume", newest.number, f"the run's budget was raised: the next attempt resumes from {saved}")
    why = f"attempt {newest.number} stopped at the run's budget (job.{details.get('limit')}) after saving {saved}"
    return _export_then_idle(state, why)


def _export_then_idle(state: State, why: str) -> Action:
    """Once the run is over with a checkpoint to keep: export it once (when an export hook is wired), wait while that
    export is live, record its success (an export that ended otherwise is said in the reasons after), then `_idle`."""
    newest, recorded = state.newest, state.recorded
    assert newest is not None
    if state.can_export and "export-submitted" not in recorded:
        return Action("export", newest.number, why)
    if state.export_status is not None:
        submission = export_submission_of(recorded["export-submitted"])
        if state.export_status == "SUCCEEDED":
            return Action("record", newest.number, f"the export {submission} SUCCEEDED", "exported",
                          details=dict(recorded["export-submitted"].get("details") or {}))  # fmt: skip
        if state.export_status in job_client.LIVE:  # its end is this guardian's to record: not done before it
            return Action("wait", newest.number, f"{why}; the export {submission} is {state.export_status}")
        step = (recorded["export-submitted"].get("details") or {}).get("step")
        again = "python -m jobs export" + (f" --step {step}" if step is not None else "")
        why = f"{why}; the export {submission} {state.export_status}: {again} tries it again"
    return _idle(state, why)


def _rungs_entry(state: State) -> Action | None:
    """The `gpu-rungs` entry of a RUNNING attempt whose GPU nodes' rungs were read and are not recorded yet."""
    newest = state.newest
    assert newest is not None
    if newest.status != "RUNNING" or state.gpu_rungs is None or "gpu-rungs" in state.recorded:
        return None
    rungs = state.gpu_rungs.get("rungs") or {}
    shown = ", ".join(f"{count} {rung}" for rung, count in rungs.items()) or "none of a rung's pool"
    other = int(state.gpu_rungs.get("otherNodes") or 0)
    reason = f"GPU nodes by rung: {shown}" + (f"; {other} of another pool" if other else "")
    return Action("record", newest.number, reason, "gpu-rungs", details=dict(state.gpu_rungs))


def export_submission_of(entry: dict[str, Any]) -> str | None:
    """The export job's submission id an `export-submitted` entry names: its `details.submission`, None when its
    details name none (the export hook submitted no job); an entry written before entries had details names it as
    its reason's first word."""
    details = entry.get("details")
    if isinstance(details, dict):
        submission = details.get("submission")
        return submission if isinstance(submission, str) and submission else None
    return (entry.get("reason") or "").split(" ", 1)[0] or None


def decide(state: State) -> Action:
    """The next thing to do about the run (see the module's rules)."""
    newest, recorded = state.newest, state.recorded
    if newest is None:
        return Action(
            "wait", 0, f"no attempt of {state.settings.run} yet (pulumi up or python -m jobs submit starts it)"
        )
    if newest.status in job_client.LIVE or newest.end is None:
        stopping = (_before_deadline(state) or _before_budget(state)) if newest.status == "RUNNING" else None
        projected = f"; {state.projected}" if state.projected else ""
        waiting = Action("wait", newest.number, f"attempt {newest.number} is {newest.status}{projected}")
        return stopping or _rungs_entry(state) or waiting
    if newest.status == "STOPPED" and "budget-stop" in recorded:
        return _after_budget_stop(state)
    if newest.status == "STOPPED" and "deadline-stop" in recorded:
        return _after_deadline_stop(state, int(recorded["deadline-stop"].get("details", {}).get("step", 0)))
    if newest.status == "SUCCEEDED" and newest.deadline_stop is not None:
        if not schedule_done(newest.metadata, newest.deadline_stop):
            return _after_deadline_stop(state, newest.deadline_stop)
    if newest.status == "SUCCEEDED":
        if "succeeded" not in recorded:
            return Action("record", newest.number, "", "succeeded", details=schedule_of(newest.metadata))
        for over in ("not-retried", "gave-up"):  # a failed preflight before the extension: the run is over
            if over in recorded:
                return _idle(state, f"attempt {newest.number} {over}: {recorded[over]['reason']}")
        wanted = state.settings.submission["metadata"]
        if extends(newest.metadata, wanted):
            reason = f"the schedule asks for more (maxSteps {newest.metadata.get('maxSteps') or 'none'} -> {wanted['maxSteps'] or 'none'}, epochs {newest.metadata.get('epochs')} -> {wanted['epochs']})"
            return Action("extend", newest.number, reason)
        return _export_then_idle(state, f"attempt {newest.number} SUCCEEDED")
    if "failed" not in recorded:
        return _judge_failure(state)
    for over in ("not-retried", "gave-up"):
        if over in recorded:
            return _idle(state, f"attempt {newest.number} {over}: {recorded[over]['reason']}")
    return _after_failure(state)
