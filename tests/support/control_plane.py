"""A real Kubernetes control plane on loopback ports for the tests: etcd, kube-apiserver, kube-scheduler and
kube-controller-manager built from the pinned sources (controlplane/versions.env, controlplane/build.sh), KubeRay's
operator, and kwok for the nodes and the kubelet's side of pods.

All the components run in one process group of their own, and are ended by it. One control plane serves the whole
test run, every test process of it (`shared`): the first process that asks starts it, under a file lock in the
session's temp dir, and writes its address, CA and process group there; the others read that; the process that owns
the session (the xdist controller, or the lone pytest) ends the group by its id (`stop_shared`). The API server
trusts one static admin token (system:masters) for the harness and the components; every other identity is a
ServiceAccount whose token the harness asks the API server for (TokenRequest), so RBAC judges its calls as it judges
a pod's.

GKE's CRDs the stack relies on are installed from their published schemas: KubeRay's from its operator's module
(config/crd/bases), Network and GKENetworkParamSet from ../shared/k8s-schemas (GoogleCloudPlatform/gke-networking-api
config/crds), ComputeClass from tests/workloads/schemas/ (made structural: see computeclass_crd).
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import yaml

from plan.harness import REPO_ROOT

BUILD_SCRIPT = REPO_ROOT / "controlplane" / "build.sh"
"""Builds the pinned binaries into the per-user cache and names their folders (`--dirs`)."""

ADMIN_TOKEN = "grpo-gke-tests-admin"
"""The harness's and the components' bearer token: user `admin` in group system:masters (--token-auth-file)."""

START_DEADLINE_SECONDS = 60.0
"""How long one component may take to answer after its start."""

REQUEST_DEADLINE_SECONDS = 30.0
"""Deadline of one request to the API server."""

APPLY_PATCH = "application/apply-patch+yaml"
"""Content type of a Server-Side Apply request (Kubernetes API concepts, "Server-Side Apply")."""


class NotBuilt(Exception):
    """The control plane's binaries are not in the cache (or Go is absent); the message says what to run."""


def component_dirs() -> dict[str, Path]:
    """Where controlplane/build.sh keeps each component (kubernetes, kuberay, kwok); NotBuilt without Go."""
    try:
        result = subprocess.run([str(BUILD_SCRIPT), "--dirs"], capture_output=True, text=True, timeout=60)
    except FileNotFoundError as error:
        raise NotBuilt(f"cannot run {BUILD_SCRIPT}: {error}") from None
    if result.returncode != 0:
        raise NotBuilt(result.stderr.strip() or f"{BUILD_SCRIPT} --dirs exited {result.returncode}")
    return {name: Path(path) for name, path in (line.split("=", 1) for line in result.stdout.split())}


BINARIES = {
    "kubernetes": ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager"),
    "kuberay": ("ray-operator",),
    "kwok": ("kwok",),
}
"""The binaries of each component folder."""


def binaries() -> dict[str, Path]:
    """Each binary's path; NotBuilt naming the command that builds the missing ones."""
    dirs = component_dirs()
    found = {name: dirs[part] / "bin" / name for part, names in BINARIES.items() for name in names}
    missing = sorted(name for name, path in found.items() if not os.access(path, os.X_OK))
    if missing:
        raise NotBuilt(f"{', '.join(missing)} not built: run controlplane/build.sh (or make test)")
    return found


def free_port() -> int:
    """A loopback TCP port nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class Process:
    """One component, started in the control plane's process group, its output in a log file."""

    name: str
    """The component's name (its log is <workdir>/<name>.log)."""
    popen: subprocess.Popen[bytes]
    """The running process."""
    log: Path
    """Its stdout and stderr."""

    def tail(self, lines: int = 30) -> str:
        """The last lines of its log."""
        return tail_of(self.log, lines)


