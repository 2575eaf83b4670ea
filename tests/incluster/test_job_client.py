"""The Ray Jobs API client without a Ray head: following a job through a fake client whose log stream fails at
once, and stopping attempts through one whose stop ends them, is ignored or is refused; a Jobs API answer other than
200 through the fault proxy in front of a stand-in dashboard."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
from dataclasses import replace

import pytest

from incluster import job_client
from incluster.guardian.loop import Guardian, Hooks
from incluster.guardian.settings import settings_from
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of
from tests.incluster.test_guardian_preflight import _with_run_dir
from tests.support.clock import Clock
from tests.support.fault_proxy import Fault, fault_proxy


class DeadStreamClient:
    """RUNNING for `running_polls` status calls, then SUCCEEDED; the log websocket fails immediately."""

    def __init__(self, running_polls: int) -> None:
        self.running_polls = running_polls
        self.status_calls = 0

    def get_job_status(self, _submission_id: str) -> str:
        self.status_calls += 1
        return "RUNNING" if self.status_calls <= self.running_polls else "SUCCEEDED"

    async def tail_job_logs(self, _submission_id: str):
        raise RuntimeError("websocket refused by the proxy")
        yield  # an async generator, like the real one

    def get_job_logs(self, _submission_id: str) -> str:
        return "step:1 - critic/score/mean:np.float64(0.25)\nstep:2 - critic/score/mean:0.5\n"


def test_a_failed_log_stream_falls_back_to_polling_and_the_full_log(monkeypatch):
    sleeps: list[float] = []
    real_sleep = asyncio.sleep

    async def counting_sleep(delay: float, *args, **kwargs):
        sleeps.append(delay)
        return await real_sleep(0)

    monkeypatch.setattr(job_client.asyncio, "sleep", counting_sleep)
    client = DeadStreamClient(running_polls=3)
    lines, progress = [], []
    status = job_client.follow(client, "job-1", "verl", lines.append, progress.append, poll=0.5)
    assert status == "SUCCEEDED"
    assert client.status_calls == 4
    # one pause of `poll` between status polls instead of a busy loop once the stream is gone
    assert sleeps == [0.5, 0.5, 0.5]
    assert lines == ["step:1 - critic/score/mean:np.float64(0.25)", "step:2 - critic/score/mean:0.5"]
    assert progress[-1] == "step 2  critic/score/mean 0.5000"


class Job:
    """The two fields of a JobDetails that stop_jobs reads."""

    def __init__(self, submission_id: str, status: str) -> None:
        self.submission_id = submission_id
        self.status = status


class StoppingClient:
    """A Jobs API client whose stop ends a job at once, or never (`ignores_stop`), or is refused."""

    def __init__(self, jobs: list[Job], ignores_stop: bool = False, refuses: bool = False) -> None:
        self.statuses = {job.submission_id: job.status for job in jobs}
        self.ignores_stop = ignores_stop
        self.refuses = refuses
        self.stop_calls: list[str] = []

    def stop_job(self, submission_id: str) -> bool:
        self.stop_calls.append(submission_id)
        if self.refuses:
            raise RuntimeError("Request failed with status code 500: stop refused.")
        if not self.ignores_stop:
            self.statuses[submission_id] = "STOPPED"
        return True

    def get_job_status(self, submission_id: str) -> str:
        return self.statuses[submission_id]


ATTEMPTS = [Job("r-1", "FAILED"), Job("r-2", "PENDING"), Job("r-3", "RUNNING"), Job("r-4", "SUCCEEDED")]
"""One attempt in each kind of status."""


def test_stop_stops_pending_and_running_attempts_and_nothing_else():
    client = StoppingClient(ATTEMPTS)
    assert job_client.stop_jobs(client, ATTEMPTS) == ["r-2", "r-3"]
    assert client.stop_calls == ["r-2", "r-3"]


def test_a_stop_that_ray_ignores_ends_after_the_stop_deadline(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(job_client, "time", clock)
    client = StoppingClient(ATTEMPTS[1:2], ignores_stop=True)
    with pytest.raises(job_client.JobError, match=r"^r-2 did not stop within 30 s; Ray still shows it live$"):
        job_client.stop_jobs(client, ATTEMPTS[1:2])
    assert 1030 <= clock.now <= 1031


def test_a_stop_that_ray_refuses_is_a_job_error():
    client = StoppingClient(ATTEMPTS, refuses=True)
    with pytest.raises(job_client.JobError, match=r"^Ray refused to stop r-2: Request failed with status code 500"):
        job_client.stop_jobs(client, ATTEMPTS)


class Dashboard(http.server.BaseHTTPRequestHandler):
    """The few Jobs and state API answers a guardian's first look needs, as Ray 2.60's dashboard gives them: the
    version check (`/api/version`), no job (`/api/jobs/`), no node (`/api/v0/nodes`)."""

    def do_GET(self) -> None:
        answers = {"/api/version": {"ray_version": "2.60.0", "version": "4"}, "/api/jobs/": []}
        body = answers.get(self.path.split("?")[0], {"data": {"result": {"result": []}}})
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args) -> None:
        pass


def test_a_503_from_the_service_proxy_while_the_head_restarts_is_a_progress_line_and_another_look(tmp_path):
    """Fault injected: the API server's service proxy answers the Jobs API with 503 "no endpoints available for
    service" twice (the head pod restarting); the guardian says so and looks again, it does not end."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    values = settings_from(guardian_settings(config_of("dev")), "test")
    settings = replace(values, submission=_with_run_dir(values.submission, tmp_path / "run"))
    lines: list[str] = []
    looks: list[float] = []
    try:
        with fault_proxy(f"http://127.0.0.1:{server.server_address[1]}") as proxy:
            guardian = Guardian(settings, job_client.endpoint_for_address(proxy.url), Hooks(), lines.append)
            body = 'no endpoints available for service "grpo-head-svc:dashboard"'
            proxy.inject(Fault(503, "/api/jobs/", "GET", times=2, body=body, content_type="text/plain"))

            def sleep(seconds: float) -> None:
                looks.append(seconds)
                if len(looks) == 3:
                    raise KeyboardInterrupt

            with pytest.raises(KeyboardInterrupt):
                guardian.run(poll=5, sleep=sleep)
    finally:
        server.shutdown()
        server.server_close()
    assert looks == [5, 5, 5]
    assert lines[0] == (
        f"{settings.run}: the Ray dashboard failed: HTTP 503 from {proxy.url}: no endpoints available for service"
        ' "grpo-head-svc:dashboard"; trying again in 5 s'
    )
    assert len(lines) == 2 and "trying again" not in lines[1], lines  # the third look found the head again
