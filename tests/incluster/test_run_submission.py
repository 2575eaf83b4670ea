"""The run's submission without a Ray head: a SUCCEEDED run extended or left alone, attempts past the ninth, and an
attempt that stopped at its deadline before its schedule's end, through a fake Jobs API client."""

from __future__ import annotations

from incluster import job_client, run_submission


def NOTHING_KNOWN() -> run_submission.RunDirView:
    """A run directory with no record and no attempt log (a run without a guardian, on the head that ran it)."""
    return run_submission.RunDirView()


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
    outcome = run_submission.ensure_run(client, submission, NOTHING_KNOWN)
    assert (outcome.action, outcome.submission_id) == ("extended", f"{run}-3")
    assert client.submitted[0]["metadata"]["maxSteps"] == "200"
    assert outcome.sentence() == f"submitted {run}-3: the run SUCCEEDED on a shorter schedule and continues"


def test_a_succeeded_run_asked_for_no_more_is_left_alone():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    outcome = run_submission.ensure_run(client, submission, NOTHING_KNOWN)
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
    outcome = run_submission.ensure_run(client, submission, NOTHING_KNOWN)
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
    assert run_submission.wants_workers(client, submission, NOTHING_KNOWN)
    outcome = run_submission.ensure_run(client, submission, NOTHING_KNOWN)
    assert (outcome.action, outcome.submission_id) == ("resumed", f"{run}-2")
    assert client.submitted[0]["runtime_env"]["env_vars"]["GRPO_ATTEMPT"] == "2"
    assert outcome.sentence() == f"submitted {run}-2: the previous attempt stopped at its deadline and the run resumes"


def test_a_deadline_stop_at_the_schedules_last_step_is_the_end_of_the_run():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["SUCCEEDED"], {"maxSteps": "100", "epochs": "1"})
    client.logs[f"{run}-1"] = deadline_log(1, 100)
    assert not run_submission.wants_workers(client, submission, NOTHING_KNOWN)
    assert run_submission.ensure_run(client, submission, NOTHING_KNOWN).action == "succeeded" and client.submitted == []


def known(entries: list[dict] = (), logged: tuple[int, ...] = ()):
    """A reader of a run directory holding the record `entries` and the attempt logs `logged`."""
    return lambda: run_submission.RunDirView(tuple(entries), tuple(logged))


def test_a_new_head_numbers_the_next_attempt_past_the_record_and_the_logs_not_attempt_1_again():
    """A new Ray head lists none of the run's attempts; the record knows attempt 2 and the logs attempt 3 (a
    submission the guardian did not record): the next is 4, whoever submits it."""
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, [], {})
    entries = [{"attempt": 2, "event": "submitted"}, {"attempt": 2, "event": "failed"}]
    outcome = run_submission.ensure_run(client, submission, known(entries, (1, 3)))
    assert (outcome.action, outcome.submission_id) == ("continued", f"{run}-4")
    assert client.submitted[0]["runtime_env"]["env_vars"]["GRPO_ATTEMPT"] == "4"
    assert outcome.sentence() == (
        f"submitted {run}-4: the run's directory knows attempt 3, which this Ray head does not list (a new head), and"
        " the run continues from its checkpoints"
    )


def test_a_live_attempt_settles_it_without_reading_the_run_directory():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["RUNNING"], {"maxSteps": "100", "epochs": "1"})

    def unread() -> run_submission.RunDirView:
        raise AssertionError("the run directory was read for a live attempt")

    assert run_submission.ensure_run(client, submission, unread).action == "live" and client.submitted == []


def test_a_run_its_record_says_is_over_is_not_submitted_again_on_a_new_head():
    """succeeded, not-retried and gave-up end a run (runs.OVER_EVENTS); a recover decision does not."""
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    schedule = {"maxSteps": "100", "epochs": "1"}
    for event, details in (("succeeded", schedule), ("not-retried", None), ("gave-up", None)):
        client = AttemptsClient(run, [], {})
        entries = [
            {"attempt": 2, "event": "failed"},
            {"attempt": 2, "event": event, "reason": "why", "details": details},
        ]
        assert not run_submission.wants_workers(client, submission, known(entries, (1, 2)))
        outcome = run_submission.ensure_run(client, submission, known(entries, (1, 2)))
        assert (outcome.action, outcome.submission_id, client.submitted) == ("over", f"{run}-2", [])
        if event == "succeeded":
            assert outcome.sentence() == (
                f"{run}-2 already SUCCEEDED; nothing submitted (raise grpo.maxSteps to extend the run, or submit --fresh"
                " for a new one)"
            )
        else:
            assert outcome.sentence() == (
                f"the run is over: the run guardian recorded {run}-2 {event}: why; nothing submitted (submit --fresh for"
                " a new run)"
            )
    client = AttemptsClient(run, [], {})
    recovering = [{"attempt": 2, "event": "failed"}, {"attempt": 2, "event": "recovering"}]
    assert run_submission.ensure_run(client, submission, known(recovering, (2,))).submission_id == f"{run}-3"