def tail_of(log: Path, lines: int) -> str:
    """The last `lines` lines of a log file."""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def group_alive(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (a zombie, ended but not yet reaped, does not count)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            # pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its closing parenthesis.
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


STOP_GRACE_SECONDS = 10.0
"""How long the components have to exit after SIGTERM before SIGKILL."""


def _group_ended(pgid: int, children: list[subprocess.Popen[bytes]], deadline: float) -> bool:
    ends = time.monotonic() + deadline
    while group_alive(pgid):
        for child in children:
            child.poll()  # reaps a child that exited
        if time.monotonic() > ends:
            return False
        time.sleep(0.1)
    return True


def stop_group(pgid: int, children: list[subprocess.Popen[bytes]]) -> None:
    """End process group `pgid` by its id: SIGTERM, SIGKILL after STOP_GRACE_SECONDS; `children` (those of its
    processes this process started) reaped."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            break
        if _group_ended(pgid, children, STOP_GRACE_SECONDS):
            break
    for child in children:
        child.poll()


@dataclass
class ControlPlane:
    """A running control plane: its API server's address and the admin's credentials, and its processes."""

    address: str
    """https://127.0.0.1:<port> of kube-apiserver."""
    ca: Path
    """The API server's self-signed serving certificate (also the CA clients verify it with)."""
    workdir: Path
    """Logs, the kubeconfig, etcd's data."""
    pgid: int = 0
    """The components' process group (0 until the first is started)."""
    processes: list[Process] = field(default_factory=list)
    """The components this test process started, in start order (none where another process started them)."""
    _resources: dict[tuple[str, str], tuple[str, bool]] = field(default_factory=dict)

    def headers(self, token: str = ADMIN_TOKEN) -> dict[str, str]:
        """Request headers of a bearer `token` (the admin's by default)."""
        return {"Authorization": f"Bearer {token}"}

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        params: dict[str, str] | None = None,
        content_type: str = "application/json",
        token: str = ADMIN_TOKEN,
    ) -> requests.Response:
        """One request to the API server within REQUEST_DEADLINE_SECONDS; the answer whatever its status."""
        data = None if body is None else (body if isinstance(body, str) else json.dumps(body))
        return requests.request(
            method,
            f"{self.address}{path}",
            data=data,
            params=params,
            headers={**self.headers(token), "Content-Type": content_type},
            verify=str(self.ca),
            timeout=REQUEST_DEADLINE_SECONDS,
        )

    def ok(self, method: str, path: str, body: Any = None, **options: Any) -> dict[str, Any]:
        """`request`, asserting a 2xx answer; its JSON body."""
        answer = self.request(method, path, body, **options)
        assert answer.status_code < 300, f"{method} {path}: HTTP {answer.status_code} {answer.text[:2000]}"
        return answer.json()

    def resource(self, api_version: str, kind: str) -> tuple[str, bool]:
        """(plural resource name, namespaced) of a kind, from the API server's discovery (as Pulumi's provider maps
        kinds to resources)."""
        key = (api_version, kind)
        if key not in self._resources:
            base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            for item in self.ok("GET", base)["resources"]:
                if "/" not in item["name"]:
                    self._resources[(api_version, item["kind"])] = (item["name"], item["namespaced"])
        return self._resources[key]

    def path_of(self, obj: dict[str, Any], name: str | None = None) -> str:
        """The API path of an object (of its collection with `name` "")."""
        api_version, kind = obj["apiVersion"], obj["kind"]
        plural, namespaced = self.resource(api_version, kind)
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        namespace = (obj.get("metadata") or {}).get("namespace")
        where = f"{base}/namespaces/{namespace}/{plural}" if namespaced else f"{base}/{plural}"
        name = obj["metadata"]["name"] if name is None else name
        return f"{where}/{name}" if name else where

    def apply(
        self, obj: dict[str, Any], field_manager: str, *, force: bool = False, token: str = ADMIN_TOKEN
    ) -> requests.Response:
        """A Server-Side Apply of `obj` as `field_manager` (force: take the fields other managers own)."""
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return self.request("PATCH", self.path_of(obj), obj, params=params, content_type=APPLY_PATCH, token=token)

    def get(self, path: str, token: str = ADMIN_TOKEN) -> dict[str, Any] | None:
        """The object at `path`; None when absent (404)."""
        answer = self.request("GET", path, token=token)
        if answer.status_code == 404:
            return None
        assert answer.status_code == 200, f"GET {path}: HTTP {answer.status_code} {answer.text[:500]}"
        return answer.json()

    def wait_for(self, what: str, check: Any, deadline: float = 60.0, every: float = 0.2) -> Any:
        """Poll `check()` until it returns a truthy value (returned) or `deadline` seconds pass (AssertionError
        naming `what`, with the last value and the components' log tails)."""
        ends, value = time.monotonic() + deadline, None
        while time.monotonic() < ends:
            value = check()
            if value:
                return value
            time.sleep(every)
        raise AssertionError(f"{what}: not within {deadline:g} s (last: {value!r})\n{self.log_tails()}")

    def log_tails(self, lines: int = 8) -> str:
        """The last lines of every component's log."""
        logs = sorted(self.workdir.glob("*.log"))
        return "\n".join(f"--- {log.stem}\n{tail_of(log, lines)}" for log in logs)

    def service_account_token(self, namespace: str, name: str) -> str:
        """A bearer token of ServiceAccount `namespace/name` from the API server (TokenRequest), as the kubelet
        mounts one in a pod of that account."""
        path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}
        return self.ok("POST", path, body)["status"]["token"]

    def record(self) -> dict[str, Any]:
        """What another test process needs to use it (`from_record`) and to end it (`stop_group`)."""
        return {"address": self.address, "ca": str(self.ca), "workdir": str(self.workdir), "pgid": self.pgid}

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> ControlPlane:
        """The control plane another test process started, from its `record`."""
        return cls(record["address"], Path(record["ca"]), Path(record["workdir"]), int(record["pgid"]))

    def stop(self) -> None:
        """End the components' process group (those this process started reaped)."""
        if self.pgid:
            stop_group(self.pgid, [process.popen for process in self.processes])


