"""Runs and attempts on a Ray cluster: readiness gate, idempotent submit, stop, follow.

Ray refuses a reused submission id, so a run is submitted as attempts `<run>-1`, `<run>-2`, ...
Submitting a run with a live (PENDING/RUNNING) attempt does nothing, nor with a SUCCEEDED one
unless the schedule now asks for more (runs.extends: a raised `grpo.maxSteps` or `grpo.epochs`) or it
stopped at its deadline before its schedule's end (the wrapper's last line, `deadline_stop_of`; NeMo-RL exits 0
there); otherwise (FAILED, STOPPED, SUCCEEDED and extended or stopped at its deadline) it starts the next attempt, which resumes
from the run's newest complete checkpoint: its entrypoint is the attempt wrapper (incluster/attempt.py),
whose modules every submission carries as Ray `py_modules` (incluster/shipping.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from core import names
from core.facts.job import RAY_JOB_START_TIMEOUT_SECONDS
from core.facts.platform import GPUS_PER_NODE
from incluster import shipping
from incluster.attempt import deadline_stop_step
from incluster.capacity_events import LadderState, ladder_state
from incluster.endpoint import AccessError, Endpoint, service_proxy_url
from incluster.export_run import retry_id
from incluster.progress import Progress, advance
from incluster.runs import extends, for_attempt, schedule_done

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

LIVE = ("PENDING", "RUNNING")
"""Statuses of an attempt that holds (or waits for) the cluster."""

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
"""Statuses after which an attempt never changes again."""

Report = Callable[[str], None]
"""Where a long wait writes its progress line."""

REPORT_EVERY_SECONDS = 30.0
"""How often an unchanged progress line of the readiness gate is repeated."""

LADDER_READ_SECONDS = 10.0
"""How often the readiness gate reads the autoscaler's events (two API requests) while it polls Ray every few seconds."""

DEADLINE_STOP_TAIL = 5
"""Log lines of a SUCCEEDED attempt read for its wrapper's deadline-stop line (its last)."""


@dataclass(frozen=True)
class Deadlines:
    """How long the job layer waits on a Ray dashboard; nothing waits for ever."""

    connect: float = 10.0
    """Seconds a request may take to connect (TCP and TLS) to the dashboard or the API server's proxy."""
    read: float = 30.0
    """Seconds a connected request may wait for the next bytes of the answer (requests' read timeout)."""
    stop: float = 30.0
    """Seconds `stop_jobs` waits for stopped attempts to leave PENDING/RUNNING (a PENDING job can
    ignore a stop until Ray's job start timeout, RAY_JOB_START_TIMEOUT_SECONDS)."""
    preflight: float = 1800.0
    """Seconds the preflight job may take from submission to its result: placing a bundle per GPU node, measuring
    8 GPUs each (well under a minute on an H200, benchmarks/results/preflight-h200/), the fabric sweeps to 8 GiB and
    the pair search; past it the preflight fails and the job is stopped."""
    run_files: float = 120.0
    """Seconds the short job that reads a run's files on the head (jobs/runs/run_files.py) may take in all."""

    @property
    def request(self) -> tuple[float, float]:
        """The (connect, read) timeout of one request."""
        return (self.connect, self.read)


DEADLINES = Deadlines()
"""The deadlines every Ray request, stop and wait of the job layer uses."""


class JobError(Exception):
    """A refused or failed job operation; the message is one line fit for the user."""


class Unreachable(JobError):
    """The Ray dashboard cannot be reached."""


