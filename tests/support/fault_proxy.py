"""A fault-injecting HTTP proxy on 127.0.0.1, in process: it forwards each request to one loopback upstream (the Ray
head, a stand-in, the real API server of tests/support/control_plane.py over TLS) and answers the next `times` requests that match a fault's method and path with that fault instead.

Faults, as a real server or network produces them (the bodies in each API's published error shape, given by the
test): `refused` (the connection is reset before any answer: requests raises ConnectionError, as for a refused
connection; a listening proxy cannot refuse at the TCP level), `timeout` (no answer for `hold` seconds, longer than the
client's read deadline), `cut` (a Content-Length promised and half of it sent: requests raises ChunkedEncodingError),
`not-json` (a 200 with an HTML page, what a login or error page in front of an API answers) and any HTTP status with
the fault's headers (a 429 or 503 with Retry-After) and body. A websocket upgrade is refused with a 400 (not
tunnelled). Every request's body is kept (`sent`), and `before_write` runs once just before the next POST or PUT
goes upstream (another client writing in between a read and a write). With `namespace` (old, new) it sends upstream a
request of namespace `old` (its path, its object's metadata.namespace) as one of namespace `new`: code that always uses the stack's namespace then works in a
namespace of the test's own on a shared API server. Bounded: each held answer is released after `hold` seconds at most, and the server's threads are daemons
stopped with it.
"""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlparse

from tests.support.loopback import serving

LOOPBACK = ("127.0.0.1", "localhost")
"""The only upstream hosts the proxy forwards to."""

HOLD_SECONDS = 0.5
"""The longest a `timeout` fault holds a request."""


@dataclass
class Fault:
    """Answer the next `times` requests whose method is `method` (any: None) and whose path contains `path` with `kind`:
    refused, timeout, cut, not-json, or an HTTP status (its `headers` and `body`)."""

    kind: str | int
    """refused, timeout, cut, not-json, or the HTTP status."""
    path: str = ""
    """A part of the request's path (with its query) the fault applies to; "" for every path."""
    method: str | None = None
    """The request method it applies to; None for every method."""
    times: int = 1
    """How many matching requests get it (then they pass)."""
    headers: dict[str, str] = field(default_factory=dict)
    """Headers of an HTTP status fault (Retry-After)."""
    body: str = ""
    """Body of an HTTP status fault."""
    content_type: str = "application/json"
    """Content-Type of an HTTP status fault."""

    def matches(self, method: str, path: str) -> bool:
        """Whether this fault applies to a request."""
        return self.times > 0 and (self.method is None or self.method == method) and self.path in path


class FaultProxy:
    """The proxy's state: its upstream, the faults still to give, every request it saw (method, path, the fault given
    or None)."""

    def __init__(self, upstream: str, ca: str | None = None, namespace: tuple[str, str] | None = None) -> None:
        parsed = urlparse(upstream)
        assert parsed.hostname in LOOPBACK and parsed.scheme in ("http", "https"), (
            f"not a loopback upstream: {upstream}"
        )
        self.upstream = (parsed.hostname, parsed.port or (443 if parsed.scheme == "https" else 80))
        self.tls = ssl.create_default_context(cafile=ca) if parsed.scheme == "https" else None
        self.prefix = parsed.path.rstrip("/")
        self.faults: list[Fault] = []
        self.seen: list[tuple[str, str, str | int | None]] = []
        self.sent: list[tuple[str, str, bytes]] = []
        self.before_write: Callable[[], None] | None = None
        self.namespace = namespace
        self.lock = threading.Lock()
        self.url = ""
        self.hold = HOLD_SECONDS

    def inject(self, *faults: Fault) -> None:
        """Give these faults to the next matching requests, in order."""
        with self.lock:
            self.faults += faults

    def take(self, method: str, path: str) -> Fault | None:
        """The fault the request gets, counted; None to pass it through."""
        with self.lock:
            for fault in self.faults:
                if fault.matches(method, path):
                    fault.times -= 1
                    self.seen.append((method, path, fault.kind))
                    return fault
            self.seen.append((method, path, None))
            return None

    def upstream_path(self, path: str) -> str:
        """The path a request goes upstream with (its namespace moved where one is given)."""
        if self.namespace is not None:
            old, new = self.namespace
            path = path.replace(f"/namespaces/{old}/", f"/namespaces/{new}/")
        return self.prefix + path

    def upstream_body(self, body: bytes) -> bytes:
        """The body a request goes upstream with (its object's metadata.namespace moved where one is given)."""
        if self.namespace is None or not body:
            return body
        try:
            sent = json.loads(body)
        except ValueError:
            return body
        metadata = sent.get("metadata") if isinstance(sent, dict) else None
        if isinstance(metadata, dict) and metadata.get("namespace") == self.namespace[0]:
            metadata["namespace"] = self.namespace[1]
            return json.dumps(sent).encode()
        return body

    def faults_left(self) -> int:
        """How many requests are still to get a fault."""
        with self.lock:
            return sum(fault.times for fault in self.faults)

    def connection(self) -> http.client.HTTPConnection:
        """A connection to the upstream (TLS verified against its CA where it is https)."""
        if self.tls is not None:
            return http.client.HTTPSConnection(*self.upstream, timeout=30, context=self.tls)
        return http.client.HTTPConnection(*self.upstream, timeout=30)

    def faulted(self) -> int:
        """How many requests got a fault."""
        return sum(1 for *_, kind in self.seen if kind is not None)

    def passed(self) -> int:
        """How many requests went through."""
        return sum(1 for *_, kind in self.seen if kind is None)


