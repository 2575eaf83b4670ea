"""A stand-in for Managed Lustre's exportData/importData and a bucket, copying between two local directories.

It behaves as the API documents (managed-lustre/docs/reference/rest/v1, read 2026-12-02):
- exportData (projects.locations.instances/exportData) and importData (.../importData) answer a long-running
  Operation `{"name", "metadata", "done": false}` at once; `operations.get` answers it as it stands, here `done: true`
  from the second read on, with `response` on success or `error` (google.rpc.Status `{"code", "message"}`) on failure
  (google.longrunning.Operation: once done, exactly one of them).
- The Cloud Storage path must end with `/` when it names a path inside the bucket (GcsPath.uri); an import's Lustre
  path other than `/` must already exist (LustrePath.path); one transfer per instance at a time, a second refused
  with ABORTED "unable to queue the operation" (managed-lustre/docs/transfer-data, Limitations).
- The metadata carries `operationMetadata.counters` (TransferCounters: bytesFound, bytesCopied).
Assumed, not documented: the contents of the Lustre path go under the Cloud Storage prefix and the other way round
(the gcloud examples export a directory to a bucket root), and an export of a path that does not exist ends with an
error (here NOT_FOUND, code 5).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from core import names
from incluster.lustre_transfer import TransferError
from incluster.park import lustre_path


class StandInLustre:
    """One instance whose file system is `lustre_root`, transferring to and from the bucket at `bucket_root`."""

    def __init__(self, lustre_root: Path, bucket_root: Path, bucket: str, instance: str) -> None:
        self.lustre_root = lustre_root
        self.bucket_root = bucket_root
        self.bucket = bucket
        self.instance = instance
        self.operations: dict[str, dict[str, Any]] = {}
        self.reads: dict[str, int] = {}
        self.requests: list[tuple[str, str, str]] = []

    def _prefix(self, uri: str) -> Path:
        head = f"gs://{self.bucket}/"
        if not uri.startswith(head):
            raise TransferError(f"HTTP 400: {uri} is not in bucket {self.bucket}")
        inside = uri[len(head) :]
        if inside and not inside.endswith("/"):
            raise TransferError("HTTP 400: a path inside the bucket must end with a forward slash")
        return self.bucket_root / inside

    def _start(self, kind: str, instance: str, source: Path, target: Path, must_exist: Path | None) -> dict:
        if instance != self.instance:
            raise TransferError(f"HTTP 404: {instance} not found")
        if any(not op["done"] for op in self.operations.values()):
            raise TransferError("HTTP 409: ABORTED: unable to queue the operation")
        name = f"{instance}/operations/{kind}-{len(self.operations) + 1}"
        if must_exist is not None and not must_exist.is_dir():
            result = {"error": {"code": 5, "message": f"{must_exist} does not exist"}}
        elif not source.is_dir():
            result = {"error": {"code": 5, "message": f"{source} not found"}}
        else:
            shutil.copytree(source, target, dirs_exist_ok=True)
            result = {"response": {"@type": f"type.googleapis.com/google.cloud.lustre.v1.{kind}DataResponse"}}
        found = sum(path.stat().st_size for path in source.rglob("*") if path.is_file()) if source.is_dir() else 0
        self.operations[name] = {"result": result, "done": False, "found": found}
        return self._view(name)

    def _view(self, name: str) -> dict[str, Any]:
        operation = self.operations[name]
        counters = {
            "bytesFound": str(operation["found"]),
            "bytesCopied": str(operation["found"] if operation["done"] else 0),
        }
        view = {"name": name, "metadata": {"operationMetadata": {"counters": counters}}, "done": operation["done"]}
        return {**view, **operation["result"]} if operation["done"] else view

    def export_data(self, instance: str, lustre_path: str, gcs_uri: str) -> dict[str, Any]:
        """Start an export; the copy is made at once, the Operation reads done from its second read."""
        self.requests.append(("export", lustre_path, gcs_uri))
        source = self.lustre_root / lustre_path.lstrip("/")
        return self._start("Export", instance, source, self._prefix(gcs_uri), None)

    def import_data(self, instance: str, gcs_uri: str, lustre_path: str) -> dict[str, Any]:
        """Start an import into an existing Lustre path."""
        self.requests.append(("import", gcs_uri, lustre_path))
        target = self.lustre_root / lustre_path.lstrip("/")
        return self._start("Import", instance, self._prefix(gcs_uri), target, target)

    def get_operation(self, name: str) -> dict[str, Any]:
        """operations.get: done from the second read on."""
        self.reads[name] = self.reads.get(name, 0) + 1
        if self.reads[name] >= 2:
            self.operations[name]["done"] = True
        return self._view(name)


class StandInObjects:
    """The bucket at `root`: object `a/b` is the file `root/a/b`."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def names(self, prefix: str) -> list[str]:
        """Names of the files under `prefix`."""
        return sorted(
            path.relative_to(self.root).as_posix()
            for path in self.root.rglob("*")
            if path.is_file() and path.relative_to(self.root).as_posix().startswith(prefix)
        )

    def read_text(self, name: str) -> str | None:
        """The file's text; None when there is none."""
        path = self.root / name
        return path.read_text() if path.is_file() else None

    def write_text(self, name: str, text: str) -> None:
        """Write the file."""
        path = self.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


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
    """A verl run on the instance: its record, logs, metrics, two complete steps, verl's rotated remains of an
    older one, the tracker, and one export; beside it what staging put there (not the run's)."""
    run_dir = root / "checkpoints" / RUN
    write(run_dir / "attempts.jsonl", '{"attempt": 1, "event": "submitted"}\n{"attempt": 1, "event": "exported"}\n')
    write(run_dir / "logs" / "attempt-1.log", "2026-12-02T00:00:00.000Z\tstep:4\n")
    write(run_dir / "metrics" / "attempt-1" / "grpo" / "run.jsonl", '{"step": 4}\n')
    write(run_dir / "global_step_2" / "data.pt", "rotated")
    for step in (4, 6):
        for rank in range(8):
            for shard in ("model", "optim", "extra_state"):
                write(
                    run_dir / f"global_step_{step}" / "actor" / f"{shard}_world_size_8_rank_{rank}.pt", f"{step}{rank}"
                )
        write(run_dir / f"global_step_{step}" / "data.pt", f"data {step}")
    write(run_dir / "latest_checkpointed_iteration.txt", "6")
    write(root / "exports" / RUN / "step-6" / "lineage.json", '{"step": 6}')
    write(root / "exports" / RUN / "step-6" / "model.safetensors", "weights")
    write(root / "models" / "Qwen" / "Qwen2.5-0.5B-Instruct" / "config.json", "{}")


def tree(root: Path) -> dict[str, bytes]:
    """Every file under `root` by its relative path, with its bytes."""
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


PATHS = [lustre_path(f"{names.DATA_MOUNT}/checkpoints/{RUN}"), lustre_path(f"{names.DATA_MOUNT}/exports/{RUN}")]
"""The instance paths `a_run` fills: the run directory and its exports."""
