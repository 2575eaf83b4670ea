"""The Ray Jobs API client: connecting to a dashboard within deadlines, the errors the job layer raises, a job's
status and log, following a job to its end, stopping jobs, and listing a run's attempts or a stack's jobs."""

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
from incluster.endpoint import AccessError, Endpoint, service_proxy_url
from incluster.progress import Progress, advance

if TYPE_CHECKING:
    from ray.job_submission import JobDetails, JobSubmissionClient

LIVE = ("PENDING", "RUNNING")
"""Statuses of an attempt that holds (or waits for) the cluster."""

TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
"""Statuses after which an attempt never changes again."""

Report = Callable[[str], None]
"""Where a long wait writes its progress line."""


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
    """Seconds the short job that reads a run's files on the head (incluster/run_files.py) may take in all."""

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


class Refused(JobError):
    """The Ray dashboard (or the API server's service proxy before it) answered, but not with what was asked: a
    status other than 200, which Ray's SDK raises as a bare RuntimeError (ray 2.60.0
    python/ray/dashboard/modules/dashboard_sdk.py `_raise_error` L304-307; an expired token as AuthenticationError,
    `_do_request` L336-341), or a 200 that is not JSON."""


@contextlib.contextmanager
def _explicit_address() -> Iterator[None]:
    """Stop RAY_ADDRESS / RAY_API_SERVER_ADDRESS from silently replacing the address we pass."""
    saved = {name: os.environ.pop(name) for name in ("RAY_API_SERVER_ADDRESS", "RAY_ADDRESS") if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def unreachable(address: str, error: Exception) -> Unreachable:
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
        reason = short_reason(Exception(str(cause).split("): ", 1)[-1]))
    return Unreachable(f"cannot reach the Ray dashboard at {address}: {reason}")


@functools.cache
def _client_type() -> type[JobSubmissionClient]:
    """JobSubmissionClient whose every request has DEADLINES.request; Ray's own sends none
    (`SubmissionClient._do_request`, ray 2.60.0), so a silent dashboard would block for ever."""
    # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms, ray.job_submission ~0.65 s
    import requests
    from ray.exceptions import AuthenticationError
    from ray.job_submission import JobSubmissionClient

    class DeadlineClient(JobSubmissionClient):
        def _do_request(self, method: str, endpoint: str, **kwargs: Any) -> requests.Response:
            try:
                kwargs.setdefault("timeout", DEADLINES.request)
                response = super()._do_request(method, endpoint, **kwargs)
            except (requests.exceptions.Timeout, requests.exceptions.ConnectionError) as error:
                raise unreachable(self._address, error) from None
            except requests.exceptions.RequestException as error:  # a cut answer: ChunkedEncodingError and the like
                raise Unreachable(
                    f"the Ray dashboard at {self._address} cut its answer short: {type(error).__name__}"
                ) from None
            except AuthenticationError as error:
                first = (str(error).strip().splitlines() or ["refused"])[0][:200]
                raise Refused(f"the Ray dashboard failed: {first} ({self._address})") from None
            decoded = response.json

            def checked_json(**json_kwargs: Any) -> Any:
                try:
                    return decoded(**json_kwargs)
                except ValueError:
                    kind = response.headers.get("Content-Type") or "no content type"
                    raise Refused(
                        f"the Ray dashboard failed: {method} {endpoint} at {self._address} answered {kind}, not JSON"
                    ) from None

            response.json = checked_json  # type: ignore[method-assign]
            return response

        def _raise_error(self, r: requests.Response) -> None:
            raise Refused(refusal_line(self._address, r.status_code, r.text))

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
            # The headers themselves, not a copy: a client's FreshBearer (incluster/google_token.py) renews its token
            # as Ray reads it for each request of a long follow.
            return client_type(endpoint.address, headers=endpoint.headers, verify=endpoint.verify)
    except JobError:
        raise
    except Exception as error:  # noqa: BLE001 - requests/ray raise many types for one cause
        if "Version check returned 404" in str(error):
            raise Unreachable(not_a_dashboard(endpoint.address)) from None
        raise Unreachable(f"cannot reach the Ray dashboard at {endpoint.address}: {short_reason(error)}") from None


def refusal_line(address: str, status: int, body: str) -> str:
    """One line for a dashboard's (or its proxy's) answer `status` with `body`: the body's first line, shortened (the
    CLI's "the Ray dashboard failed" line, jobs/cli/main.py, for every caller)."""
    first = next((line.strip() for line in body.splitlines() if line.strip()), "no body")
    return f"the Ray dashboard failed: HTTP {status} from {address}: {first[:200]}"


def not_a_dashboard(address: str) -> str:
    """Why `address` answers, but not as a Ray dashboard (its version check is a 404), and what one looks like."""
    local = f"http://127.0.0.1:{names.RAY_DASHBOARD_PORT}"
    return (
        f"no Ray dashboard at {address}: GET {address}/api/version answered 404 Not Found;"
        f" a dashboard address has no path after host:port ({local} with the stack's dashboardCommand)"
        f" or is the service proxy {service_proxy_url('https://<api-server>')}"
    )


def short_reason(error: BaseException) -> str:
    """The last line of an error's text, at most 200 characters: the reason a one-line message gives."""
    text = str(error).strip().splitlines()
    reason = text[-1] if text else type(error).__name__
    return reason if len(reason) <= 200 else reason[:197] + "..."


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
                raise JobError(f"Ray refused to stop {job.submission_id}: {short_reason(error)}") from None
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
