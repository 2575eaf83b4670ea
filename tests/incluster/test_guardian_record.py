"""The guardian's record as `status` shows it (issue 21 item 3): a failure it does not retry is recorded with the
attempt's real error line (as `python -m jobs status` finds it, incluster/logs.py), not Ray's boilerplate, and each
decision once, whatever the polls, a restart of the guardian or a second guardian that acted first. The loop runs
whole (observe, decide, apply) against a stand-in Jobs API client; the record is read back as `status` prints it."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace

import pytest

from incluster import job_client, readiness, record
from incluster.attempt import log_path
from incluster.endpoint import Endpoint
from incluster.guardian.loop import ExportDone, Guardian, Hooks
from incluster.guardian.policy import decide
from incluster.guardian.settings import settings_from
from incluster.preflight import gate
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of
from tests.incluster.test_guardian_preflight import _with_run_dir
from tests.incluster.test_logs import TRACEBACK_LOG

NOW = 1796126400.0
"""The guardian's clock: two minutes after the attempt ended, past SETTLE_SECONDS."""

STAMP = record.utc_stamp(NOW)

NODES = [
    {"node_id": "head", "is_head_node": True, "state": "ALIVE", "resources_total": {"CPU": 8}},
    {"node_id": "gpu-1", "is_head_node": False, "state": "ALIVE", "resources_total": {"GPU": 8}},
]
"""The dev stack's Ray cluster, whole: its head and its one GPU node (no capacity was lost)."""

RAY_MESSAGE = (
    "Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n"
    + "\n".join(TRACEBACK_LOG.splitlines()[-10:])
)
"""Ray's message about the failed attempt: its boilerplate, then the driver's last 10 lines (ray 2.60.0
python/ray/dashboard/modules/job/job_supervisor.py L449-455)."""


class Jobs:
    """A stand-in Jobs API client listing the run's attempts as ray.job_submission.JobDetails do."""

    def __init__(self, *jobs: SimpleNamespace) -> None:
        self.jobs = list(jobs)

    def list_jobs(self) -> list[SimpleNamespace]:
        return list(self.jobs)


def attempt(settings, status: str, message: str = "", **metadata: str) -> SimpleNamespace:
    """Attempt 1 of the run, ended two minutes before NOW."""
    return SimpleNamespace(submission_id=f"{settings.run}-1", status=status, start_time=(NOW - 600) * 1000,
                           end_time=(NOW - 120) * 1000, message=message,
                           metadata={**settings.submission["metadata"], "attempt": "1", **metadata})  # fmt: skip


@pytest.fixture
def settings(tmp_path, monkeypatch):
    """The dev stack's guardian settings, its run under tmp_path, on a stand-in head with its GPU node up."""
    values = settings_from(guardian_settings(config_of("dev")), "test")
    monkeypatch.setattr(readiness, "ray_nodes", lambda endpoint: NODES)
    monkeypatch.setattr(readiness, "wait_for_gpus", lambda *args, **kwargs: None)
    return replace(values, submission=_with_run_dir(values.submission, tmp_path / "run"))


def guard(settings, client, monkeypatch, lines: list[str]) -> Guardian:
    """A guardian of a Ray head on this machine (no API server, so no Lease and no pods to read)."""
    monkeypatch.setattr(job_client, "connect", lambda endpoint: client)
    return Guardian(settings, Endpoint("http://127.0.0.1:8265"), Hooks(), lines.append, clock=lambda: NOW)


def no_sleep(seconds: float) -> None:
    raise AssertionError(f"the guardian waited {seconds} s: it should have had nothing left to do")


def shown(settings) -> list[str]:
    """The run's record as `python -m jobs status` prints it."""
    return record.record_lines(record.read(settings.run_dir))


def write_log(settings, text: str) -> None:
    """Attempt 1's log as its wrapper writes it: each line after its time stamp and a tab."""
    path = log_path(settings.run_dir, 1)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"2026-12-01T11:50:00.000Z\t{line}\n" for line in text.splitlines()))


def test_a_failure_not_retried_is_recorded_with_its_error_line_not_rays_boilerplate(settings, monkeypatch):
    write_log(settings, TRACEBACK_LOG)
    lines: list[str] = []
    done = guard(settings, Jobs(attempt(settings, "FAILED", RAY_MESSAGE)), monkeypatch, lines).run(sleep=no_sleep)
    error = "ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=812, ip=10.0.0.3)"
    assert shown(settings) == [f"{STAMP}  attempt 1  failed: {error}", f"{STAMP}  attempt 1  not-retried: {error}"]
    assert done.kind == "done" and lines[-1] == f"{settings.run}: attempt 1 not-retried: {error}; nothing left to do"


def test_without_a_log_the_error_line_is_read_from_rays_message_without_its_boilerplate(settings, monkeypatch):
    message = (
        "Job entrypoint command failed with exit code 2, last available logs (truncated to 20,000 chars):\nstep 1\n"
    )
    guard(settings, Jobs(attempt(settings, "FAILED", message + "CUDA error: out of memory\nstep 2")), monkeypatch,
          []).run(sleep=no_sleep)  # fmt: skip
    assert shown(settings)[0] == f"{STAMP}  attempt 1  failed: CUDA error: out of memory"
    settings.run_dir.joinpath(record.RECORD_FILE).unlink()  # no line says why: Ray's message is all there is
    guard(settings, Jobs(attempt(settings, "FAILED", message)), monkeypatch, []).run(sleep=no_sleep)
    assert shown(settings)[0] == f"{STAMP}  attempt 1  failed: {' '.join(message.split())}"