def _handler(proxy: FaultProxy) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: Any) -> None:
            pass

        def _answer(self, status: int, body: bytes, headers: dict[str, str], content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def _fault(self, fault: Fault) -> None:
            if fault.kind == "refused":
                # An RST instead of an answer (SO_LINGER 0): the client sees its connection reset.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                return
            if fault.kind == "timeout":
                time.sleep(proxy.hold)
                self.close_connection = True
                return
            if fault.kind == "cut":
                body = b'{"partial": "an answer cut'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body) * 2))
                self.end_headers()
                self.wfile.write(body)
                self.wfile.flush()
                self.close_connection = True
                return
            if fault.kind == "not-json":
                page = b"<html><body>Sign in to continue</body></html>"
                self._answer(200, page, {}, "text/html")
                return
            assert isinstance(fault.kind, int)
            self._answer(fault.kind, fault.body.encode(), fault.headers, fault.content_type)

        def _handle(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length) if length else b""
            if self.headers.get("Upgrade", "").lower() == "websocket":
                # No websocket is tunnelled (Ray's log stream): refused as a proxy that does not upgrade would; the
                # Jobs client then polls (incluster/job_client.py follow).
                self._answer(400, b"websocket upgrades are not proxied", {}, "text/plain")
                return
            proxy.sent.append((self.command, self.path, body))
            fault = proxy.take(self.command, self.path)
            if fault is not None:
                self._fault(fault)
                return
            if self.command in ("POST", "PUT") and proxy.before_write is not None:
                hook, proxy.before_write = proxy.before_write, None
                hook()
            upstream = proxy.connection()
            try:
                dropped = ("host", "connection", "content-length")
                headers = {k: v for k, v in self.headers.items() if k.lower() not in dropped}
                data = proxy.upstream_body(body)
                if data:
                    headers["Content-Length"] = str(len(data))
                upstream.request(self.command, proxy.upstream_path(self.path), body=data or None, headers=headers)
                answer = upstream.getresponse()
                data = answer.read()
                kept = {
                    k: v
                    for k, v in answer.getheaders()
                    if k.lower() not in ("content-length", "transfer-encoding", "connection", "content-type")
                }
                self._answer(answer.status, data, kept, answer.getheader("Content-Type") or "application/json")
            finally:
                upstream.close()

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    return Handler


@contextmanager
def fault_proxy(upstream: str, ca: str | None = None, namespace: tuple[str, str] | None = None) -> Iterator[FaultProxy]:
    """A FaultProxy in front of `upstream` (a loopback http URL, or https verified with `ca`; paths of namespace
    (old, new) moved) while the block runs; its `url` is where to send."""
    proxy = FaultProxy(upstream, ca, namespace)

    class Server(ThreadingHTTPServer):
        def handle_error(self, request: Any, client_address: Any) -> None:
            pass  # a client that gave up on a held or cut answer closed its end: nothing to report

    with serving(Server(("127.0.0.1", 0), _handler(proxy))) as url:
        proxy.url = url
        yield proxy
