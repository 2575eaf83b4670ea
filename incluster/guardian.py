"""The run guardian: it follows the run's newest attempt and decides what comes next.

`decide(state) -> Action` is the whole policy, pure; `run()` is the thin loop around it that reads the
cluster and the run's record, applies one action at a time and appends every decision to the record
(`<run dir>/attempts.jsonl`, incluster/record.py). The rules:

- an attempt PENDING or RUNNING: wait;
- an attempt FAILED because GPU capacity went away, judged from facts, never from words a trainer logs (capacity_lost:
  a Ray node with GPUs died while it ran; Ray's own node-died sentence in its message or last lines; a GPU worker
  pod that Kubernetes ended with its node, graceful node shutdown or a deleted or unreachable node; a GPU node whose
  Ready condition turned while it ran; fewer than gpu.nodes full GPU nodes up): `failed`, then `recovering` with a
  backoff (BACKOFF: 30 s doubling to 10 min), then the readiness gate (control.wait_for_gpus, with its progress line)
  and the next attempt through control.ensure_run (never two live attempts): its wrapper resumes from the newest
  complete checkpoint (`submitted`, with that step). At most maxRecoveries recoveries per run, then `gave-up`;
- an attempt the run's record (or its log, or this guardian) knows and the Ray head does not: a new head, whose job
  table started empty (no GCS fault tolerance). It is lost capacity like a lost node: the readiness gate waits for the
  GPU workers to rejoin the new head, the preflight runs on it (a head it has not checked), and the next attempt's
  number continues the record's;
- an attempt refused by its wrapper (checkpoints, none complete), STOPPED, or FAILED for any other reason
  (decided once SETTLE_SECONDS have passed without evidence of lost capacity, the time Ray takes to mark a
  lost node dead): `failed`, then `not-retried` with the reason and its last log lines;
- before it submits an attempt on a Ray cluster that no preflight has checked (a fresh RayCluster: its head is
  not the one the newest preflight result names, incluster/preflight/driver.py `rayHead`), the settings' preflight
  runs (incluster/preflight/gate.py, job.preflight; never before a resume on the same cluster): `preflight-passed`,
  or `preflight-failed` and `not-retried` with one line per bad node (cordoned first with job.cordonBadNodes);
- SUCCEEDED after a deadline stop before the schedule's end (NeMo-RL's `checkpoint_must_save_by`: it saves, prints
  "Timeout has been reached, stopping training early" and exits 0; the wrapper's last line names the step saved,
  incluster/attempt.py DEADLINE_STOP_LINE): `deadline-stop`, then the next attempt resumes from that step through the
  readiness gate, i.e. on the next capacity (not a recovery: maxRecoveries is not spent). A deadline stop that
  saved nothing ends FAILED (the wrapper's UNSAVED_STOP_EXIT) and is judged as a failure;
- a verl attempt RUNNING with a known end of its GPU nodes (incluster/deadline.py: verl 0.9.1's default trainer reads no
  deadline): once the newest checkpoint it saved is the last that completes before the save-by time
  (deadline.stop_due), `deadline-stop`, then the attempt is stopped; STOPPED after a `deadline-stop`, the next
  attempt resumes from that step on the next capacity, as above;
- SUCCEEDED: `succeeded`; when the settings' schedule asks for more (runs.extends) the next attempt
  continues the run; else the export (`export-submitted`, through Hooks.export);
- once the run is over (succeeded, not retried, gave up) and nothing is live on the cluster for
  idleMinutes: `scaled-to-zero` (through Hooks.scale_to_zero; idleMinutes 0 never).

`python -m jobs guard --stack NAME [--address URL] [--data-root DIR] [--follow] [--take-over]` runs it in the
foreground until the run is over and nothing is left to do (with `--follow`, until Ctrl-C); `python -m jobs guard
--settings FILE --address URL`, run as `python3 -m incluster.guardian`, is the in-cluster form (it always follows),
from the shipped files alone (incluster/shipping.py): no Pulumi, no typed config.

One guardian at a time (incluster/lease.py): where the Kubernetes API server is at hand, a guardian acts (records a
decision, submits, exports, scales) only while it holds the run guardian's Lease, checked before each action.
The in-cluster one waits while another holds it; the foreground one refuses to start while another holds it
(unless `--take-over`) and stops with exit 2 if it loses it.
Exit codes: 0 done; 2 bad input, an unreachable dashboard at the start, or another guardian holding the Lease
(one line); 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from incluster import control, record
from incluster.attempt import REFUSED_LINE, deadline_stop_in, log_path, logged_lines
from incluster.checkpoints import CheckpointError, newest_complete
from incluster.endpoint import AccessError, Endpoint, bearer_headers
from incluster.export_run import for_step
from incluster.lease import (
    RENEW_INTERVAL_SECONDS,
    Lease,
    LeaseError,
    LeaseHeld,
    acquire_in_foreground,
    foreground_identity,
    in_cluster_identity,
)
from incluster.runs import extends, run_dir_of, schedule_done

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

LAST_LINES = 20
"""Log lines of a failed attempt kept in the record."""

SETTLE_SECONDS = 60.0
"""Seconds after a failure before it counts as not caused by lost capacity: Ray marks a lost node dead after
its health checks fail (about 15 s by default, ray_config_def.h), KubeRay deletes a preempted pod later."""

IN_CLUSTER_API = "https://kubernetes.default.svc"
"""The API server as a pod reaches it (Kubernetes' `kubernetes` Service in `default`)."""

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod's service account token and the cluster CA are mounted."""

DEADLINE_REFRESH_SECONDS = 300.0
"""Seconds between two reads of the GPU nodes' known ends while a verl attempt runs (a maintenance label may come)."""

POLL_SECONDS = 10.0
"""Seconds between two looks at the cluster while nothing changes."""

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


class GuardError(Exception):
    """Bad settings or input; the message is one line naming the file or key and what to do."""


@dataclass(frozen=True)
class Settings:
    """What the guardian follows (jobs/guardian/settings.py `guardian_settings` writes it as JSON)."""

    stack: str
    """The stack's name."""
    run: str
    """The run's id."""
    submission: dict[str, Any]
    """The attempt-1 submit_job kwargs of the run (its schedule in the metadata)."""
    gpu_nodes: int
    """gpu.nodes: the full 8-GPU Ray nodes every attempt needs."""
    max_recoveries: int
    """job.maxRecoveries."""
    idle_minutes: float
    """job.idleMinutes (0: never scale to zero)."""
    ready_timeout_seconds: float
    """job.readyTimeoutSeconds: one readiness gate's longest wait."""
    framework: str
    """verl or nemo-rl: whose checkpoint layout."""
    world_size: int
    """Ranks of the run (8 x gpu.nodes)."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """Every key of the settings, for the hooks (namespace, RayCluster and worker group names, ...)."""

    @property
    def run_dir(self) -> Path:
        """The run's directory (the submission's GRPO_RUN_DIR)."""
        return Path(run_dir_of(self.submission))


SETTINGS_KEYS = {
    "stack": str,
    "run": str,
    "submission": dict,
    "gpuNodes": int,
    "maxRecoveries": int,
    "idleMinutes": (int, float),
    "readyTimeoutSeconds": (int, float),
    "framework": str,
    "worldSize": int,
}
"""The settings keys the guardian itself reads, with their JSON types."""


def settings_from(values: dict[str, Any], source: str) -> Settings:
    """Settings from the JSON object `values` read from `source`; GuardError names a missing or mistyped key."""
    for key, kind in SETTINGS_KEYS.items():
        if key not in values:
            raise GuardError(f"{source}: the key {key!r} is missing; write the file with guardian_settings(config)")
        if not isinstance(values[key], kind) or isinstance(values[key], bool):
            raise GuardError(f"{source}: {key!r} must be {getattr(kind, '__name__', 'a number')}, got {values[key]!r}")
    try:
        run_dir_of(values["submission"])
    except (KeyError, TypeError):
        raise GuardError(f"{source}: 'submission' has no runtime_env.env_vars.GRPO_RUN_DIR") from None
    return Settings(
        stack=values["stack"],
        run=values["run"],
        submission=values["submission"],
        gpu_nodes=values["gpuNodes"],
        max_recoveries=values["maxRecoveries"],
        idle_minutes=float(values["idleMinutes"]),
        ready_timeout_seconds=float(values["readyTimeoutSeconds"]),
        framework=values["framework"],
        world_size=values["worldSize"],
        raw=dict(values),
    )


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
    save_by: float | None = None
    """For a live verl attempt: when it must have saved (a known end of its GPU nodes less the margin); else None."""
    saves: tuple[Any, ...] = ()
    """With `save_by`: the run's complete checkpoints and when each completed (incluster/deadline.py Saved)."""
    next_capacity_in: float = 0.0
    """After a deadline stop: seconds until the GPU nodes whose known end stopped it are gone (0: resume now)."""