RECORD = "control-plane.json"
"""The shared control plane's record in its folder: its `ControlPlane.record`, or {"error": why it did not start}."""


class NotStarted(Exception):
    """The shared control plane failed to start (in this test process or another); the message says why."""


_STARTED: list[ControlPlane] = []
"""The shared control plane, where this test process started it (its components are this process's children)."""


def shared(folder: Path, starter: Callable[[Path], ControlPlane]) -> ControlPlane:
    """The test run's one control plane: the first test process to ask starts it (`starter(folder / "run")`) under a
    lock in `folder` (the session's temp dir, one for all its test processes) and writes its RECORD there; the
    others wait for the lock and read it. NotStarted when it failed to start, here or in another process."""
    folder.mkdir(parents=True, exist_ok=True)
    kept = folder / RECORD
    with open(folder / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not kept.exists():
            try:
                plane = starter(folder / "run")
            except Exception as error:
                kept.write_text(json.dumps({"error": f"{type(error).__name__}: {error}"}))
                raise NotStarted(str(error)) from error
            _STARTED.append(plane)
            kept.write_text(json.dumps(plane.record()))
            return plane
    record = json.loads(kept.read_text())
    if "error" in record:
        raise NotStarted(f"it failed to start in another test process: {record['error']}")
    return _STARTED[0] if _STARTED else ControlPlane.from_record(record)


def stop_shared(folder: Path) -> None:
    """End the test run's control plane recorded in `folder`, if one was started: by its process group's id."""
    kept = folder / RECORD
    if not kept.exists():
        return
    record = json.loads(kept.read_text())
    if _STARTED:
        _STARTED.pop().stop()
    elif record.get("pgid"):
        stop_group(int(record["pgid"]), [])
    kept.write_text(json.dumps({"error": "it was stopped at the end of the test run"}))


def _start(plane: ControlPlane, name: str, argv: list[str], env: dict[str, str] | None = None) -> Process:
    log = plane.workdir / f"{name}.log"
    with open(log, "wb") as out:
        # The first component leads a new process group (outside the terminal's foreground group: a Ctrl-C reaches the
        # test process, whose teardown ends the group); the others join it.
        popen = subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, process_group=plane.pgid,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
    plane.pgid = plane.pgid or popen.pid
    process = Process(name, popen, log)
    plane.processes.append(process)
    return process


def _alive(process: Process) -> None:
    if process.popen.poll() is not None:
        raise AssertionError(f"{process.name} exited {process.popen.returncode}:\n{process.tail()}")


def _answers(url: str, headers: dict[str, str] | None = None, verify: Any = False) -> bool:
    try:
        return requests.get(url, headers=headers, verify=verify, timeout=2).status_code == 200
    except requests.RequestException:
        return False


def _wait_answer(process: Process, url: str, **options: Any) -> None:
    ends = time.monotonic() + START_DEADLINE_SECONDS
    while not _answers(url, **options):
        _alive(process)
        if time.monotonic() > ends:
            raise AssertionError(f"{process.name} did not answer {url} within {START_DEADLINE_SECONDS:g} s")
        time.sleep(0.1)


def _kubeconfig(plane: ControlPlane) -> Path:
    path = plane.workdir / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "tests", "cluster": {"server": plane.address, "certificate-authority": str(plane.ca)}}],
        "users": [{"name": "admin", "user": {"token": ADMIN_TOKEN}}],
        "contexts": [{"name": "tests", "context": {"cluster": "tests", "user": "admin"}}],
        "current-context": "tests",
    }
    path.write_text(yaml.safe_dump(config))
    return path


