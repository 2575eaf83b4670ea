"""The guardian's reading of a deadline: for a RUNNING verl attempt the known end of the GPU nodes and the run's
complete checkpoints (verl 0.9.1's default trainer reads no deadline, so the guardian stops it); after a deadline
stop, how long the capacity that ends still lasts; and the stop itself, of that attempt only."""

from __future__ import annotations

import os
from dataclasses import replace
from types import SimpleNamespace

import pytest

from core.facts.job import DEADLINE_SAVE_MARGIN_SECONDS
from incluster import job_client
from incluster.deadline import Saved
from incluster.endpoint import Endpoint
from incluster.guardian import loop
from incluster.guardian.loop import Guardian, Hooks
from incluster.guardian.policy import Action, AttemptView
from incluster.guardian.settings import settings_from
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of
from tests.incluster.test_attempt import verl_step
from tests.incluster.test_guardian_preflight import _with_run_dir

NOW = 1796126400.0
"""The guardian's clock in these cases."""

MAINTENANCE = "cloud.google.com/scheduled-maintenance-time"


@pytest.fixture
def guard(tmp_path, monkeypatch):
    """A guardian of the dev stack (verl, world size 2 here) through the API server's proxy, whose GPU node has
    host maintenance at NOW + 3600."""
    settings = settings_from(guardian_settings(config_of("dev")), "test")
    settings = replace(settings, submission=_with_run_dir(settings.submission, tmp_path), world_size=2)
    monkeypatch.setattr(job_client, "connect", lambda endpoint: object())
    node = {"metadata": {"name": "gpu-a", "labels": {MAINTENANCE: str(int(NOW) + 3600)}}}
    monkeypatch.setattr(loop, "gpu_nodes_of", lambda api: [node])
    proxy = "https://1.2.3.4/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy"
    return Guardian(settings, Endpoint(address=proxy, headers={}, verify=True), Hooks(),
                             lambda line: None, clock=lambda: NOW)  # fmt: skip


def test_a_running_verl_attempt_sees_its_save_by_time_and_the_complete_checkpoints(guard, tmp_path, monkeypatch):
    verl_step(tmp_path, 2)
    verl_step(tmp_path, 4, complete=False)
    os.utime(tmp_path / "global_step_2" / "data.pt", (NOW - 60, NOW - 60))
    running = AttemptView(1, "RUNNING", start=NOW - 600)
    view = guard.deadline_view(running, {})
    assert view == {"save_by": NOW + 3600 - DEADLINE_SAVE_MARGIN_SECONDS, "saves": (Saved(2, NOW - 60),)}
    assert guard.deadline_view(replace(running, status="PENDING"), {}) == {}
    # the next attempt, on the next capacity, reads the nodes again at once
    next_node = {"metadata": {"name": "gpu-b", "labels": {}}}
    monkeypatch.setattr(loop, "gpu_nodes_of", lambda api: [next_node])
    assert guard.deadline_view(running, {}) == view
    assert guard.deadline_view(replace(running, number=2), {}) == {}
    guard.settings = replace(guard.settings, framework="nemo-rl")
    assert guard.deadline_view(running, {}) == {}


def test_after_a_deadline_stop_the_guardian_knows_how_long_the_ending_capacity_lasts(guard):
    stopped = AttemptView(1, "SUCCEEDED", start=NOW - 600, end=NOW - 5, deadline_stop=4)
    assert guard.deadline_view(stopped, {"deadline-stop": {}}) == {"next_capacity_in": 3600}
    assert guard.deadline_view(stopped, {"deadline-stop": {}, "not-retried": {}}) == {}


def test_the_stop_stops_the_attempt_it_names_only(guard, monkeypatch):
    jobs = [SimpleNamespace(submission_id=f"run-{number}", metadata={"attempt": str(number)}) for number in (1, 2)]
    stopped: list[list[str]] = []
    monkeypatch.setattr(job_client, "attempts", lambda client, run: jobs)
    monkeypatch.setattr(
        job_client,
        "stop_jobs",
        lambda client, chosen: stopped.append([job.submission_id for job in chosen]) or ["run-2"],
    )
    guard.apply(Action("stop", 2, "attempt 2 stops at its deadline"))
    assert stopped == [["run-2"]]


def test_a_ladders_guardian_takes_flex_starts_seven_days_from_the_flex_start_node_only(tmp_path, monkeypatch):
    """A spot stack with the ladder [spot, flex-start]: one attempt on a spot node and a flex-start node, both up
    6 days 22 h; only the flex-start node's pool (`gpu-flex-start`) gives the 7-day end, 2 h away."""
    config = config_of("dev", gpu={"nodes": 2, "capacity": ["spot", "flex-start"]})
    settings = settings_from(guardian_settings(config), "test")
    settings = replace(settings, submission=_with_run_dir(settings.submission, tmp_path))
    created = "2026-11-24T14:00:00Z"  # NOW is 2026-12-01T12:00:00Z: 6 days 22 h before
    pool = "cloud.google.com/gke-nodepool"
    nodes = [
        {"metadata": {"name": "gpu-spot", "creationTimestamp": created, "labels": {pool: "gpu"}}},
        {"metadata": {"name": "gpu-flex", "creationTimestamp": created, "labels": {pool: "gpu-flex-start"}}},
    ]
    monkeypatch.setattr(job_client, "connect", lambda endpoint: object())
    monkeypatch.setattr(loop, "gpu_nodes_of", lambda api: nodes)
    proxy = "https://1.2.3.4/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy"
    reported: list[str] = []
    ladder = Guardian(settings, Endpoint(address=proxy, headers={}, verify=True), Hooks(), reported.append,
                      clock=lambda: NOW)  # fmt: skip
    ends = ladder.known_end(1)
    assert (ends.node, ends.at) == ("gpu-flex", NOW + 2 * 3600)
    ladder.told_the_deadline(settings.submission)
    assert reported == [
        f"{settings.run}: GPU capacity ends at 2026-12-01T14:00:00.000Z"
        " (flex-start capacity ends 7 days after the node came up): saving first"
    ]
    nodes[1]["metadata"]["labels"][pool] = "gpu-on-demand"  # the same node on another rung: no known end
    assert ladder.known_end(1) is None
