"""Nothing waits for ever: the CLI, following and the post-deploy provider against a dashboard that
accepts connections and never answers (or answers only Ray's version check, then nothing)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from incluster import job_client, readiness
from jobs.cli.main import main
from jobs.submit.local_head import refusing_address
from jobs.submit.provider import JobProvider
from tests.jobs.submit.test_provider_on_ray import props_for

pytest.importorskip("ray", reason="ray is not installed: pip install 'ray[default]' (requirements.txt)")

SHORT = job_client.Deadlines(connect=0.5, read=0.5, stop=1.0)
"""Deadlines short enough for a test; the code under test must read them from job_client.DEADLINES."""

BOUND_SECONDS = 8.0
"""A call that has not returned after this long is waiting for ever (each needs a few SHORT deadlines)."""


def version_answer() -> bytes:
    """The HTTP answer of a Ray dashboard to GET /api/version."""
    import ray

    body = json.dumps({"version": "4", "ray_version": ray.__version__, "ray_commit": "test"}).encode()
    head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


class SilentDashboard:
    """A TCP server on 127.0.0.1 that accepts every connection and answers nothing, or (answers_version)
    only GET /api/version. It holds the connections until `close`, which ends whatever waits on them."""

    def __init__(self, answers_version: bool) -> None:
        self.answers_version = answers_version
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.held: list[socket.socket] = []
        self.closing = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        """The dashboard URL."""
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}"

    def _serve(self) -> None:
        while not self.closing.is_set():
            try:
                connection, _peer = self.listener.accept()
            except TimeoutError:
                continue
            if self.answers_version and self._asks_version(connection):
                connection.sendall(version_answer())
                connection.close()
            else:
                self.held.append(connection)

    @staticmethod
    def _asks_version(connection: socket.socket) -> bool:
        connection.settimeout(2)
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = connection.recv(4096)
            if not chunk:
                break
            head += chunk
        return head.startswith(b"GET /api/version ")

    def close(self) -> None:
        """Stop accepting and drop every held connection."""
        self.closing.set()
        self.thread.join(timeout=5)
        self.listener.close()
        for connection in self.held:
            connection.close()


def silent_dashboard(monkeypatch, answers_version: bool) -> Iterator[SilentDashboard]:
    """A SilentDashboard, with job_client.DEADLINES set to SHORT, closed at the end."""
    monkeypatch.setattr(job_client, "DEADLINES", SHORT)
    server = SilentDashboard(answers_version)
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(params=[False, True], ids=["silent", "answers-only-the-version"])
def dashboard(request, monkeypatch) -> Iterator[SilentDashboard]:
    """A dashboard silent from the first request, or from the first after Ray's version check."""
    yield from silent_dashboard(monkeypatch, request.param)


@pytest.fixture
def version_only_dashboard(monkeypatch) -> Iterator[SilentDashboard]:
    """A dashboard that answers Ray's version check (so a client connects), then nothing."""
    yield from silent_dashboard(monkeypatch, True)


def within_bound(server: SilentDashboard, call: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    """(result, exception) of `call`, which must return within BOUND_SECONDS; else the server is closed
    (ending the wait) and the test fails."""
    outcome: dict[str, Any] = {"result": None, "error": None}

    def run() -> None:
        try:
            outcome["result"] = call()
        except BaseException as error:  # noqa: BLE001 - handed to the test
            outcome["error"] = error

    worker = threading.Thread(target=run, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(BOUND_SECONDS)
    if worker.is_alive():
        server.close()
        worker.join(10)
        pytest.fail(f"still waiting on the silent dashboard after {BOUND_SECONDS:.0f} s")
    assert time.monotonic() - started < BOUND_SECONDS
    return outcome["result"], outcome["error"]


def unanswered(server: SilentDashboard) -> str:
    """The reason every bounded call gives."""
    return f"cannot reach the Ray dashboard at {server.address}: no answer within 0.5 s"


@pytest.mark.parametrize("command", [["status"], ["submit", "--entrypoint", "sleep 60"]])
def test_the_cli_says_unreachable_in_one_line_and_exits_2(dashboard, make_stack, capsys, command):
    name, directory = make_stack("silent")
    argv = [*command, "--stack", name, "--dir", str(directory), "--address", dashboard.address]
    code, error = within_bound(dashboard, lambda: main(argv))
    assert error is None
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"error: {unanswered(dashboard)}\n"


def test_following_a_job_ends_when_the_dashboard_stops_answering(version_only_dashboard):
    server = version_only_dashboard
    client = job_client.connect(job_client.endpoint_for_address(server.address))
    _, error = within_bound(server, lambda: job_client.follow(client, "run-1", "verl", None, lambda _line: None))
    assert isinstance(error, job_client.Unreachable) and str(error) == unanswered(server)


def test_create_fails_within_the_deadlines(dashboard, tmp_path):
    props = props_for(tmp_path, dashboard.address, "silent-create", "sleep 60", ready_timeout_seconds=600)
    _, error = within_bound(dashboard, lambda: JobProvider().create(props))
    run = props["submission"]["metadata"]["run"]
    assert error is not None and str(error) == f"grpo-gke job {run}: {unanswered(dashboard)}"


def test_update_fails_saying_the_old_run_could_not_be_stopped(dashboard, tmp_path):
    olds = {**props_for(tmp_path, dashboard.address, "silent-update", "sleep 60"), "run": "old"}
    news = props_for(tmp_path, dashboard.address, "silent-update", "sleep 61")
    old_run, new_run = olds["submission"]["metadata"]["run"], news["submission"]["metadata"]["run"]
    _, error = within_bound(dashboard, lambda: JobProvider().update("silent-update", olds, news))
    assert error is not None
    assert str(error) == f"grpo-gke job {new_run}: cannot stop the old run {old_run}: {unanswered(dashboard)}"


def test_delete_warns_and_returns_within_the_deadlines(dashboard, capsys, tmp_path):
    props = props_for(tmp_path, dashboard.address, "silent-delete", "sleep 60")
    run = props["submission"]["metadata"]["run"]
    result, error = within_bound(dashboard, lambda: JobProvider().delete("silent-delete", props))
    assert (result, error) == (None, None)
    assert capsys.readouterr().err == (
        f"grpo-gke job: warning: {run} not stopped ({unanswered(dashboard)}); deleting the RayCluster ends it\n"
    )


def test_a_closed_port_is_unreachable_with_the_reason_only():
    with refusing_address() as address:
        for call in (lambda: job_client.connect(job_client.endpoint_for_address(address)),
                     lambda: readiness.gpu_nodes(job_client.endpoint_for_address(address))):  # fmt: skip
            with pytest.raises(job_client.Unreachable) as raised:
                call()
            assert str(raised.value) == (
                f"cannot reach the Ray dashboard at {address}: Failed to establish a new connection:"
                " [Errno 111] Connection refused"
            )