class RefusingPreflight:
    """A stand-in for incluster/preflight/gate.py before_first_attempt that refuses the cluster, once only: a
    second run of it is the guardian deciding the same thing again."""

    def __init__(self) -> None:
        self.runs = 0

    def __call__(self, client, template, report, api=None):
        self.runs += 1
        assert self.runs == 1, "the preflight ran again on the cluster it had refused"
        outcome = type("Outcome", (), {"mode": "gpu", "path": "/r.json", "failure_lines": lambda self: ["w-1: FAIL"]})
        raise gate.PreflightRefused(outcome())


def test_a_preflight_that_refuses_the_extension_is_recorded_once_and_ends_the_run(settings, monkeypatch):
    """A SUCCEEDED run whose schedule asks for more: the preflight refuses the fresh cluster, recorded once; the
    run is over (it polled the same refusal into the record, and the preflight again, for ever)."""
    refusing = RefusingPreflight()
    monkeypatch.setattr(gate, "before_first_attempt", refusing)
    record.append(settings.run_dir, record.entry(NOW - 100, 1, "succeeded"))
    fewer = str(int(settings.submission["metadata"]["epochs"]) - 1)
    client = Jobs(attempt(settings, "SUCCEEDED", epochs=fewer))
    lines: list[str] = []
    assert guard(settings, client, monkeypatch, lines).run(sleep=no_sleep).kind == "done"
    expected = [
        f"{record.utc_stamp(NOW - 100)}  attempt 1  succeeded",
        f"{STAMP}  attempt 1  preflight-failed: refused: the gpu preflight failed (results /r.json):",
        f"{STAMP}  attempt 1  not-retried: the preflight failed on 1 node(s) or NIC(s)",
    ]
    assert shown(settings) == expected
    # a restart of the guardian: the same record, nothing decided again
    assert guard(settings, client, monkeypatch, []).run(sleep=no_sleep).kind == "done"
    assert shown(settings) == expected and refusing.runs == 1


def test_a_decision_another_guardian_recorded_first_is_not_recorded_again(settings, monkeypatch):
    """Two guardians that saw the same failure (a restart in the middle, or the Lease's hand-over): the second to
    act finds the decision in the record and does not append it."""
    write_log(settings, TRACEBACK_LOG)
    client = Jobs(attempt(settings, "FAILED", RAY_MESSAGE))
    late_lines: list[str] = []
    late = guard(settings, client, monkeypatch, late_lines)
    decided = decide(late.observe())
    first = guard(settings, client, monkeypatch, [])
    first.apply(decide(first.observe()))
    late.apply(decided)
    assert [line.split("  ", 2)[2].split(":")[0] for line in shown(settings)] == ["failed"]
    assert late_lines == [f"{settings.run}: attempt 1 failed is in the record already"]


def test_the_guardian_starts_and_decides_past_record_lines_of_another_shape(settings, monkeypatch):
    """Issue 31 item 5. A boundary fault: lines another writer (an older or newer guardian, a hand edit) left in the
    record, valid JSON of another shape: a `deadline-stop` whose step is null and a `failed` without a reason whose
    details are null. The guardian used to raise in decide on every start; it reports what it skips, once, uses what
    it can, and decides to the end."""
    stopped = Jobs(attempt(settings, "STOPPED"))
    foreign = {"attempt": 1, "event": "deadline-stop", "time": STAMP, "reason": "", "details": {"step": None}}
    settings.run_dir.mkdir(parents=True)
    (settings.run_dir / record.RECORD_FILE).write_text(json.dumps(foreign) + "\n")
    lines: list[str] = []
    guardian = guard(settings, stopped, monkeypatch, lines)
    guardian.observe()
    assert guardian.run(sleep=no_sleep).kind == "done"
    path = settings.run_dir / record.RECORD_FILE
    skipped = (
        f"{settings.run}: {path} line 1: details.step that is not a step; skipped (the guardian goes on without it)"
    )
    assert lines.count(skipped) == 1
    stop = "attempt 1 was STOPPED (python -m jobs stop, or pulumi up replaced the run)"
    assert shown(settings) == [f"{STAMP}  attempt 1  failed: {stop}", f"{STAMP}  attempt 1  not-retried: {stop}"]

    failed = Jobs(attempt(settings, "FAILED", RAY_MESSAGE))
    path.write_text(json.dumps({"attempt": 1, "event": "failed", "time": STAMP, "details": None}) + "\n")
    assert guard(settings, failed, monkeypatch, []).run(sleep=no_sleep).kind == "done"
    assert shown(settings) == [f"{STAMP}  attempt 1  failed", f"{STAMP}  attempt 1  not-retried"]


def test_an_export_hook_that_submits_no_job_is_recorded_and_no_job_is_looked_up(settings, monkeypatch):
    """`make demo`'s export hook says what it would submit and submits nothing (jobs/demo/lifecycle.py Printing): the
    guardian records it without a submission and never asks Ray for a job named by the line's first word (it said
    "the export on is not known ... Job on does not exist" on every look)."""
    lines: list[str] = []
    guardian = guard(settings, Jobs(attempt(settings, "SUCCEEDED")), monkeypatch, lines)
    said = "on a cluster this submits the export of global_step_8"
    guardian.hooks = Hooks(export=lambda request: ExportDone(None, said))
    done = guardian.run(sleep=no_sleep)
    submitted = [item for item in record.read(settings.run_dir) if item["event"] == "export-submitted"]
    assert [(item["reason"], item["details"]) for item in submitted] == [(said, {"step": None})]
    assert not [line for line in lines if "not known" in line], lines
    assert done.kind == "done"
