"""The Ray Jobs API client without a Ray head: following a job through a fake client whose log stream fails at
once, and stopping attempts through one whose stop ends them, is ignored or is refused."""

from __future__ import annotations

import asyncio

import pytest

from incluster import job_client
from tests.support.clock import Clock


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
