"""A stand-in for Managed Lustre's exportData/importData and a bucket, copying between two local directories, called
in process or served over HTTP on 127.0.0.1 (`google_apis`, where the REST clients and the fault proxy meet it).

It answers in the shapes of Managed Lustre API v1 (managed-lustre/docs/reference/rest/v1, read 2026-12-02;
googleapis/googleapis @6c345acd google/cloud/lustre/v1/transfer.proto):
- exportData (projects.locations.instances/exportData) and importData (.../importData) answer a long-running
  Operation `{"name", "metadata", "done": false}` at once; `operations.get` answers it as it stands, here `done: true`
  from the second read on, with `response` on success or `error` (google.rpc.Status `{"code", "message"}`) on failure
  (google.longrunning.Operation: once done, exactly one of them).
- The metadata is `{"operationMetadata": TransferOperationMetadata}`: `counters` (TransferCounters, the v1 names
  `foundObjectsCount`, `bytesFoundCount`, `objectsSkippedCount`, `bytesSkippedCount`, `objectsCopiedCount`,
  `bytesCopiedCount`, `objectsFailedCount`, `bytesFailedCount`; int64 as JSON strings and a zero left out, as proto3's
  JSON mapping writes them), `transferType` (EXPORT, IMPORT) and `errorSummaries` (ErrorSummary `errorCode` as the
  google.rpc.Code name, `errorCount`, `errorLogEntries` of `{"uri", "errorDetails"}`, at most 5 per code). Files named
  in `failing` fail to copy: they count in `objectsFailedCount` and an ErrorSummary, and the Operation still ends with
  `response` (a transfer that copied part of what it found is not an Operation error; transfer.proto's failure
  counters exist for this).
- Incremental, never deleting: a file already at the destination with the same bytes is skipped (counted in
  `objectsSkippedCount`, left out of `foundObjectsCount`, which "excludes any ... skipped due to sync",
  transfer.proto TransferCounters); nothing at the destination is removed (managed-lustre/docs/transfer-data:
  transfers are incremental, only files not at the destination or changed since are copied).
- The Cloud Storage path must end with `/` when it names a path inside the bucket (GcsPath.uri); an import's Lustre
  path other than `/` must already exist (LustrePath.path); one transfer per instance at a time, a second refused
  with ABORTED "unable to queue the operation" (managed-lustre/docs/transfer-data, Limitations; ABORTED is HTTP 409,
  google/rpc/code.proto). A start repeating a requestId answers the Operation of the first (AIP-155).
- The metadata is ExportDataMetadata / ImportDataMetadata with `target` (the instance), `verb` and, in
  `operationMetadata`, `sourceLustrePath`/`sourceGcsPath` and `destinationGcsPath`/`destinationLustrePath`
  (transfer.proto); `operations.list` answers `{"operations": [...]}` (google.longrunning ListOperationsResponse), here
  the operations not done.
Assumed, not documented: the contents of the Lustre path go under the Cloud Storage prefix and the other way round
(the gcloud examples export a directory to a bucket root), and an export of a path that does not exist ends with an
error (here NOT_FOUND, code 5).

The bucket (StandInObjects) keeps each object's generation as the file's st_mtime_ns and honours `ifGenerationMatch`
as Cloud Storage does (cloud.google.com/storage/docs/request-preconditions: 0 means "no live object"; a mismatch is
HTTP 412 Precondition Failed).

Over HTTP (`google_apis`), the two APIs' REST paths answer as Cloud Storage's JSON API documents them
(cloud.google.com/storage/docs/json_api/v1/objects: list `{"kind": "storage#objects", "items": [{"name"}]}`, get of
the resource (`generation` an int64 string) or with `alt=media` the bytes, insert with `uploadType=media` answering the
resource) and Managed Lustre's as above; a refusal is Google's JSON error `{"error": {"code", "message", "status"}}`
(cloud.google.com/apis/design/errors), ABORTED as HTTP 409, a failed precondition as 412.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlparse

from incluster import record
from incluster.lustre_transfer import PreconditionFailed, Refused, Stored
from jobs.demo.stand_in_trainer import write_archive
from tests.support.loopback import serving


def _files(root: Path) -> dict[str, Path]:
    """Every file under `root` by its path relative to it."""
    return {path.relative_to(root).as_posix(): path for path in root.rglob("*") if path.is_file()}


class ApiRefusal(Refused):
    """A refusal as the API answers it: the HTTP status, the google.rpc.Code name and the message."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"HTTP {status}: {code}: {message}", status)
        self.code, self.reason = code, message

    def body(self) -> dict[str, Any]:
        """Google's JSON error of this refusal."""
        return {"error": {"code": self.status, "message": self.reason, "status": self.code}}