@dataclass(frozen=True)
class Action:
    """One decision: `wait` or `done` (nothing to do now), `record` (append `event`), or one of `recover`,
    `extend`, `resume`, `stop`, `export`, `scale-to-zero` (act, then record)."""

    kind: str
    """wait, done, record, recover, extend, resume, stop, export or scale-to-zero."""
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
    """For `record`: the event's details."""


def node_view(node: dict[str, Any]) -> NodeView:
    """A NodeView of one state API node entry (control.ray_nodes)."""
    end = node.get("end_time_ms")
    return NodeView(
        node_id=str(node.get("node_id", "")),
        alive=node.get("state") == "ALIVE",
        gpus=control.node_gpus(node),
        end=end / 1000 if isinstance(end, (int, float)) and end > 0 else None,
    )


def head_node_id(nodes: list[dict[str, Any]]) -> str | None:
    """The alive head's node id among state API node entries (control.ray_nodes), or None."""
    for node in nodes:
        if node.get("is_head_node") and node.get("state") == "ALIVE":
            return str(node.get("node_id", "")) or None
    return None


def preflighted_head(results: Path) -> str | None:
    """The Ray head the newest preflight result in `results` checked and passed, or None (none, unreadable,
    failed, or written before results named their head)."""
    from incluster.preflight.driver import NEWEST

    try:
        newest = (results / NEWEST).read_text().strip()
        result = json.loads((results / newest).read_text())
    except (OSError, ValueError):
        return None
    passed = isinstance(result, dict) and (result.get("verdict") or {}).get("passed") is True
    return (str(result.get("rayHead") or "") or None) if passed else None


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
            return f"GPU capacity went away: {_one_line(line)}"
    for pod in state.worker_pods:
        shut_down = pod.phase == "Failed" and pod.reason in NODE_SHUTDOWN_REASONS
        if (shut_down or pod.disruption in NODE_LOSS_DISRUPTIONS) and within(pod.since):
            what = pod.message or pod.disruption or pod.reason
            return f"GPU worker pod {pod.name} ended with its node: {_one_line(what)}"
    for kube_node in state.kube_nodes:
        if kube_node.ready != "True" and within(kube_node.since):
            return f"GPU node {kube_node.name} stopped being Ready ({kube_node.ready}): {_one_line(kube_node.why)}"
    missing = control.readiness([node.gpus for node in state.nodes if node.alive], settings.gpu_nodes)
    return f"GPU nodes went away: {missing}" if missing else None


