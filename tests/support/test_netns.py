"""The test network: its subnet checked against the host's, and a visible skip where `ip netns` is refused."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import sys

import pytest

from tests.conftest import REPO_ROOT
from tests.support import netns

HOST_ADDRESSES = """\
1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
4: eth0    inet 192.0.2.2/24 brd 192.0.2.255 scope global eth0\\       valid_lft forever preferred_lft forever
"""
"""`ip -4 -o addr show` of a host with one interface."""

HOST_ROUTES = """\
default via 192.0.2.1 dev eth0
192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2
local 127.0.0.0/8 dev lo table local proto kernel scope host src 127.0.0.1
broadcast 192.0.2.255 dev eth0 table local proto kernel scope link src 192.0.2.2
"""
"""`ip -4 route show table all` of that host: the default route covers everything and is no collision."""


def test_a_host_without_the_test_subnet_has_no_collision():
    assert netns.subnet_collisions(netns.SUBNET, HOST_ADDRESSES, HOST_ROUTES) == []


def test_a_host_address_or_route_inside_the_test_subnet_is_a_collision():
    addresses = HOST_ADDRESSES + "7: wg0    inet 10.213.7.9/32 scope global wg0\n"
    routes = HOST_ROUTES + "10.213.0.0/16 via 192.0.2.7 dev eth0\n"
    assert netns.subnet_collisions(netns.SUBNET, addresses, routes) == [
        "address 10.213.7.9/32 on wg0",
        "route 10.213.0.0/16 via 192.0.2.7 dev eth0",
    ]
    assert netns.subnet_collisions(ipaddress.ip_network("10.213.8.0/24"), addresses, HOST_ROUTES) == []


def test_the_two_addresses_lie_in_the_subnet():
    addresses = {ipaddress.ip_address(netns.HEAD_ADDRESS), ipaddress.ip_address(netns.GPU_ADDRESS)}
    assert len(addresses) == 2 and addresses <= set(netns.SUBNET.hosts())


def fake_ip(directory) -> str:
    """A directory whose `ip` refuses every command the way a non-root user's does."""
    script = directory / "ip"
    script.write_text("#!/bin/sh\necho 'mount --make-shared /run/netns failed: Operation not permitted' >&2\nexit 1\n")
    script.chmod(0o755)
    return str(directory)


def test_a_refused_ip_netns_is_one_line_naming_the_command(tmp_path, monkeypatch):
    monkeypatch.setattr(netns, "IP", str(tmp_path / "ip"))
    fake_ip(tmp_path)
    with pytest.raises(netns.NamespaceRefused) as refusal:
        with netns.namespace_pair():
            pass
    assert str(refusal.value) == (
        f"`{tmp_path / 'ip'} netns list` was refused: mount --make-shared /run/netns failed: Operation not permitted"
    )


def test_where_ip_netns_is_refused_the_two_node_tests_skip_and_say_why(tmp_path):
    test = (
        "tests/incluster/test_two_node_ray.py::"
        "test_async_save_writes_no_tracker_the_wrapper_does_so_the_next_attempt_resumes_and_a_bug_fails_every_attempt"
    )
    env = {**os.environ, "PATH": f"{fake_ip(tmp_path)}:{os.environ['PATH']}"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", test], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr
    skips = [line for line in result.stdout.splitlines() if line.startswith("SKIPPED")]
    assert len(skips) == 1, result.stdout
    assert skips[0].endswith(
        "the two-node Ray tests need network namespaces (root): `ip netns list` was refused:"
        " mount --make-shared /run/netns failed: Operation not permitted"
    ), skips
    assert "1 skipped" in result.stdout
