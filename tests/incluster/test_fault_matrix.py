"""The fault matrix of docs/relies-on.md ("Faults at every boundary"), cell by cell: every call path the in-cluster
code takes at run time meets every fault through one fault-injecting proxy (tests/support/fault_proxy.py) placed in
front of its boundary, and does what its cell says: the real API server of the test run (tests/conftest.py
`control_plane`: the Lease as the guardian's ServiceAccount, the RayCluster and a node to cordon, each in a
namespace of the module's own), the in-process stand-ins (the Google APIs, the metadata server), and the real Ray
2.60.0 head of the session (tests/ray_fixtures.py `ray_head`, shared with the
other Ray-head files of the test process), with one job that ended and one RUNNING, started once for the module, for
the cells that act on a job. The cells are read from the document; the call paths are found in incluster/'s source, so
a new call site without a row fails here. Every fault is injected at the boundary, as the test's name says; deadlines
are shrunk (read timeouts of a fraction of a second, pauses not slept) so that the whole matrix takes seconds."""

from __future__ import annotations

import ast
import json
import re
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import replace
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from incluster import google_token, job_client, lustre_transfer, readiness, run_files, run_submission, scaling
from incluster.endpoint import Endpoint
from incluster.export_submission import submit_export
from incluster.guardian.cluster import gpu_nodes_of
from incluster.guardian.loop import Guardian, Hooks
from incluster.guardian.settings import Settings, settings_from
from incluster.lease import Lease
from incluster.lustre_transfer import RestObjects, RestTransfers, TransferError, wait_for
from incluster.preflight import cordon
from incluster.preflight.run import run_preflight, stamp_now
from incluster.runs import run_dir_of
from jobs.guardian.settings import guardian_settings
from jobs.preflight.settings import preflight_settings
from jobs.runs.export import export_submission
from jobs.spec.training import on_data_root, submission_of, training_spec
from tests.conftest import config_of
from tests.support import control_plane as cp
from tests.support import kube_objects as made
from tests.support.clock import Clock
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy
from tests.support.lustre_stand_in import BUCKET, INSTANCE, StandInGoogleApis, google_apis, stand_in_apis

REPO = Path(__file__).resolve().parents[2]
TABLE_HEADING = "## Faults at every boundary (issue 31)"
FAULTS = ("refused", "timeout", "cut", "not-json", "401", "403", "404", "409", "429", "500", "503")
READ_SECONDS = 0.5
"""The read deadline of every request to a stand-in under test (a busy two-core machine answers a stand-in well within
it); the proxy holds a `timeout` for twice as long."""

CALL = re.compile(
    r"^(requests\.(get|post|put|patch|delete|request|head)|(urllib\.request\.)?urlopen|client_type"
    r"|.*client\.(list_jobs|submit_job|stop_job|get_job_status|get_job_info|get_job_logs|tail_job_logs|delete_job))$"
)
"""A call that leaves the process: requests, urllib, the Ray Jobs client (and the client's construction)."""


def table() -> dict[str, dict[str, str]]:
    """The matrix's rows by call path: each fault's cell."""
    text = (REPO / "docs" / "relies-on.md").read_text()
    section = text.split(TABLE_HEADING, 1)[1].split("\n## ", 1)[0]
    rows: dict[str, dict[str, str]] = {}
    header: list[str] = []
    for line in section.splitlines():
        if not line.startswith("|") or line.startswith("|---"):
            continue
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if cells[0] == "boundary":
            header = cells
            continue
        rows[cells[1].strip("`")] = dict(zip(header[2:-1], cells[2:-1], strict=True))
    assert header[2:-1] == list(FAULTS), header
    return rows


def call_paths() -> set[str]:
    """`file:function` (or `file:Class.method`) of every call in incluster/ that leaves the process."""
    found = set()
    for path in sorted((REPO / "incluster").rglob("*.py")):
        where = path.relative_to(REPO).as_posix()

        def visit(node: ast.AST, scope: list[str], where: str = where) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    visit(child, [*scope, child.name])
                    continue
                if isinstance(child, ast.Call) and CALL.match(ast.unparse(child.func)):
                    top = scope[:2] if scope and scope[0][:1].isupper() else scope[:1]
                    found.add(f"{where}:{'.'.join(top)}")
                visit(child, scope)

        visit(ast.parse(path.read_text()), [])
    return found


