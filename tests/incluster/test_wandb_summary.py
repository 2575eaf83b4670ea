"""The projected end in W&B's run summary: when an attempt's W&B run gets it and what (pure), and the writer against
the W&B stand-in (tests/support/wandb_stand_in.py), faults injected at the boundary by the fault proxy in front of it
(tests/support/fault_proxy.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from incluster import wandb_summary
from incluster.backoff import Backoff
from incluster.budget import Projection
from incluster.wandb_summary import SummaryError, WandbTarget, summary_values, target_from, write_due, write_summary
from tests.support.clock import Clock
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy
from tests.support.wandb_stand_in import StandInWandb, wandb_stand_in

FOUND = Projection(last_step=100, steps_left=60, seconds=3723.46, dollars=42.109, preemptions=0, recovery_s=0.0)
RUN = ("stand-in-team", "grpo", "run-a-attempt-1")


def test_an_ended_attempt_gets_the_projection_once():
    assert write_due("FAILED", ended=True, written=False)
    assert write_due("SUCCEEDED", ended=True, written=False)
    assert not write_due("FAILED", ended=True, written=True)


def test_a_live_attempt_does_not_get_it():
    assert not write_due("RUNNING", ended=False, written=False)
    assert not write_due("PENDING", ended=False, written=False)
    assert not write_due("STOPPED", ended=False, written=False)


def test_the_summary_values_hold_the_dollars_only_when_priced():
    assert summary_values(FOUND, priced=True) == {
        "grpo/projected_end_s": 3723.5,
        "grpo/steps_left": 60,
        "grpo/projected_cost_usd": 42.11,
    }
    assert summary_values(FOUND, priced=False) == {"grpo/projected_end_s": 3723.5, "grpo/steps_left": 60}


def test_the_target_needs_the_key_and_the_attempts_project():
    attempt = {"WANDB_PROJECT": "grpo", "WANDB_ENTITY": "team", "WANDB_RUN_GROUP": "run-a"}
    found = target_from({"WANDB_API_KEY": "k", "WANDB_BASE_URL": "http://w/"}, attempt)
    assert found == WandbTarget("grpo", "team", "k", "http://w")
    assert "k" not in repr(found)
    assert target_from({"WANDB_API_KEY": "k"}, {"WANDB_PROJECT": "grpo"}) == WandbTarget("grpo", None, "k")
    assert target_from({}, attempt) is None
    assert target_from({"WANDB_API_KEY": "k"}, {}) is None


def test_the_guardians_target_comes_from_the_submission_the_stack_builds_and_its_key():
    """The guardian's settings as the stack renders them (jobs/guardian/settings.py), with and without a W&B key."""
    from incluster.guardian.settings import settings_from
    from jobs.guardian.settings import guardian_settings
    from tests.conftest import config_of

    def attempt_env(**kwargs: object) -> dict[str, str]:
        settings = settings_from(guardian_settings(config_of("dev", **kwargs)), "test")  # type: ignore[arg-type]
        return settings.submission["runtime_env"]["env_vars"]

    with_key = attempt_env(wandb_key="k", tracking={"wandbProject": "p", "wandbEntity": "e"})
    assert target_from({"WANDB_API_KEY": "k"}, with_key) == WandbTarget("p", "e", "k")
    assert target_from({"WANDB_API_KEY": "k"}, attempt_env()) is None


@pytest.fixture
def stand_in() -> Iterator[tuple[StandInWandb, FaultProxy]]:
    """The W&B stand-in holding one run with a summary the trainer wrote, behind a fault proxy."""
    state = StandInWandb(summaries={RUN: {"critic/score/mean": 0.5, "_step": 40}})
    with wandb_stand_in(state) as url, fault_proxy(url) as proxy:
        proxy.hold = 1.0
        yield state, proxy


def target(proxy: FaultProxy, key: str = "wandb-stand-in-key", entity: str | None = "stand-in-team") -> WandbTarget:
    """The stand-in's run through the proxy."""
    return WandbTarget("grpo", entity, key, proxy.url)


def write(proxy: FaultProxy, lines: list[str], **kwargs: object) -> None:
    """Write FOUND's values to the stand-in's run with a short deadline and no sleeping."""
    options = {"deadline_s": 5.0, "backoff": Backoff(first=0.01, most=0.01), "sleep": lambda s: None, **kwargs}
    write_summary(target(proxy), RUN[2], summary_values(FOUND, True), lines.append, **options)  # type: ignore[arg-type]


def test_the_writer_merges_the_projection_into_the_summary_it_read(stand_in):
    state, proxy = stand_in
    write(proxy, [])
    assert state.summaries[RUN] == {
        "critic/score/mean": 0.5,
        "_step": 40,
        "grpo/projected_end_s": 3723.5,
        "grpo/steps_left": 60,
        "grpo/projected_cost_usd": 42.11,
    }


def test_without_an_entity_the_keys_default_entity_is_used(stand_in):
    state, proxy = stand_in
    write_summary(target(proxy, entity=None), RUN[2], {"grpo/steps_left": 3}, print)
    assert state.summaries[RUN]["grpo/steps_left"] == 3


@pytest.mark.parametrize("fault", ["refused", "timeout", "cut", "not-json", 409, 429, 500, 502, 503])
def test_a_transient_fault_is_retried_with_a_progress_line(stand_in, monkeypatch, fault):
    """Fault injected at the boundary on the summary's read, once."""
    monkeypatch.setattr(wandb_summary, "READ_SECONDS", 0.5)
    state, proxy = stand_in
    proxy.inject(Fault(fault, path="/graphql", times=1, headers={"Retry-After": "0"} if fault == 429 else {}))
    lines: list[str] = []
    write(proxy, lines)
    assert state.summaries[RUN]["grpo/steps_left"] == 60
    assert len(lines) == 1 and "trying again" in lines[0], lines