def _one_line(text: str) -> str:
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
        return Action("record", newest.number, lost, "failed", last_lines=lines, details={"cause": record.GPU_CAPACITY_LOST})
    left = newest.end + state.settle - state.now
    if left > 0:
        return Action("wait", newest.number, f"attempt {newest.number} FAILED; judging it in {left:.0f} s", wait_s=left)
    reason = _one_line(newest.message) or f"attempt {newest.number} FAILED"
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
    """After the run is over: scale to zero once nothing has been live for idleMinutes, else done."""
    newest, settings = state.newest, state.settings
    assert newest is not None and newest.end is not None
    if not state.can_scale or settings.idle_minutes <= 0 or "scaled-to-zero" in state.recorded:
        return Action("done", newest.number, why)
    if state.anything_live:
        return Action("wait", newest.number, f"{why}; a job is live on the cluster, so the GPU workers stay")
    left = newest.end + settings.idle_minutes * 60 - state.now
    if left > 0:
        return Action("wait", newest.number, f"{why}; GPU workers scale to zero in {left:.0f} s", wait_s=left)
    return Action("scale-to-zero", newest.number, f"{why}; idle for job.idleMinutes={settings.idle_minutes:g}")


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
    from incluster.deadline import stop_due

    due = stop_due(list(state.saves), newest.start, state.save_by)
    if due is None:
        return None
    reason = (f"attempt {newest.number} saved step {due.step}, the last checkpoint that completes before"
              f" {record.utc_stamp(state.save_by)} (a known end of its GPU nodes less the save margin)")  # fmt: skip
    return Action("record", newest.number, reason, "deadline-stop", details={"step": due.step})


def decide(state: State) -> Action:
    """The next thing to do about the run (see the module's rules)."""
    newest, recorded = state.newest, state.recorded
    if newest is None:
        return Action(
            "wait", 0, f"no attempt of {state.settings.run} yet (pulumi up or python -m jobs submit starts it)"
        )
    if newest.status in control.LIVE or newest.end is None:
        stopping = _before_deadline(state) if newest.status == "RUNNING" else None
        return stopping or Action("wait", newest.number, f"attempt {newest.number} is {newest.status}")
    if newest.status == "STOPPED" and "deadline-stop" in recorded:
        return _after_deadline_stop(state, int(recorded["deadline-stop"].get("details", {}).get("step", 0)))
    if newest.status == "SUCCEEDED" and newest.deadline_stop is not None:
        if not schedule_done(newest.metadata, newest.deadline_stop):
            return _after_deadline_stop(state, newest.deadline_stop)
    if newest.status == "SUCCEEDED":
        if "succeeded" not in recorded:
            return Action("record", newest.number, "", "succeeded")
        wanted = state.settings.submission["metadata"]
        if extends(newest.metadata, wanted):
            reason = f"the schedule asks for more (maxSteps {newest.metadata.get('maxSteps') or 'none'} -> {wanted['maxSteps'] or 'none'}, epochs {newest.metadata.get('epochs')} -> {wanted['epochs']})"
            return Action("extend", newest.number, reason)
        if state.can_export and "export-submitted" not in recorded:
            return Action("export", newest.number, f"attempt {newest.number} SUCCEEDED")
        return _idle(state, f"attempt {newest.number} SUCCEEDED")
    if "failed" not in recorded:
        return _judge_failure(state)
    for over in ("not-retried", "gave-up"):
        if over in recorded:
            return _idle(state, f"attempt {newest.number} {over}: {recorded[over]['reason']}")
    return _after_failure(state)


@dataclass(frozen=True)
class ExportRequest:
    """What the export hook is asked to turn into a Hugging Face model directory."""

    settings: Settings
    """The run's settings."""
    attempt: int
    """The SUCCEEDED attempt."""
    step: int | None
    """The newest complete checkpoint's step; None when there is none."""


@dataclass(frozen=True)
class Hooks:
    """What the guardian does beyond Ray jobs of the run, wired by the caller (the export job and the
    scale-to-zero belong to the stack's deployment); each returns one line saying what it did."""

    export: Callable[[ExportRequest], str] | None = None
    """Submit the export job; None: no export is decided."""
    scale_to_zero: Callable[[Settings], str] | None = None
    """Scale the GPU workers to zero; None: no scale-to-zero is decided."""