def start(workdir: Path, bins: dict[str, Path], crds: list[dict[str, Any]], stages: Path) -> ControlPlane:
    """Start etcd, kube-apiserver, the CRDs, kube-controller-manager, kube-scheduler, kwok and KubeRay's operator;
    return once the API server answers and the CRDs are established. On failure everything started is ended."""
    workdir.mkdir(parents=True, exist_ok=True)
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    plane = ControlPlane(f"https://127.0.0.1:{api_port}", workdir / "certs" / "apiserver.crt", workdir)
    try:
        _start_core(plane, bins, etcd_port, peer_port, api_port)
        install_crds(plane, crds)
        _start_controllers(plane, bins, stages)
    except BaseException:
        plane.stop()
        raise
    return plane


def start_with_crds(workdir: Path, shared: Path, computeclass_schema: Path) -> ControlPlane:
    """`start` with the CRDs a GKE cluster has for the stack: KubeRay's from its operator's manifests
    (open_unless_applied), GKE's networking ones from `shared` (../shared), ComputeClass from `computeclass_schema`."""
    bins, dirs = binaries(), component_dirs()
    crds = [*map(open_unless_applied, yaml_documents_of(dirs["kuberay"] / "crd")), *gke_networking_crds(shared)]
    crds.append(computeclass_crd(computeclass_schema))
    for attempt in range(1, PORT_TRIES + 1):
        try:
            return start(workdir / f"try-{attempt}", bins, crds, dirs["kwok"] / "stages")
        except AssertionError as error:
            if "address already in use" not in str(error) or attempt == PORT_TRIES:
                raise
    raise AssertionError("unreachable")


PORT_TRIES = 3
"""Starts tried when a component finds its port taken: free_port's port is free when asked, and another process on
this shared machine may bind it before the component does."""


