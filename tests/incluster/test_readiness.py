"""The readiness gate without a Ray head: what is missing on a scripted node list, its progress line, and its
refusal when the GPU nodes never come."""

from __future__ import annotations

import pytest

from incluster import readiness
from incluster.endpoint import Endpoint
from incluster.job_client import JobError
from tests.support.clock import Clock


def scripted_nodes(monkeypatch, *answers: list[float]) -> list[int]:
    """Make readiness.gpu_nodes return `answers` in turn (the last one for ever); return the call counter."""
    calls = [0]

    def gpu_nodes(_endpoint: Endpoint) -> list[float]:
        calls[0] += 1
        return answers[min(calls[0], len(answers)) - 1]

    monkeypatch.setattr(readiness, "gpu_nodes", gpu_nodes)
    return calls


def test_the_gate_reports_progress_until_every_node_shows_8_gpus(monkeypatch):
    calls = scripted_nodes(monkeypatch, [0.0, 8.0], [0.0, 8.0, 4.0], [0.0, 8.0, 8.0])
    lines: list[str] = []
    readiness.wait_for_gpus(Endpoint("http://ray"), 2, timeout=60, report=lines.append, poll=0, gpus_per_node=8)
    assert calls[0] == 3
    assert all("missing 1 (gpu.nodes=2;" in line and line.endswith(" s left") for line in lines)
    assert [line.split(";")[0] for line in lines] == [
        "waiting for GPU nodes: 1 of 2 Ray nodes with 8 GPUs are up",
        "waiting for GPU nodes: 1 of 2 Ray nodes with 8 GPUs are up (and nodes with only 4 GPUs)",
    ]


def test_an_unchanged_progress_line_is_repeated_every_30_s_not_every_poll(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(readiness, "time", clock)
    scripted_nodes(monkeypatch, [0.0, 8.0])
    lines: list[str] = []
    with pytest.raises(JobError, match="can never be placed"):
        readiness.wait_for_gpus(Endpoint("http://ray"), 2, timeout=100, report=lines.append, poll=2, gpus_per_node=8)
    assert [line.rsplit("; ", 1)[1] for line in lines] == ["100 s left", "70 s left", "40 s left", "10 s left"]


def test_the_gate_refuses_a_job_that_can_never_be_placed_and_says_what_is_missing(monkeypatch):
    scripted_nodes(monkeypatch, [0.0, 8.0])
    lines: list[str] = []
    with pytest.raises(JobError, match=r"can never be placed: 1 of 2 Ray nodes with 8 GPUs are up; missing 1"):
        readiness.wait_for_gpus(Endpoint("http://ray"), 2, timeout=0, report=lines.append, poll=0, gpus_per_node=8)


def test_readiness_counts_nodes_with_8_gpus_not_the_total_of_gpus():
    assert readiness.readiness([8.0], 1, 8) is None
    assert readiness.readiness([4.0, 4.0], 1, 8) == (
        "0 of 1 Ray nodes with 8 GPUs are up (and nodes with only 4, 4 GPUs); missing 1"
        " (gpu.nodes=1; verl places one STRICT_PACK group of 8 GPUs per node)"
    )
    assert readiness.readiness([8.0, 4.0, 4.0], 2, 8).startswith("1 of 2 Ray nodes with 8 GPUs are up")
    assert readiness.readiness([0.0, 8.0, 8.0], 2, 8) is None


def test_the_gate_does_not_take_two_nodes_of_4_gpus_for_one_of_8(monkeypatch):
    monkeypatch.setattr(readiness, "time", Clock())
    calls = scripted_nodes(monkeypatch, [4.0, 4.0])
    with pytest.raises(JobError, match=r"can never be placed: 0 of 1 Ray nodes with 8 GPUs are up"):
        readiness.wait_for_gpus(
            Endpoint("http://ray"), 1, timeout=10, report=lambda _line: None, poll=2, gpus_per_node=8
        )
    assert calls[0] > 1
    calls = scripted_nodes(monkeypatch, [4.0, 4.0], [4.0, 4.0], [4.0, 4.0, 8.0])
    readiness.wait_for_gpus(Endpoint("http://ray"), 1, timeout=10, report=lambda _line: None, poll=2, gpus_per_node=8)
    assert calls[0] == 3


def test_a_node_is_whole_with_its_machines_gpus_not_eight():
    """Issue 34 item 1: GPUs per node is the machine's (GpuMachine.gpus): a one-GPU node is a whole node."""
    assert readiness.readiness([1.0], 1, 1) is None
    assert readiness.readiness([1.0], 2, 1) == (
        "1 of 2 Ray nodes with 1 GPUs are up; missing 1 (gpu.nodes=2; verl places one STRICT_PACK group of 1 GPUs"
        " per node)"
    )
