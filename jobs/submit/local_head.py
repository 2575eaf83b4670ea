"""A throwaway Ray head on 127.0.0.1, for the job tests, the benchmark and trying the CLI offline.

`ray start --head --block` runs in its own process group with its own short temporary
directory; `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` keeps Ray on the loopback address (without it
Ray moves to the machine's routable address). It is ended by its process id.

Ports picked beforehand (bind to 0, close, pass the number) race: another head or any outgoing
connection can take one before Ray binds it, and `ray start --block` then exits. So every port
that Ray can choose itself is 0 (the kernel hands one out as Ray binds it). The Ray Client server
alone needs a number (1024-65535, and it starts whenever grpc is installed): it gets a free one
below the kernel's ephemeral range, which neither port-0 binds nor outgoing connections use; if
even that one is taken in between, `start` tries again with another.
The head writes its GCS address to `<temp dir>/ray_current_cluster` and the dashboard publishes
the address it bound under `webui:url` in the GCS's `dashboard` namespace (ray 2.60,
ray/_private/node.py start_api_server), which is where ray.init reads it too.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ray._raylet import GcsClient

from incluster.endpoint import Endpoint
from incluster.job_client import JobError
from incluster.readiness import gpu_nodes

HOST = "127.0.0.1"
"""The local head listens on loopback only."""


@contextlib.contextmanager
def refusing_address() -> Iterator[str]:
    """`http://127.0.0.1:<port>` where nothing listens, for as long as the context lasts.

    The port stays bound (not listening), so connections are refused and nothing else can take it.
    """
    with socket.socket() as holder:
        holder.bind((HOST, 0))
        yield f"http://{HOST}:{holder.getsockname()[1]}"


@dataclass
class LocalHead:
    """A running local Ray head."""

    process: subprocess.Popen
    """The `ray start --head --block` process."""
    temp_dir: Path
    """Ray's temporary directory, removed on stop."""
    dashboard_url: str = ""
    """Ray dashboard / Jobs API address, `http://127.0.0.1:<port>`, once the dashboard has published it."""

    def stop(self) -> None:
        """End the head's process group (short grace, then SIGKILL to whatever of it is left, `ray start` itself
        included) and remove its directory."""
        with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=1)
        end_group(self.process.pid)
        self.process.wait(timeout=10)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def end_group(group: int) -> None:
    """SIGKILL every process left in process group `group`.

    `ray start --block` can exit while processes it started live on in its group: when a port it was given is
    taken, the dashboard agent and the runtime env agent of the failed head were still running 30 s after it
    exited (measured on ray 2.60.0 with tests/jobs/submit/test_local_head.py), so a head is never ended by
    waiting for `ray start` alone.
    """
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)


def _ray_executable() -> str:
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else "ray"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


ZERO_PORT_FLAGS = (
    "--port",
    "--dashboard-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--metrics-export-port",
    "--runtime-env-agent-port",
    "--node-manager-port",
    "--object-manager-port",
    "--min-worker-port",
    "--max-worker-port",
)
"""`ray start` port options set to 0: the kernel picks each port as Ray binds it (ray 2.60 `ray start
--help` and ray/_private/parameter.py; 0 for the worker port range lets each worker bind any port)."""


NO_PRESTARTED_WORKERS = {"RAY_prestart_worker_first_driver": "0"}
"""A local head starts no idle Python workers when the first driver connects: `ray start` tells the raylet to
prestart as many as it has CPUs (ray 2.60.0 python/ray/_private/services.py L2020 `--num_prestart_python_workers`),
each one a Python process importing Ray, which a local head's few jobs do not wait for. `prestart_worker_first_driver`
is the raylet's setting for it: its name is in ray 2.60.0's raylet binary (ray/core/src/ray/raylet/raylet), which
reads each setting from `RAY_<setting>` as the health-check settings of jobs/demo/lifecycle.py are read. Measured with
and without on the CLI's and the export's Ray tests (a cpuacct cgroup of every process they start): 58 -> 52 s of
CPU."""

START_ATTEMPTS = 3
"""How often `start` tries again when a port it gave Ray was taken before Ray bound it."""

PORT_TAKEN = ("Failed to bind", "already occupied", "Address already in use")
"""What Ray's processes log when a port they were given is taken (grpc, the dashboard, the kernel)."""


def start(num_cpus: int = 4, num_gpus: int = 0, timeout: float = 60.0, env: dict[str, str] | None = None) -> LocalHead:
    """Start a head declaring `num_cpus` CPUs and `num_gpus` GPUs, with `env` added to its environment (Ray's
    `RAY_<setting>` overrides); return once its dashboard answers."""
    for _ in range(START_ATTEMPTS - 1):
        try:
            return _start_once(num_cpus, num_gpus, timeout, env or {})
        except PortTaken:
            continue
    return _start_once(num_cpus, num_gpus, timeout, env or {})