class Guardian:
    """The loop around `decide`: reads the cluster and the record, applies an action, records the decision."""

    def __init__(
        self,
        settings: Settings,
        endpoint: Endpoint,
        hooks: Hooks,
        report: control.Report,
        backoff: Backoff = BACKOFF,
        settle: float = SETTLE_SECONDS,
        clock: Callable[[], float] = time.time,
        lease: Lease | None = None,
        wait_for_lease: bool = True,
    ) -> None:
        self.settings, self.endpoint, self.hooks, self.report = settings, endpoint, hooks, report
        self.backoff, self.settle, self.clock = backoff, settle, clock
        self.lease, self.wait_for_lease = lease, wait_for_lease
        self.client: JobSubmissionClient = control.connect(endpoint)
        self._deadline_read: tuple[int, float, float | None] = (0, float("-inf"), None)
        """For the attempt it was read for: when the GPU nodes' known end was read, and the save-by time it gave."""
        self.seen_attempt = 0
        """The newest attempt of the run this guardian has seen on the Ray head."""
        self.missed_since: dict[int, float] = {}
        """When an attempt the record knows was first missed on the Ray head, by number."""

    def observe(self) -> State:
        """The state `decide` needs, read from Ray (every request within control.DEADLINES), the record and, when a
        failure must be judged, the API server."""
        settings = self.settings
        jobs = control.attempts(self.client, settings.run)
        entries = record.read(settings.run_dir)
        if jobs:
            self.seen_attempt = max(self.seen_attempt, control.attempt_number(jobs[-1]))
            newest = self._view(jobs[-1], entries)
        else:
            newest = self._missing_view(entries)
        recorded = {item["event"]: item for item in entries if newest and item.get("attempt") == newest.number}
        judging = newest is not None and newest.status in ("FAILED", "STOPPED") and "failed" not in recorded
        pods, kube_nodes = self.kubernetes_facts() if judging and not newest.gone_from_ray else ((), ())
        return State(
            now=self.clock(),
            settings=settings,
            newest=newest,
            nodes=tuple(node_view(node) for node in control.ray_nodes(self.endpoint)),
            recoveries=sum(1 for item in entries if item.get("event") == "recovering"),
            worker_pods=pods,
            kube_nodes=kube_nodes,
            recorded=recorded,
            anything_live=any(control.status_text(job.status) in control.LIVE for job in self.client.list_jobs()),
            backoff=self.backoff,
            settle=self.settle,
            can_export=self.hooks.export is not None,
            can_scale=self.hooks.scale_to_zero is not None,
            **self.deadline_view(newest, recorded),
        )

    def known_end(self, attempt: int) -> Any:
        """The earliest known end of the GPU nodes (a incluster/deadline.py Deadline), or None: none known, no API
        server at hand, or it did not answer (a progress line says so)."""
        from incluster.deadline import earliest_end

        api = api_endpoint(self.endpoint)
        if api is None:
            return None
        try:
            return earliest_end(gpu_nodes_of(api), bool(self.settings.raw.get("flexStart")))
        except control.JobError as error:
            self.report(f"{self.settings.run}: no deadline known for attempt {attempt}: {error}")
            return None

    def deadline_view(self, newest: AttemptView | None, recorded: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """For a RUNNING verl attempt, `save_by` and `saves`: the earliest known end of the GPU nodes less the margin
        (the nodes read for each attempt, then every DEADLINE_REFRESH_SECONDS) and the run's complete checkpoints;
        after a deadline stop, `next_capacity_in` (the nodes read every poll); else nothing."""
        from incluster.deadline import next_capacity_in, save_by, verl_saves

        if newest is None:
            return {}
        now = self.clock()
        over = "not-retried" in recorded or "gave-up" in recorded
        if newest.status not in control.LIVE and "deadline-stop" in recorded and not over:
            return {"next_capacity_in": next_capacity_in(self.known_end(newest.number), now)}
        if self.settings.framework != "verl" or newest.status != "RUNNING":
            return {}
        attempt, read_at, save_by_at = self._deadline_read
        if attempt != newest.number or now - read_at >= DEADLINE_REFRESH_SECONDS:
            ends = self.known_end(newest.number)
            save_by_at = save_by(ends) if ends is not None else None
            self._deadline_read = (newest.number, now, save_by_at)
        if save_by_at is None:
            return {}
        return {"save_by": save_by_at, "saves": tuple(verl_saves(self.settings.run_dir, self.settings.world_size))}

    def _view(self, job: Any, entries: list[dict[str, Any]]) -> AttemptView:
        number = control.attempt_number(job)
        status = control.status_text(job.status)
        judged = any(item.get("attempt") == number and item.get("event") == "failed" for item in entries)
        message = job.message or ""
        lines: tuple[str, ...] = ()
        if status in ("FAILED", "STOPPED") and not judged:
            lines = failure_lines(self.settings.run_dir, number, message)
        return AttemptView(
            number=number,
            status=status,
            start=job.start_time / 1000 if job.start_time else None,
            end=job.end_time / 1000 if job.end_time else None,
            message=message,
            last_lines=lines,
            metadata=dict(job.metadata or {}),
            deadline_stop=deadline_stop_in(self.settings.run_dir, number) if status == "SUCCEEDED" else None,
        )

    def _missing_view(self, entries: list[dict[str, Any]]) -> AttemptView | None:
        """The newest attempt the run's record (or its logs, or this guardian) knows when the Ray head lists none of
        the run's: a new head, whose job table started empty (no GCS fault tolerance). It ended when its log was last
        written (else when the guardian first missed it): SUCCEEDED when the record says so, else FAILED; None for a run
        with no attempt yet."""
        number = max(known_attempt(entries, self.settings.run_dir), self.seen_attempt)
        if number == 0:
            return None
        succeeded = any(item.get("attempt") == number and item.get("event") == "succeeded" for item in entries)
        try:
            end = log_path(self.settings.run_dir, number).stat().st_mtime
        except OSError:
            end = self.missed_since.setdefault(number, self.clock())
        lines = () if succeeded else failure_lines(self.settings.run_dir, number, "")
        status = "SUCCEEDED" if succeeded else "FAILED"
        return AttemptView(number=number, status=status, end=end, last_lines=lines, gone_from_ray=True)

    def kubernetes_facts(self) -> tuple[tuple[PodView, ...], tuple[KubeNodeView, ...]]:
        """The GPU worker pods and GPU nodes as the API server lists them; nothing without an API server at hand or
        when it refuses (a progress line says so: the judgement goes on from Ray's facts)."""
        api = api_endpoint(self.endpoint)
        if api is None:
            return (), ()
        try:
            pods = worker_pods_of(api, self.settings)
            kube_nodes = gpu_nodes_of(api)
        except control.JobError as error:
            self.report(f"{self.settings.run}: judging without the API server's pods and nodes: {error}")
            return (), ()
        return tuple(map(pod_view, pods)), tuple(map(kube_node_view, kube_nodes))

    def append(self, attempt: int, event: str, reason: str = "", **extra: Any) -> None:
        """Append one decision to the run's record and report it."""
        record.append(self.settings.run_dir, record.entry(self.clock(), attempt, event, reason, **extra))
        self.report(f"{self.settings.run}: attempt {attempt} {event}" + (f": {reason}" if reason else ""))

    def resume_step(self) -> int | None:
        """The step the next attempt's wrapper will resume from (None: from scratch, or it will refuse)."""
        try:
            chosen = newest_complete(self.settings.run_dir, self.settings.framework, self.settings.world_size)
        except CheckpointError:
            return None
        return chosen.step if chosen else None

    def submit(self, attempt: int, reason: str) -> None:
        """Pass the readiness gate and, on a Ray cluster no preflight has checked, the preflight; then submit
        the run's next attempt through control.ensure_run. `attempt` is the attempt it follows."""
        settings = self.settings
        control.wait_for_gpus(self.endpoint, settings.gpu_nodes, settings.ready_timeout_seconds, self.report)
        if not self.may_act() or not self.preflight(attempt) or not self.may_act():
            return
        step = self.resume_step()
        outcome = control.ensure_run(
            self.client, self.told_the_deadline(settings.submission), self.deadline_stop_of, after=attempt
        )
        if outcome.action in ("submitted", "extended", "resumed"):
            number = int(outcome.submission_id.rsplit("-", 1)[1])
            self.append(number, "submitted", reason, resumed_from_step=step)
        else:
            self.report(f"{settings.run}: {outcome.sentence()}")

    def deadline_stop_of(self, job: Any) -> int | None:
        """The step a SUCCEEDED attempt `job` saved before it stopped at its deadline, from the end of its log in
        the run directory (not Ray's whole log); None otherwise."""
        if control.status_text(job.status) != "SUCCEEDED":
            return None
        return deadline_stop_in(self.settings.run_dir, control.attempt_number(job))

    def preflight(self, attempt: int) -> bool:
        """Run the settings' preflight when the Ray cluster's head is not the one the newest preflight result
        names (a fresh RayCluster); whether the next attempt may go. A failed one is recorded as
        `preflight-failed` and `not-retried`, one line per bad node."""
        from incluster.preflight.gate import PreflightRefused, before_first_attempt

        template = self.settings.raw.get("preflight")
        if template is None:
            return True
        results = self.settings.run_dir / "preflight"
        head = head_node_id(control.ray_nodes(self.endpoint))
        if head is not None and preflighted_head(results) == head:
            return True
        try:
            outcome = before_first_attempt(
                self.client, {**template, "results_dir": str(results)}, self.report, self.cluster_api()
            )
        except PreflightRefused as refusal:
            lines = str(refusal).splitlines()
            self.append(attempt, "preflight-failed", _one_line(lines[0]), last_lines=lines[1:])
            self.append(attempt, "not-retried", f"the preflight failed on {len(lines) - 1} node(s) or NIC(s)")
            return False
        details = {"rayHead": head, "results": outcome.path if outcome else None}
        self.append(attempt, "preflight-passed", "", details=details)
        return True

    def told_the_deadline(self, submission: dict[str, Any]) -> dict[str, Any]:
        """`submission` told to save before the earliest known end of the GPU nodes (incluster/deadline.py: the
        scheduled-maintenance label, flex-start's 7 days), read through the API server; unchanged without one, or
        when the API server does not list the nodes (a progress line says so: the attempt must not wait on it)."""
        from incluster.deadline import earliest_end

        api = api_endpoint(self.endpoint)
        if api is None:
            return submission
        try:
            nodes = gpu_nodes_of(api)
        except control.JobError as error:
            self.report(f"{self.settings.run}: no deadline known for the next attempt: {error}")
            return submission
        ends = earliest_end(nodes, bool(self.settings.raw.get("flexStart")))
        if ends is not None:
            self.report(f"{self.settings.run}: GPU capacity ends at {record.utc_stamp(ends.at)} ({ends.source}): saving first")
        return with_deadline(submission, self.settings.framework, ends, self.clock())

    def cluster_api(self) -> Endpoint | None:
        """The API server for cordoning the nodes a failed preflight names (job.cordonBadNodes), or None."""
        return api_endpoint(self.endpoint) if self.settings.raw.get("cordonBadNodes") else None

    def may_act(self) -> bool:
        """Whether this guardian may act now: no Lease at hand (no API server: nothing else can guard the run),
        or it holds the Lease (incluster/lease.py). A foreground guardian that lost it stops (GuardError)."""
        if self.lease is None or self.lease.held():
            return True
        if not self.wait_for_lease:
            raise GuardError(
                f"this guardian lost the Lease: {self.lease.holder_line()}, and acts for run {self.settings.run} now"
            )
        return False

    def apply(self, action: Action) -> None:
        """Carry out one action that is not a wait."""
        if action.kind == "record":
            extra: dict[str, Any] = {"last_lines": list(action.last_lines), "details": action.details}
            self.append(action.attempt, action.event, action.reason, **extra)
        elif action.kind in ("recover", "extend", "resume"):
            self.submit(action.attempt, action.reason)
        elif action.kind == "stop":
            jobs = control.attempts(self.client, self.settings.run)
            stopped = control.stop_jobs(self.client, [job for job in jobs if control.attempt_number(job) == action.attempt])
            self.report(f"{self.settings.run}: {action.reason}: stopped {', '.join(stopped) or 'nothing live'}")
        elif action.kind == "export":
            assert self.hooks.export is not None
            step = self.resume_step()
            done = self.hooks.export(ExportRequest(self.settings, action.attempt, step))
            self.append(action.attempt, "export-submitted", _one_line(done), details={"step": step})
        elif action.kind == "scale-to-zero":
            assert self.hooks.scale_to_zero is not None
            done = self.hooks.scale_to_zero(self.settings)
            self.append(action.attempt, "scaled-to-zero", _one_line(f"{action.reason}: {done}"))

    def run(
        self, follow: bool = False, poll: float = POLL_SECONDS, sleep: Callable[[float], None] = time.sleep
    ) -> Action:
        """Decide and act until the run is over and nothing is left to do (with `follow`, for ever); return the
        last decision. A dashboard lost on the way, or GPU nodes that do not come back within the readiness
        gate, is a progress line and another look after `poll` seconds."""
        shown, shown_at = "", 0.0
        while True:
            try:
                action = decide(self.observe())
                if action.kind not in ("wait", "done"):
                    if self.may_act():
                        self.apply(action)
                        continue
                    assert self.lease is not None
                    action = Action("wait", action.attempt, self.lease.waiting_line(), wait_s=RENEW_INTERVAL_SECONDS)
            except control.JobError as error:
                action = Action("wait", 0, f"{error}; trying again in {poll:g} s")
            if action.kind == "done" and not follow:
                self.report(f"{self.settings.run}: {action.reason}; nothing left to do")
                return action
            now = time.monotonic()
            if action.reason != shown or now - shown_at >= control.REPORT_EVERY_SECONDS:
                self.report(f"{self.settings.run}: {action.reason}")
                shown, shown_at = action.reason, now
            sleep(min(poll, action.wait_s) if action.wait_s > 0 else poll)


def api_endpoint(endpoint: Endpoint) -> Endpoint | None:
    """The Kubernetes API server: the one behind the dashboard's service proxy, else the pod's own service
    account's; None when neither is at hand (a plain dashboard address on this machine)."""
    if "/api/v1/" in endpoint.address:
        return Endpoint(address=endpoint.address.split("/api/v1/", 1)[0], headers=endpoint.headers, verify=endpoint.verify)
    token = SERVICE_ACCOUNT_DIR / "token"
    if not token.is_file():
        return None
    ca = SERVICE_ACCOUNT_DIR / "ca.crt"
    return Endpoint(IN_CLUSTER_API, bearer_headers(token.read_text().strip()), str(ca) if ca.is_file() else True)


GPU_NODE_SELECTOR = "cloud.google.com/gke-accelerator"
"""The label every GKE GPU node carries (Standard and Autopilot): the nodes whose end the attempts are told."""


def gpu_nodes_of(api: Endpoint) -> list[dict[str, Any]]:
    """The cluster's GPU node objects, from the API server within DEADLINES.request (the guardian's ClusterRole
    lists nodes); JobError when it refuses or is silent."""
    return _api_list(api, "/api/v1/nodes", GPU_NODE_SELECTOR, "the GPU nodes")


def worker_pods_of(api: Endpoint, settings: Settings) -> list[dict[str, Any]]:
    """The GPU worker pods of the stack's RayCluster (KubeRay's labels ray.io/cluster and ray.io/group,
    ray-operator/controllers/ray/utils/constant.go L19-21, v1.7.0), from the API server within DEADLINES.request
    (the guardian's Role lists pods); JobError when it refuses or is silent."""
    raw = settings.raw
    selector = f"ray.io/cluster={raw.get('rayCluster', '')},ray.io/group={raw.get('gpuWorkerGroup', '')}"
    return _api_list(api, f"/api/v1/namespaces/{raw.get('namespace', '')}/pods", selector, "the GPU worker pods")


def _api_list(api: Endpoint, path: str, selector: str, what: str) -> list[dict[str, Any]]:
    import requests

    try:
        answer = requests.get(
            f"{api.address}{path}",
            params={"labelSelector": selector},
            headers=dict(api.headers),
            verify=api.verify,
            timeout=control.DEADLINES.request,
        )
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):
        raise control.Unreachable(f"the API server at {api.address} did not answer listing {what}") from None
    if answer.status_code >= 400:
        raise control.JobError(f"the API server answered HTTP {answer.status_code} listing {what}")
    return list(answer.json().get("items", []))


