"""An in-process HTTP stand-in, on 127.0.0.1, for the two Google APIs parking calls over REST: Managed Lustre v1's
transfers and operations, and Cloud Storage's JSON API for one bucket's objects, answering in their published shapes.

- `POST /v1/{instance}:exportData` and `:importData` answer a long-running Operation (google.longrunning.Operation:
  `name`, `metadata`, `done`); the metadata is ExportDataMetadata / ImportDataMetadata with `target`, `verb` and
  `operationMetadata` (TransferOperationMetadata: `sourceLustrePath`/`sourceGcsPath`, `destinationGcsPath`/
  `destinationLustrePath`, `counters`) as google/cloud/lustre/v1/transfer.proto names them (googleapis c6b8b89, read
  2026-12-07). A second transfer while one runs is refused with ABORTED "unable to queue the operation"
  (managed-lustre/docs/transfer-data, Limitations; the Managed Lustre troubleshooting page), HTTP 409 as Google maps
  ABORTED (cloud.google.com/apis/design/errors, HTTP mapping); a repeated requestId answers the same Operation.
- `GET /v1/{operation}` (operations.get) answers it, done from the `reads_to_done`-th read on, with `response`.
- `GET /v1/{location}/operations` (operations.list) answers `{"operations": [...]}` of the operations not done.
- `GET /storage/v1/b/{bucket}/o?prefix=` (objects.list) answers `{"kind": "storage#objects", "items": [{"name"}]}`;
  `GET .../o/{name}?alt=media` the object's bytes, 404 without; `POST /upload/storage/v1/b/{bucket}/o?uploadType=media
  &name=` stores one and answers its resource (cloud.google.com/storage/docs/json_api/v1/objects: list, get, insert).
- Errors are Google's JSON error `{"error": {"code", "message", "status"}}` (cloud.google.com/apis/design/errors).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

INSTANCE = "projects/p/locations/us-central1-b/instances/grpo-dev-lustre"
"""The stand-in instance as the API names it."""

BUCKET = "grpo-dev-parked-1234abcd"
"""The stand-in bucket."""


def google_error(code: int, status: str, message: str) -> dict[str, Any]:
    """Google's JSON error body."""
    return {"error": {"code": code, "message": message, "status": status}}


class GoogleApis:
    """The instance's operations and the bucket's objects the stand-in holds."""

    def __init__(self, reads_to_done: int = 2) -> None:
        self.reads_to_done = reads_to_done
        self.operations: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, int] = {}
        self.by_request: dict[str, str] = {}
        self.objects: dict[str, bytes] = {}
        self.starts = 0
        self.lock = threading.Lock()
        self.url = ""

    def start(self, instance: str, verb: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """exportData or importData."""
        if instance != INSTANCE:
            return 404, google_error(404, "NOT_FOUND", f"Resource '{instance}' was not found")
        request_id = body.get("requestId", "")
        if request_id in self.by_request:
            return 200, self.view(self.by_request[request_id])
        if any(not operation["done"] for operation in self.operations.values()):
            return 409, google_error(409, "ABORTED", "unable to queue the operation")
        self.starts += 1
        name = f"{INSTANCE.rsplit('/instances/', 1)[0]}/operations/operation-{self.starts}"
        lustre, gcs = (body.get("lustrePath") or {}).get("path"), (body.get("gcsPath") or {}).get("uri")
        ends = (
            {"sourceLustrePath": {"path": lustre}, "destinationGcsPath": {"uri": gcs}}
            if verb == "exportData"
            else {"sourceGcsPath": {"uri": gcs}, "destinationLustrePath": {"path": lustre}}
        )
        kind = "Export" if verb == "exportData" else "Import"
        self.operations[name] = {
            "done": False,
            "metadata": {
                "@type": f"type.googleapis.com/google.cloud.lustre.v1.{kind}DataMetadata",
                "target": instance,
                "verb": verb.removesuffix("Data"),
                "operationMetadata": {**ends, "counters": {"bytesFoundCount": "0", "bytesCopiedCount": "0"}},
            },
        }
        if request_id:
            self.by_request[request_id] = name
        return 200, self.view(name)

    def view(self, name: str) -> dict[str, Any]:
        """The Operation as operations.get answers it."""
        operation = self.operations[name]
        view = {"name": name, "metadata": operation["metadata"], "done": operation["done"]}
        if operation["done"]:
            view["response"] = {"@type": "type.googleapis.com/google.cloud.lustre.v1.ExportDataResponse"}
        return view

    def get(self, name: str) -> tuple[int, dict[str, Any]]:
        """operations.get."""
        if name not in self.operations:
            return 404, google_error(404, "NOT_FOUND", f"Operation '{name}' was not found")
        self.reads[name] = self.reads.get(name, 0) + 1
        if self.reads[name] >= self.reads_to_done:
            self.operations[name]["done"] = True
        return 200, self.view(name)

    def answer(self, method: str, url: str, body: bytes) -> tuple[int, Any]:
        """The status and body (a dict as JSON, bytes as they are) of one request."""
        parsed = urlparse(url)
        path, query = unquote(parsed.path), {k: v[0] for k, v in parse_qs(parsed.query).items()}
        with self.lock:
            if path.startswith("/v1/") and method == "POST" and ":" in path:
                instance, verb = path.removeprefix("/v1/").rsplit(":", 1)
                return self.start(instance, verb, json.loads(body or b"{}"))
            if path.startswith("/v1/") and path.endswith("/operations") and method == "GET":
                running = [self.view(name) for name, item in self.operations.items() if not item["done"]]
                return 200, {"operations": running}
            if path.startswith("/v1/") and method == "GET":
                return self.get(path.removeprefix("/v1/"))
            objects = f"/storage/v1/b/{BUCKET}/o"
            if path == objects and method == "GET":
                prefix = query.get("prefix", "")
                items = [{"name": name} for name in sorted(self.objects) if name.startswith(prefix)]
                return 200, {"kind": "storage#objects", "items": items}
            if path.startswith(objects + "/") and method == "GET":
                name = path.removeprefix(objects + "/")
                if name not in self.objects:
                    return 404, google_error(404, "NOT_FOUND", f"No such object: {BUCKET}/{name}")
                return 200, self.objects[name]
            if path == f"/upload{objects}" and method == "POST":
                self.objects[query["name"]] = body
                return 200, {"kind": "storage#object", "bucket": BUCKET, "name": query["name"]}
        return 404, google_error(404, "NOT_FOUND", f"no such method: {method} {path}")


@contextmanager
def google_apis(apis: GoogleApis) -> Iterator[GoogleApis]:
    """Serve `apis` on 127.0.0.1 while the block runs; its `url` is the server's base URL."""

    class Handler(BaseHTTPRequestHandler):
        def _reply(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            status, body = apis.answer(self.command, self.path, self.rfile.read(length) if length else b"")
            data = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.send_response(status)
            kind = "application/octet-stream" if isinstance(body, bytes) else "application/json; charset=UTF-8"
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _reply

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    apis.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield apis
    finally:
        server.shutdown()
        server.server_close()
