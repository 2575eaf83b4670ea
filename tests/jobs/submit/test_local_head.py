"""The throwaway local Ray head: it comes up even when a port it was given is taken before Ray binds it."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from jobs.submit import local_head

pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[default]' (requirements.txt)")

LOOKUP_DEADLINE_S = 3.0
"""How long the taken-port test lets one dashboard lookup take (a lookup of a live head takes milliseconds)."""


def with_deadline(lookup: Callable[[Path], str]) -> Callable[[Path], str]:
    """`lookup` (local_head._published_dashboard) given up on after LOOKUP_DEADLINE_S, as "" (not published yet).

    The failed head writes its GCS address only once all its processes are up, and kills them (GCS first)
    within a second of noticing its dead client server. A lookup that connects just then waits ~40 s in
    Ray's GcsClient (5 s connect, 5 s pubsub, 30 s cluster id) before `start` sees the exit: the thread
    is left to finish on its own, and the loop goes on to see the exit and start again.
    """

    def bounded(temp_dir: Path) -> str:
        found: list[str] = []
        worker = threading.Thread(target=lambda: found.append(lookup(temp_dir)), daemon=True)
        worker.start()
        worker.join(LOOKUP_DEADLINE_S)
        return found[0] if found else ""

    return bounded


def test_a_taken_client_server_port_starts_the_head_again_on_another(monkeypatch):
    taken = socket.socket()
    taken.bind((local_head.HOST, 0))
    taken.listen()
    real = local_head.client_server_port
    picked: list[int] = []

    def taken_first() -> int:
        picked.append(taken.getsockname()[1] if not picked else real())
        return picked[-1]

    monkeypatch.setattr(local_head, "client_server_port", taken_first)
    monkeypatch.setattr(local_head, "_published_dashboard", with_deadline(local_head._published_dashboard))
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def recorded_popen(*args, **kwargs) -> subprocess.Popen:
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(local_head.subprocess, "Popen", recorded_popen)
    try:
        head = local_head.start(num_cpus=1)
    finally:
        taken.close()
    try:
        assert len(picked) == 2, "the first attempt died on the taken port"
        assert group_gone(started[0].pid), "every process of the failed attempt's group is ended, its agents too"
        assert local_head._group_listens(head.process.pid, picked[-1]), "the head's own client server holds its port"
        assert head.process.poll() is None
        assert local_head._answers(f"{head.dashboard_url}/api/version")
    finally:
        head.stop()
    assert group_gone(head.process.pid), "stop ends every process of the head's group"
    assert not head.temp_dir.exists()


def group_gone(group: int, within: float = 10.0) -> bool:
    """Whether process group `group` has no process left within `within` seconds (a SIGKILLed process lingers
    as a zombie until its parent, or init, reaps it)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.1)
    return False


def test_the_client_server_port_lies_below_the_ephemeral_range():
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(1024 <= local_head.client_server_port() < low for _ in range(50))


def test_a_refusing_address_refuses_connections_and_keeps_its_port_while_held():
    with local_head.refusing_address() as address:
        port = int(address.rsplit(":", 1)[1])
        with socket.socket() as probe:
            assert probe.connect_ex((local_head.HOST, port)) != 0
        with socket.socket() as other, pytest.raises(OSError):
            other.bind((local_head.HOST, port))
