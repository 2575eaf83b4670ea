"""Two network namespaces joined by one veth pair, made by the tests, for a real two-node Ray cluster.

On the host's own network Ray either stays on 127.0.0.1 and refuses a second node, or advertises the
machine's routable address (../shared/reference/day-two-operations.md, last section). Inside two
namespaces of our own, each node has a private address on a /24 that only the two namespaces see;
neither has a route to anything else, so no traffic can leave them. Needs root (`ip netns`).
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

SUBNET = ipaddress.ip_network("10.213.7.0/24")
"""The veth pair's network: private, unusual, and checked against the host's addresses and routes."""

HEAD_ADDRESS = "10.213.7.1"
"""The head namespace's end of the veth pair."""

GPU_ADDRESS = "10.213.7.2"
"""The GPU node namespace's end of the veth pair."""

NAME_PREFIX = "grpotest-"
"""Every namespace the tests make starts with this, then the creating process id."""

IP = "ip"
"""The iproute2 command."""

COMMAND_SECONDS = 20.0
"""Deadline of one `ip` command."""

CALL_SECONDS = 180.0
"""Deadline of one function run inside a namespace (`Namespace.call`)."""

_CLONE_NEWNET = 0x40000000
"""setns(2) namespace type of a network namespace (linux/sched.h)."""

_ROUTE_TYPES = {
    "unicast", "local", "broadcast", "multicast", "anycast", "blackhole", "unreachable", "prohibit", "throw",
}  # fmt: skip
"""Route types `ip route show table all` may print before a route's destination."""

T = TypeVar("T")


class NamespaceRefused(Exception):
    """`ip netns` is refused here (not root, no iproute2, a sandbox): the tests that need it skip."""


def _ip(*argv: str) -> str:
    """Run `ip ARGV` with a deadline; NamespaceRefused with its own words when it fails."""
    try:
        result = subprocess.run([IP, *argv], capture_output=True, text=True, timeout=COMMAND_SECONDS)
    except FileNotFoundError:
        raise NamespaceRefused(f"the {IP!r} command (iproute2) is not installed") from None
    except subprocess.TimeoutExpired:
        raise NamespaceRefused(f"`{IP} {' '.join(argv)}` did not answer within {COMMAND_SECONDS:.0f} s") from None
    if result.returncode != 0:
        reason = (result.stderr.strip() or result.stdout.strip() or f"exit {result.returncode}").splitlines()[0]
        raise NamespaceRefused(f"`{IP} {' '.join(argv)}` was refused: {reason}")
    return result.stdout


def subnet_collisions(subnet: ipaddress.IPv4Network, addresses: str, routes: str) -> list[str]:
    """The host's addresses (`ip -4 -o addr show`) and routes (`ip -4 route show table all`) inside `subnet`.

    The default route covers every address and is no collision: the namespaces never see the host's routes.
    """
    found = []
    for line in addresses.splitlines():
        tokens = line.split()
        if "inet" in tokens:
            interface = ipaddress.ip_interface(tokens[tokens.index("inet") + 1])
            if interface.network.overlaps(subnet):
                found.append(f"address {interface} on {tokens[1]}")
    for line in routes.splitlines():
        tokens = line.split()
        if not tokens:
            continue
        destination = tokens[1] if tokens[0] in _ROUTE_TYPES and len(tokens) > 1 else tokens[0]
        if destination == "default":
            continue
        if ipaddress.ip_network(destination, strict=False).overlaps(subnet):
            found.append(f"route {line.strip()}")
    return found


def check_subnet_is_free() -> None:
    """Refuse (NamespaceRefused) when the host already uses part of SUBNET."""
    collisions = subnet_collisions(SUBNET, _ip("-4", "-o", "addr", "show"), _ip("-4", "route", "show", "table", "all"))
    if collisions:
        raise NamespaceRefused(f"the test network {SUBNET} collides with the host's {'; '.join(collisions)}")


