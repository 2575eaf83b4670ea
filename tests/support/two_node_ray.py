"""A real two-node Ray cluster on this machine: a head and a node that declares 8 GPUs, each in a
network namespace of its own (tests/support/netns.py), each `ray start --block` in its own process group.

Killing the GPU node's process group (and whatever it left in its namespace) is a real node loss:
its actors fail, the head marks it dead, a node started again joins under a new id
(../shared/reference/day-two-operations.md, last section, tried with Ray 2.60.0). Clients reach the
head only from inside its namespace: `call` for functions of this process (incluster.job_client,
incluster.readiness, incluster.run_submission), `python` and `cli` for a snippet or `python -m jobs` in a subprocess
there.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from incluster.endpoint import Endpoint
from jobs.demo.gpu_node import GPUS
from jobs.submit.local_head import NO_PRESTARTED_WORKERS
from tests.support.netns import Namespace

REPO_ROOT = Path(__file__).resolve().parents[2]

GCS_PORT = 6379
"""The head's GCS port: fixed, since nothing else listens inside the head's namespace."""

DASHBOARD_PORT = 8265
"""The head's dashboard / Jobs API port, inside its namespace."""

CPUS_PER_NODE = 2
"""CPUs each node declares: the job's driver runs on the head, the stand-in's GPU actor on the GPU node."""

OBJECT_STORE_BYTES = 100 * 1024**2
"""Each node's object store (Ray's minimum is 75 MiB; the tests pass small values only)."""

NODE_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "1", "RAY_USAGE_STATS_ENABLED": "0", **NO_PRESTARTED_WORKERS}
"""Inside the namespaces Ray must allow a multi-node cluster; no usage report is sent; no idle workers are prestarted
(jobs/submit/local_head.py NO_PRESTARTED_WORKERS)."""

HEAD_ENV = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "5",
}
"""The head's GCS checks each node every half second and marks it dead after 5 failures in a row: a killed
node (refused connections) is dead in about 2.5 s instead of Ray's default 15 s (period 3 s, timeout 10 s,
threshold 5, initial delay 5 s: ray-project/ray src/ray/common/ray_config_def.h), while a live but loaded
node still has 5 s to answer each check (the next check is timed from the answer, so it must miss 5 in a row)."""

GPU_NODE_ENV = {"RAY_gcs_rpc_server_reconnect_timeout_s": "5"}
"""The GPU node's raylet exits 5 s after it lost the GCS instead of Ray's default 60 s
(`RAY_CONFIG(int32_t, gcs_rpc_server_reconnect_timeout_s, 60)`, ray-project/ray src/ray/common/ray_config_def.h, read
at 9033414; KubeRay v1.7.0 ray-operator/controllers/ray/common/pod.go L94-101: "If the worker cannot reconnect to GCS
within [the timeout], the Raylet will exit the process. By default, the value is 60s", raised to 600 s only with GCS
fault tolerance): a lost head takes the GPU node's raylet with it, as on a RayCluster without GCS fault tolerance."""

START_SECONDS = 90.0
"""Deadline of a node's start (this machine's CPUs are shared; a node takes 10-30 s to join)."""

T = TypeVar("T")


@dataclass(frozen=True)
class RayNode:
    """One node as the head's state API lists it."""

    node_id: str
    """Ray's node id (a node started again gets a new one)."""
    address: str
    """The node's IP address."""
    state: str
    """ALIVE or DEAD."""
    gpus: float
    """GPUs the node declared."""


