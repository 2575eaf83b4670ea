"""A throwaway Ray head on 127.0.0.1, for the job tests, the benchmark and trying the CLI offline.

`ray start --head --block` runs in its own process group with its own short temporary
directory; `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` keeps Ray on the loopback address (without it
Ray moves to the machine's routable address). It is ended by its process id.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
"""The local head listens on loopback only."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


@dataclass
class LocalHead:
    """A running local Ray head."""

    process: subprocess.Popen
    """The `ray start --head --block` process."""
    temp_dir: Path
    """Ray's temporary directory, removed on stop."""
    dashboard_url: str
    """Ray dashboard / Jobs API address, `http://127.0.0.1:<port>`."""

    def stop(self) -> None:
        """End the head's process group (short grace, then SIGKILL) and remove its directory."""
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        except ProcessLookupError:
            pass
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def _ray_executable() -> str:
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.exists() else "ray"


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def start(num_cpus: int = 4, num_gpus: int = 0, timeout: float = 60.0) -> LocalHead:
    """Start a head declaring `num_cpus` CPUs and `num_gpus` GPUs; return once its dashboard answers."""
    temp_dir = Path(tempfile.mkdtemp(prefix="rh", dir="/tmp"))
    dashboard_port = free_port()
    ports = {
        "--port": free_port(),
        "--dashboard-port": dashboard_port,
        "--ray-client-server-port": free_port(),
        "--dashboard-agent-listen-port": free_port(),
        "--dashboard-agent-grpc-port": free_port(),
        "--metrics-export-port": free_port(),
        "--runtime-env-agent-port": free_port(),
        "--node-manager-port": free_port(),
        "--object-manager-port": free_port(),
    }
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
        *(f"{flag}={port}" for flag, port in ports.items()),
    ]
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
    for name in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"):
        env.pop(name, None)
    with open(temp_dir / "head.log", "wb") as log:
        process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    head = LocalHead(process=process, temp_dir=temp_dir, dashboard_url=f"http://{HOST}:{dashboard_port}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = (temp_dir / "head.log").read_text(errors="replace")[-2000:]
            shutil.rmtree(temp_dir, ignore_errors=True)
            raise RuntimeError(f"ray start exited with {process.returncode}:\n{output}")
        url = head.dashboard_url
        if _answers(f"{url}/api/version") and _answers(f"{url}/api/jobs/") and _node_alive(url):
            return head
        time.sleep(0.3)
    head.stop()
    raise RuntimeError(f"the local Ray head did not answer within {timeout:.0f} s")


def _node_alive(url: str) -> bool:
    from jobs.access import Endpoint
    from jobs.control import JobError, gpu_nodes

    try:
        return bool(gpu_nodes(Endpoint(address=url)))
    except JobError:
        return False