_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class Namespace:
    """A network namespace the tests made, with its address on the veth pair."""

    name: str
    """Its name under /run/netns."""
    address: str
    """Its end of the veth pair."""

    def command(self, argv: list[str]) -> list[str]:
        """`argv` run inside the namespace."""
        return [IP, "netns", "exec", self.name, *argv]

    def spawn(self, argv: list[str], env: dict[str, str], log: str) -> subprocess.Popen:
        """Start `argv` inside the namespace in a process group of its own, its output into the file `log`."""
        with open(log, "wb") as out:
            return subprocess.Popen(
                self.command(argv), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def run(
        self, argv: list[str], env: dict[str, str], timeout: float, cwd: str | None = None
    ) -> subprocess.CompletedProcess:
        """Run `argv` inside the namespace to its end (at most `timeout` seconds); its output as text."""
        return subprocess.run(self.command(argv), env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)

    def call(self, function: Callable[..., T], *args: Any, timeout: float = CALL_SECONDS, **kwargs: Any) -> T:
        """`function(*args, **kwargs)` in a thread that entered the namespace: its sockets are the namespace's.

        setns(2) moves only the calling thread, so the rest of the test process stays where it was;
        threads the function starts are born inside the namespace too.
        """
        outcome: dict[str, Any] = {}

        def inside() -> None:
            try:
                with open(f"/run/netns/{self.name}") as handle:
                    if _libc.setns(handle.fileno(), _CLONE_NEWNET) != 0:
                        error = ctypes.get_errno()
                        raise OSError(error, f"setns into {self.name}: {os.strerror(error)}")
                outcome["value"] = function(*args, **kwargs)
            except BaseException as error:  # noqa: BLE001 - re-raised in the caller's thread
                outcome["error"] = error

        thread = threading.Thread(target=inside, name=f"in-{self.name}", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise TimeoutError(f"{getattr(function, '__name__', function)} inside {self.name} ran past {timeout:.0f} s")
        if "error" in outcome:
            raise outcome["error"]
        return outcome["value"]

    def pids(self) -> list[int]:
        """Processes running inside the namespace."""
        return [int(pid) for pid in _ip("netns", "pids", self.name).split()]

    def kill_all(self, timeout: float = 15.0) -> None:
        """SIGKILL every process inside the namespace (all of them the tests started) and wait until none is left."""
        deadline = time.monotonic() + timeout
        while pids := self.pids():
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                raise RuntimeError(f"processes {pids} inside {self.name} outlived SIGKILL for {timeout:.0f} s")
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale() -> None:
    """Delete empty namespaces left by a test process that died before its teardown (killed pytest)."""
    for line in _ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        owner = name[len(NAME_PREFIX) :].split("-")[0] if name.startswith(NAME_PREFIX) else ""
        if owner.isdigit() and not _alive(int(owner)) and not _ip("netns", "pids", name).split():
            _ip("netns", "delete", name)


_made = [0]


@contextlib.contextmanager
def namespace_pair() -> Iterator[tuple[Namespace, Namespace]]:
    """Two fresh namespaces, head and GPU node, joined by a veth pair on SUBNET, `lo` up in each.

    Names are unique per process (so per xdist worker). At exit, even after a failure, every process
    left inside them is killed and both are deleted (the veth pair goes with them).
    """
    remove_stale()
    check_subnet_is_free()
    _made[0] += 1
    stem = f"{NAME_PREFIX}{os.getpid()}-{_made[0]}"
    head, gpu = Namespace(f"{stem}-head", HEAD_ADDRESS), Namespace(f"{stem}-gpu", GPU_ADDRESS)
    with contextlib.ExitStack() as cleanup:
        for namespace in (head, gpu):
            _ip("netns", "add", namespace.name)
            cleanup.callback(_ip, "netns", "delete", namespace.name)
            cleanup.callback(namespace.kill_all)
        # Both ends are created inside their namespaces: the host's own network never has them.
        _ip("link", "add", "name", "veth-head", "netns", head.name, "type", "veth",
            "peer", "name", "veth-gpu", "netns", gpu.name)  # fmt: skip
        for namespace, device in ((head, "veth-head"), (gpu, "veth-gpu")):
            _ip("-n", namespace.name, "addr", "add", f"{namespace.address}/{SUBNET.prefixlen}", "dev", device)
            _ip("-n", namespace.name, "link", "set", "lo", "up")
            _ip("-n", namespace.name, "link", "set", device, "up")
        yield head, gpu
