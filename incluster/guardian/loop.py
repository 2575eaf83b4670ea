"""The thin loop around `decide`: it reads the cluster and the run's record into a State (observe), carries out one
action at a time (apply) and appends every decision to the record, until the run is over (run)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core import names
from incluster import budget, job_client, readiness, record, run_submission, scaling, wandb_summary
from incluster.attempt import deadline_stop_in, last_log_part, logged_lines
from incluster.capacity_events import groups_from_text, ladder_state
from incluster.checkpoints import CheckpointError, newest_complete
from incluster.deadline import earliest_end, next_capacity_in, save_by, verl_saves
from incluster.endpoint import Endpoint
from incluster.google_token import TokenError
from incluster.guardian.cluster import (
    api_endpoint,
    failure_error,
    failure_lines,
    gpu_nodes_of,
    gpu_rungs,
    kube_node_view,
    pod_view,
    with_deadline,
    worker_pods_of,
)
from incluster.guardian.policy import (
    BACKOFF,
    SETTLE_SECONDS,
    Action,
    AttemptView,
    Backoff,
    KubeNodeView,
    NodeView,
    PodView,
    State,
    decide,
    export_submission_of,
    one_line,
)
from incluster.guardian.settings import GuardError, Settings
from incluster.lease import RENEW_INTERVAL_SECONDS, Lease, current_entries
from incluster.lustre_transfer import TransferError
from incluster.preflight import gate
from incluster.preflight.driver import NEWEST
from incluster.runs import attempt_id, newest_attempt
from incluster.wandb_summary import SummaryError, WandbTarget

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient

GROUPS_FILE = Path(names.GPU_INSTANCE_GROUPS_DIR) / names.GPU_INSTANCE_GROUPS_FILE
"""The GPU pools' MIGs by name, as the guardian's pod mounts them (jobs/guardian/objects.py render_deployment)."""

PROJECTION_LINES = 2000
"""The newest lines of a RUNNING attempt's log the projection reads (verl writes one step line per step)."""

WORKERS_REFRESH_SECONDS = 60.0
"""Seconds between two reads of the RayCluster's GPU workers once the guardian has scaled them to zero."""

DEADLINE_REFRESH_SECONDS = 300.0
"""Seconds between two reads of the GPU nodes' known ends while a verl attempt runs (a maintenance label may come)."""

PROJECTION_REFRESH_SECONDS = 300.0
"""Seconds between two projections of a RUNNING attempt's end from its log's step lines (its waiting line changes
with each, so not on every poll)."""

SUMMARY_FINISH_SECONDS = 60.0
"""How long a guardian that is done waits for its W&B summary writes still running before it returns."""

POLL_SECONDS = 10.0
"""Seconds between two looks at the cluster while nothing changes."""

REPEATABLE_EVENTS = frozenset({"preflight-passed", "park-failed"})
"""Record events one attempt may have more than once: a passed preflight per Ray head (a new head before the next
attempt is checked again), a failed park per try (policy.PARK_TRIES). Every other decision is recorded once per
attempt."""


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
class ExportDone:
    """What the export hook did: the job it submitted, by id, and the line saying so."""

    submission: str | None
    """The export job's Ray submission id, which the guardian follows to record `exported`; None when the hook
    submitted no job (`make demo`'s, which says what it would do on a cluster)."""
    line: str
    """One line saying what the hook did, the record entry's reason."""


@dataclass(frozen=True)
class Hooks:
    """What the guardian does beyond Ray jobs of the run, wired by the caller (the export job and the
    scale-to-zero belong to the stack's deployment); each returns one line saying what it did."""

    export: Callable[[ExportRequest], ExportDone] | None = None
    """Submit the export job; None: no export is decided."""
    scale_to_zero: Callable[[Settings], str] | None = None
    """Scale the GPU workers to zero; None: no scale-to-zero is decided."""
    park: Callable[[Settings], dict[str, Any]] | None = None
    """Park the run in the parked bucket and return the park marker (incluster/park.py park_run); None: no park is
    decided. It raises TransferError or TokenError when it fails."""
    mark_stale: Callable[[], str | None] | None = None
    """Before each submission: mark a parked marker stale (incluster/park.py mark_stale), a line or None; it raises
    TransferError or TokenError when it cannot (nothing is submitted then). None: no parked bucket is reachable."""