def _start_core(plane: ControlPlane, bins: dict[str, Path], etcd_port: int, peer_port: int, api_port: int) -> None:
    workdir = plane.workdir
    etcd_url, peer_url = f"http://127.0.0.1:{etcd_port}", f"http://127.0.0.1:{peer_port}"
    etcd = _start(plane, "etcd", [
        str(bins["etcd"]), "--data-dir", str(workdir / "etcd"), "--listen-client-urls", etcd_url,
        "--advertise-client-urls", etcd_url, "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
        "--initial-cluster", f"default={peer_url}", "--unsafe-no-fsync", "--log-level", "warn",
    ])  # fmt: skip
    key = workdir / "service-account.key"
    subprocess.run(["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True, timeout=60)
    tokens = workdir / "tokens.csv"
    tokens.write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
    _wait_answer(etcd, f"{etcd_url}/health")
    apiserver = _start(plane, "kube-apiserver", [
        str(bins["kube-apiserver"]), "--etcd-servers", etcd_url, "--bind-address", "127.0.0.1",
        "--advertise-address", "127.0.0.1", "--secure-port", str(api_port), "--cert-dir", str(workdir / "certs"),
        "--token-auth-file", str(tokens), "--authorization-mode", "RBAC",
        "--service-account-issuer", "https://kubernetes.default.svc", "--service-account-key-file", str(key),
        "--service-account-signing-key-file", str(key), "--service-cluster-ip-range", "10.96.0.0/16",
        "--endpoint-reconciler-type", "none", "--allow-privileged",
    ])  # fmt: skip
    _wait_answer(apiserver, f"{plane.address}/readyz", headers=plane.headers())
    # The API server names its self-signed certificate after its bind address (<dir>/apiserver.crt).
    assert plane.ca.is_file(), f"no {plane.ca}"


def _start_controllers(plane: ControlPlane, bins: dict[str, Path], stages: Path) -> None:
    kubeconfig = str(_kubeconfig(plane))
    key = str(plane.workdir / "service-account.key")
    _start(plane, "kube-controller-manager", [
        str(bins["kube-controller-manager"]), "--kubeconfig", kubeconfig, "--leader-elect=false", "--secure-port=0",
        "--service-account-private-key-file", key, "--root-ca-file", str(plane.ca), "--use-service-account-credentials=false",
        # The node lifecycle controller sees a node whose kubelet stopped within seconds, not GKE's 50 s default.
        "--node-monitor-period=1s", "--node-monitor-grace-period=4s",
    ])  # fmt: skip
    _start(plane, "kube-scheduler", [
        str(bins["kube-scheduler"]), "--kubeconfig", kubeconfig, "--leader-elect=false", "--secure-port=0",
    ])  # fmt: skip
    stage_files = sorted(stages.glob("*.yaml"))
    _start(plane, "kwok", [
        str(bins["kwok"]), "--kubeconfig", kubeconfig, f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION}=fake",
        "--node-lease-duration-seconds=40", *[f"--config={path}" for path in stage_files],
    ])  # fmt: skip
    _start(plane, "ray-operator", [
        str(bins["ray-operator"]), "--metrics-addr=0", "--health-probe-bind-address=0", "--enable-leader-election=false",
    ], env={"KUBECONFIG": kubeconfig})  # fmt: skip
    time.sleep(0.5)
    for process in plane.processes:
        _alive(process)


KWOK_ANNOTATION = "kwok.x-k8s.io/node"
"""The annotation by which kwok manages a node (its value `fake`): a node without it is no kubelet's."""


def install_crds(plane: ControlPlane, crds: list[dict[str, Any]]) -> None:
    """Create the CRDs and wait until each is Established."""
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
    for crd in crds:
        plane.ok("POST", path, crd)

    def established() -> bool:
        for crd in crds:
            live = plane.get(f"{path}/{crd['metadata']['name']}") or {}
            conditions = (live.get("status") or {}).get("conditions") or []
            if not any(item["type"] == "Established" and item["status"] == "True" for item in conditions):
                return False
        return True

    plane.wait_for("the CRDs established", established, deadline=START_DEADLINE_SECONDS)


def yaml_documents(path: Path) -> Iterator[dict[str, Any]]:
    """The non-empty YAML documents of a file."""
    yield from (document for document in yaml.safe_load_all(path.read_text()) if document)


def crd_of(group: str, kind: str, plural: str, scope: str, schema: dict[str, Any], version: str = "v1") -> dict:
    """A CustomResourceDefinition of one served, stored version with `schema` as its openAPIV3Schema."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {"kind": kind, "plural": plural, "singular": kind.lower(), "listKind": f"{kind}List"},
            "versions": [{"name": version, "served": True, "storage": True, "schema": {"openAPIV3Schema": schema}}],
        },
    }


def gke_networking_crds(shared: Path) -> list[dict[str, Any]]:
    """GKE's Network and GKENetworkParamSet CRDs from ../shared/k8s-schemas (their openAPIV3Schema as
    GoogleCloudPlatform/gke-networking-api config/crds publishes it, descriptions stripped)."""
    data = json.loads((shared / "k8s-schemas" / "gke-networking-v1-crds.json").read_text())["crds"]
    crds = []
    for key, item in data.items():
        group, version, kind = key.rsplit("/", 2)
        crds.append(crd_of(group, kind, f"{kind.lower()}s", item["scope"], item["schema"], version))
    return crds


def _structural(schema: Any) -> Any:
    """A JSON Schema (draft 7) as a structural openAPIV3Schema: types, properties, items, required, enums and
    bounds kept; what a structural schema refuses (`$schema`, `$comment`, `additionalProperties: false`,
    `allOf`/`anyOf`/`oneOf`/`not` with their own types, `const`) dropped."""
    if isinstance(schema, list):
        return [_structural(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    kept = ("type", "properties", "items", "required", "enum", "minimum", "maximum", "minItems", "maxItems", "pattern")
    out = {key: _structural(value) for key, value in schema.items() if key in kept}
    if isinstance(out.get("properties"), dict):
        out["properties"] = {key: _structural(value) for key, value in schema["properties"].items()}
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = _structural(extra)
    return out


def computeclass_crd(schema_file: Path) -> dict[str, Any]:
    """GKE's ComputeClass CRD (cloud.google.com/v1, cluster-scoped) from the tests' strict JSON Schema of it, made
    structural (_structural): this API server checks its types, required keys and enums; the strict check (unknown
    fields, the CEL rules) stays tests/workloads/test_computeclass.py's."""
    schema = _structural(json.loads(schema_file.read_text()))
    schema["properties"].pop("apiVersion", None), schema["properties"].pop("kind", None)
    schema["properties"].pop("metadata", None)
    schema["required"] = [key for key in schema.get("required", []) if key not in ("apiVersion", "kind", "metadata")]
    return crd_of("cloud.google.com", "ComputeClass", "computeclasses", "Cluster", schema)


