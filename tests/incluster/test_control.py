"""Run control without a Ray head: the readiness gate on a scripted node list, and following a job
through a fake Jobs API client whose log stream fails at once."""

from __future__ import annotations

import asyncio

import pytest

from incluster import control
from incluster.endpoint import Endpoint


def scripted_nodes(monkeypatch, *answers: list[float]) -> list[int]:
    """Make control.gpu_nodes return `answers` in turn (the last one for ever); return the call counter."""
    calls = [0]

    def gpu_nodes(_endpoint: Endpoint) -> list[float]:
        calls[0] += 1
        return answers[min(calls[0], len(answers)) - 1]

    monkeypatch.setattr(control, "gpu_nodes", gpu_nodes)
    return calls


def test_the_gate_reports_progress_until_every_node_shows_8_gpus(monkeypatch):
    calls = scripted_nodes(monkeypatch, [0.0, 8.0], [0.0, 8.0, 4.0], [0.0, 8.0, 8.0])
    lines: list[str] = []
    control.wait_for_gpus(Endpoint("http://ray"), 2, timeout=60, report=lines.append, poll=0)
    assert calls[0] == 3
    assert all("missing 1 (gpu.nodes=2;" in line and line.endswith(" s left") for line in lines)
    assert [line.split(";")[0] for line in lines] == [
        "waiting for GPU nodes: 1 of 2 Ray nodes with 8 GPUs are up",
        "waiting for GPU nodes: 1 of 2 Ray nodes with 8 GPUs are up (and nodes with only 4 GPUs)",
    ]


class FakeClock:
    """Stands in for the `time` module in incluster.control: sleeping advances the clock at once."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_an_unchanged_progress_line_is_repeated_every_30_s_not_every_poll(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(control, "time", clock)
    scripted_nodes(monkeypatch, [0.0, 8.0])
    lines: list[str] = []
    with pytest.raises(control.JobError, match="can never be placed"):
        control.wait_for_gpus(Endpoint("http://ray"), 2, timeout=100, report=lines.append, poll=2)
    assert [line.rsplit("; ", 1)[1] for line in lines] == ["100 s left", "70 s left", "40 s left", "10 s left"]


def test_the_gate_refuses_a_job_that_can_never_be_placed_and_says_what_is_missing(monkeypatch):
    scripted_nodes(monkeypatch, [0.0, 8.0])
    lines: list[str] = []
    with pytest.raises(control.JobError, match=r"can never be placed: 1 of 2 Ray nodes with 8 GPUs are up; missing 1"):
        control.wait_for_gpus(Endpoint("http://ray"), 2, timeout=0, report=lines.append, poll=0)


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

    monkeypatch.setattr(control.asyncio, "sleep", counting_sleep)
    client = DeadStreamClient(running_polls=3)
    lines, progress = [], []
    status = control.follow(client, "job-1", "verl", lines.append, progress.append, poll=0.5)
    assert status == "SUCCEEDED"
    assert client.status_calls == 4
    # one pause of `poll` between status polls instead of a busy loop once the stream is gone
    assert sleeps == [0.5, 0.5, 0.5]
    assert lines == ["step:1 - critic/score/mean:np.float64(0.25)", "step:2 - critic/score/mean:0.5"]
    assert progress[-1] == "step 2  critic/score/mean 0.5000"


def test_readiness_counts_nodes_with_8_gpus_not_the_total_of_gpus():
    assert control.readiness([8.0], 1) is None
    assert control.readiness([4.0, 4.0], 1) == (
        "0 of 1 Ray nodes with 8 GPUs are up (and nodes with only 4, 4 GPUs); missing 1"
        " (gpu.nodes=1; verl places one STRICT_PACK group of 8 GPUs per node)"
    )
    assert control.readiness([8.0, 4.0, 4.0], 2).startswith("1 of 2 Ray nodes with 8 GPUs are up")
    assert control.readiness([0.0, 8.0, 8.0], 2) is None


def test_the_gate_does_not_take_two_nodes_of_4_gpus_for_one_of_8(monkeypatch):
    monkeypatch.setattr(control, "time", FakeClock())
    calls = scripted_nodes(monkeypatch, [4.0, 4.0])
    with pytest.raises(control.JobError, match=r"can never be placed: 0 of 1 Ray nodes with 8 GPUs are up"):
        control.wait_for_gpus(Endpoint("http://ray"), 1, timeout=10, report=lambda _line: None, poll=2)
    assert calls[0] > 1
    calls = scripted_nodes(monkeypatch, [4.0, 4.0], [4.0, 4.0], [4.0, 4.0, 8.0])
    control.wait_for_gpus(Endpoint("http://ray"), 1, timeout=10, report=lambda _line: None, poll=2)
    assert calls[0] == 3


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
    assert control.stop_jobs(client, ATTEMPTS) == ["r-2", "r-3"]
    assert client.stop_calls == ["r-2", "r-3"]


def test_a_stop_that_ray_ignores_ends_after_the_stop_deadline(monkeypatch):
    clock = FakeClock()
    monkeypatch.setattr(control, "time", clock)
    client = StoppingClient(ATTEMPTS[1:2], ignores_stop=True)
    with pytest.raises(control.JobError, match=r"^r-2 did not stop within 30 s; Ray still shows it live$"):
        control.stop_jobs(client, ATTEMPTS[1:2])
    assert 1030 <= clock.now <= 1031


def test_a_stop_that_ray_refuses_is_a_job_error():
    client = StoppingClient(ATTEMPTS, refuses=True)
    with pytest.raises(control.JobError, match=r"^Ray refused to stop r-2: Request failed with status code 500"):
        control.stop_jobs(client, ATTEMPTS)


class AttemptsClient:
    """A Jobs API client holding finished attempts of one run; records what is submitted."""

    def __init__(self, run: str, statuses: list[str], schedule: dict[str, str]) -> None:
        from types import SimpleNamespace

        self.jobs = [
            SimpleNamespace(
                submission_id=f"{run}-{number}",
                status=status,
                metadata={"run": run, "attempt": str(number), **schedule},
                start_time=1000 + number,
            )
            for number, status in enumerate(statuses, start=1)
        ]
        self.submitted: list[dict] = []
        self.logs: dict[str, str] = {}

    def list_jobs(self):
        return list(reversed(self.jobs))

    def submit_job(self, **kwargs):
        self.submitted.append(kwargs)
        return kwargs["submission_id"]

    def get_job_status(self, _submission_id):
        return "PENDING"

    def get_job_logs(self, submission_id):
        """The job's whole driver log, as Ray 2.60 JobSubmissionClient.get_job_logs returns it."""
        return self.logs.get(submission_id, "")