class PortTaken(RuntimeError):
    """`ray start` exited because a port it was given was taken before it bound it."""


def client_server_port() -> int:
    """A free port for the Ray Client server, below the kernel's ephemeral range."""
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    while True:
        port = random.randrange(max(1024, ephemeral_low // 2), ephemeral_low)
        with socket.socket() as probe:
            try:
                probe.bind((HOST, port))
            except OSError:
                continue
        return port


def _start_once(num_cpus: int, num_gpus: int, timeout: float, extra_env: dict[str, str]) -> LocalHead:
    temp_dir = Path(tempfile.mkdtemp(prefix="rh", dir="/tmp"))
    client_port = client_server_port()
    command = [
        _ray_executable(),
        "start",
        "--head",
        "--block",
        f"--node-ip-address={HOST}",
        f"--num-cpus={num_cpus}",
        f"--num-gpus={num_gpus}",
        f"--temp-dir={temp_dir}",
        "--disable-usage-stats",
        "--include-dashboard=true",
        f"--dashboard-host={HOST}",
        *(f"{flag}=0" for flag in ZERO_PORT_FLAGS),
        f"--ray-client-server-port={client_port}",
    ]
    env = {
        **os.environ,
        **NO_PRESTARTED_WORKERS,
        **extra_env,
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        "RAY_USAGE_STATS_ENABLED": "0",
    }
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        env.pop(name, None)
    with open(temp_dir / "head.log", "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    head = LocalHead(process=process, temp_dir=temp_dir)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            end_group(process.pid)
            output = (temp_dir / "head.log").read_text(errors="replace")
            shutil.rmtree(temp_dir, ignore_errors=True)
            failure = PortTaken if any(sign in output for sign in PORT_TAKEN) else RuntimeError
            raise failure(f"ray start exited with {process.returncode}:\n{output[-2000:]}")
        head.dashboard_url = head.dashboard_url or _published_dashboard(temp_dir)
        url = head.dashboard_url
        if url and _answers(f"{url}/api/version") and _answers(f"{url}/api/jobs/") and _node_alive(url):
            if _group_listens(process.pid, client_port):
                return head
        time.sleep(0.3)
    head.stop()
    raise RuntimeError(f"the local Ray head did not answer within {timeout:.0f} s")


def _group_listens(group: int, port: int) -> bool:
    """Whether a process of process group `group` listens on TCP `port` (Linux /proc/net/tcp and tcp6).

    A listener of another process on the port would mean this head's Ray Client server could not bind it.
    grpc listens on 127.0.0.1 as an IPv4-mapped IPv6 socket, so both tables are read.
    """
    rows = [line.split() for table in ("tcp", "tcp6") for line in _proc_net(table)[1:]]
    sockets = {f"socket:[{row[9]}]" for row in rows if row[1].endswith(f":{port:04X}") and row[3] == TCP_LISTEN}
    for entry in Path("/proc").iterdir():
        if not sockets or not entry.name.isdigit():
            continue
        try:
            if os.getpgid(int(entry.name)) != group:
                continue
            if any(os.readlink(fd) in sockets for fd in (entry / "fd").iterdir()):
                return True
        except OSError:
            continue
    return False


def _proc_net(table: str) -> list[str]:
    try:
        return Path("/proc/net", table).read_text().splitlines()
    except OSError:
        return []


TCP_LISTEN = "0A"
"""The LISTEN state in /proc/net/tcp (Linux include/net/tcp_states.h TCP_LISTEN = 10)."""


DASHBOARD_URL_KEY = b"webui:url"
"""GCS internal-KV key under which the Ray dashboard publishes the `host:port` it bound (ray 2.60 node.py)."""

DASHBOARD_KV_NAMESPACE = b"dashboard"
"""Its internal-KV namespace (ray 2.60 ray_constants.KV_NAMESPACE_DASHBOARD)."""


def _published_dashboard(temp_dir: Path) -> str:
    """The dashboard URL the head published, or "" while it has not yet."""
    gcs_file = temp_dir / "ray_current_cluster"
    gcs_address = gcs_file.read_text().strip() if gcs_file.exists() else ""
    if not gcs_address:
        return ""
    try:
        published = GcsClient(address=gcs_address).internal_kv_get(DASHBOARD_URL_KEY, DASHBOARD_KV_NAMESPACE, timeout=2)
    except Exception:  # noqa: BLE001 - the GCS answers a not-yet-ready query with several error types
        return ""
    return f"http://{published.decode()}" if published else ""


def _node_alive(url: str) -> bool:
    try:
        return bool(gpu_nodes(Endpoint(address=url)))
    except JobError:
        return False