def _moment(stamp: Any) -> float | None:
    """An RFC 3339 time of the API server (`2026-12-01T11:50:03Z`) in seconds since the epoch; None when absent."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pod_view(pod: dict[str, Any]) -> PodView:
    """A PodView of one pod object as the API server returns it (k8s.io/api core/v1 Pod: status.phase, reason,
    message, conditions[].type/status/reason/lastTransitionTime, containerStatuses[].state.terminated.finishedAt)."""
    status = pod.get("status") or {}
    disrupted = next(
        (item for item in status.get("conditions") or [] if item.get("type") == "DisruptionTarget"), None
    )
    since = _moment(disrupted.get("lastTransitionTime")) if disrupted else None
    if since is None:
        ended = [
            _moment(((item.get("state") or {}).get("terminated") or {}).get("finishedAt"))
            for item in status.get("containerStatuses") or []
        ]
        since = max((moment for moment in ended if moment is not None), default=None)
    return PodView(
        name=str((pod.get("metadata") or {}).get("name", "")),
        phase=str(status.get("phase", "")),
        reason=str(status.get("reason", "")),
        message=str(status.get("message", "")),
        disruption=str(disrupted.get("reason", "")) if disrupted and disrupted.get("status") == "True" else "",
        since=since,
    )


def kube_node_view(node: dict[str, Any]) -> KubeNodeView:
    """A KubeNodeView of one node object as the API server returns it (status.conditions[] of type Ready)."""
    ready = next(
        (item for item in (node.get("status") or {}).get("conditions") or [] if item.get("type") == "Ready"), {}
    )
    why = ": ".join(part for part in (ready.get("reason"), ready.get("message")) if part)
    return KubeNodeView(
        name=str((node.get("metadata") or {}).get("name", "")),
        ready=str(ready.get("status", "")),
        since=_moment(ready.get("lastTransitionTime")),
        why=why,
    )


def failure_lines(run_dir: Path, attempt: int, message: str) -> tuple[str, ...]:
    """The last LAST_LINES lines of a failed attempt: its log on the shared storage read from the end (incluster/attempt.py
    logged_lines), else the lines of Ray's message, which holds the driver's last 10 lines for a failed entrypoint
    (ray 2.60.0 python/ray/dashboard/modules/job/job_supervisor.py L449-455). Never the whole log: Ray's get_job_logs
    reads the whole driver log into one string (job_log_storage_client.py L20-24) and the guardian's pod has 512 Mi."""
    logged = logged_lines(run_dir, attempt, LAST_LINES)
    return tuple(logged or message.splitlines()[-LAST_LINES:])


