"""The run's submission without a Ray head: a SUCCEEDED run extended or left alone, attempts past the ninth, and an
attempt that stopped at its deadline before its schedule's end, through a fake Jobs API client."""

from __future__ import annotations

from incluster import job_client, run_submission


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
    outcome = run_submission.ensure_run(client, submission)
    assert (outcome.action, outcome.submission_id) == ("extended", f"{run}-3")
    assert client.submitted[0]["metadata"]["maxSteps"] == "200"
    assert outcome.sentence() == f"submitted {run}-3: the run SUCCEEDED on a shorter schedule and continues"


def test_a_succeeded_run_asked_for_no_more_is_left_alone():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    outcome = run_submission.ensure_run(client, submission)
    assert (outcome.action, outcome.submission_id, client.submitted) == ("succeeded", f"{run}-1", [])
    assert "raise grpo.maxSteps to extend the run, or submit --fresh" in outcome.sentence()


def test_attempts_past_the_ninth_order_by_number():
    submission = first_attempt(None)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["FAILED"] * 9 + ["SUCCEEDED"] + ["FAILED"], {"maxSteps": "", "epochs": "1"})
    client.jobs.sort(key=lambda job: job.submission_id)
    assert [job.submission_id for job in job_client.attempts(client, run)][-3:] == [
        f"{run}-9",
        f"{run}-10",
        f"{run}-11",
    ]
    outcome = run_submission.ensure_run(client, submission)
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
    assert run_submission.wants_workers(client, submission)
    outcome = run_submission.ensure_run(client, submission)
    assert (outcome.action, outcome.submission_id) == ("resumed", f"{run}-2")
    assert client.submitted[0]["runtime_env"]["env_vars"]["GRPO_ATTEMPT"] == "2"
    assert outcome.sentence() == f"submitted {run}-2: the previous attempt stopped at its deadline and the run resumes"


def test_a_deadline_stop_at_the_schedules_last_step_is_the_end_of_the_run():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    client.logs[f"{run}-1"] = deadline_log(1, 100)
    assert not run_submission.wants_workers(client, submission)
    assert run_submission.ensure_run(client, submission).action == "succeeded" and client.submitted == []