CPU_MACHINES = {"c2-standard-16": (16, 64), "e2-standard-8": (8, 32)}
"""vCPUs and memory (GiB) of the head pool's machine types (Compute Engine's compute-optimized machine table;
core/facts/platform.py HEAD_MIN_MEMORY_GIB's note: c2-standard-16 has 64 GiB; the first-run stack's e2-standard-8:
8.0 vCPUs, 32.0 GiB in the SkyPilot catalog's row, core/facts/prices.json's source)."""

MAX_PODS = 110
"""A GKE Standard node's default pod limit (GKE "Configure maximum Pods per node": 110)."""


def _quantities(vcpus: float, memory_gib: float, ephemeral_gib: float, gpus: int) -> dict[str, str]:
    found = {"cpu": f"{int(vcpus * 1000)}m", "memory": f"{int(memory_gib * 1024)}Mi", "pods": str(MAX_PODS)}
    found["ephemeral-storage"] = f"{int(ephemeral_gib)}Gi"
    if gpus:
        found["nvidia.com/gpu"] = str(gpus)
    return found


def node_status(machine_type: str, gpus: int) -> dict[str, Any]:
    """A node's capacity and allocatable as core/facts states them: the machine's vCPUs and memory (less the
    kernel's NODE_MEMORY_MARGIN), GKE's reservations (workloads/sizing.py, GKE "Plan node sizes") taken from
    allocatable, the local SSDs (else the boot disk) as ephemeral storage less the kubelet's 10% eviction threshold,
    `gpus` GPUs."""
    from core.facts.platform import GPU_MACHINES
    from core.facts.pods import LOCAL_SSD_GIB, NODE_MEMORY_MARGIN
    from workloads.sizing import gke_reserved_cpu, gke_reserved_memory_gib

    gpu_machine = next((item for item in GPU_MACHINES.values() if item.machine_type == machine_type), None)
    if gpu_machine is not None:
        vcpus, memory, ssd = gpu_machine.vcpus, gpu_machine.memory_gib, gpu_machine.local_ssd_count * LOCAL_SSD_GIB
        # A machine without local SSDs (the L4's g2-standard-8) keeps its ephemeral storage on the boot disk, as the
        # CPU machines below (GKE's default 100 GB; assumed from GKE's ephemeral storage docs, not read here).
        ssd = ssd or 100
    else:
        (vcpus, memory), ssd = CPU_MACHINES[machine_type], 100  # GKE's default 100 GB boot disk
    counted = memory * (1 - NODE_MEMORY_MARGIN)
    return {
        "capacity": _quantities(vcpus, counted, ssd, gpus),
        "allocatable": _quantities(
            vcpus - gke_reserved_cpu(vcpus), counted - gke_reserved_memory_gib(memory), ssd * 0.9, gpus
        ),
    }


GKE_TAINT_EFFECTS = {"NO_SCHEDULE": "NoSchedule", "PREFER_NO_SCHEDULE": "PreferNoSchedule", "NO_EXECUTE": "NoExecute"}
"""GKE's node pool taint effects (container API) as Kubernetes writes them on the node."""