def known_attempt(entries: list[dict[str, Any]], run_dir: Path) -> int:
    """The newest attempt the run's directory knows: its record's lines and the attempt wrapper's logs (every attempt
    writes `logs/attempt-N.log`, whoever submitted it); 0 when none."""
    numbers = [item["attempt"] for item in entries if isinstance(item.get("attempt"), int)]
    for path in (run_dir / "logs").glob("attempt-*.log"):
        stem = path.stem.split("-", 1)[1]
        if stem.isdigit():
            numbers.append(int(stem))
    return max(numbers, default=0)


def with_deadline(submission: dict[str, Any], framework: str, ends: Any, now: float) -> dict[str, Any]:
    """`submission` with the save-before-deadline of `ends` (a incluster/deadline.py Deadline, or None): NeMo-RL's
    save-by override appended to the framework's command (the last word of the attempt wrapper's entrypoint,
    `sh -c '<command>'`); verl unchanged (nothing of its default trainer reads a deadline: the guardian stops it)."""
    import shlex

    from incluster.deadline import attempt_overrides

    overrides = attempt_overrides(framework, ends, now)
    if not overrides:
        return submission
    words = shlex.split(submission["entrypoint"])
    words[-1] = " ".join([words[-1], *map(shlex.quote, overrides)])
    return {**submission, "entrypoint": shlex.join(words)}