def test_a_fault_that_lasts_gives_up_with_one_line(stand_in, monkeypatch):
    """Fault injected at the boundary: every request answers 503."""
    monkeypatch.setattr(wandb_summary, "READ_SECONDS", 0.5)
    state, proxy = stand_in
    proxy.inject(Fault(503, path="/graphql", times=1000))
    clock = Clock(0.0)
    lines: list[str] = []
    with pytest.raises(SummaryError) as raised:
        write_summary(target(proxy), RUN[2], {"grpo/steps_left": 1}, lines.append, deadline_s=5.0,
                      backoff=Backoff(first=1.0, most=1.0), sleep=clock.sleep, clock=clock)  # fmt: skip
    text = str(raised.value)
    assert text == "W&B run run-a-attempt-1's summary not written: W&B answered HTTP 503; gave up after 5 s", text
    assert state.writes == [] and len(lines) == 5 and proxy.faulted() == 6


@pytest.mark.parametrize(
    ("fault", "line"),
    [
        (401, "W&B answered HTTP 401: the W&B key was refused (grpo-gke:wandbApiKey)"),
        (403, "W&B answered HTTP 403"),
        (404, "W&B answered HTTP 404: not found"),
    ],
)
def test_a_refusal_is_one_line_and_never_retried(stand_in, fault, line):
    """Fault injected at the boundary on the summary's read."""
    state, proxy = stand_in
    proxy.inject(Fault(fault, path="/graphql", times=1000, body='{"errors": [{"message": "injected"}]}'))
    with pytest.raises(SummaryError) as raised:
        write(proxy, [])
    assert str(raised.value) == f"W&B run run-a-attempt-1's summary not written: {line}"
    assert proxy.faulted() == 1 and state.writes == []


def test_a_bad_key_is_refused_by_the_stand_in_in_one_line_without_the_key(stand_in):
    state, proxy = stand_in
    with pytest.raises(SummaryError) as raised:
        write_summary(target(proxy, key="not-the-key"), RUN[2], {"grpo/steps_left": 1}, print)
    assert "HTTP 401" in str(raised.value) and "not-the-key" not in str(raised.value)
    assert len(proxy.seen) == 1 and state.writes == []


def test_a_run_w_and_b_does_not_hold_is_one_line(stand_in):
    state, proxy = stand_in
    with pytest.raises(SummaryError) as raised:
        write_summary(target(proxy), "run-a-attempt-9", {"grpo/steps_left": 1}, print)
    assert str(raised.value) == (
        "W&B run run-a-attempt-9's summary not written: W&B has no run stand-in-team/grpo/run-a-attempt-9"
    )
    assert state.writes == []


def test_the_guardians_write_runs_beside_its_loop_and_a_done_guardian_waits_for_it_a_bounded_time(tmp_path):
    """The attempt wrapper's own log (incluster/attempt.py AttemptLog) holds verl step lines; W&B (the stand-in, behind
    the fault proxy) holds the summary's read longer than the guardian waits: summarize returns at once, and
    finish_summaries gives up after its bound with one line (fault injected at the boundary: a held answer)."""
    from dataclasses import replace

    from incluster.attempt import AttemptLog
    from incluster.guardian.loop import Guardian
    from incluster.guardian.policy import AttemptView
    from incluster.guardian.settings import settings_from
    from jobs.guardian.settings import guardian_settings
    from tests.conftest import config_of
    from tests.incluster.test_guardian_preflight import _with_run_dir

    values = settings_from(guardian_settings(config_of("dev", grpo={"maxSteps": 10})), "test")
    settings = replace(values, submission=_with_run_dir(values.submission, tmp_path))
    log = AttemptLog(tmp_path, "1")
    log.write(b"step:1 - critic/score/mean:np.float64(0.1) - timing_s/step:90.0\n")
    log.close()
    state = StandInWandb(summaries={("stand-in-team", "grpo", f"{settings.run}-1"): {}})
    lines: list[str] = []
    with wandb_stand_in(state) as url, fault_proxy(url) as proxy:
        proxy.hold = 3.0
        proxy.inject(Fault("timeout", path="/graphql"))
        guard = object.__new__(Guardian)
        guard.settings, guard.report, guard.summarized = settings, lines.append, {}
        guard.wandb = WandbTarget("grpo", "stand-in-team", state.api_key, proxy.url)
        ended = AttemptView(1, "FAILED", end=1.0)
        guard.summarize(AttemptView(1, "RUNNING"), {})
        assert guard.summarized == {}
        guard.summarize(ended, {})
        guard.summarize(ended, {})
        thread = guard.summarized[1]
        assert list(guard.summarized) == [1] and thread is not None and thread.is_alive()
        guard.finish_summaries(seconds=0.2)
        assert lines == [
            f"{settings.run}: waiting up to 0.2 s for the W&B summary write",
            f"{settings.run}: the W&B summary write did not finish; its run lacks the projected end",
        ]
        thread.join(10)
        guard.summarize(AttemptView(2, "FAILED", end=2.0), {})  # no step line measured: nothing to write, once
        assert guard.summarized[2] is None
    assert state.summaries[("stand-in-team", "grpo", f"{settings.run}-1")]["grpo/steps_left"] == 9
    assert lines[-1] == f"{settings.run}: W&B run {settings.run}-1's summary has the projected end (9 steps left)"