def test_a_succeeded_run_a_new_head_no_longer_lists_is_extended_by_the_schedule_its_record_keeps():
    submission = first_attempt(200)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, [], {})
    entries = [{"attempt": 1, "event": "succeeded", "details": {"maxSteps": "100", "epochs": "1"}}]
    outcome = run_submission.ensure_run(client, submission, known(entries, (1,)))
    assert (outcome.action, outcome.submission_id) == ("extended", f"{run}-2")


def test_a_failed_attempt_the_guardian_did_not_retry_is_over_on_the_head_that_lists_it():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = AttemptsClient(run, ["FAILED"], {"maxSteps": "100", "epochs": "1"})
    entries = [{"attempt": 1, "event": "failed"}, {"attempt": 1, "event": "not-retried", "reason": "a bug"}]
    outcome = run_submission.ensure_run(client, submission, known(entries, (1,)))
    assert (outcome.action, outcome.submission_id, client.submitted) == ("over", f"{run}-1", [])
    assert run_submission.ensure_run(client, submission, NOTHING_KNOWN).submission_id == f"{run}-2"


class RefusingClient(AttemptsClient):
    """Another submitter's attempt reaches Ray first: submit_job is refused as Ray 2.60 refuses a known id (the SDK's
    RuntimeError for the non-200, dashboard/modules/dashboard_sdk.py L304-307, the job manager's ValueError text in
    it, job_manager.py L553-556), and the id then has a status."""

    def submit_job(self, **kwargs):
        raise RuntimeError(
            "Request failed with status code 500: Traceback ... ValueError: Job with submission_id"
            f" {kwargs['submission_id']} already exists. Please use a different submission_id.."
        )

    def get_job_status(self, submission_id):
        return "RUNNING" if submission_id.endswith("-2") else super().get_job_status(submission_id)


def test_a_refused_id_that_ray_holds_is_another_submitters_attempt_and_nothing_else_is_submitted():
    submission = first_attempt(100)
    run = submission["metadata"]["run"]
    client = RefusingClient(run, ["FAILED"], {"maxSteps": "100", "epochs": "1"})
    outcome = run_submission.ensure_run(client, submission, NOTHING_KNOWN)
    assert (outcome.action, outcome.submission_id, outcome.status) == ("taken", f"{run}-2", "RUNNING")
    assert outcome.sentence() == f"{run}-2 was submitted by another submitter first (RUNNING); nothing submitted"


def budgeted_attempt(max_cost: float | None, max_gpu_hours: float | None = None):
    """Attempt 1 of the dev stack's run with job.maxCost and job.maxGpuHours (the budget, in its job metadata)."""
    from jobs.spec.training import submission_of, training_spec
    from tests.jobs.spec.test_training import config_of

    config = config_of("dev", grpo={"maxSteps": 100}, job={"maxCost": max_cost, "maxGpuHours": max_gpu_hours})
    return submission_of(config, training_spec(config), 1)


def test_a_run_stopped_at_its_budget_is_over_until_the_budget_that_stopped_it_is_raised():
    """The guardian's `budget-stop` (incluster/guardian/policy.py) ends the run for every submitter, on the head that
    lists the STOPPED attempt and on a new one, until job.maxCost rises; a budget kept or lowered resumes nothing."""
    stopped = {"step": 4, "limit": "maxCost", "maxCost": 40.0, "maxGpuHours": None, "spent": 35.0, "gpuHours": 3.0}
    entries = [{"attempt": 1, "event": "budget-stop", "reason": "the next save would pass $40", "details": stopped}]
    for cost, hours, action in ((40.0, None, "over"), (30.0, None, "over"), (60.0, None, "raised"),
                                (None, None, "raised"), (60.0, 8.0, "raised")):  # fmt: skip
        submission = budgeted_attempt(cost, hours)
        run = submission["metadata"]["run"]
        for listed in (["STOPPED"], []):
            client = AttemptsClient(run, listed, {"maxSteps": "100", "epochs": "1", "maxCost": "40.0"})
            outcome = run_submission.ensure_run(client, submission, known(entries, (1,)))
            assert outcome.action == action, (cost, hours, listed)
            if action == "over":
                assert (outcome.submission_id, client.submitted) == (f"{run}-1", [])
                assert not run_submission.wants_workers(client, submission, known(entries, (1,)))
                assert outcome.sentence() == (
                    f"the run is over: the run guardian stopped {run}-1 at the run's budget: the next save would pass"
                    " $40; nothing submitted (raise job.maxCost or job.maxGpuHours and pulumi up to resume it)"
                )
            else:
                assert [kwargs["submission_id"] for kwargs in client.submitted] == [f"{run}-2"]
                assert outcome.sentence() == (
                    f"submitted {run}-2: the run's budget was raised and the run resumes from its checkpoint"
                )


def test_the_budget_is_job_metadata_only_when_set_and_outside_the_runs_hash():
    with_budget, without = budgeted_attempt(12.5, 3.0), budgeted_attempt(None)
    assert {key: with_budget["metadata"][key] for key in ("maxCost", "maxGpuHours")} == {
        "maxCost": "12.5",
        "maxGpuHours": "3.0",
    }
    assert "maxCost" not in without["metadata"] and "maxGpuHours" not in without["metadata"]
    assert with_budget["metadata"]["run"] == without["metadata"]["run"]