ROWS = table()


def test_every_call_path_that_leaves_the_process_has_a_row_and_every_row_a_call_path():
    assert call_paths() == set(ROWS)


def test_the_call_path_finder_sees_a_new_call_site():
    tree = ast.parse("def fetch(client):\n    return client.get_job_logs('x')\n")
    assert any(isinstance(node, ast.Call) and CALL.match(ast.unparse(node.func)) for node in ast.walk(tree))


def fault_of(kind: str, body: str, content_type: str = "application/json") -> Fault:
    """The matrix's fault `kind` on the next matching request, with the boundary's error `body`."""
    if kind in ("refused", "timeout", "cut", "not-json"):
        return Fault(kind)
    headers = {"Retry-After": "0"} if kind == "429" else {}
    return Fault(int(kind), headers=headers, body=body, content_type=content_type)


GOOGLE_ERROR = json.dumps({"error": {"code": 0, "message": "injected by the fault proxy", "status": "INJECTED"}})
KUBE_STATUS = json.dumps({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "injected"})


def one_line(error: BaseException) -> str:
    """`error`'s text, asserted to be one line."""
    text = str(error)
    assert text and "\n" not in text, repr(text)
    return text


def shrink_deadlines(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Every request's connect and read deadline `seconds`."""
    tiny = replace(job_client.DEADLINES, connect=seconds, read=seconds)
    import incluster.lease

    for module in (job_client, scaling, incluster.lease, cordon):
        if hasattr(module, "DEADLINES"):
            monkeypatch.setattr(module, "DEADLINES", tiny)
    monkeypatch.setattr(lustre_transfer, "REQUEST_SECONDS", seconds)
    monkeypatch.setattr(google_token, "METADATA_REQUEST_SECONDS", seconds)


def through(proxy: FaultProxy, fault: Fault, path: str, method: str | None, call: Callable[[], Any]) -> str:
    """Inject `fault` on the next `method` request to `path`, run `call`: `retry` when it then succeeded after the
    fault (a later request got through), `ok` when it succeeded otherwise, `error` when it raised a one-line error of
    the project's kinds."""
    proxy.faults.clear()
    fault.path, fault.method = path, method
    proxy.inject(fault)
    before = len(proxy.seen)
    try:
        call()
    except (job_client.JobError, TransferError, google_token.TokenError, cordon.CordonError) as error:
        one_line(error)
        assert any(kind is not None for *_, kind in proxy.seen[before:]), f"failed before the fault: {error}"
        return "error"
    given = [index for index, (*_, kind) in enumerate(proxy.seen[before:]) if kind is not None]
    assert given, f"no request met the fault on {method} {path}: {proxy.seen[before:]}"
    later = [kind for *_, kind in proxy.seen[before + given[0] + 1 :]]
    return "retry" if later else "ok"


# Kubernetes API server -----------------------------------------------------------------------------------------------


def kube_driver(name: str, proxy: FaultProxy, fault: Fault, api: Endpoint, node: str) -> str:
    """The Kubernetes rows: through the proxy in front of the real API server."""
    if name == "api_items":
        return through(proxy, fault, "/api/v1/nodes", "GET", lambda: gpu_nodes_of(api))
    if name == "gpu_workers":
        return through(proxy, fault, "/rayclusters/", "GET", lambda: scaling.gpu_workers(api))
    if name == "scale_to":
        return through(proxy, fault, "/rayclusters/", "PATCH", lambda: scaling.scale_to(api, 0, sleep=lambda s: None))
    if name == "_request":
        return through(proxy, fault, "/api/v1/nodes/", "PATCH", lambda: cordon.cordon(api, node))
    raise AssertionError(f"no driver for the Kubernetes row {name}")


def lease_driver(proxy: FaultProxy, fault: Fault, api: Endpoint, namespace: str) -> str:
    """The Lease row, through its public API: one renewing try (renew_once) after the fault on its read."""
    lease = Lease(api, f"guardian-{uuid.uuid4().hex[:8]}", namespace=namespace)
    proxy.faults.clear()
    fault.path, fault.method = "/leases/", "GET"
    proxy.inject(fault)
    lease.renew_once()
    return "kept" if lease.last_error else "ok"


# Google APIs and the metadata server ---------------------------------------------------------------------------------


def google_driver(name: str, proxy: FaultProxy, fault: Fault, apis: StandInGoogleApis) -> str:
    """The Managed Lustre and Cloud Storage rows, through the proxy in front of the Google APIs stand-in."""
    token = {"Authorization": "Bearer ya29.test"}
    transfers = RestTransfers(token, lambda line: None, api=f"{proxy.url}/v1", sleep=lambda s: None)
    objects = RestObjects(BUCKET, token, lambda line: None, f"{proxy.url}/storage/v1", f"{proxy.url}/upload/storage/v1",
                          sleep=lambda s: None)  # fmt: skip
    uri = f"gs://{BUCKET}/parked/data/checkpoints/run/"
    apis.lustre.operations.clear()
    if name == "RestTransfers._post":
        return through(proxy, fault, ":exportData", "POST", lambda: transfers.export_data(INSTANCE, "/run", uri))
    if name == "RestTransfers.get_operation":
        started = transfers.export_data(INSTANCE, "/run", uri)
        clock = Clock(0.0)
        wait = lambda: wait_for(transfers, started, "exporting /run", 600, lambda line: None, 1, clock, clock.sleep)  # noqa: E731
        return through(proxy, fault, "/operations/", "GET", wait)
    if name == "RestTransfers._page":
        return through(proxy, fault, "/operations", "GET", lambda: transfers.list_operations(INSTANCE))
    if name == "RestObjects._get":
        return through(proxy, fault, "/o", "GET", lambda: objects.names("parked/"))
    if name == "RestObjects.write_text":
        stored = objects.read("parked/marker.json")
        generation = stored.generation if stored else 0
        return through(proxy, fault, "/o", "POST", lambda: objects.write_text("parked/marker.json", "{}", generation))
    raise AssertionError(f"no driver for the Google row {name}")


def metadata_driver(proxy: FaultProxy, fault: Fault, url: str) -> str:
    """The metadata server row: metadata_credential through the proxy in front of the token stand-in."""
    path = url.split("127.0.0.1", 1)[1].split("/", 1)[1]
    return through(proxy, fault, "/token", "GET", lambda: google_token.metadata_credential(f"{proxy.url}/{path}"))


@pytest.fixture(scope="module")
def stand_ins(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Every in-process stand-in with a fault proxy in front of it, for the module."""
    from tests.incluster.test_google_token import TOKEN_PATH, MetadataServer

    with ExitStack() as stack:
        root = tmp_path_factory.mktemp("google")
        (root / "lustre" / "run").mkdir(parents=True)
        (root / "lustre" / "run" / "data.pt").write_text("data")
        apis = stack.enter_context(google_apis(stand_in_apis(root, reads_to_done=1)))
        metadata = ThreadingHTTPServer(("127.0.0.1", 0), MetadataServer)
        threading.Thread(target=metadata.serve_forever, daemon=True).start()
        stack.callback(metadata.server_close)
        stack.callback(metadata.shutdown)
        proxies = {
            "google": stack.enter_context(fault_proxy(apis.url)),
            "metadata": stack.enter_context(fault_proxy(f"http://127.0.0.1:{metadata.server_address[1]}")),
        }
        for proxy in proxies.values():
            proxy.hold = 2 * READ_SECONDS
        yield {"proxies": proxies, "apis": apis, "metadata_server": MetadataServer,
               "metadata_url": f"http://127.0.0.1:{metadata.server_address[1]}{TOKEN_PATH}"}  # fmt: skip


@pytest.fixture(scope="module")
def lease_api(control_plane) -> Iterator[dict[str, Any]]:
    """The Lease row's boundary: the real API server of the test run (tests/conftest.py `control_plane`) with a fault
    proxy in front of it, the guardian's ServiceAccount and Role (tests/support/control_plane.py guardian_in) in a
    namespace of the module's own."""
    namespace = f"t-{uuid.uuid4().hex[:12]}"
    control_plane.ok(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    token = cp.guardian_in(control_plane, namespace)
    with fault_proxy(control_plane.address, str(control_plane.ca)) as proxy:
        proxy.hold = 2 * READ_SECONDS
        yield {"proxy": proxy, "namespace": namespace, "api": Endpoint(proxy.url, {"Authorization": f"Bearer {token}"})}
    control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")


@pytest.fixture(scope="module")
def kube_api(control_plane) -> Iterator[dict[str, Any]]:
    """The Kubernetes rows' boundary: the real API server of the test run with a fault proxy in front of it that moves
    the stack's namespace (which the scaling code always uses) to one of the module's own, where the stack's RayCluster
    (suspended: no pods) stands; a node of the module's own (no GPU label: no other test's GPU node list sees it) is
    the one cordoned. The calls are the guardian's own ServiceAccount's, its rendered Role and ClusterRole with
    cordoning bound in that namespace (tests/support/control_plane.py guardian_in), so RBAC judges each."""
    from core import names

    namespace = f"t-{uuid.uuid4().hex[:12]}"
    control_plane.ok(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    node = f"{namespace}-node"
    control_plane.ok("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": node}})
    try:
        made.create_raycluster(control_plane, namespace)
        token = cp.guardian_in(control_plane, namespace, cordon=True)
        with fault_proxy(control_plane.address, str(control_plane.ca), (names.NAMESPACE, namespace)) as proxy:
            proxy.hold = 2 * READ_SECONDS
            yield {"proxy": proxy, "api": Endpoint(proxy.url, control_plane.headers(token)), "node": node}
    finally:
        control_plane.request("DELETE", f"/api/v1/nodes/{node}")
        control_plane.request("DELETE", f"/api/v1/namespaces/{namespace}")


BODIES = {"kube": KUBE_STATUS, "lease": KUBE_STATUS, "google": GOOGLE_ERROR,
          "metadata": "injected"}  # fmt: skip


def boundary_of(path: str) -> str:
    """Which stand-in (or the Ray head) a call path's row meets."""
    if path.startswith("incluster/lease.py"):
        return "lease"
    if path.startswith(("incluster/scaling.py", "incluster/preflight/cordon.py")) or path.endswith(":api_items"):
        return "kube"
    if path.startswith("incluster/lustre_transfer.py"):
        return "google"
    if path.startswith("incluster/google_token.py"):
        return "metadata"
    if path.startswith("incluster/wandb_summary.py"):
        return "wandb"
    return "ray"


STAND_IN_CELLS = [(path, fault) for path in ROWS for fault in FAULTS if boundary_of(path) not in ("ray", "wandb")]


def cell_id(path: str, fault: str) -> str:
    """A cell's test id: its function and fault."""
    return f"{path.split(':')[1]}-{fault}"


@pytest.mark.parametrize(("path", "fault"), STAND_IN_CELLS, ids=[cell_id(*cell) for cell in STAND_IN_CELLS])
def test_each_call_path_to_a_stand_in_does_what_the_matrix_says_for_each_fault(
    path: str, fault: str, monkeypatch: pytest.MonkeyPatch, stand_ins: dict[str, Any], request: pytest.FixtureRequest
) -> None:
    """Fault injected at the boundary by the proxy in front of the stand-in (the Lease's: of the real API server), as
    the parameters name it."""
    shrink_deadlines(monkeypatch, READ_SECONDS)
    expected = ROWS[path][fault]
    boundary = boundary_of(path)
    injected = fault_of(fault, BODIES[boundary], "text/plain" if boundary == "metadata" else "application/json")
    name = path.split(":", 1)[1]
    if boundary == "lease":
        lease_api = request.getfixturevalue("lease_api")  # the real API server: only these cells wait for it
        observed = lease_driver(lease_api["proxy"], injected, lease_api["api"], lease_api["namespace"])
    elif boundary == "kube":
        kube_api = request.getfixturevalue("kube_api")  # the real API server: only these cells wait for it
        observed = kube_driver(name, kube_api["proxy"], injected, kube_api["api"], kube_api["node"])
    elif boundary == "google":
        observed = google_driver(name, stand_ins["proxies"][boundary], injected, stand_ins["apis"])
    else:
        token = json.dumps({"access_token": "ya29.m", "expires_in": 3599, "token_type": "Bearer"})
        stand_ins["metadata_server"].answers = [(200, token)] * 3
        observed = metadata_driver(stand_ins["proxies"][boundary], injected, stand_ins["metadata_url"])
    assert observed == expected, f"{path} under {fault}: the matrix says {expected}, the code does {observed}"


# The Ray head --------------------------------------------------------------------------------------------------------

RAY_ERROR = (
    "Traceback (most recent call last):\n"
    '  File "ray/dashboard/modules/job/job_head.py", line 409, in submit_job\n'
    "ValueError: injected by the fault proxy\n"
)
"""What the Ray dashboard answers when a handler fails: the traceback as text/plain (ray 2.60.0
python/ray/dashboard/modules/job/job_head.py, installed: submit_job L428-438, `Response(text=traceback.format_exc(),
status=...)`; the package handlers L372-375 and L401-404)."""

SETTLE_SECONDS = 60.0
"""The longest the module's two jobs take to reach the state the cells need (a job supervisor and a driver each)."""


class LookedAgain(Exception):
    """The guardian's loop went on to another look after its pause: the driver ends it there."""


class RayHeadSide:
    """The session's real Ray head behind a fault proxy: a Jobs API client through the proxy, a job that ended (the
    reading job as incluster/run_files.py submits it, its deletion left to the `_delete` cells), a job still RUNNING,
    and the run, the export and the preflight of one stack as the project builds their submissions."""

    def __init__(self, proxy: FaultProxy, root: Path, ended: str, live: Any) -> None:
        config = config_of("dev", stack="fault-matrix")
        spec = training_spec(config)
        self.proxy, self.ended, self.live = proxy, ended, live
        self.stack = config.stack
        self.submission = on_data_root(submission_of(config, spec, 1), str(root))
        self.run = self.submission["metadata"]["run"]
        self.run_dir = Path(run_dir_of(self.submission))
        self.export = on_data_root(export_submission(config, spec, step=10), str(root))
        self.preflight = preflight_settings(config, "gpu", str(self.run_dir / "preflight"), stamp_now())
        guardian = settings_from(guardian_settings(config), "fault-matrix")
        self.guardian: Settings = replace(guardian, submission=self.submission)
        self.client = job_client.connect(Endpoint(proxy.url))


def settled(client: Any, submission_id: str, wanted: tuple[str, ...]) -> None:
    """Wait (at most SETTLE_SECONDS) until the job's status is one of `wanted`."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while (status := job_client.status_of(client, submission_id)) not in wanted:
        assert time.monotonic() < deadline, f"{submission_id} is {status} after {SETTLE_SECONDS:g} s"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def ray_side(ray_head: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayHeadSide]:
    """The session's Ray head (tests/ray_fixtures.py, shared with the other Ray-head files of this test process) with
    a fault proxy in front of its dashboard, one ended and one running job for the cells that act on a job; both are
    ended and deleted after the module."""
    root = tmp_path_factory.mktemp("ray-run")
    direct = job_client.connect(job_client.endpoint_for_address(ray_head))
    run_dir = root / "reader"
    run_dir.mkdir()
    (run_dir / "attempts.jsonl").write_text("")
    ended = direct.submit_job(
        entrypoint=run_files.reader_entrypoint(str(run_dir), ["attempts.jsonl"]),
        submission_id=f"grpo-gke-run-files-{uuid.uuid4().hex[:12]}",
        metadata=dict(run_files.READER_METADATA),
    )
    done = root / "done"
    # RUNNING until the module is over (or 10 min): it then ends by itself, faster than a stop (2 s measured).
    wait = f"i=0; until [ -e {shlex.quote(str(done))} ] || [ $i -ge 6000 ]; do sleep 0.1; i=$((i+1)); done"
    live = direct.submit_job(entrypoint=shlex.join(["sh", "-c", wait]), metadata={"grpo-gke": "fault-matrix"})
    try:
        settled(direct, ended, ("SUCCEEDED",))
        settled(direct, live, ("RUNNING",))
        with fault_proxy(ray_head) as proxy:
            proxy.hold = 2 * READ_SECONDS
            yield RayHeadSide(proxy, root, ended, direct.get_job_info(live))
    finally:
        done.touch()
        settled(direct, live, job_client.TERMINAL)
        for submission_id in (ended, live):
            if submission_id in {job.submission_id for job in direct.list_jobs()}:
                direct.delete_job(submission_id)


def guardian_driver(proxy: FaultProxy, fault: Fault, settings: Settings) -> str:
    """The guardian's row, through its loop (Guardian.run): `progress` when the fault on its first look is one progress
    line ending in its pause and the loop looks again (and finds the run waiting for its first attempt); what escaped
    the loop otherwise."""
    lines: list[str] = []
    guardian = Guardian(settings, Endpoint(proxy.url), Hooks(), lines.append)
    proxy.faults.clear()
    fault.path, fault.method = "/api/jobs/", "GET"
    proxy.inject(fault)
    before = len(proxy.seen)
    looks: list[float] = []

    def sleep(seconds: float) -> None:
        looks.append(seconds)
        if len(looks) == 2:
            raise LookedAgain

    try:
        guardian.run(poll=5, sleep=sleep)
    except LookedAgain:
        pass
    except Exception as error:  # noqa: BLE001 - what escapes the loop is the cell's outcome (a traceback in the pod)
        return f"raised {type(error).__name__}: {error}"
    assert any(kind is not None for *_, kind in proxy.seen[before:]), f"no request met the fault: {proxy.seen[before:]}"
    first = lines[0]
    assert "\n" not in first, repr(first)
    waiting = f"{settings.run}: no attempt of {settings.run} yet"
    if looks == [5, 5] and len(lines) == 2 and first.endswith("; trying again in 5 s") and lines[1].startswith(waiting):
        return "progress"
    return f"looks {looks}, lines {lines}"


def ray_driver(name: str, side: RayHeadSide) -> Callable[[FaultProxy, Fault], str]:
    """The Ray rows: each call path's first request to the head, through the proxy in front of it."""
    client, ended, live = side.client, side.ended, side.live.submission_id
    calls: dict[str, tuple[str, str, Callable[[], Any]]] = {
        "connect": ("/api/version", "GET", lambda: job_client.connect(Endpoint(side.proxy.url))),
        "attempts": ("/api/jobs/", "GET", lambda: job_client.attempts(client, side.run)),
        "stack_jobs": ("/api/jobs/", "GET", lambda: job_client.stack_jobs(client, side.stack)),
        "status_of": (f"/api/jobs/{ended}", "GET", lambda: job_client.status_of(client, ended)),
        "stop_jobs": (f"/api/jobs/{live}/stop", "POST", lambda: job_client.stop_jobs(client, [side.live])),
        "last_lines": (f"/api/jobs/{ended}/logs", "GET", lambda: job_client.last_lines(client, ended)),
        "follow": (
            f"/api/jobs/{ended}",
            "GET",
            lambda: job_client.follow(client, ended, "verl", None, lambda line: None, poll=0.05),
        ),
        "_through_head": (
            "/api/jobs/",
            "POST",
            lambda: run_files.read_run_files(client, str(side.run_dir), ["attempts.jsonl"], poll=0.05),
        ),
        "_delete": (f"/api/jobs/{ended}", "DELETE", lambda: run_files._delete(client, ended)),
        "ensure_run": (
            "/api/jobs/",
            "POST",
            lambda: run_submission.ensure_run(client, side.submission, lambda: run_submission.local_view(side.run_dir)),
        ),
        "submit_export": ("/api/jobs/", "POST", lambda: submit_export(client, side.export)),
        "run_preflight": ("/api/jobs/", "POST", lambda: run_preflight(client, side.preflight, lambda line: None, 0.05)),
        "ray_nodes": ("/api/v0/nodes", "GET", lambda: readiness.ray_nodes(Endpoint(side.proxy.url))),
    }
    if name == "Guardian.observe":
        return lambda proxy, fault: guardian_driver(proxy, fault, side.guardian)
    assert name in calls, f"no driver for the Ray row {name}"
    path, method, call = calls[name]
    return lambda proxy, fault: through(proxy, fault, path, method, call)


RAY_CELLS = [(path, fault) for path in ROWS for fault in FAULTS if boundary_of(path) == "ray"]


@pytest.mark.parametrize(("path", "fault"), RAY_CELLS, ids=[cell_id(*cell) for cell in RAY_CELLS])
def test_each_call_path_to_the_ray_head_does_what_the_matrix_says_for_each_fault(
    path: str, fault: str, monkeypatch: pytest.MonkeyPatch, ray_side: RayHeadSide
) -> None:
    """Fault injected at the boundary by the proxy in front of the real Ray head's dashboard, as the parameters name
    it; every other request reaches the head."""
    shrink_deadlines(monkeypatch, READ_SECONDS)
    expected = ROWS[path][fault]
    observed = ray_driver(path.split(":", 1)[1], ray_side)(ray_side.proxy, fault_of(fault, RAY_ERROR, "text/plain"))
    assert observed == expected, f"{path} under {fault}: the matrix says {expected}, the code does {observed}"


# W&B's GraphQL API ---------------------------------------------------------------------------------------------------

WANDB_ERROR = json.dumps({"errors": [{"message": "injected by the fault proxy"}]})
"""GraphQL's error shape (spec.graphql.org/October2021 "Response Format"), assumed for W&B's error statuses."""

WANDB_CELLS = [(path, fault) for path in ROWS for fault in FAULTS if boundary_of(path) == "wandb"]


@pytest.mark.parametrize(("path", "fault"), WANDB_CELLS, ids=[cell_id(*cell) for cell in WANDB_CELLS])
def test_each_call_path_to_w_and_b_does_what_the_matrix_says_for_each_fault(
    path: str, fault: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Fault injected at the boundary by the proxy in front of the W&B stand-in (tests/support/wandb_stand_in.py), on
    the summary's read: `retry` when the summary was written after it, `error` when the write raised its one line."""
    from incluster import wandb_summary
    from tests.support.wandb_stand_in import StandInWandb, wandb_stand_in

    monkeypatch.setattr(wandb_summary, "READ_SECONDS", READ_SECONDS)
    run = ("team", "grpo", "run-attempt-1")
    state = StandInWandb(summaries={run: {"_step": 3}})
    with wandb_stand_in(state) as url, fault_proxy(url) as proxy:
        proxy.hold = 2 * READ_SECONDS
        proxy.inject(replace(fault_of(fault, WANDB_ERROR), path="/graphql", method="POST"))
        clock = Clock(0.0)
        target = wandb_summary.WandbTarget("grpo", "team", state.api_key, proxy.url)
        try:
            wandb_summary.write_summary(target, run[2], {"grpo/steps_left": 1}, lambda line: None, 60.0,
                                        sleep=clock.sleep, clock=clock)  # fmt: skip
            observed = "retry" if state.summaries[run] == {"_step": 3, "grpo/steps_left": 1} else "ok"
        except wandb_summary.SummaryError as error:
            one_line(error)
            observed = "error"
        assert proxy.faulted() == 1
    expected = ROWS[path][fault]
    assert observed == expected, f"{path} under {fault}: the matrix says {expected}, the code does {observed}"
