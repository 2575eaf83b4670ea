"""The throwaway local Ray head: it comes up even when a port it was given is taken before Ray binds it."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from jobs import local_head

pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[default]' (requirements.txt)")


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
    try:
        head = local_head.start(num_cpus=1)
    finally:
        taken.close()
    try:
        assert len(picked) == 2, "the first attempt died on the taken port"
        assert local_head._group_listens(head.process.pid, picked[-1]), "the head's own client server holds its port"
        assert head.process.poll() is None
        assert local_head._answers(f"{head.dashboard_url}/api/version")
    finally:
        head.stop()


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