def cluster_hooks(settings: Settings, endpoint: Endpoint) -> Hooks:
    """The stack's export (the settings' export submission, jobs/runs/export.py) and scale to zero (the JSON patch
    of incluster/scaling.py through the API server); no scale to zero without an API server at hand."""
    from incluster import scaling

    export = settings.raw.get("export")
    api = api_endpoint(endpoint)

    def submit_export(request: ExportRequest) -> str:
        # Pinned to the step, the export has its deterministic submission id: a second guardian's is followed.
        pinned = for_step(export, settings.run, request.step) if request.step is not None else export
        submission_id, already = control.submit_export(control.connect(endpoint), pinned)
        what = f"exports the newest complete checkpoint (step {request.step})"
        return f"{submission_id} (already submitted) {what}" if already else f"{submission_id} {what}"

    def scale_to_zero(_: Settings) -> str:
        assert api is not None
        scaling.scale_to(api, 0)
        return f"the GPU worker group {settings.raw.get('gpuWorkerGroup', '')} of {api.address} patched to 0 replicas"

    return Hooks(export=submit_export if export else None, scale_to_zero=scale_to_zero if api else None)


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise GuardError(message)


def _parser() -> argparse.ArgumentParser:
    top = _Parser(prog=".venv/bin/python -m jobs guard", description=__doc__.splitlines()[0])
    which = top.add_mutually_exclusive_group(required=True)
    which.add_argument("--stack", help="stack name: reads Pulumi.<stack>.yaml in --dir")
    which.add_argument("--settings", help="the guardian's settings JSON (the in-cluster form; always follows)")
    top.add_argument("--dir", default=".", help="directory of the stack files (default: .)")
    top.add_argument("--address", help="Ray dashboard URL; default: the stack's cluster via the kubeconfig")
    top.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG or ~/.kube/config)")
    top.add_argument("--context", help="kubeconfig context (default: the stack's gke_<project>_<region>_<cluster>)")
    top.add_argument("--data-root", help="a local directory standing for the shared storage (/data)")
    top.add_argument("--follow", action="store_true", help="keep following after the run is over (until Ctrl-C)")
    top.add_argument(
        "--take-over",
        action="store_true",
        help="guard from here although another guardian (the in-cluster one) holds the Lease: take it from it",
    )
    return top


