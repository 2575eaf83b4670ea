"""Preflight fixtures: what nvidia-smi printed on a real H200 and the reports measured there."""

from __future__ import annotations

import functools
import http.server
import json
import sys
import threading
from pathlib import Path

import pytest
import yaml

from incluster.preflight import run
from jobs.preflight import settings as settings_module
from plan.harness import REPO_ROOT

DATA = Path(__file__).with_name("data")
"""nvidia-smi's output on an H200 (driver 580.159.04), recorded by benchmarks/preflight_device.py on 2026-12-01,
and NCCL's INFO log on an H200 without RDMA (h200-nccl-socket.log, benchmarks/fabric_nccl_log_device.py, same day)."""

RESULTS = REPO_ROOT / "benchmarks" / "results" / "preflight-h200"
"""The device runs' results: measure_node() reports of healthy and slowed H200s."""


def recorded(name: str) -> str:
    """A recorded nvidia-smi output file."""
    return (DATA / name).read_text()


def device_run(name: str) -> dict:
    """One device run's result file (run1-preflight.json, run2-preflight.json)."""
    return json.loads((RESULTS / name).read_text())


STAMP = "20261201T120000.000Z"
"""The preflight's fixed time, so its file name and job id are known."""

LOCAL = {
    "gpus_per_node": 1,
    "strategy": "PACK",
    "measure": "tests.incluster.preflight.stand_in_measure:measure_node",
}
"""The local head is one Ray node with 8 declared GPUs: a bundle of one GPU stands for each GPU node."""

GLOO = {"backend": "gloo", "device": "cpu", "min_bytes": 1 << 10, "max_bytes": 1 << 16, "warmups": 1, "iterations": 2}
"""The fabric over gloo on loopback, a short sweep."""

FLOOR_GBPS = 1e-6
"""A floor any loopback run reaches."""

POLL_S = 0.5
"""How often the tests' preflight asks for its job's status (run.POLL_SECONDS, 2 s, is a cluster's pace)."""


def on_local_head_settings(made: dict) -> dict:
    """Preflight settings made for the local head: a one-GPU bundle per stand-in node, the stand-in measurement,
    gloo on lo with a short sweep and FLOOR_GBPS."""
    made = {**made, **LOCAL}
    measure = {**made["fabric"]["measure"], **GLOO, "floor_gbps": FLOOR_GBPS}
    made["fabric"] = {**made["fabric"], "measure": measure, "env": {"GLOO_SOCKET_IFNAME": "lo"}}
    return made


@pytest.fixture
def on_local_head(monkeypatch):
    """The preflight's settings and submission made for the local head (the venv's Python, the checkout on
    PYTHONPATH for the stand-in, gloo on lo), its time fixed and its status polled every POLL_S."""
    settings_of, submission_of = settings_module.preflight_settings, run.preflight_submission

    def settings(*args, **kwargs):
        return on_local_head_settings(settings_of(*args, **kwargs))

    def submission(settings):
        made = submission_of(settings)
        return {**made, "runtime_env": {"env_vars": {"PYTHONPATH": str(REPO_ROOT)}}}

    monkeypatch.setattr(settings_module, "preflight_settings", settings)
    monkeypatch.setattr(run, "preflight_submission", submission)
    monkeypatch.setattr(run, "POD_PYTHON", sys.executable)
    monkeypatch.setattr(run, "stamp_now", lambda: STAMP)
    monkeypatch.setattr(run, "run_preflight", functools.partial(run.run_preflight, poll=POLL_S))


class RecordingApiServer:
    """A stand-in Kubernetes API server on 127.0.0.1 that records every request: a pod's GET answers its node
    (`node-of-<pod>`, 404 for a pod named `gone`), a node's PATCH answers 200."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, str, str, dict | None]] = []
        """(method, path, Authorization, Content-Type, JSON body) of every request, in order."""
        recorded = self.requests

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _record(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                auth, kind = self.headers.get("Authorization", ""), self.headers.get("Content-Type", "")
                recorded.append((self.command, self.path, auth, kind, body))

            def do_GET(self) -> None:
                self._record()
                pod = self.path.rsplit("/", 1)[-1]
                if pod == "gone":
                    self._answer(404, {"kind": "Status", "reason": "NotFound"})
                else:
                    self._answer(200, {"kind": "Pod", "spec": {"nodeName": f"node-of-{pod}"}})

            def do_PATCH(self) -> None:
                self._record()
                self._answer(200, {"kind": "Node"})

            def log_message(self, *_: object) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.address = f"http://127.0.0.1:{self.server.server_address[1]}"
        """The server's base URL."""
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def kubeconfig(self, token: str = "test-token") -> str:
        """A kubeconfig whose current context is this server with a bearer `token`."""
        return yaml.safe_dump(
            {
                "apiVersion": "v1",
                "clusters": [{"name": "stand-in", "cluster": {"server": self.address}}],
                "contexts": [{"name": "stand-in", "context": {"cluster": "stand-in", "user": "u"}}],
                "current-context": "stand-in",
                "users": [{"name": "u", "user": {"token": token}}],
            }
        )

    def stop(self) -> None:
        """End the server and its thread."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


@pytest.fixture
def api_server():
    """A RecordingApiServer for the test, ended after it."""
    server = RecordingApiServer()
    try:
        yield server
    finally:
        server.stop()