def first_attempt(max_steps: int | None):
    from jobs.spec.training import submission_of, training_spec
    from tests.jobs.spec.test_training import config_of

    config = config_of("dev", grpo={"maxSteps": max_steps})
    return submission_of(config, training_spec(config), 1)


def test_a_succeeded_run_asked_for_more_steps_continues_as_the_next_attempt():
    submission = first_attempt(200)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["FAILED", "SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    outcome = control.ensure_run(client, submission)
    assert (outcome.action, outcome.submission_id) == ("extended", f"{run}-3")
    assert client.submitted[0]["metadata"]["maxSteps"] == "200"
    assert outcome.sentence() == f"submitted {run}-3: the run SUCCEEDED on a shorter schedule and continues"


def test_a_succeeded_run_asked_for_no_more_is_left_alone():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    outcome = control.ensure_run(client, submission)
    assert (outcome.action, outcome.submission_id, client.submitted) == ("succeeded", f"{run}-1", [])
    assert "raise grpo.maxSteps to extend the run, or submit --fresh" in outcome.sentence()


def test_attempts_past_the_ninth_order_by_number():
    submission = first_attempt(None)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["FAILED"] * 9 + ["SUCCEEDED"] + ["FAILED"], {"maxSteps": "", "epochs": "1"})
    client.jobs.sort(key=lambda job: job.submission_id)
    assert [job.submission_id for job in control.attempts(client, run)][-3:] == [f"{run}-9", f"{run}-10", f"{run}-11"]
    outcome = control.ensure_run(client, submission)
    assert outcome.submission_id == f"{run}-12"
    assert client.submitted[0]["runtime_env"]["env_vars"]["GRPO_ATTEMPT"] == "12"


def deadline_log(attempt: int, step: int) -> str:
    """An attempt's log ending as the wrapper ends it after NeMo-RL stopped at its deadline having saved `step`
    (NeMo-RL's line, then the wrapper's; W&B's summary may come between, not after)."""
    return (
        f"grpo-gke attempt {attempt}: no checkpoint; starting at step 0 in /data/runs/x\n"
        "Timeout has been reached, stopping training early\n"
        f"grpo-gke attempt {attempt}: stopped at its deadline after saving step {step}"
        " ('Timeout has been reached, stopping training early'); the run resumes from it\n"
    )


def test_a_deadline_stop_before_the_schedules_end_resumes_as_the_next_attempt_for_the_cli_and_pulumi_up():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    client.logs[f"{run}-1"] = deadline_log(1, 40)
    assert control.wants_workers(client, submission)
    outcome = control.ensure_run(client, submission)
    assert (outcome.action, outcome.submission_id) == ("resumed", f"{run}-2")
    assert client.submitted[0]["runtime_env"]["env_vars"]["GRPO_ATTEMPT"] == "2"
    assert outcome.sentence() == f"submitted {run}-2: the previous attempt stopped at its deadline and the run resumes"


def test_a_deadline_stop_at_the_schedules_last_step_is_the_end_of_the_run():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    client.logs[f"{run}-1"] = deadline_log(1, 100)
    assert not control.wants_workers(client, submission)
    assert control.ensure_run(client, submission).action == "succeeded" and client.submitted == []