def read_settings(path: str) -> Settings:
    """The settings JSON at `path`; GuardError in one line when it cannot be read."""
    try:
        values = json.loads(Path(path).read_text())
    except OSError as error:
        raise GuardError(f"cannot read the guardian settings {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise GuardError(f"the guardian settings {path} are not JSON: {error}") from None
    if not isinstance(values, dict):
        raise GuardError(f"the guardian settings {path} must hold a JSON object")
    return settings_from(values, path)


StackSettings = Callable[[argparse.Namespace], "tuple[Settings, Endpoint]"]
"""The foreground form's settings and endpoint from a stack file (jobs/guardian/foreground.py: the client side)."""


def hold_the_lease(settings: Settings, endpoint: Endpoint, in_cluster: bool, take_over: bool) -> Lease | None:
    """The Lease this guardian holds while it acts, renewed in a thread; None without an API server at hand (a
    Ray head on this machine: no in-cluster guardian can follow it). The in-cluster guardian tries once and
    otherwise waits for it in the loop; the foreground one holds it before it starts (incluster/lease.py
    acquire_in_foreground: LeaseHeld while another holds it, unless `take_over`)."""
    api = api_endpoint(endpoint)
    if api is None:
        return None
    if in_cluster:
        lease = Lease(api, in_cluster_identity())
        try:
            lease.try_acquire_or_renew()
        except LeaseError as error:
            _report(f"{settings.run}: {error}; trying again every {RENEW_INTERVAL_SECONDS:g} s")
    else:
        lease = Lease(api, foreground_identity())
        acquire_in_foreground(lease, settings.run, take_over, _report)
    lease.start_renewing()
    return lease


def main(argv: list[str] | None = None, from_stack: StackSettings | None = None) -> int:
    """`python3 -m incluster.guardian --settings FILE --address URL` (in the cluster), or with `from_stack` the
    foreground `python -m jobs guard --stack NAME`; return the exit code."""

    try:
        args = _parser().parse_args(argv)
        if args.settings:
            if not args.address:
                raise GuardError("--settings needs --address http://<head service>:8265")
            if args.take_over:
                raise GuardError(
                    "--take-over is for the foreground guardian (--stack); the in-cluster one waits for the Lease"
                )
            settings, endpoint = read_settings(args.settings), control.endpoint_for_address(args.address)
            follow = True
        elif from_stack is None:
            raise GuardError("--stack is the foreground form: run it as .venv/bin/python -m jobs guard --stack NAME")
        else:
            settings, endpoint = from_stack(args)
            follow = args.follow
        lease = hold_the_lease(settings, endpoint, in_cluster=bool(args.settings), take_over=args.take_over)
        try:
            guardian = Guardian(settings, endpoint, cluster_hooks(settings, endpoint), _report, lease=lease,
                                wait_for_lease=bool(args.settings))  # fmt: skip
            guardian.run(follow=follow)
        finally:
            if lease is not None:
                lease.stop()
        return 0
    except (GuardError, AccessError, control.JobError, LeaseHeld, LeaseError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:
        where = f" ({error.filename})" if error.filename else ""
        print(f"error: cannot read or write the run's directory{where}: {error.strerror or error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; the run's attempts keep running", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