@dataclass(frozen=True)
class Outcome:
    """What `ensure_run` did."""

    action: str
    """`submitted`, `extended` (submitted past a SUCCEEDED attempt's schedule), `resumed` (submitted after an
    attempt that stopped at its deadline before its schedule's end), `live` (an attempt
    is PENDING or RUNNING) or `succeeded` (the run is done)."""
    submission_id: str
    """The attempt submitted or found."""
    status: str
    """Its status when `ensure_run` returned."""

    def sentence(self) -> str:
        """What happened, for the user."""
        if self.action == "submitted":
            return f"submitted {self.submission_id}"
        if self.action == "extended":
            return f"submitted {self.submission_id}: the run SUCCEEDED on a shorter schedule and continues"
        if self.action == "resumed":
            return f"submitted {self.submission_id}: the previous attempt stopped at its deadline and the run resumes"
        if self.action == "live":
            return f"{self.submission_id} is already {self.status}; nothing submitted"
        return (
            f"{self.submission_id} already SUCCEEDED; nothing submitted"
            " (raise grpo.maxSteps to extend the run, or submit --fresh for a new one)"
        )


@contextlib.contextmanager
def _explicit_address() -> Iterator[None]:
    """Stop RAY_ADDRESS / RAY_API_SERVER_ADDRESS from silently replacing the address we pass."""
    saved = {name: os.environ.pop(name) for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS") if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _unreachable(address: str, error: Exception) -> Unreachable:
    """The one-line Unreachable for a request to `address` that failed with a requests error."""
    import requests  # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms (measured)

    if isinstance(error, requests.exceptions.ConnectTimeout):
        reason = f"no connection within {DEADLINES.connect:g} s"
    elif isinstance(error, requests.exceptions.Timeout):
        reason = f"no answer within {DEADLINES.read:g} s"
    else:
        # requests wraps urllib3's MaxRetryError, whose `reason` names the failure after a
        # "HTTPConnection(host=..., port=...): " prefix.
        cause = getattr(error.args[0], "reason", error.args[0]) if error.args else error
        reason = _short(Exception(str(cause).split("): ", 1)[-1]))
    return Unreachable(f"cannot reach the Ray dashboard at {address}: {reason}")


@functools.cache
def _client_type() -> type[JobSubmissionClient]:
    """JobSubmissionClient whose every request has DEADLINES.request; Ray's own sends none
    (`SubmissionClient._do_request`, ray 2.60.0), so a silent dashboard would block for ever."""
    # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms, ray.job_submission ~0.65 s
    import requests
    from ray.job_submission import JobSubmissionClient

    class DeadlineClient(JobSubmissionClient):
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> requests.Response:
            try:
                kwargs.setdefault("timeout", DEADLINES.request)
                return super()._do_request(method, endpoint, **kwargs)
            except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as error:
                raise _unreachable(self._address, error) from None

    return DeadlineClient


def connect(endpoint: Endpoint) -> JobSubmissionClient:
    """A Jobs API client for `endpoint` (every request within DEADLINES); Unreachable when it does not answer."""
    client_type = _client_type()
    # The SDK logs every closed log stream at INFO; the CLI shows its own progress instead. Set after the
    # import above: importing Ray's job SDK configures its loggers.
    # Every submission's py_modules package and upload log at INFO too ("Creating a file package ...",
    # "Package ... already exists").
    quiet = (
        "ray.dashboard.modules.job.sdk",
        "ray.dashboard.modules.dashboard_sdk",
        "ray._private.runtime_env.packaging",
    )
    for logger in quiet:
        logging.getLogger(logger).setLevel(logging.WARNING)
    try:
        with _explicit_address():
            return client_type(endpoint.address, headers=dict(endpoint.headers), verify=endpoint.verify)
    except JobError:
        raise
    except Exception as error:  # noqa: BLE001 - requests/ray raise many types for one cause
        if "Version check returned 404" in str(error):
            raise Unreachable(not_a_dashboard(endpoint.address)) from None
        raise Unreachable(f"cannot reach the Ray dashboard at {endpoint.address}: {_short(error)}") from None


def not_a_dashboard(address: str) -> str:
    """Why `address` answers, but not as a Ray dashboard (its version check is a 404), and what one looks like."""
    local = f"http://127.0.0.1:{names.RAY_DASHBOARD_PORT}"
    return (
        f"no Ray dashboard at {address}: GET {address}/api/version answered 404 Not Found;"
        f" a dashboard address has no path after host:port ({local} with the stack's dashboardCommand)"
        f" or is the service proxy {service_proxy_url('https://<api-server>')}"
    )


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    reason = text[-1] if text else type(error).__name__
    return reason if len(reason) <= 200 else reason[:197] + "..."


def ray_nodes(endpoint: Endpoint) -> list[dict[str, Any]]:
    """Every Ray node the head knows, dead ones included, from the dashboard's state API (`/api/v0/nodes`,
    entries with `node_id`, `state`, `resources_total`, `end_time_ms`), within DEADLINES.request."""
    import requests  # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms (measured)

    url = f"{endpoint.address}/api/v0/nodes?detail=1"
    try:
        response = requests.get(url, headers=dict(endpoint.headers), verify=endpoint.verify, timeout=DEADLINES.request)
        response.raise_for_status()
        nodes = response.json()["data"]["result"]["result"]
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as error:
        raise _unreachable(endpoint.address, error) from None
    except requests.exceptions.HTTPError as error:
        raise Unreachable(f"cannot read the Ray nodes at {endpoint.address}: {_short(error)}") from None
    except (ValueError, KeyError, TypeError):
        raise JobError(f"the Ray dashboard at {endpoint.address} returned no node list") from None
    if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
        raise JobError(f"the Ray dashboard at {endpoint.address} returned no node list")
    return nodes


def node_gpus(node: dict[str, Any]) -> float:
    """GPUs a state API node entry declared."""
    return float((node.get("resources_total") or {}).get("GPU", 0))


def gpu_nodes(endpoint: Endpoint) -> list[float]:
    """GPUs of each ALIVE Ray node, from the dashboard's state API, within DEADLINES.request."""
    return [node_gpus(node) for node in ray_nodes(endpoint) if node.get("state") == "ALIVE"]


def readiness(gpus_by_node: list[float], nodes: int) -> str | None:
    """What is missing for `nodes` Ray nodes with 8 GPUs each, or None when they are there."""
    full = sum(1 for gpus in gpus_by_node if gpus >= GPUS_PER_NODE)
    if full >= nodes:
        return None
    partial = sorted(int(gpus) for gpus in gpus_by_node if 0 < gpus < GPUS_PER_NODE)
    detail = f" (and nodes with only {', '.join(map(str, partial))} GPUs)" if partial else ""
    return (
        f"{full} of {nodes} Ray nodes with {GPUS_PER_NODE} GPUs are up{detail}; missing {nodes - full}"
        f" (gpu.nodes={nodes}; verl places one STRICT_PACK group of {GPUS_PER_NODE} GPUs per node)"
    )


@dataclass(frozen=True)
class Capacity:
    """Where the readiness gate reads which rung of the capacity ladder GKE is trying: the API server and what maps
    the autoscaler's node groups to rungs (incluster/capacity_events.py)."""

    api: Endpoint
    """The Kubernetes API server (not the dashboard's proxy)."""
    provisioning: str
    """gpu.provisioning: the rung whose pool keeps today's name (core/names.py gpu_pool_name)."""
    cluster: str
    """The GKE cluster's name, in each pool's MIG name."""
    namespace: str = names.NAMESPACE
    """The namespace of the GPU worker pods and their events."""


def api_items(api: Endpoint, path: str, params: dict[str, str], what: str) -> list[dict[str, Any]]:
    """The `items` of a list request to the API server within DEADLINES.request; JobError (Unreachable when silent)
    names `what` when it refuses."""
    import requests  # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms (measured)

    try:
        answer = requests.get(
            f"{api.address}{path}",
            params=params,
            headers=dict(api.headers),
            verify=api.verify,
            timeout=DEADLINES.request,
        )
    except (requests.exceptions.Timeout, requests.exceptions.ConnectionError):
        raise Unreachable(f"the API server at {api.address} did not answer listing {what}") from None
    if answer.status_code >= 400:
        raise JobError(f"the API server answered HTTP {answer.status_code} listing {what}")
    try:
        return list(answer.json().get("items") or [])
    except (ValueError, AttributeError):
        raise JobError(f"the API server returned no list of {what}") from None


WORKER_SELECTOR = f"ray.io/cluster={names.RAY_CLUSTER},ray.io/group={names.RAY_WORKER_GROUP}"
"""The GPU worker pods of the stack's RayCluster (KubeRay's labels ray.io/cluster and ray.io/group,
ray-operator/controllers/ray/utils/constant.go L19-21, v1.7.0)."""


def scale_up_events(capacity: Capacity) -> list[dict[str, Any]]:
    """The events on the pending GPU worker pods: the Pending worker pods (fieldSelector status.phase, a field
    selector every pod supports), then the namespace's Pod events (Events are namespaced; fieldSelector
    involvedObject.kind=Pod: kubernetes/kubernetes pkg/registry/core/event/strategy.go EventToSelectableFields,
    read at commit 00b2d95, the stored copy; the field set is the same in v1.33) of those pods alone."""
    base = f"/api/v1/namespaces/{capacity.namespace}"
    pods = api_items(
        capacity.api,
        f"{base}/pods",
        {"labelSelector": WORKER_SELECTOR, "fieldSelector": "status.phase=Pending"},
        "the pending GPU worker pods",
    )
    pending = {str((pod.get("metadata") or {}).get("name", "")) for pod in pods}
    if not pending:
        return []
    events = api_items(capacity.api, f"{base}/events", {"fieldSelector": "involvedObject.kind=Pod"}, "the pods' events")
    return [event for event in events if (event.get("involvedObject") or {}).get("name") in pending]


def ladder_line(capacity: Capacity | None) -> str:
    """Which rung is being tried, since when, and why the last scale-up did not happen, for the gate's progress
    line; "" without an API server or before the autoscaler wrote anything; one clause when it cannot be read."""
    if capacity is None:
        return ""
    try:
        state = ladder_state(scale_up_events(capacity), capacity.provisioning, capacity.cluster)
    except JobError as error:
        return f"rung unknown ({error})"
    return ladder_line_of(state)


def ladder_line_of(state: LadderState) -> str:
    """`trying rung R since T; last scale-up failed: WHY`, the parts the state knows; "" when it knows none."""
    parts = []
    if state.rung is not None:
        parts.append(f"trying rung {state.rung} since {state.since}")
    if state.last_failure is not None:
        parts.append(f"last scale-up failed: {state.last_failure}")
    return "; ".join(parts)


def wait_for_gpus(
    endpoint: Endpoint,
    nodes: int,
    timeout: float,
    report: Report,
    poll: float = 2.0,
    capacity: Capacity | None = None,
) -> None:
    """Wait, at most `timeout` seconds, until `nodes` Ray nodes show 8 GPUs; JobError says what is missing.

    The progress line is reported when what is missing (or the ladder's rung and last failure, read from the
    autoscaler's events when `capacity` gives an API server) changes, else every REPORT_EVERY_SECONDS (`pulumi up`
    prints every line the provider writes).
    """
    deadline = time.monotonic() + timeout
    reported, reported_at = "", 0.0
    ladder, ladder_at = "", float("-inf")
    while True:
        missing = readiness(gpu_nodes(endpoint), nodes)
        if missing is None:
            return
        now = time.monotonic()
        if now - ladder_at >= LADDER_READ_SECONDS:
            ladder, ladder_at = ladder_line(capacity), now
        missing_now = f"{missing}; {ladder}" if ladder else missing
        left = deadline - now
        if left <= 0:
            raise JobError(
                f"refused: the job can never be placed: {missing_now} after {timeout:.0f} s."
                f" Ray would keep it PENDING for {RAY_JOB_START_TIMEOUT_SECONDS} s; check the GPU node pool"
                f" (kubectl -n {names.NAMESPACE} get pods) and job.readyTimeoutSeconds"
            )
        if missing_now != reported or now - reported_at >= REPORT_EVERY_SECONDS:
            report(f"waiting for GPU nodes: {missing_now}; {left:.0f} s left")
            reported, reported_at = missing_now, now
        time.sleep(min(poll, max(left, 0.1)))


def attempt_number(details: JobDetails) -> int:
    """The attempt number recorded in a job's metadata (0 when it is not one of ours)."""
    try:
        return int((details.metadata or {}).get("attempt", "0"))
    except ValueError:
        return 0


def attempts(client: JobSubmissionClient, run: str) -> list[JobDetails]:
    """The attempts of `run` on the cluster, oldest first."""
    found = [job for job in client.list_jobs() if (job.metadata or {}).get("run") == run]
    return sorted(found, key=attempt_number)


def stack_jobs(client: JobSubmissionClient, stack: str) -> list[JobDetails]:
    """Every job the stack submitted, oldest first."""
    found = [job for job in client.list_jobs() if (job.metadata or {}).get("stack") == stack]
    return sorted(found, key=lambda job: (job.start_time or 0, job.submission_id or ""))


def deadline_stop_of(client: JobSubmissionClient, job: JobDetails) -> int | None:
    """The step a SUCCEEDED attempt saved before it stopped at its deadline (its wrapper's last line,
    incluster/attempt.py DEADLINE_STOP_LINE), or None: any other attempt, or one that ran to its schedule's end."""
    if status_text(job.status) != "SUCCEEDED" or not job.submission_id:
        return None
    return deadline_stop_step(last_lines(client, job.submission_id, DEADLINE_STOP_TAIL))


def settled(previous: list[JobDetails], submission: dict[str, Any], stopped_at: int | None = None) -> Outcome | None:
    """What `ensure_run` finds with the run's attempts `previous` when it submits nothing: `live` (the newest
    is PENDING or RUNNING) or `succeeded` (it SUCCEEDED, did not stop at its deadline before its schedule's end,
    `stopped_at` being the step it saved then, and the schedule asks for no more); else None."""
    if not previous:
        return None
    newest = previous[-1]
    status = status_text(newest.status)
    if status in LIVE:
        return Outcome("live", newest.submission_id, status)
    if stopped_at is not None and not schedule_done(newest.metadata or {}, stopped_at):
        return None
    if status == "SUCCEEDED" and not extends(newest.metadata or {}, submission["metadata"]):
        return Outcome("succeeded", newest.submission_id, status)
    return None


def wants_workers(client: JobSubmissionClient, submission: dict[str, Any]) -> bool:
    """Whether the run of `submission` needs the GPU workers: anything but a SUCCEEDED run with nothing more
    to do (whose workers the run guardian may have scaled to zero)."""
    previous = attempts(client, submission["metadata"]["run"])
    stopped_at = deadline_stop_of(client, previous[-1]) if previous else None
    kept = settled(previous, submission, stopped_at)
    return kept is None or kept.action != "succeeded"


def ensure_run(
    client: JobSubmissionClient,
    submission: dict[str, Any],
    stop_of: Callable[[JobDetails], int | None] | None = None,
    after: int = 0,
) -> Outcome:
    """Submit the run of `submission` (attempt-1 kwargs) unless an attempt is live, or the newest
    SUCCEEDED and the schedule asks for no more than it ran. An attempt that stopped at its deadline before
    its schedule's end (`stop_of`, default `deadline_stop_of` through Ray's logs) is `resumed`. The attempt's
    number follows the newest on the cluster and `after` (the newest the run's record knows: a new Ray head lists
    none of the run's attempts, and Ray refuses no id it has not seen, so attempt 1's id and log would be used
    again)."""
    run = submission["metadata"]["run"]
    previous = attempts(client, run)
    stopped_at = (stop_of or functools.partial(deadline_stop_of, client))(previous[-1]) if previous else None
    kept = settled(previous, submission, stopped_at)
    if kept is not None:
        return kept
    if stopped_at is not None:
        action = "resumed"
    elif previous and status_text(previous[-1].status) == "SUCCEEDED":
        action = "extended"
    else:
        action = "submitted"
    attempt = max(attempt_number(previous[-1]) if previous else 0, after) + 1
    kwargs = for_attempt(submission, attempt)
    try:
        with shipping.py_modules() as modules:
            submission_id = client.submit_job(
                **{**kwargs, "runtime_env": {**kwargs["runtime_env"], "py_modules": modules}}
            )
    except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
        raise JobError(f"Ray refused {kwargs['submission_id']}: {_short(error)}") from None
    return Outcome(action, submission_id, status_of(client, submission_id))


EXPORT_TRIES = 20
"""Most tries of one export (incluster/export_run.py retry_id) before giving up on one whose tries all failed."""

LIVE_OR_DONE = ("PENDING", "RUNNING", "SUCCEEDED")
"""Statuses of an export already submitted that a second submission follows instead of trying again."""


def submit_export(client: JobSubmissionClient, submission: dict[str, Any]) -> tuple[str, bool]:
    """Submit an export (jobs/runs/export.py export_submission) with its driver's modules: its submission id, and
    whether that export was already submitted (pending, running or succeeded: follow it, nothing submitted).

    Ray refuses a submission_id it already holds (ray 2.60.0 dashboard/modules/job/job_manager.py L549-556,
    ValueError "Job with submission_id ... already exists"; job_head.py L428-433 answers it as HTTP 400, and
    sdk.py L265-268 with dashboard_sdk.py L304-307 raise that as RuntimeError); after a refusal the id's status says
    which case it is, so no error text is parsed. A try that ended FAILED or STOPPED is followed by the next try's id."""
    base = submission.get("submission_id")
    for retry in range(1, EXPORT_TRIES + 1 if base else 2):
        wanted = {**submission, "submission_id": retry_id(base, retry)} if base else submission
        try:
            with shipping.py_modules() as modules:
                runtime_env = {**wanted["runtime_env"], "py_modules": modules}
                return client.submit_job(**{**wanted, "runtime_env": runtime_env}), False
        except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
            refused = JobError(f"Ray refused the export: {_short(error)}")
        try:
            status = status_of(client, wanted["submission_id"]) if base else None
        except Exception:  # noqa: BLE001 - no such job (HTTP 404 as RuntimeError) or Ray unreachable
            status = None
        if status is None:
            raise refused from None
        if status in LIVE_OR_DONE:
            return wanted["submission_id"], True
    raise JobError(f"the export {base} failed or was stopped {EXPORT_TRIES} times; see `python -m jobs logs {base}`")


def status_of(client: JobSubmissionClient, submission_id: str) -> str:
    """The job's status as text (PENDING, RUNNING, STOPPED, SUCCEEDED or FAILED)."""
    return status_text(client.get_job_status(submission_id))


def status_text(status: Any) -> str:
    """A JobStatus (or its text) as text."""
    return str(status.value if hasattr(status, "value") else status)


def stop_jobs(client: JobSubmissionClient, jobs: list[JobDetails]) -> list[str]:
    """Stop the live (PENDING or RUNNING) ones of `jobs` and wait, at most DEADLINES.stop seconds,
    until they have ended; return their ids. JobError when Ray refuses a stop or one stays live."""
    stopped = []
    for job in jobs:
        if status_text(job.status) in LIVE:
            try:
                client.stop_job(job.submission_id)
            except JobError:
                raise
            except Exception as error:  # noqa: BLE001 - the Jobs API answers with RuntimeError and HTTP errors
                raise JobError(f"Ray refused to stop {job.submission_id}: {_short(error)}") from None
            stopped.append(job.submission_id)
    timeout = DEADLINES.stop
    deadline = time.monotonic() + timeout
    for submission_id in stopped:
        while status_of(client, submission_id) in LIVE:
            if time.monotonic() > deadline:
                raise JobError(f"{submission_id} did not stop within {timeout:g} s; Ray still shows it live")
            time.sleep(0.3)
    return stopped


def last_lines(client: JobSubmissionClient, submission_id: str, count: int = 20) -> list[str]:
    """The job's last `count` log lines."""
    return client.get_job_logs(submission_id).rstrip("\n").splitlines()[-count:]


def follow(
    client: JobSubmissionClient,
    submission_id: str,
    framework: str,
    on_line: Callable[[str], None] | None,
    on_progress: Report,
    poll: float = 1.0,
) -> str:
    """Stream the job's log until it ends, reporting progress; return its final status.

    The log streams over the Jobs API's websocket while the status is polled every `poll`
    seconds: Ray closes the stream seconds after the job ends and may drop its last lines
    (ray-project/ray#48701), so at the end the rest comes from the full log. Every status poll has
    DEADLINES.request, so a dashboard that stops answering ends the follow with Unreachable; the
    websocket, which Ray opens without a timeout, is cancelled with it.
    """
    progress = Progress()
    shown = ""
    emitted = 0

    def emit(line: str) -> None:
        nonlocal progress, shown, emitted
        emitted += 1
        if on_line is not None:
            on_line(line)
        progress = advance(progress, line, framework)
        text = progress.line(framework)
        if text != shown and progress.step is not None:
            on_progress(text)
            shown = text

    async def tail() -> None:
        pending = ""
        async for chunk in client.tail_job_logs(submission_id):
            *lines, pending = (pending + chunk).split("\n")
            for line in lines:
                emit(line)

    async def watch() -> str:
        streaming = asyncio.ensure_future(tail())
        try:
            while True:
                status = await asyncio.to_thread(status_of, client, submission_id)
                if status in TERMINAL:
                    return status
                if streaming.done():
                    # The stream ended or failed (a proxy refusing the websocket): poll, do not spin.
                    await asyncio.sleep(poll)
                else:
                    await asyncio.wait([streaming], timeout=poll)
        finally:
            streaming.cancel()
            await asyncio.gather(streaming, return_exceptions=True)

    # asyncio.Runner with a loop factory leaves the thread's current loop alone (asyncio.run would clear it, and
    # the Pulumi runtime in the same process still expects it). On Ctrl-C it cancels `watch` (whose `finally`
    # cancels the stream: ray 2.60.0 ray/dashboard/modules/job/sdk.py L505-515 holds the aiohttp ClientSession in
    # `async with` around `await ws.receive()`, so the cancellation closes the session) and raises KeyboardInterrupt
    # once `watch` has ended (CPython v3.11.7 Lib/asyncio/runners.py L100-124, `_on_sigint` L150); closing it
    # finishes every task, async generator and the status poll's thread (`close` L65-79). A plain
    # run_until_complete let the interrupt escape with the stream pending: "Task was destroyed but it is pending!"
    # and "Unclosed client session" at exit.
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        status = runner.run(watch())
    text = client.get_job_logs(submission_id).rstrip("\n")
    for line in (text.split("\n") if text else [])[emitted:]:
        emit(line)
    return status


def endpoint_for_address(address: str) -> Endpoint:
    """An Endpoint for a dashboard URL given on the command line (`host:port` means http)."""
    if "://" not in address:
        address = f"http://{address}"
    if not address.startswith(("http://", "https://")):
        raise AccessError(f"--address must be an http(s) dashboard URL, got {address!r}")
    return Endpoint(address=address.rstrip("/"))