class StandInLustre:
    """One instance whose file system is `lustre_root`, transferring to and from the bucket at `bucket_root`; an
    Operation reads done from its `reads_to_done`-th read on."""

    def __init__(
        self, lustre_root: Path, bucket_root: Path, bucket: str, instance: str, reads_to_done: int = 2
    ) -> None:
        self.lustre_root = lustre_root
        self.bucket_root = bucket_root
        self.bucket = bucket
        self.instance = instance
        self.reads_to_done = reads_to_done
        self.operations: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, int] = {}
        self.requests: list[tuple[str, str, str]] = []
        self.by_request: dict[str, str] = {}
        self.starts = 0
        """How many transfers were started."""
        self.failing: set[str] = set()
        """Source file names (relative to the transfer's source) that fail to copy."""

    def _prefix(self, uri: str) -> Path:
        head = f"gs://{self.bucket}/"
        if not uri.startswith(head):
            raise ApiRefusal(400, "INVALID_ARGUMENT", f"{uri} is not in bucket {self.bucket}")
        inside = uri[len(head) :]
        if inside and not inside.endswith("/"):
            raise ApiRefusal(400, "INVALID_ARGUMENT", "a path inside the bucket must end with a forward slash")
        return self.bucket_root / inside

    def _copy(self, kind: str, source: Path, target: Path) -> dict[str, Any]:
        """Copy what is new or changed; the TransferOperationMetadata."""
        counts = dict.fromkeys(("found", "bytesFound", "skipped", "bytesSkipped", "copied", "bytesCopied"), 0)
        counts |= {"failed": 0, "bytesFailed": 0}
        failed_uris = []
        for name, path in sorted(_files(source).items()):
            data, there = path.read_bytes(), target / name
            if there.is_file() and there.read_bytes() == data:
                counts["skipped"] += 1
                counts["bytesSkipped"] += len(data)
                continue
            counts["found"] += 1
            counts["bytesFound"] += len(data)
            if name in self.failing:
                counts["failed"] += 1
                counts["bytesFailed"] += len(data)
                failed_uris.append(name)
                continue
            there.parent.mkdir(parents=True, exist_ok=True)
            there.write_bytes(data)
            counts["copied"] += 1
            counts["bytesCopied"] += len(data)
        fields = {
            "foundObjectsCount": "found", "bytesFoundCount": "bytesFound", "objectsSkippedCount": "skipped",
            "bytesSkippedCount": "bytesSkipped", "objectsCopiedCount": "copied", "bytesCopiedCount": "bytesCopied",
            "objectsFailedCount": "failed", "bytesFailedCount": "bytesFailed",
        }  # fmt: skip
        metadata: dict[str, Any] = {
            "counters": {field: str(counts[key]) for field, key in fields.items() if counts[key]},
            "transferType": kind.upper(),
        }
        if failed_uris:
            entries = [{"uri": name, "errorDetails": ["permission denied"]} for name in failed_uris[:5]]
            metadata["errorSummaries"] = [
                {"errorCode": "PERMISSION_DENIED", "errorCount": str(len(failed_uris)), "errorLogEntries": entries}
            ]
        return metadata

    def _start(self, kind: str, instance: str, ends: dict[str, Any], target: Path, must_exist: Path | None) -> dict:
        if instance != self.instance:
            raise ApiRefusal(404, "NOT_FOUND", f"Resource '{instance}' was not found")
        if any(not op["done"] for op in self.operations.values()):
            raise ApiRefusal(409, "ABORTED", "unable to queue the operation")
        self.starts += 1
        name = f"{instance}/operations/{kind}-{self.starts}"
        source = (
            self.lustre_root / ends["sourceLustrePath"]["path"].lstrip("/")
            if kind == "Export"
            else self._prefix(ends["sourceGcsPath"]["uri"])
        )
        metadata: dict[str, Any] = {"transferType": kind.upper()}
        if must_exist is not None and not must_exist.is_dir():
            result = {"error": {"code": 5, "message": f"{must_exist} does not exist"}}
        elif not source.is_dir():
            result = {"error": {"code": 5, "message": f"{source} not found"}}
        else:
            metadata = self._copy(kind, source, target)
            result = {"response": {"@type": f"type.googleapis.com/google.cloud.lustre.v1.{kind}DataResponse"}}
        self.operations[name] = {"result": result, "done": False, "metadata": {**metadata, **ends}}
        return self._view(name)

    def _view(self, name: str) -> dict[str, Any]:
        operation = self.operations[name]
        metadata = operation["metadata"]
        if not operation["done"]:
            counters = {key: value for key, value in (metadata.get("counters") or {}).items() if "Copied" not in key}
            metadata = {**metadata, "counters": counters}
            metadata.pop("errorSummaries", None)
        kind = "Export" if "Export" in name else "Import"
        view = {
            "name": name,
            "metadata": {"@type": f"type.googleapis.com/google.cloud.lustre.v1.{kind}DataMetadata",
                         "target": self.instance, "verb": kind.lower(), "operationMetadata": metadata},
            "done": operation["done"],
        }  # fmt: skip
        return {**view, **operation["result"]} if operation["done"] else view

    def export_data(self, instance: str, lustre_path: str, gcs_uri: str) -> dict[str, Any]:
        """Start an export; the copy is made at once, the Operation reads done from its second read."""
        self.requests.append(("export", lustre_path, gcs_uri))
        ends = {"sourceLustrePath": {"path": lustre_path}, "destinationGcsPath": {"uri": gcs_uri}}
        return self._start("Export", instance, ends, self._prefix(gcs_uri), None)

    def import_data(self, instance: str, gcs_uri: str, lustre_path: str) -> dict[str, Any]:
        """Start an import into an existing Lustre path."""
        self.requests.append(("import", gcs_uri, lustre_path))
        target = self.lustre_root / lustre_path.lstrip("/")
        ends = {"sourceGcsPath": {"uri": gcs_uri}, "destinationLustrePath": {"path": lustre_path}}
        return self._start("Import", instance, ends, target, target)

    def start(self, instance: str, verb: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `<instance>:<verb>` with its JSON body; a repeated requestId answers the first start's Operation."""
        request_id = body.get("requestId", "")
        if request_id in self.by_request:
            return self._view(self.by_request[request_id])
        lustre, gcs = (body.get("lustrePath") or {}).get("path", "/"), (body.get("gcsPath") or {}).get("uri", "")
        if verb == "exportData":
            operation = self.export_data(instance, lustre, gcs)
        elif verb == "importData":
            operation = self.import_data(instance, gcs, lustre)
        else:
            raise ApiRefusal(404, "NOT_FOUND", f"no such method: {verb}")
        if request_id:
            self.by_request[request_id] = operation["name"]
        return operation

    def get_operation(self, name: str) -> dict[str, Any]:
        """operations.get: done from the `reads_to_done`-th read on."""
        if name not in self.operations:
            raise ApiRefusal(404, "NOT_FOUND", f"Operation '{name}' was not found")
        self.reads[name] = self.reads.get(name, 0) + 1
        if self.reads[name] >= self.reads_to_done:
            self.operations[name]["done"] = True
        return self._view(name)

    def running(self) -> dict[str, Any]:
        """operations.list with `done = false`: the operations not done."""
        return {"operations": [self._view(name) for name, item in self.operations.items() if not item["done"]]}


class StandInObjects:
    """The bucket at `root`: object `a/b` is the file `root/a/b`, its generation the file's st_mtime_ns."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def names(self, prefix: str) -> list[str]:
        """Names of the files under `prefix`."""
        return sorted(name for name in _files(self.root) if name.startswith(prefix)) if self.root.is_dir() else []

    def read(self, name: str) -> Stored | None:
        """The file's text and generation; None when there is none."""
        path = self.root / name
        return Stored(path.read_text(), path.stat().st_mtime_ns) if path.is_file() else None

    def write_text(self, name: str, text: str, if_generation: int) -> int:
        """Write the file while its generation is `if_generation` (0: while there is none); HTTP 412 otherwise."""
        path = self.root / name
        now = path.stat().st_mtime_ns if path.is_file() else 0
        if now != if_generation:
            raise PreconditionFailed(f"writing gs://stand-in/{name}: HTTP 412: the object changed since it was read")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        later = max(now + 1, path.stat().st_mtime_ns)
        os.utime(path, ns=(later, later))
        return later


class StandInGoogleApis:
    """A StandInLustre and its bucket's StandInObjects answering REST requests, as `google_apis` serves them."""

    def __init__(self, lustre: StandInLustre, objects: StandInObjects) -> None:
        self.lustre = lustre
        self.objects = objects
        self.lock = threading.Lock()
        self.url = ""

    def answer(self, method: str, url: str, body: bytes) -> tuple[int, Any]:
        """The status and body (a dict as JSON, bytes as they are) of one request."""
        parsed = urlparse(url)
        path, query = unquote(parsed.path), {k: v[0] for k, v in parse_qs(parsed.query).items()}
        try:
            with self.lock:
                return 200, self._answer(method, path, query, body)
        except ApiRefusal as refusal:
            return refusal.status, refusal.body()
        except PreconditionFailed:
            return 412, ApiRefusal(412, "FAILED_PRECONDITION", "At least one of the pre-conditions you specified did "
                                   "not hold.").body()  # fmt: skip

    def _answer(self, method: str, path: str, query: dict[str, str], body: bytes) -> Any:
        objects = f"/storage/v1/b/{self.lustre.bucket}/o"
        if path.startswith("/v1/") and method == "POST" and ":" in path:
            instance, verb = path.removeprefix("/v1/").rsplit(":", 1)
            return self.lustre.start(instance, verb, json.loads(body or b"{}"))
        if path.startswith("/v1/") and path.endswith("/operations") and method == "GET":
            return self.lustre.running()
        if path.startswith("/v1/") and method == "GET":
            return self.lustre.get_operation(path.removeprefix("/v1/"))
        if path == objects and method == "GET":
            items = [{"name": name} for name in self.objects.names(query.get("prefix", ""))]
            return {"kind": "storage#objects", "items": items}
        if path.startswith(objects + "/") and method == "GET":
            name = path.removeprefix(objects + "/")
            stored = self.objects.read(name)
            if stored is None:
                raise ApiRefusal(404, "NOT_FOUND", f"No such object: {self.lustre.bucket}/{name}")
            if query.get("ifGenerationMatch", str(stored.generation)) != str(stored.generation):
                raise PreconditionFailed(name)
            return stored.text.encode() if query.get("alt") == "media" else self._resource(name, stored.generation)
        if path == f"/upload{objects}" and method == "POST":
            generation = self.objects.write_text(query["name"], body.decode(), int(query["ifGenerationMatch"]))
            return self._resource(query["name"], generation)
        raise ApiRefusal(404, "NOT_FOUND", f"no such method: {method} {path}")

    def _resource(self, name: str, generation: int) -> dict[str, Any]:
        return {"kind": "storage#object", "bucket": self.lustre.bucket, "name": name, "generation": str(generation)}


@contextmanager
def google_apis(apis: StandInGoogleApis) -> Iterator[StandInGoogleApis]:
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

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as url:
        apis.url = url
        yield apis


def stand_in_apis(root: Path, reads_to_done: int = 2) -> StandInGoogleApis:
    """The stand-in instance (its file system `root/lustre`) and bucket (`root/bucket`), to serve with `google_apis`."""
    lustre = StandInLustre(root / "lustre", root / "bucket", BUCKET, INSTANCE, reads_to_done)
    return StandInGoogleApis(lustre, StandInObjects(root / "bucket"))


RUN = "verl-qwen-0123456789ab"
"""The parked run of the tests."""
INSTANCE = "projects/p/locations/us-central1-b/instances/grpo-dev-lustre"
"""The stand-in instance as the API names it."""
BUCKET = "grpo-dev-parked-1234abcd"
"""The stand-in parked bucket."""


def write(path: Path, text: str) -> None:
    """Write `text` at `path`, its directories made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def a_run(root: Path) -> None:
    """A verl run on the instance: its record (written by incluster/record.py), its log, two complete steps of
    verl 0.9.1's layout (incluster/checkpoints.py: every rank's shards and data.pt whole zip archives as torch.save
    writes them, jobs/demo/stand_in_trainer.py write_archive; rank 0's fsdp_config.json), verl's
    rotated remains of an older one, the tracker, and one export; beside it what staging put there (not the run's)."""
    run_dir = root / "checkpoints" / RUN
    run_dir.mkdir(parents=True, exist_ok=True)
    record.append(run_dir, record.entry(1796126400.0, 1, "submitted"))
    write(run_dir / "logs" / "attempt-1.log", "2026-12-02T00:00:00.000Z\tstep:4\n")
    write(run_dir / "global_step_2" / "data.pt", "rotated")
    for step in (4, 6):
        actor = run_dir / f"global_step_{step}" / "actor"
        actor.mkdir(parents=True, exist_ok=True)
        for rank in range(8):
            for shard in ("model", "optim", "extra_state"):
                write_archive(actor / f"{shard}_world_size_8_rank_{rank}.pt", {"step": step, "rank": rank})
        write(actor / "fsdp_config.json", '{"FSDP_version": 1, "world_size": 8}')
        write_archive(run_dir / f"global_step_{step}" / "data.pt", {"step": step})
    write(run_dir / "latest_checkpointed_iteration.txt", "6")
    write(root / "exports" / RUN / "step-6" / "lineage.json", '{"step": 6}')
    write(root / "exports" / RUN / "step-6" / "model.safetensors", "weights")
    write(root / "models" / "Qwen" / "Qwen2.5-0.5B-Instruct" / "config.json", "{}")


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` by its relative path, with its bytes."""
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}