def _node_env(extra: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    return {**env, **NODE_ENV, **extra}


def _ray_executable() -> str:
    return str(Path(sys.executable).with_name("ray"))


@dataclass
class TwoNodeRay:
    """The head and the GPU node of one test cluster, started and ended by process id."""

    head_ns: Namespace
    """The head's namespace: the Jobs API, the GCS and the job drivers live here."""
    gpu_ns: Namespace
    """The GPU node's namespace."""
    head: subprocess.Popen | None = None
    """The head's `ray start --head --block`."""
    gpu: subprocess.Popen | None = None
    """The GPU node's `ray start --block`, None while it is down."""
    gpu_node_id: str = ""
    """Ray's id of the GPU node started last."""
    temp_dirs: list[Path] = field(default_factory=list)
    """Each started node's `--temp-dir` (short, under /tmp, outside any job's working_dir)."""

    @property
    def dashboard_url(self) -> str:
        """The Jobs API address, reachable from inside the head's namespace only."""
        return f"http://{self.head_ns.address}:{DASHBOARD_PORT}"

    @property
    def endpoint(self) -> Endpoint:
        """The dashboard as incluster.job_client takes it."""
        return Endpoint(address=self.dashboard_url)

    def call(self, function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """`function(*args, **kwargs)` run from inside the head's namespace."""
        return self.head_ns.call(function, *args, **kwargs)

    def python(self, code: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """The venv's Python running `code` inside the head's namespace, from the repository root."""
        return self.head_ns.run([sys.executable, "-c", code], _node_env({}), timeout, cwd=str(REPO_ROOT))

    def cli(self, *argv: str, timeout: float = 120.0) -> subprocess.CompletedProcess:
        """`python -m jobs ARGV` inside the head's namespace, from the repository root."""
        return self.head_ns.run([sys.executable, "-m", "jobs", *argv], _node_env({}), timeout, cwd=str(REPO_ROOT))

    def nodes(self) -> list[RayNode]:
        """Every node the head knows, alive or dead, from its state API."""
        return self.call(_read_nodes, self.dashboard_url, timeout=30)

    def ray_nodes(self) -> list[dict[str, Any]]:
        """`ray.nodes()` as a driver inside the head's namespace sees it: NodeID, Alive, NodeManagerAddress, GPU."""
        code = (
            "import json, ray\n"
            f"ray.init(address='{self.head_ns.address}:{GCS_PORT}', _node_ip_address='{self.head_ns.address}',"
            " logging_level='ERROR', log_to_driver=False)\n"
            "print(json.dumps([{'NodeID': n['NodeID'], 'Alive': n['Alive'],"
            " 'NodeManagerAddress': n['NodeManagerAddress'], 'GPU': n['Resources'].get('GPU', 0)}"
            " for n in ray.nodes()]))\n"
        )
        result = self.python(code)
        if result.returncode != 0:
            raise RuntimeError(f"ray.nodes() failed inside {self.head_ns.name}: {result.stderr[-2000:]}")
        return json.loads(result.stdout.strip().splitlines()[-1])

    def _start(self, namespace: Namespace, flags: list[str], env: dict[str, str]) -> subprocess.Popen:
        temp_dir = Path(tempfile.mkdtemp(prefix="rn", dir="/tmp"))
        self.temp_dirs.append(temp_dir)
        command = [
            _ray_executable(),
            "start",
            "--block",
            f"--node-ip-address={namespace.address}",
            f"--num-cpus={CPUS_PER_NODE}",
            f"--object-store-memory={OBJECT_STORE_BYTES}",
            f"--temp-dir={temp_dir}",
            "--disable-usage-stats",
            *flags,
        ]
        return namespace.spawn(command, _node_env(env), str(temp_dir / "ray-start.log"))

    def _wait(self, process: subprocess.Popen, ready: Callable[[], bool], what: str) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log = Path(self.temp_dirs[-1], "ray-start.log").read_text(errors="replace")[-3000:]
                raise RuntimeError(f"{what} exited with {process.returncode}:\n{log}")
            if ready():
                return
            time.sleep(0.3)
        raise RuntimeError(f"{what} did not join within {START_SECONDS:.0f} s")

    def start_head(self) -> None:
        """Start the head (no GPUs) and return once its Jobs API answers and it is ALIVE."""
        flags = [
            "--head",
            f"--port={GCS_PORT}",
            "--num-gpus=0",
            "--include-dashboard=true",
            f"--dashboard-host={self.head_ns.address}",
            f"--dashboard-port={DASHBOARD_PORT}",
        ]
        self.head = self._start(self.head_ns, flags, HEAD_ENV)

        def ready() -> bool:
            return self.call(_answers, f"{self.dashboard_url}/api/jobs/", timeout=30) and any(
                node.address == self.head_ns.address and node.state == "ALIVE" for node in self._nodes_or_none()
            )

        self._wait(self.head, ready, "the Ray head")

    def start_gpu_node(self) -> str:
        """Start the GPU node (8 GPUs declared) and return its new node id once the head lists it ALIVE."""
        known = {node.node_id for node in self.nodes()}
        flags = [f"--address={self.head_ns.address}:{GCS_PORT}", f"--num-gpus={GPUS}"]
        self.gpu = self._start(self.gpu_ns, flags, GPU_NODE_ENV)
        joined: list[str] = []

        def ready() -> bool:
            joined[:] = [
                node.node_id
                for node in self._nodes_or_none()
                if node.node_id not in known and node.state == "ALIVE" and node.gpus == GPUS
            ]
            return bool(joined)

        self._wait(self.gpu, ready, "the GPU node")
        self.gpu_node_id = joined[0]
        return self.gpu_node_id

    def kill_gpu_node(self) -> str:
        """A real node loss: SIGKILL the GPU node's process group and everything else in its namespace.

        Returns the id of the node killed; the head notices on its own (HEAD_ENV).
        """
        if self.gpu is None:
            raise RuntimeError("the GPU node is not running")
        try:
            os.killpg(self.gpu.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.gpu.wait(timeout=30)
        self.gpu = None
        # Ray's workers on the node may live in process groups of their own: a lost node takes them all.
        self.gpu_ns.kill_all()
        return self.gpu_node_id

    def kill_head(self) -> None:
        """A lost Ray head: SIGKILL its process group and everything else in its namespace (the GCS, the dashboard, the
        job drivers). Without GCS fault tolerance its job table is gone with it."""
        if self.head is None:
            raise RuntimeError("the Ray head is not running")
        try:
            os.killpg(self.head.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.head.wait(timeout=30)
        self.head = None
        self.head_ns.kill_all()

    def wait_for_gpu_node_exit(self, timeout: float = 60.0) -> int:
        """Wait until the GPU node's `ray start --block` has exited on its own (its raylet lost the GCS, GPU_NODE_ENV);
        its exit status."""
        if self.gpu is None:
            raise RuntimeError("the GPU node is not running")
        code = self.gpu.wait(timeout=timeout)
        self.gpu = None
        self.gpu_ns.kill_all()
        return code

    def restart_gpu_node(self) -> str:
        """The GPU node back after a loss (killed first if still up); return its new node id."""
        if self.gpu is not None:
            self.kill_gpu_node()
        return self.start_gpu_node()

    def ensure_gpu_node(self) -> str:
        """The GPU node up (started again when a test left it down); return its node id."""
        if self.gpu is None or self.gpu.poll() is not None:
            self.gpu = None
            self.gpu_ns.kill_all()
            return self.start_gpu_node()
        return self.gpu_node_id

    def wait_for_state(self, node_id: str, state: str, timeout: float = 60.0) -> None:
        """Wait until the head lists `node_id` in `state` (ALIVE or DEAD)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(node.node_id == node_id and node.state == state for node in self.nodes()):
                return
            time.sleep(0.3)
        raise TimeoutError(f"node {node_id} was not {state} within {timeout:.0f} s: {self.nodes()}")

    def stop(self) -> None:
        """End both nodes by process group, then everything left in the namespaces; remove the temp dirs."""
        for process in (self.gpu, self.head):
            if process is not None and process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(timeout=30)
        self.gpu = self.head = None
        self.gpu_ns.kill_all()
        self.head_ns.kill_all()
        for temp_dir in self.temp_dirs:
            shutil.rmtree(temp_dir, ignore_errors=True)

    def _nodes_or_none(self) -> list[RayNode]:
        try:
            return self.nodes()
        except (OSError, ValueError, KeyError):
            return []


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


def _read_nodes(dashboard_url: str) -> list[RayNode]:
    with urllib.request.urlopen(f"{dashboard_url}/api/v0/nodes?detail=1", timeout=10) as response:
        listed = json.load(response)["data"]["result"]["result"]
    return [
        RayNode(
            node_id=node["node_id"],
            address=node["node_ip"],
            state=node["state"],
            gpus=float(node.get("resources_total", {}).get("GPU", 0)),
        )
        for node in listed
    ]
