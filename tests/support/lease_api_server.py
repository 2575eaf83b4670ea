"""A stand-in Kubernetes API server for Leases (coordination.k8s.io/v1), as the API server answers them.

Behaves as kubernetes/apiserver v0.36.3 pkg/registry/generic/registry/store.go does for Leases:

- GET of an absent Lease: 404 NotFound;
- POST (create) of a Lease that exists: 409 AlreadyExists (pkg/storage/errors/storage.go L61
  InterpretCreateError); a created object gets a fresh resourceVersion (201);
- PUT (update) without metadata.resourceVersion: 422 Invalid "must be specified for an update" (store.go L735-741;
  Leases allow no unconditional update: kubernetes/kubernetes pkg/registry/coordination/lease/strategy.go
  `AllowUnconditionalUpdate` false);
- PUT with a resourceVersion other than the stored one: 409 Conflict with store.go L263's OptimisticLockErrorMsg
  (store.go L743-744);
- PUT of an absent Lease creates it (strategy.go `AllowCreateOnUpdate` true; store.go L646-656);
- every successful write stores a new resourceVersion (etcd's revision: one counter for the server).

Any other path answers 404 (no Ray dashboard behind the service proxy here). Every request is recorded, and a
test can run `before_write` once, just before the next write is applied (another client writing in between).

Faults injected at the boundary, not the API server's answers: each entry of `faults` answers one request in place
of the stand-in, in order: "cut" (the headers promise the whole Lease, half of it comes, then the connection closes: a
connection cut mid-answer, as by an API server's restart or a proxy's reset) and "html" (200 with a text/html page:
what a proxy or load balancer in front of the API server answers in its place).
"""

from __future__ import annotations

import copy
import http.server
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

OPTIMISTIC_LOCK = "the object has been modified; please apply your changes to the latest version and try again"
"""kubernetes/apiserver v0.36.3 pkg/registry/generic/registry/store.go L263 OptimisticLockErrorMsg."""

PREFIX = "/apis/coordination.k8s.io/v1/namespaces/"


class LeaseStore:
    """The Leases the stand-in holds, by (namespace, name), and the requests it answered."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.revision = 100
        self.requests: list[tuple[str, str, dict[str, Any] | None]] = []
        self.before_write: Callable[[], None] | None = None
        self.faults: list[str] = []
        self.lock = threading.RLock()

    def put_directly(self, namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Store a Lease as another client's successful write would (a new resourceVersion)."""
        with self.lock:
            self.revision += 1
            lease = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": name, "namespace": namespace, "resourceVersion": str(self.revision)},
                "spec": copy.deepcopy(spec),
            }
            self.leases[(namespace, name)] = lease
            return copy.deepcopy(lease)

    def spec(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored Lease's spec, or None."""
        lease = self.leases.get((namespace, name))
        return copy.deepcopy(lease["spec"]) if lease else None


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


def _handler(store: LeaseStore) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _answer(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _fault(self) -> bool:
            """Answer the next injected fault in place of the stand-in; whether there was one."""
            with store.lock:
                fault = store.faults.pop(0) if store.faults else None
            if fault is None:
                return False
            store.requests.append((self.command, self.path, None))
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.close_connection = True
            if fault == "cut":
                data = json.dumps({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": {}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data[: len(data) // 2])
            else:
                page = b"<html><body><h1>Service Unavailable</h1></body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
            return True

        def _where(self) -> tuple[str, str] | None:
            """(namespace, name) of a Lease path; name "" for the collection; None for any other path."""
            if not self.path.startswith(PREFIX):
                return None
            parts = self.path[len(PREFIX) :].split("/")
            if len(parts) == 2 and parts[1] == "leases":
                return parts[0], ""
            if len(parts) == 3 and parts[1] == "leases":
                return parts[0], parts[2]
            return None

        def _body(self) -> dict[str, Any]:
            return json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")

        def do_GET(self) -> None:
            if self._fault():
                return
            where = self._where()
            store.requests.append(("GET", self.path, None))
            if where is None or not where[1]:
                self._answer(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            with store.lock:
                lease = store.leases.get(where)
                if lease is None:
                    self._answer(404, _status(404, "NotFound", f'leases.coordination.k8s.io "{where[1]}" not found'))
                else:
                    self._answer(200, lease)

        def _before_write(self) -> None:
            hook, store.before_write = store.before_write, None
            if hook is not None:
                hook()

        def do_POST(self) -> None:
            if self._fault():
                return
            where, body = self._where(), self._body()
            store.requests.append(("POST", self.path, body))
            if where is None or where[1]:
                self._answer(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            self._before_write()
            name = body["metadata"]["name"]
            with store.lock:
                if (where[0], name) in store.leases:
                    message = f'leases.coordination.k8s.io "{name}" already exists'
                    self._answer(409, _status(409, "AlreadyExists", message))
                    return
                self._answer(201, store.put_directly(where[0], name, body.get("spec") or {}))

        def do_PUT(self) -> None:
            if self._fault():
                return
            where, body = self._where(), self._body()
            store.requests.append(("PUT", self.path, body))
            if where is None or not where[1]:
                self._answer(404, _status(404, "NotFound", "the server could not find the requested resource"))
                return
            self._before_write()
            with store.lock:
                existing = store.leases.get(where)
                wanted = str((body.get("metadata") or {}).get("resourceVersion") or "")
                if existing is not None:
                    if not wanted:
                        message = f'Lease.coordination.k8s.io "{where[1]}" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update'
                        self._answer(422, _status(422, "Invalid", message))
                        return
                    if wanted != existing["metadata"]["resourceVersion"]:
                        message = f'Operation cannot be fulfilled on leases.coordination.k8s.io "{where[1]}": {OPTIMISTIC_LOCK}'
                        self._answer(409, _status(409, "Conflict", message))
                        return
                code = 200 if existing is not None else 201
                self._answer(code, store.put_directly(where[0], where[1], body.get("spec") or {}))

    return Handler


@contextmanager
def lease_api_server() -> Iterator[tuple[str, LeaseStore]]:
    """The stand-in on a free loopback port: (its base URL, its store)."""
    store = LeaseStore()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(store))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", store
    finally:
        server.shutdown()
        server.server_close()