def node_object(name: str, labels: dict[str, str], taints: list[dict[str, str]], status: dict[str, Any]) -> dict:
    """A Node kwok runs (KWOK_ANNOTATION), with its labels, taints, capacity and allocatable."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {KWOK_ANNOTATION: "fake"},
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                **labels,
            },
        },  # fmt: skip
        "spec": {"taints": taints},
        "status": status,
    }


def standard_nodes(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """The nodes GKE Standard makes for the plan's node pools (plan.json `gcp:container/nodePool:NodePool` inputs),
    each pool at its most nodes: the labels GKE puts on every node (cloud.google.com/gke-nodepool,
    node.kubernetes.io/instance-type, topology.kubernetes.io/zone and /region, cloud.google.com/gke-accelerator on
    a GPU pool: GKE "About node pools" and "GPUs in Standard node pools"), the pool's own labels and taints."""
    nodes = []
    for resource in plan["resources"]:
        if resource.get("type") != "gcp:container/nodePool:NodePool":
            continue
        pool = resource["inputs"]
        config = pool.get("nodeConfig") or {}
        accelerators = config.get("guestAccelerators") or []
        scaling = pool.get("autoscaling") or {}
        count = scaling.get("totalMaxNodeCount") or pool.get("nodeCount") or pool.get("initialNodeCount") or 1
        zone = (pool.get("nodeLocations") or [""])[0]
        labels = {
            "cloud.google.com/gke-nodepool": pool["name"],
            "node.kubernetes.io/instance-type": config["machineType"],
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": zone.rsplit("-", 1)[0],
            **(config.get("labels") or {}),
        }
        if accelerators:
            labels["cloud.google.com/gke-accelerator"] = accelerators[0]["type"]
        taints = [
            {"key": item["key"], "value": item["value"], "effect": GKE_TAINT_EFFECTS[item["effect"]]}
            for item in config.get("taints") or []
        ]
        gpus = sum(int(item["count"]) for item in accelerators)
        nodes += [
            node_object(f"{pool['name']}-{index}", labels, taints, node_status(config["machineType"], gpus))
            for index in range(int(count))
        ]
    return nodes


def autopilot_nodes(raycluster: dict[str, Any], machine_type: str) -> list[dict[str, Any]]:
    """The nodes GKE Autopilot makes for the RayCluster's pods: for each GPU worker, a node carrying the labels
    its nodeSelector asks for (Autopilot provisions a node to a pod's selectors: GKE "Deploy GPU workloads in
    Autopilot") and the GPU taint nvidia.com/gpu NoSchedule GKE puts on GPU nodes; and one general-purpose node
    for the head and the other pods."""
    group = raycluster["spec"]["workerGroupSpecs"][0]
    selector = group["template"]["spec"].get("nodeSelector") or {}
    taints = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    gpu_nodes = [
        node_object(f"gk3-gpu-{index}", selector, taints, node_status(machine_type, 8))
        for index in range(group["maxReplicas"])
    ]
    general = node_object("gk3-general-0", {}, [], node_status("c2-standard-16", 0))
    return [*gpu_nodes, general]


APPLIED_KUBERAY_KINDS = frozenset({"RayCluster"})
"""KubeRay's kinds the stack applies (workloads/raycluster.py): their CRDs keep the operator's published schema."""