def node_view(node: dict[str, Any]) -> NodeView:
    """A NodeView of one state API node entry (readiness.ray_nodes)."""
    end = node.get("end_time_ms")
    return NodeView(
        node_id=str(node.get("node_id", "")),
        alive=node.get("state") == "ALIVE",
        gpus=readiness.node_gpus(node),
        end=end / 1000 if isinstance(end, (int, float)) and end > 0 else None,
    )


def head_node_id(nodes: list[dict[str, Any]]) -> str | None:
    """The alive head's node id among state API node entries (readiness.ray_nodes), or None."""
    for node in nodes:
        if node.get("is_head_node") and node.get("state") == "ALIVE":
            return str(node.get("node_id", "")) or None
    return None


def preflighted_head(results: Path) -> str | None:
    """The Ray head the newest preflight result in `results` checked and passed, or None (none, unreadable,
    failed, or written before results named their head)."""
    try:
        newest = (results / NEWEST).read_text().strip()
        result = json.loads((results / newest).read_text())
    except (OSError, ValueError):
        return None
    passed = isinstance(result, dict) and (result.get("verdict") or {}).get("passed") is True
    return (str(result.get("rayHead") or "") or None) if passed else None


class Guardian:
    """The loop around `decide`: reads the cluster and the record, applies an action, records the decision."""

    def __init__(
        self,
        settings: Settings,
        endpoint: Endpoint,
        hooks: Hooks,
        report: job_client.Report,
        backoff: Backoff = BACKOFF,
        settle: float = SETTLE_SECONDS,
        clock: Callable[[], float] = time.time,
        lease: Lease | None = None,
        wait_for_lease: bool = True,
        wandb: WandbTarget | None = None,
    ) -> None:
        self.settings, self.endpoint, self.hooks, self.report = settings, endpoint, hooks, report
        self.wandb = wandb
        """Where the attempts' W&B runs live (incluster/wandb_summary.py target_from); None: the stack logs no W&B."""
        self.summarized: dict[int, threading.Thread | None] = {}
        """The ended attempts looked at for the W&B summary, with the thread that writes it (None: nothing to write)."""
        self.backoff, self.settle, self.clock = backoff, settle, clock
        self.lease, self.wait_for_lease = lease, wait_for_lease
        self.client: JobSubmissionClient = job_client.connect(endpoint)
        self._deadline_read: tuple[int, float, float | None] = (0, float("-inf"), None)
        """For the attempt it was read for: when the GPU nodes' known end was read, and the save-by time it gave."""
        self._workers_read: tuple[float, bool] = (float("-inf"), False)
        """When the GPU workers were last read after the scale to zero, and whether any were kept."""
        self._projected: tuple[int, float, str | None] = (0, float("-inf"), None)
        """For the attempt it was made for: when the projected end was made, and its line."""
        self._rungs_read: tuple[int, dict[str, Any] | None] = (0, None)
        """The attempt whose GPU nodes' rungs were read (once per attempt) and what was read (None: it failed)."""
        self.seen_attempt = 0
        """The newest attempt of the run this guardian has seen on the Ray head."""
        self.missed_since: dict[int, float] = {}
        """When an attempt the record knows was first missed on the Ray head, by number."""
        self.record_skips: set[str] = set()
        """The record's lines this guardian reported as skipped (each is reported once, not on every poll)."""

    def observe(self) -> State:
        """The state `decide` needs, read from Ray (every request within job_client.DEADLINES), the record and, when a
        failure must be judged, the API server."""
        settings = self.settings
        jobs = job_client.attempts(self.client, settings.run)
        entries = current_entries(record.read(settings.run_dir, self.report_record_skip))
        if jobs:
            self.seen_attempt = max(self.seen_attempt, job_client.attempt_number(jobs[-1]))
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
            nodes=tuple(node_view(node) for node in readiness.ray_nodes(self.endpoint)),
            recoveries=sum(1 for item in entries if item.get("event") == "recovering"),
            worker_pods=pods,
            kube_nodes=kube_nodes,
            recorded=recorded,
            anything_live=any(job_client.status_text(job.status) in job_client.LIVE for job in self.client.list_jobs()),
            backoff=self.backoff,
            settle=self.settle,
            can_export=self.hooks.export is not None,
            can_scale=self.hooks.scale_to_zero is not None,
            can_park=self.hooks.park is not None,
            export_status=self.export_status(recorded),
            gpu_workers_up=self.workers_view(newest, recorded),
            gpu_rungs=self.rungs_view(newest, recorded),
            projected=self.projection_view(newest, recorded),
            **{**self.deadline_view(newest, recorded), **self.budget_view(newest, jobs, entries)},
        )

    def report_record_skip(self, problem: str) -> None:
        """Report a record line `record.read` skipped, the first time only."""
        if problem not in self.record_skips:
            self.record_skips.add(problem)
            self.report(f"{self.settings.run}: {problem} (the guardian goes on without it)")

    def workers_view(self, newest: AttemptView | None, recorded: dict[str, dict[str, Any]]) -> bool:
        """After the scale to zero of an attempt that is over: whether the RayCluster keeps GPU workers again (a
        RayCluster made anew by `pulumi up`, or an unpark, starts with them), read through the API server at most every
        WORKERS_REFRESH_SECONDS; False otherwise, without a scale-to-zero hook or an API server, or when it refused (a
        progress line says so)."""
        over = newest is not None and newest.status not in job_client.LIVE and newest.end is not None
        api = api_endpoint(self.endpoint)
        if not over or "scaled-to-zero" not in recorded or self.hooks.scale_to_zero is None or api is None:
            return False
        read_at, up = self._workers_read
        now = time.monotonic()
        if now - read_at < WORKERS_REFRESH_SECONDS:
            return up
        try:
            up = scaling.gpu_workers(api) > 0
        except job_client.JobError as error:
            self.report(f"{self.settings.run}: the GPU workers' count is not known: {error}")
            up = False
        self._workers_read = (now, up)
        return up

    def export_status(self, recorded: dict[str, dict[str, Any]]) -> str | None:
        """The export job's status once `export-submitted` is recorded and until `exported` is; None otherwise or when
        Ray does not know it (a progress line says so), and when the export hook submitted no job."""
        if "export-submitted" not in recorded or "exported" in recorded:
            return None
        submission = export_submission_of(recorded["export-submitted"])
        if submission is None:
            return None
        try:
            return job_client.status_of(self.client, submission)
        except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
            self.report(f"{self.settings.run}: the export {submission} is not known: {job_client.short_reason(error)}")
            return None

    def rungs_view(self, newest: AttemptView | None, recorded: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
        """For a RUNNING attempt whose `gpu-rungs` the record lacks: its Ready GPU nodes per rung (cluster.gpu_rungs),
        read through the API server once per attempt; None otherwise, without an API server, when it refused (a
        progress line says so), or when it lists no Ready GPU node (nothing to count: no entry). Without an entry
        `python -m jobs status` prices the attempt at the stack's single price, marked."""
        if newest is None or newest.status != "RUNNING" or "gpu-rungs" in recorded:
            return None
        number, read = self._rungs_read
        if number == newest.number:
            return read
        read = None
        api = api_endpoint(self.endpoint)
        if api is not None:
            try:
                read = gpu_rungs(gpu_nodes_of(api), self.settings)
                read = read if read["rungs"] or read["otherNodes"] else None
            except job_client.JobError as error:
                self.report(f"{self.settings.run}: no rungs recorded for attempt {newest.number}: {error}")
        self._rungs_read = (newest.number, read)
        return read

    def earliest_end_of(self, nodes: list[dict[str, Any]]) -> Any:
        """The earliest known end of the GPU node objects `nodes` (a incluster/deadline.py Deadline, or None), each
        node's flex-start end by its own rung: the settings' `provisioning` and `ladder` (gpu.capacity set)."""
        raw = self.settings.raw
        return earliest_end(nodes, str(raw.get("provisioning", "")), bool(raw.get("ladder")))

    def known_end(self, attempt: int) -> Any:
        """The earliest known end of the GPU nodes (a incluster/deadline.py Deadline), or None: none known, no API
        server at hand, or it did not answer (a progress line says so)."""
        api = api_endpoint(self.endpoint)
        if api is None:
            return None
        try:
            return self.earliest_end_of(gpu_nodes_of(api))
        except job_client.JobError as error:
            self.report(f"{self.settings.run}: no deadline known for attempt {attempt}: {error}")
            return None

    def deadline_view(self, newest: AttemptView | None, recorded: dict[str, dict[str, Any]]) -> dict[str, Any]:
        """For a RUNNING verl attempt, `save_by` and `saves`: the earliest known end of the GPU nodes less the margin
        (the nodes read for each attempt, then every DEADLINE_REFRESH_SECONDS) and the run's complete checkpoints;
        after a deadline stop, `next_capacity_in` (the nodes read every poll); else nothing."""
        if newest is None:
            return {}
        now = self.clock()
        over = "not-retried" in recorded or "gave-up" in recorded
        if newest.status not in job_client.LIVE and "deadline-stop" in recorded and not over:
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

    def budget_view(self, newest: AttemptView | None, jobs: list[Any], entries: list[dict[str, Any]]) -> dict[str, Any]:
        """For a RUNNING verl attempt of a run with a budget: `budget_by` (when spending at the attempt's rate crosses
        the budget, incluster/budget.py crossing), `spent` (the attempts Ray lists, each at its rungs' price) and the
        run's complete checkpoints (`saves`); else nothing."""
        settings = self.settings
        limits = budget.limits_of(settings.submission["metadata"])
        prices = settings.gpu_prices
        if newest is None or newest.status != "RUNNING" or prices is None or settings.framework != "verl":
            return {}
        if all(value is None for value in limits.values()):
            return {}
        now = self.clock()
        spans = [
            budget.Span(
                job_client.attempt_number(job), job.start_time / 1000, job.end_time / 1000 if job.end_time else None
            )
            for job in jobs
            if job.start_time
        ]
        used = budget.spent(
            spans, entries, prices.node_hourly, prices.stack_rungs, now, gpus_per_node=prices.gpus_per_node
        )
        crossing = budget.crossing(limits, used, now)
        if crossing is None:
            return {}
        saves = tuple(verl_saves(settings.run_dir, settings.world_size))
        return {"budget_by": crossing, "spent": used, "saves": saves}

    def projection_view(self, newest: AttemptView | None, recorded: dict[str, dict[str, Any]]) -> str | None:
        """For a RUNNING verl attempt: its projected end (incluster/budget.py projected_end) from the step lines of its
        log's tail (attempt.logged_lines) and the schedule's last step (its `lastStep`: grpo.maxSteps, else the epochs'
        steps of the data set, jobs/spec/training.py scheduled_steps), priced at the settings' `gpuPrices` for its
        recorded rungs (`gpu-rungs`, else the stack's) when the run has a budget (else time only), made at most every
        PROJECTION_REFRESH_SECONDS; no preemption folded in (`python -m jobs status` does); None otherwise."""
        settings = self.settings
        if newest is None or newest.status != "RUNNING" or settings.framework != "verl":
            return None
        number, made_at, line = self._projected
        now = self.clock()
        if number == newest.number and now - made_at < PROJECTION_REFRESH_SECONDS:
            return line
        found, hourly = self.projection_of(newest.number, recorded)
        line = None if found is None else budget.projection_line(found, hourly, now)
        self._projected = (newest.number, now, line)
        return line

    def projection_of(
        self, attempt: int, recorded: dict[str, dict[str, Any]]
    ) -> tuple[budget.Projection | None, float | None]:
        """Attempt `attempt`'s projected end from its log's step lines and the schedule's last step (its submission's
        `lastStep`: maxSteps, or epochs x the steps of an epoch), and the $/h it is priced at (None: unpriced, time
        only): the settings' `gpuPrices` for its recorded rungs, else the stack's."""
        settings = self.settings
        times, step = budget.verl_pace(logged_lines(settings.run_dir, attempt, PROJECTION_LINES))
        prices = settings.gpu_prices
        hourly = None
        if prices is not None:
            rungs = budget.rungs_of(recorded.values()).get(attempt, prices.stack_rungs)
            if None not in (prices.node_hourly.get(rung) for rung in rungs):
                hourly = sum(count * (prices.node_hourly.get(rung) or 0.0) for rung, count in rungs.items())
        last = budget.scheduled_last_step(settings.submission["metadata"])
        found = budget.projected_end(times, step, last, hourly or 0.0)
        return found, hourly

    def summarize(self, newest: AttemptView | None, recorded: dict[str, dict[str, Any]]) -> None:
        """Once a verl attempt has ended, give its W&B run (WANDB_RUN_ID: its submission id) the projected end it ended
        at (incluster/wandb_summary.py), in a thread of its own so that no W&B fault holds up the loop; the thread
        reports its outcome in one line. Nothing where the stack logs no W&B or the attempt measured no step."""
        if self.wandb is None or newest is None or self.settings.framework != "verl":
            return
        ended = newest.end is not None
        if not wandb_summary.write_due(newest.status, ended, newest.number in self.summarized):
            return
        found, hourly = self.projection_of(newest.number, recorded)
        self.summarized[newest.number] = None
        if found is None:
            return
        values = wandb_summary.summary_values(found, hourly is not None)
        name = attempt_id(self.settings.run, newest.number)
        target, report = self.wandb, self.report

        def write() -> None:
            try:
                wandb_summary.write_summary(target, name, values, report)
            except SummaryError as error:
                report(f"{self.settings.run}: {error}")
                return
            report(
                f"{self.settings.run}: W&B run {name}'s summary has the projected end ({found.steps_left} steps left)"
            )

        thread = threading.Thread(target=write, name=f"wandb-summary-{name}", daemon=True)
        self.summarized[newest.number] = thread
        thread.start()

    def finish_summaries(self, seconds: float = SUMMARY_FINISH_SECONDS) -> None:
        """Before a guardian that is done returns (the foreground form exits then): wait up to `seconds` in all for the
        W&B summary writes still running, with a line first; one still running then is left, with a line."""
        running = [thread for thread in self.summarized.values() if thread is not None and thread.is_alive()]
        if not running:
            return
        self.report(f"{self.settings.run}: waiting up to {seconds:g} s for the W&B summary write")
        end = time.monotonic() + seconds
        for thread in running:
            thread.join(max(0.0, end - time.monotonic()))
        if any(thread.is_alive() for thread in running):
            self.report(f"{self.settings.run}: the W&B summary write did not finish; its run lacks the projected end")

    def _view(self, job: Any, entries: list[dict[str, Any]]) -> AttemptView:
        number = job_client.attempt_number(job)
        status = job_client.status_text(job.status)
        judged = any(item.get("attempt") == number and item.get("event") == "failed" for item in entries)
        message = job.message or ""
        lines: tuple[str, ...] = ()
        error = None
        if status in ("FAILED", "STOPPED") and not judged:
            lines = failure_lines(self.settings.run_dir, number, message)
            error = failure_error(self.settings.run_dir, number, message)
        return AttemptView(
            number=number,
            status=status,
            start=job.start_time / 1000 if job.start_time else None,
            end=job.end_time / 1000 if job.end_time else None,
            message=message,
            last_lines=lines,
            error=error,
            metadata=dict(job.metadata or {}),
            deadline_stop=deadline_stop_in(self.settings.run_dir, number) if status == "SUCCEEDED" else None,
        )

    def _missing_view(self, entries: list[dict[str, Any]]) -> AttemptView | None:
        """The newest attempt the run's record (or its logs, or this guardian) knows when the Ray head lists none of
        the run's: a new head, whose job table started empty (no GCS fault tolerance). It ended when its log was last
        written (else when the guardian first missed it): SUCCEEDED when the record says so, else FAILED; None for a run
        with no attempt yet."""
        logged = run_submission.local_view(self.settings.run_dir).logged
        number = newest_attempt((self.seen_attempt,), entries, logged)
        if number == 0:
            return None
        succeeded = any(item.get("attempt") == number and item.get("event") == "succeeded" for item in entries)
        try:
            end = last_log_part(self.settings.run_dir, number).stat().st_mtime
        except OSError:
            end = self.missed_since.setdefault(number, self.clock())
        lines = () if succeeded else failure_lines(self.settings.run_dir, number, "")
        error = None if succeeded else failure_error(self.settings.run_dir, number, "")
        status = "SUCCEEDED" if succeeded else "FAILED"
        return AttemptView(number=number, status=status, end=end, last_lines=lines, error=error, gone_from_ray=True)

    def kubernetes_facts(self) -> tuple[tuple[PodView, ...], tuple[KubeNodeView, ...]]:
        """The GPU worker pods and GPU nodes as the API server lists them; nothing without an API server at hand or
        when it refuses (a progress line says so: the judgement goes on from Ray's facts)."""
        api = api_endpoint(self.endpoint)
        if api is None:
            return (), ()
        try:
            pods = worker_pods_of(api, self.settings)
            kube_nodes = gpu_nodes_of(api)
        except job_client.JobError as error:
            self.report(f"{self.settings.run}: judging without the API server's pods and nodes: {error}")
            return (), ()
        return tuple(map(pod_view, pods)), tuple(map(kube_node_view, kube_nodes))

    def append(self, attempt: int, event: str, reason: str = "", **extra: Any) -> None:
        """Append one decision to the run's record and report it, once: a decision the record already holds for this
        attempt (a second guardian's that acted first, or this one's before it restarted) is not appended again.
        With a Lease, only its holder records: the Lease is read again just before, and the entry carries its term
        (lease.Lease.confirm, lease.current_entries); a guardian that lost it meanwhile reports what it did and
        records nothing."""
        entries = current_entries(record.read(self.settings.run_dir))
        if event not in REPEATABLE_EVENTS and any(
            item.get("attempt") == attempt and item.get("event") == event for item in entries
        ):
            self.report(f"{self.settings.run}: attempt {attempt} {event} is in the record already")
            return
        line = record.entry(self.clock(), attempt, event, reason, **extra)
        said = f"{self.settings.run}: attempt {attempt} {event}" + (f": {reason}" if reason else "")
        if self.lease is not None:
            stamp = self.lease.confirm()
            if stamp is None:
                self.report(f"{said} (not recorded: this guardian lost the Lease; {self.lease.holder_line()})")
                return
            line["lease"] = stamp
        record.append(self.settings.run_dir, line)
        self.report(said)

    def resume_step(self) -> int | None:
        """The step the next attempt's wrapper will resume from (None: from scratch, or it will refuse)."""
        try:
            chosen = newest_complete(self.settings.run_dir, self.settings.framework, self.settings.world_size)
        except CheckpointError:
            return None
        return chosen.step if chosen else None

    @staticmethod
    def capacity_of(settings: Settings, api: Endpoint, groups_file: Path = GROUPS_FILE) -> readiness.Capacity:
        """Where the readiness gate reads the ladder's rung and last failure: `api`, the settings' namespace and the
        GPU pools' MIGs by name, read from `groups_file` now (the mounted ConfigMap the kubelet keeps current,
        workloads/instance_groups.py; none, as on Autopilot: no rung named)."""
        try:
            groups = groups_from_text(groups_file.read_text())
        except (OSError, UnicodeDecodeError):
            groups = {}
        return readiness.Capacity(api, groups, str(settings.raw.get("namespace", "")))

    def capacity(self) -> readiness.Capacity | None:
        """The gate's ladder source, or None without an API server at hand (the gate's line then says no rung)."""
        api = api_endpoint(self.endpoint)
        return self.capacity_of(self.settings, api) if api is not None else None

    def submit(self, attempt: int, reason: str) -> None:
        """Pass the readiness gate and, on a Ray cluster no preflight has checked, the preflight; then submit
        the run's next attempt through run_submission.ensure_run. `attempt` is the attempt it follows. A gate that
        waited on the capacity ladder is recorded once, as `capacity` (record_capacity)."""
        settings = self.settings
        capacity = self.capacity()
        try:
            readiness.wait_for_gpus(
                self.endpoint,
                settings.gpu_nodes,
                settings.ready_timeout_seconds,
                self.report,
                capacity=capacity,
                gpus_per_node=settings.gpus_per_node,
            )
        finally:
            self.record_capacity(attempt, capacity)
        if not self.may_act() or not self.preflight(attempt) or not self.may_act():
            return
        if self.hooks.mark_stale is not None:
            try:
                marked = self.hooks.mark_stale()
            except (TransferError, TokenError) as error:
                self.report(f"{settings.run}: not submitting: the park marker cannot be marked stale: {error}")
                return
            if marked:
                self.report(f"{settings.run}: {marked}")
        step = self.resume_step()
        outcome = run_submission.ensure_run(
            self.client,
            self.told_the_deadline(settings.submission),
            lambda: run_submission.local_view(settings.run_dir),
            self.deadline_stop_of,
            after=max(attempt, self.seen_attempt),
        )
        if outcome.action in run_submission.SUBMITTING:
            number = run_submission.number_of(outcome.submission_id)
            self.append(number, "submitted", reason, resumed_from_step=step)
        else:
            self.report(f"{settings.run}: {outcome.sentence()}")

    def record_capacity(self, attempt: int, capacity: readiness.Capacity | None) -> None:
        """Record once for `attempt` which rung the autoscaler tried, since when and why the last scale-up failed,
        when the pending GPU workers' events say anything (none pending, or no API server: nothing recorded)."""
        if capacity is None:
            return
        try:
            state = ladder_state(readiness.scale_up_events(capacity), capacity.groups)
        except job_client.JobError as error:
            self.report(f"{self.settings.run}: no rung known for attempt {attempt}: {error}")
            return
        if state.rung is None and state.last_failure is None:
            return
        details = {"rung": state.rung, "since": state.since, "lastFailure": state.last_failure}
        self.append(attempt, "capacity", readiness.ladder_line_of(state), details=details)

    def deadline_stop_of(self, job: Any) -> int | None:
        """The step a SUCCEEDED attempt `job` saved before it stopped at its deadline, from the end of its log in
        the run directory (not Ray's whole log); None otherwise."""
        if job_client.status_text(job.status) != "SUCCEEDED":
            return None
        return deadline_stop_in(self.settings.run_dir, job_client.attempt_number(job))

    def preflight(self, attempt: int) -> bool:
        """Run the settings' preflight when the Ray cluster's head is not the one the newest preflight result
        names (a fresh RayCluster); whether the next attempt may go. A failed one is recorded as
        `preflight-failed` and `not-retried`, one line per bad node."""
        template = self.settings.raw.get("preflight")
        if template is None:
            return True
        results = self.settings.run_dir / "preflight"
        head = head_node_id(readiness.ray_nodes(self.endpoint))
        if head is not None and preflighted_head(results) == head:
            return True
        try:
            outcome = gate.before_first_attempt(
                self.client, {**template, "results_dir": str(results)}, self.report, self.cluster_api()
            )
        except gate.PreflightRefused as refusal:
            lines = str(refusal).splitlines()
            self.append(attempt, "preflight-failed", one_line(lines[0]), last_lines=lines[1:])
            self.append(attempt, "not-retried", f"the preflight failed on {len(lines) - 1} node(s) or NIC(s)")
            return False
        details = {"rayHead": head, "results": outcome.path if outcome else None}
        self.append(attempt, "preflight-passed", "", details=details)
        return True

    def told_the_deadline(self, submission: dict[str, Any]) -> dict[str, Any]:
        """`submission` told to save before the earliest known end of the GPU nodes (incluster/deadline.py: the
        scheduled-maintenance label, flex-start's 7 days), read through the API server; unchanged without one, or
        when the API server does not list the nodes (a progress line says so: the attempt must not wait on it)."""
        api = api_endpoint(self.endpoint)
        if api is None:
            return submission
        try:
            nodes = gpu_nodes_of(api)
        except job_client.JobError as error:
            self.report(f"{self.settings.run}: no deadline known for the next attempt: {error}")
            return submission
        ends = self.earliest_end_of(nodes)
        if ends is not None:
            self.report(
                f"{self.settings.run}: GPU capacity ends at {record.utc_stamp(ends.at)} ({ends.source}): saving first"
            )
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
            jobs = job_client.attempts(self.client, self.settings.run)
            stopped = job_client.stop_jobs(
                self.client, [job for job in jobs if job_client.attempt_number(job) == action.attempt]
            )
            self.report(f"{self.settings.run}: {action.reason}: stopped {', '.join(stopped) or 'nothing live'}")
        elif action.kind == "export":
            assert self.hooks.export is not None
            step = self.resume_step()
            done = self.hooks.export(ExportRequest(self.settings, action.attempt, step))
            details = {"step": step, **({} if done.submission is None else {"submission": done.submission})}
            self.append(action.attempt, "export-submitted", one_line(done.line), details=details)
        elif action.kind == "scale-to-zero":
            assert self.hooks.scale_to_zero is not None
            done = self.hooks.scale_to_zero(self.settings)
            # The entry's time is the moment the idle bill starts: status counts it from there. A second scale to zero
            # of the attempt (its workers came back) is reported, not recorded again (append).
            self.append(action.attempt, "scaled-to-zero", one_line(f"{action.reason}: {done}"), details=action.details)
            self._workers_read = (time.monotonic(), False)
        elif action.kind == "park":
            self.park(action)

    def park(self, action: Action) -> None:
        """Park the run through the park hook and record `parked` with what the marker says, or `park-failed` with
        why, which try it was and when (the policy tries again up to PARK_TRIES times; then `python -m jobs park`
        parks by hand)."""
        assert self.hooks.park is not None and self.settings.park is not None
        try:
            marker = self.hooks.park(self.settings)
        except (TransferError, TokenError) as error:
            details = {"tries": action.details.get("tries", 1), "at": self.clock()}
            self.append(
                action.attempt,
                "park-failed",
                one_line(f"{error}; python -m jobs park parks it by hand"),
                details=details,
            )
            return
        objects = sum(int(count) for count in (marker.get("objects") or {}).values())
        step = "no checkpoint" if marker.get("step") is None else f"step {marker['step']}"
        bucket = self.settings.park.bucket
        reason = (
            f"{objects} objects ({step}) in gs://{bucket}/{marker.get('prefix', '')}; the Lustre instance bills on"
            " until storage.parked true and pulumi up delete it"
        )
        details = {"bucket": bucket, "step": marker.get("step"), "objects": objects}
        self.append(action.attempt, "parked", reason, details=details)

    def run(
        self, follow: bool = False, poll: float = POLL_SECONDS, sleep: Callable[[float], None] = time.sleep
    ) -> Action:
        """Decide and act until the run is over and nothing is left to do (with `follow`, for ever); return the
        last decision. A dashboard lost on the way, or GPU nodes that do not come back within the readiness
        gate, is a progress line and another look after `poll` seconds. GuardError once the Lease says this
        guardian can no longer lead (lease.Lease.failure)."""
        shown, shown_at = "", 0.0
        while True:
            failure = self.lease.failure() if self.lease is not None else None
            if failure is not None:  # client-go's Check (incluster/lease.py): a leader that cannot renew is taken down
                raise GuardError(f"{failure}: this guardian stops (in the cluster, Kubernetes restarts its pod)")
            try:
                state = self.observe()
                self.summarize(state.newest, state.recorded)
                action = decide(state)
                if action.kind not in ("wait", "done"):
                    if self.may_act():
                        self.apply(action)
                        continue
                    assert self.lease is not None
                    action = Action("wait", action.attempt, self.lease.waiting_line(), wait_s=RENEW_INTERVAL_SECONDS)
            except job_client.JobError as error:
                action = Action("wait", 0, f"{error}; trying again in {poll:g} s")
            if action.kind == "done" and not follow:
                self.report(f"{self.settings.run}: {action.reason}; nothing left to do")
                self.finish_summaries()
                return action
            now = time.monotonic()
            if action.reason != shown or now - shown_at >= readiness.REPORT_EVERY_SECONDS:
                self.report(f"{self.settings.run}: {action.reason}")
                shown, shown_at = action.reason, now
            sleep(min(poll, action.wait_s) if action.wait_s > 0 else poll)
