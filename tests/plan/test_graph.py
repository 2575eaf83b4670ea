"""The critical path through creation times, on graphs small enough to check by hand."""

from __future__ import annotations

import pytest

from plan.graph import critical_path, upstream


def test_the_critical_path_is_the_longest_chain_and_the_serial_sum_adds_everything():
    seconds = {"cluster": 10.0, "head": 5.0, "gpu": 20.0, "staging": 8.0, "ray": 1.0, "job": 2.0}
    waits = {
        "head": {"cluster"},
        "gpu": {"cluster"},
        "staging": {"head"},
        "ray": {"gpu", "head"},
        "job": {"ray", "staging"},
    }
    path = critical_path(seconds, waits)
    assert path.seconds == 10 + 20 + 1 + 2
    assert path.chain == ("cluster", "gpu", "ray", "job")
    assert path.serial_seconds == 46


def test_staging_behind_the_gpu_pool_lengthens_the_path():
    seconds = {"cluster": 10.0, "gpu": 20.0, "staging": 8.0, "job": 2.0}
    beside = critical_path(seconds, {"gpu": {"cluster"}, "staging": {"cluster"}, "job": {"gpu", "staging"}})
    behind = critical_path(seconds, {"gpu": {"cluster"}, "staging": {"gpu"}, "job": {"staging"}})
    assert (beside.seconds, behind.seconds) == (32, 40)
    assert behind.chain == ("cluster", "gpu", "staging", "job")


def test_nodes_without_a_time_take_none_and_a_cycle_is_refused():
    assert critical_path({"a": 3.0}, {"component": {"a"}}).seconds == 3
    with pytest.raises(ValueError, match="cycle"):
        critical_path({"a": 1.0}, {"a": {"b"}, "b": {"a"}})


def test_upstream_follows_every_path():
    assert upstream({"job": {"ray"}, "ray": {"gpu", "net"}, "gpu": {"cluster"}}, "job") == {
        "ray",
        "gpu",
        "net",
        "cluster",
    }