def open_unless_applied(crd: dict[str, Any]) -> dict[str, Any]:
    """`crd` as installed here: whole when the stack applies its kind (APPLIED_KUBERAY_KINDS), else with an open
    schema (any object kept as sent). KubeRay's operator watches RayService and RayJob whatever a cluster holds
    (ray-operator v1.6.1 main.go L280-288 sets up both reconcilers unconditionally; RayCronJob's only behind its
    feature gate, L295), so their CRDs must exist for it to start; the stack and the tests create none, and their
    published schemas (1.0 MB and 1.4 MB of YAML, RayCronJob's 0.7 MB) took about a third of the control plane's
    start to establish (41 s against 26 s for the start, measured under the same load on 2026-12-07)."""
    if crd["spec"]["names"]["kind"] in APPLIED_KUBERAY_KINDS:
        return crd
    versions = [
        {**version, "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}}}
        for version in crd["spec"]["versions"]
    ]
    return {**crd, "spec": {**crd["spec"], "versions": versions}}


def yaml_documents_of(folder: Path) -> list[dict[str, Any]]:
    """The YAML documents of every *.yaml file of `folder`, by file name."""
    return [document for path in sorted(folder.glob("*.yaml")) for document in yaml_documents(path)]


def rules_of(role_args: Any) -> list[dict[str, Any]]:
    """The rules of a rendered Role or ClusterRole (pulumi-kubernetes PolicyRuleArgs) as the API server takes them."""
    rules = []
    for rule in role_args.rules:
        plain = {"apiGroups": rule.api_groups, "resources": rule.resources, "verbs": rule.verbs}
        rules.append({**plain, **({"resourceNames": rule.resource_names} if rule.resource_names else {})})
    return rules


def guardian_in(plane: ControlPlane, namespace: str, cordon: bool = False) -> str:
    """The guardian's ServiceAccount in `namespace`, with the Role and the ClusterRole the stack renders
    (jobs/guardian/objects.py render_role, render_cluster_role; cordoning only with `cordon`) bound to it as the stack
    binds them: the Role in `namespace`, the ClusterRole (the nodes are cluster-scoped) named after `namespace`, so
    tests of either process keep apart, applied server-side, so that a second call for the namespace sets its rules
    anew. Its token (TokenRequest), once RBAC allows it every rendered call (asked of the API server with a
    SelfSubjectAccessReview: the authorizer learns a new binding from its watch, within moments)."""
    from core import names
    from jobs.guardian.objects import render_cluster_role, render_role

    metadata = {"name": names.GUARDIAN, "namespace": namespace}
    rbac = "rbac.authorization.k8s.io/v1"
    account = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata}
    role = {"apiVersion": rbac, "kind": "Role", "metadata": metadata, "rules": rules_of(render_role(cordon))}
    subjects = [{"kind": "ServiceAccount", "name": names.GUARDIAN, "namespace": namespace}]
    binding = {"apiVersion": rbac, "kind": "RoleBinding", "metadata": metadata, "subjects": subjects,
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": names.GUARDIAN}}  # fmt: skip
    nodes_role = f"{names.GUARDIAN_NODES_ROLE}-{namespace}"
    cluster_rules = rules_of(render_cluster_role(cordon))
    cluster_role = {"apiVersion": rbac, "kind": "ClusterRole", "metadata": {"name": nodes_role}, "rules": cluster_rules}
    cluster_binding = {"apiVersion": rbac, "kind": "ClusterRoleBinding", "metadata": {"name": nodes_role},
                       "subjects": subjects,
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": nodes_role}}  # fmt: skip
    for obj in (account, role, binding, cluster_role, cluster_binding):
        answer = plane.apply(obj, "grpo-gke-tests", force=True)
        assert answer.ok, f"{obj['kind']} {obj['metadata']['name']}: {answer.status_code} {answer.text}"
    token = plane.service_account_token(namespace, names.GUARDIAN)
    asked = [(rule, namespace) for rule in role["rules"]] + [(rule, None) for rule in cluster_rules]
    wait_allowed(plane, token, asked, "the guardian its rendered calls")
    return token


def wait_allowed(plane: ControlPlane, token: str, asked: list[tuple[dict[str, Any], str | None]], what: str) -> None:
    """Wait until RBAC allows bearer `token` every call of each (rule, namespace or None for cluster scope) of
    `asked`, as the API server answers a SelfSubjectAccessReview of it (the authorizer learns a new binding from its
    watch, within moments)."""

    def allowed() -> bool:
        for rule, where in asked:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        attributes = {"group": group, "resource": resource, "verb": verb,
                                      "name": (rule.get("resourceNames") or [""])[0],
                                      **({"namespace": where} if where else {})}  # fmt: skip
                        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                                  "spec": {"resourceAttributes": attributes}}  # fmt: skip
                        path = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
                        answer = plane.request("POST", path, review, token=token)
                        if not (answer.ok and answer.json()["status"].get("allowed")):
                            return False
        return True

    plane.wait_for(f"RBAC allowing {what}", allowed, deadline=30, every=0.05)


def account_with_role(plane: ControlPlane, namespace: str, name: str, rules: list[dict[str, Any]]) -> str:
    """A ServiceAccount `name` in `namespace` with a Role of `rules` bound to it (a user whose rights the test
    chooses); its token (TokenRequest), once RBAC allows it every rule."""
    rbac = "rbac.authorization.k8s.io/v1"
    metadata = {"name": name, "namespace": namespace}
    subjects = [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    for obj in (
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": metadata},
        {"apiVersion": rbac, "kind": "Role", "metadata": metadata, "rules": rules},
        {"apiVersion": rbac, "kind": "RoleBinding", "metadata": metadata, "subjects": subjects,
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name}},
    ):  # fmt: skip
        answer = plane.apply(obj, "grpo-gke-tests", force=True)
        assert answer.ok, f"{obj['kind']} {name}: {answer.status_code} {answer.text}"
    token = plane.service_account_token(namespace, name)
    wait_allowed(plane, token, [(rule, namespace) for rule in rules], f"{namespace}/{name} its Role")
    return token
