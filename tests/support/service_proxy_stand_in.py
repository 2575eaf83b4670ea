"""A stand-in API server on the loopback for the CLI's way into a cluster: the Ray dashboard through the API server's
service proxy, and the RayCluster object the GPU workers scale by.

- `/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy/<rest>` is forwarded, method, query and body, to a
  real local Ray head's dashboard as `<dashboard>/<rest>`, and its answer handed back: what the API server's proxy
  subresource does for a Service port (Kubernetes 1.33 `services/proxy`, the path incluster/endpoint.py
  service_proxy_url builds). GET, POST, PUT (the Jobs client uploads py_modules with PUT) and DELETE; a websocket
  upgrade (the Jobs client's log tail) becomes a byte tunnel, as the API server's upgrade-aware proxy passes one on
  (k8s.io/apimachinery pkg/util/proxy/upgradeaware.go). The Authorization header of each forwarded request is
  recorded, not checked.
- `/apis/ray.io/v1/namespaces/grpo/rayclusters/grpo` answers GET with the object it holds and applies a PATCH of
  type `application/json-patch+json` (RFC 6902 `test` and `replace`, tests/incluster/test_scaling.py
  apply_json_patch) to it, recording each patch.

Why a stand-in and not the real API server of tests/support/control_plane.py: there the service proxy reaches no Ray
dashboard (kwok's pods run no process and have no network), and the CLI's tests need a real Ray head behind that one
address. The RayCluster it serves sits beside the dashboard at that address for the CLI's scale-back; the guardian's
RayCluster reads and patches run against the real API server (tests/incluster/test_guardian_recovery.py,
tests/incluster/test_fault_matrix.py, tests/controlplane/).
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from incluster.endpoint import service_proxy_url
from incluster.scaling import raycluster_path
from tests.incluster.test_scaling import apply_json_patch

FORWARD_SECONDS = 30.0
"""Deadline of each forwarded request."""


@dataclass
class ProxyStandIn:
    """What the stand-in holds and was asked."""

    dashboard: str
    """The real Ray head's dashboard URL the proxy path forwards to."""
    raycluster: dict[str, Any]
    """The RayCluster object as the API server holds it."""
    patches: list[list[dict[str, Any]]] = field(default_factory=list)
    """Each JSON patch of the RayCluster, in order."""
    authorizations: list[str] = field(default_factory=list)
    """The Authorization header of each request forwarded to the dashboard, in order."""
    address: str = ""
    """Its base URL once started."""

    @property
    def dashboard_url(self) -> str:
        """The dashboard as the CLI reaches it through this stand-in."""
        return service_proxy_url(self.address)

    def replicas(self) -> int:
        """The GPU worker group's `replicas` as held now."""
        return self.raycluster["spec"]["workerGroupSpecs"][0]["replicas"]


def _handler(state: ProxyStandIn) -> type[BaseHTTPRequestHandler]:
    prefix = service_proxy_url("")

    class Handler(BaseHTTPRequestHandler):
        def _body(self) -> bytes:
            return self.rfile.read(int(self.headers.get("Content-Length") or 0))

        def _answer(self, status: int, payload: bytes, content_type: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _tunnel(self, rest: str) -> None:
            """An upgrade request (the Jobs client's websocket log tail) goes to the dashboard as it came, then the
            bytes flow both ways until either side closes, as the API server's proxy handles an upgrade."""
            target = urlsplit(state.dashboard)
            upstream = socket.create_connection((target.hostname, target.port), timeout=FORWARD_SECONDS)
            head = [f"GET {rest} HTTP/1.1", f"Host: {target.netloc}"]
            head += [f"{key}: {value}" for key, value in self.headers.items() if key.lower() != "host"]
            upstream.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
            upstream.settimeout(None)
            self.connection.settimeout(None)

            def pump(source: socket.socket, sink: socket.socket) -> None:
                with contextlib.suppress(OSError):
                    while chunk := source.recv(65536):
                        sink.sendall(chunk)
                with contextlib.suppress(OSError):
                    sink.shutdown(socket.SHUT_WR)

            back = threading.Thread(target=pump, args=(upstream, self.connection), daemon=True)
            back.start()
            pump(self.connection, upstream)
            back.join()
            upstream.close()
            self.close_connection = True

        def _forward(self, method: str) -> None:
            rest = self.path[len(prefix) :]
            state.authorizations.append(self.headers.get("Authorization", ""))
            if self.headers.get("Upgrade", "").lower() == "websocket":
                self._tunnel(rest)
                return
            request = urllib.request.Request(f"{state.dashboard}{rest}", data=self._body() or None, method=method)
            if self.headers.get("Content-Type"):
                request.add_header("Content-Type", self.headers["Content-Type"])
            try:
                with urllib.request.urlopen(request, timeout=FORWARD_SECONDS) as answer:
                    self._answer(answer.status, answer.read(), answer.headers.get("Content-Type", "text/plain"))
            except urllib.error.HTTPError as error:
                self._answer(error.code, error.read(), error.headers.get("Content-Type", "text/plain"))

        def _handle(self, method: str) -> None:
            if self.path.startswith(prefix):
                self._forward(method)
            elif self.path.split("?", 1)[0] == raycluster_path() and method == "GET":
                self._answer(200, json.dumps(state.raycluster).encode())
            elif self.path.split("?", 1)[0] == raycluster_path() and method == "PATCH":
                patch = json.loads(self._body())
                state.patches.append(patch)
                state.raycluster = apply_json_patch(state.raycluster, patch)
                self._answer(200, json.dumps(state.raycluster).encode())
            else:
                self._answer(404, json.dumps({"kind": "Status", "code": 404, "reason": "NotFound"}).encode())

        def do_GET(self) -> None:
            self._handle("GET")

        def do_POST(self) -> None:
            self._handle("POST")

        def do_PUT(self) -> None:
            self._handle("PUT")

        def do_PATCH(self) -> None:
            self._handle("PATCH")

        def do_DELETE(self) -> None:
            self._handle("DELETE")

        def log_message(self, *_: Any) -> None:
            """Quiet."""

    return Handler


@contextmanager
def service_proxy_stand_in(state: ProxyStandIn) -> Iterator[ProxyStandIn]:
    """Serve `state` on 127.0.0.1 (a free port) for the duration."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.address = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()
