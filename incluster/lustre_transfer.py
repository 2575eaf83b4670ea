"""Managed Lustre's transfers to and from Cloud Storage, and the few Cloud Storage calls parking needs, as the client
side makes them: every request with a deadline, every wait with one and a progress line.

Managed Lustre API v1 (managed-lustre/docs/reference/rest/v1, read 2026-12-02):
- `POST https://lustre.googleapis.com/v1/{name=projects/*/locations/*/instances/*}:exportData`, body
  `{"lustrePath": {"path": "/dir"}, "gcsPath": {"uri": "gs://bucket/prefix/"}, "requestId": ...}`; a path inside the
  bucket must end with `/`; the Lustre path starts with `/`, default `/` (projects.locations.instances/exportData).
- `POST ...:importData`, body `{"gcsPath": {"uri": ...}, "lustrePath": {"path": ...}, "requestId": ...}`; a Lustre
  path other than `/` must already exist on the file system (google.cloud.lustre.v1 LustrePath.path).
- Both answer a long-running Operation `{"name", "metadata", "done", "error" | "response"}`: while `done` is false
  (or absent) it runs; once true it holds either `error` (a google.rpc.Status `{"code", "message"}`) or `response`
  (projects.locations.operations/get, google.longrunning.Operation). The metadata (ExportDataMetadata,
  ImportDataMetadata) carries `operationMetadata` (TransferOperationMetadata): `counters` (TransferCounters:
  `foundObjectsCount`, `bytesFoundCount`, `objectsSkippedCount`, `bytesSkippedCount`, `objectsCopiedCount`,
  `bytesCopiedCount`, `objectsFailedCount`, `bytesFailedCount`, int64 so JSON strings, a zero left out) and
  `errorSummaries` (ErrorSummary `{"errorCode", "errorCount", "errorLogEntries": [{"uri", "errorDetails"}]}`)
  (googleapis/googleapis @6c345acd google/cloud/lustre/v1/transfer.proto, messages TransferCounters, ErrorSummary,
  ErrorLogEntry, TransferOperationMetadata). `foundObjectsCount` leaves out what is skipped as already at the
  destination, so a transfer is whole when nothing failed, no error is summarised and every object found was copied
  (`transfer_faults`). Transfers are incremental: only files not yet at the destination, or changed since, are copied
  (managed-lustre/docs/transfer-data, read 2026-12-07); nothing is deleted at the destination.
- The caller needs `lustre.instances.exportData` / `lustre.instances.importData` (roles/lustre.admin,
  managed-lustre/docs/access-control); the data moves as the Managed Lustre service agent, which needs
  roles/storage.objectUser on the bucket (core/facts/gcp.py LUSTRE_TRANSFER_ROLE). One transfer per instance at a
  time: a second is refused with ABORTED "unable to queue the operation" (managed-lustre/docs/transfer-data,
  Limitations), so the transfers here run one after the other.
"""

from __future__ import annotations

import functools
import json
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

import requests

from core.facts.gcp import LUSTRE_API, STORAGE_API, STORAGE_UPLOAD_API
from incluster.backoff import Transient, retry_after, retrying, transient_status

REQUEST_SECONDS = 30.0
"""Deadline of each HTTP request."""

POLL_SECONDS = 10.0
"""Pause between two reads of a running operation."""

RETRY_SECONDS = 300.0
"""How long a start or a Cloud Storage call keeps retrying a transient answer (incluster/backoff.py)."""

TRANSFER_DEADLINE_SECONDS = 6 * 3600.0
"""How long a park or an unpark waits for each transfer by default: at the documented ceiling of 100 GB/s for files
over 32 MB (transfer-data page, Performance) this bounds nothing a run holds; the instance's own throughput limits it
first."""


class TransferError(Exception):
    """A transfer or a Cloud Storage call failed; the message is one line saying which and why."""


class PreconditionFailed(TransferError):
    """A Cloud Storage write refused because the object's generation is not the one the writer read (HTTP 412,
    cloud.google.com/storage/docs/request-preconditions: `ifGenerationMatch` that does not match)."""


@dataclass(frozen=True)
class Stored:
    """A small object's text and its generation (what a conditional write names)."""

    text: str
    """The object's text."""
    generation: int
    """Its generation (objects resource `generation`)."""


class Transfers(Protocol):
    """Managed Lustre's exportData, importData and operations.get, as the API documents them."""

    def export_data(self, instance: str, lustre_path: str, gcs_uri: str) -> dict[str, Any]:
        """Start an export of `lustre_path` into `gcs_uri`; the Operation."""
        ...

    def import_data(self, instance: str, gcs_uri: str, lustre_path: str) -> dict[str, Any]:
        """Start an import of `gcs_uri` into `lustre_path`; the Operation."""
        ...

    def get_operation(self, name: str) -> dict[str, Any]:
        """The Operation `name` as it stands."""
        ...


class Objects(Protocol):
    """The Cloud Storage objects of one bucket: list by prefix, read and write a small text object."""

    def names(self, prefix: str) -> list[str]:
        """Names of the objects under `prefix`, sorted."""
        ...

    def read(self, name: str) -> Stored | None:
        """Object `name`'s text and generation; None when there is none."""
        ...

    def write_text(self, name: str, text: str, if_generation: int) -> int:
        """Write `text` as object `name` (JSON content) only while its generation is `if_generation` (0: only while
        there is none); the new generation. PreconditionFailed otherwise."""
        ...


def instance_name(project: str, zone: str, instance_id: str) -> str:
    """`projects/<project>/locations/<zone>/instances/<id>`: the instance as the API names it."""
    return f"projects/{project}/locations/{zone}/instances/{instance_id}"


def gcs_uri(bucket: str, prefix: str) -> str:
    """`gs://<bucket>/<prefix>`, ending with `/` as the API requires for a path inside a bucket."""
    return f"gs://{bucket}/{prefix.strip('/')}/" if prefix.strip("/") else f"gs://{bucket}/"


class Unavailable(Transient, TransferError):
    """A transient answer (UNAVAILABLE, no answer, a cut answer, or a 429/5xx saying when to come back): retried."""


class Refused(TransferError):
    """An answer other than 2xx that is not transient; `status` is its HTTP status."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _sent(send: Callable[[], requests.Response], what: str, host: str) -> requests.Response:
    """`send()`'s response; Unavailable when it has none (no connection, no answer in time, a cut body) or a
    transient status (incluster/backoff.py transient_status)."""
    try:
        response = send()
    except requests.RequestException as error:
        raise Unavailable(f"{what}: no answer from {host}: {type(error).__name__}") from None
    if response.status_code >= 400:
        wait = retry_after(response.headers.get("Retry-After"))
        if transient_status(response.status_code, wait):
            raise Unavailable(f"{what}: HTTP {response.status_code}: {_message(response)}", wait)
    return response


def _message(response: requests.Response) -> str:
    try:
        message = response.json()["error"]["message"]
    except (ValueError, KeyError, TypeError):
        message = response.text.strip()[:200] or response.reason
    return (str(message).splitlines() or [""])[0][:200]


def _checked(response: requests.Response, what: str) -> dict[str, Any]:
    if response.status_code == 412:
        raise PreconditionFailed(f"{what}: HTTP 412: the object changed since it was read")
    if response.status_code >= 400:
        raise Refused(f"{what}: HTTP {response.status_code}: {_message(response)}", response.status_code)
    try:
        return response.json() if response.content else {}
    except ValueError:
        raise TransferError(f"{what}: the answer is not JSON") from None


def _to_stderr(line: str) -> None:
    """A retry's progress line on stderr, where the guardian and the CLI write theirs."""
    print(line, file=sys.stderr, flush=True)


@dataclass
class RestTransfers:
    """Transfers through the REST API with the caller's bearer token (every request within REQUEST_SECONDS; a start
    retried while its answer is transient, for RETRY_SECONDS)."""

    headers: Mapping[str, str]
    """The caller's Authorization header, read at each request (incluster/google_token.py FreshBearer: renewed before
    the token ends, as a transfer may be waited on for hours)."""
    report: Callable[[str], None] = _to_stderr
    """Where a retry's progress line goes."""
    api: str = LUSTRE_API
    """The Managed Lustre API's base URL."""
    retry_seconds: float = RETRY_SECONDS
    """How long a start keeps retrying a transient answer."""
    sleep: Callable[[float], None] = time.sleep
    """The pause between two tries."""

    def _post(self, url: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        # The same body, so the same requestId, on every try: the API does not start a second transfer for it
        # (AIP-155), which is what makes the retry of a start safe.
        def send() -> requests.Response:
            return requests.post(url, json=body, headers={**self.headers}, timeout=REQUEST_SECONDS)

        def once() -> dict[str, Any]:
            return _checked(_sent(send, what, self.api), what)

        return retrying(once, what, self.retry_seconds, self.report, sleep=self.sleep)

    def _start(self, instance: str, verb: str, body: dict[str, Any], what: str) -> dict[str, Any]:
        """POST `<instance>:<verb>`, or, when the instance refuses to queue it (ABORTED, HTTP 409: one transfer per
        instance at a time) and the transfer running is this very one (a guardian that restarted while it ran), that
        running Operation."""
        try:
            return self._post(f"{self.api}/{instance}:{verb}", body, what)
        except Refused as refusal:
            if refusal.status != 409:
                raise
            running = running_transfer(self.list_operations(instance), instance, body)
            if running is None:
                raise
            self.report(f"{what}: picking up {running.get('name')}, which runs it already")
            return running

    def export_data(self, instance: str, lustre_path: str, gcs_uri: str) -> dict[str, Any]:
        """POST `<instance>:exportData` (or pick up the same export running)."""
        body = {"lustrePath": {"path": lustre_path}, "gcsPath": {"uri": gcs_uri}, "requestId": str(uuid.uuid4())}
        return self._start(instance, "exportData", body, f"exporting {lustre_path}")

    def import_data(self, instance: str, gcs_uri: str, lustre_path: str) -> dict[str, Any]:
        """POST `<instance>:importData` (or pick up the same import running)."""
        body = {"gcsPath": {"uri": gcs_uri}, "lustrePath": {"path": lustre_path}, "requestId": str(uuid.uuid4())}
        return self._start(instance, "importData", body, f"importing {gcs_uri}")

    def get_operation(self, name: str) -> dict[str, Any]:
        """GET the operation (one request: wait_for retries a transient answer)."""

        def send() -> requests.Response:
            return requests.get(f"{self.api}/{name}", headers={**self.headers}, timeout=REQUEST_SECONDS)

        return _checked(_sent(send, f"reading {name}", self.api), f"reading {name}")

    def list_operations(self, instance: str) -> list[dict[str, Any]]:
        """The instance's location's operations that are not done, every page (projects.locations.operations.list,
        `lustre.operations.list`; the filter `done = false` is assumed from AIP-160, the page does not list the
        fields it filters on, so the caller matches each Operation itself)."""
        parent = instance.split("/instances/")[0]
        url, what = f"{self.api}/{parent}/operations", f"listing the operations of {parent}"
        found: list[dict[str, Any]] = []
        params = {"filter": "done = false"}
        while True:
            page = retrying(
                functools.partial(self._page, url, params, what), what, self.retry_seconds, self.report,
                sleep=self.sleep,
            )  # fmt: skip
            found += [item for item in page.get("operations", []) if isinstance(item, dict)]
            if not page.get("nextPageToken"):
                return found
            params = {**params, "pageToken": page["nextPageToken"]}

    def _page(self, url: str, params: dict[str, str], what: str) -> dict[str, Any]:
        def send() -> requests.Response:
            return requests.get(url, params=params, headers={**self.headers}, timeout=REQUEST_SECONDS)

        return _checked(_sent(send, what, self.api), what)


def running_transfer(operations: list[dict[str, Any]], instance: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The Operation among `operations` that runs the transfer `body` asks of `instance` (not done, its metadata's
    target the instance, its source and destination the body's: ExportDataMetadata/ImportDataMetadata `target`,
    `operationMetadata.sourceLustrePath`/`sourceGcsPath`, `destinationGcsPath`/`destinationLustrePath`,
    google/cloud/lustre/v1/transfer.proto, googleapis c6b8b89); None when none does."""
    lustre = (body.get("lustrePath") or {}).get("path")
    gcs = (body.get("gcsPath") or {}).get("uri")
    for operation in operations:
        metadata = operation.get("metadata") or {}
        transfer = metadata.get("operationMetadata") or {}
        ends = {
            (transfer.get("sourceLustrePath") or {}).get("path"),
            (transfer.get("destinationLustrePath") or {}).get("path"),
            (transfer.get("sourceGcsPath") or {}).get("uri"),
            (transfer.get("destinationGcsPath") or {}).get("uri"),
        }
        if not operation.get("done") and metadata.get("target") == instance and {lustre, gcs} <= ends:
            return operation
    return None


@dataclass
class RestObjects:
    """One bucket's objects through Cloud Storage's JSON API (every request within REQUEST_SECONDS; each call retried
    while its answer is transient, for RETRY_SECONDS)."""

    bucket: str
    """The bucket."""
    headers: Mapping[str, str]
    """The caller's Authorization header, read at each request (incluster/google_token.py FreshBearer: renewed before
    the token ends, as a transfer may be waited on for hours)."""
    report: Callable[[str], None] = _to_stderr
    """Where a retry's progress line goes."""
    api: str = STORAGE_API
    """Cloud Storage's JSON API base URL."""
    upload_api: str = STORAGE_UPLOAD_API
    """Its upload URL."""
    retry_seconds: float = RETRY_SECONDS
    """How long a call keeps retrying a transient answer."""
    sleep: Callable[[float], None] = time.sleep
    """The pause between two tries."""

    def _get(self, url: str, params: dict[str, str], what: str) -> requests.Response:
        def send() -> requests.Response:
            return requests.get(url, params=params, headers={**self.headers}, timeout=REQUEST_SECONDS)

        return retrying(lambda: _sent(send, what, "Cloud Storage"), what, self.retry_seconds, self.report,
                        sleep=self.sleep)  # fmt: skip

    def names(self, prefix: str) -> list[str]:
        """objects.list with `prefix`, every page."""
        found: list[str] = []
        params = {"prefix": prefix, "fields": "items(name),nextPageToken"}
        while True:
            page = _checked(self._get(f"{self.api}/b/{self.bucket}/o", params, f"listing gs://{self.bucket}"), "list")
            found += [item["name"] for item in page.get("items", [])]
            if not page.get("nextPageToken"):
                return sorted(found)
            params = {**params, "pageToken": page["nextPageToken"]}

    def read(self, name: str) -> Stored | None:
        """objects.get of the generation (None on 404), then of that generation's media (`ifGenerationMatch`: a
        412 means it was replaced in between)."""
        url = f"{self.api}/b/{self.bucket}/o/{quote(name, safe='')}"
        what = f"reading gs://{self.bucket}/{name}"
        response = self._get(url, {"fields": "generation"}, what)
        if response.status_code == 404:
            return None
        generation = int(_checked(response, what)["generation"])
        media = self._get(url, {"alt": "media", "ifGenerationMatch": str(generation)}, what)
        if media.status_code >= 400:
            _checked(media, what)
        return Stored(media.text, generation)

    def write_text(self, name: str, text: str, if_generation: int) -> int:
        """objects.insert with `uploadType=media` and `ifGenerationMatch`; the new generation. A transient answer is
        retried with the same `ifGenerationMatch`, so the retry stays conditional; a 412 is never retried
        (PreconditionFailed). A 412 after a transient answer may be this very write, stored by a try whose answer was
        lost: the object is then read again, and when it holds `text` its generation is this write's; otherwise the
        412 stands."""
        what = f"writing gs://{self.bucket}/{name}"
        tries = 0

        def send() -> requests.Response:
            nonlocal tries
            tries += 1
            return requests.post(
                f"{self.upload_api}/b/{self.bucket}/o",
                params={"uploadType": "media", "name": name, "ifGenerationMatch": str(if_generation)},
                data=text.encode(),
                headers={**self.headers, "Content-Type": "application/json"},
                timeout=REQUEST_SECONDS,
            )

        try:
            written = retrying(lambda: _checked(_sent(send, what, "Cloud Storage"), what), what, self.retry_seconds,
                               self.report, sleep=self.sleep)  # fmt: skip
        except PreconditionFailed:
            stored = self.read(name) if tries > 1 else None
            if stored is None or stored.text != text:
                raise
            self.report(f"{what}: a retry met HTTP 412 and the object holds this text: an earlier try stored it")
            return stored.generation
        return int(written["generation"])


def _count(counters: Mapping[str, Any], key: str) -> int:
    """A TransferCounters field: int64 as a JSON string, left out when zero (proto3 JSON)."""
    return int(counters.get(key) or 0)


def transfer_metadata(operation: dict[str, Any]) -> dict[str, Any]:
    """The Operation's TransferOperationMetadata (`metadata.operationMetadata`), {} without one."""
    return (operation.get("metadata") or {}).get("operationMetadata") or {}


def transfer_faults(operation: dict[str, Any], what: str) -> str | None:
    """Why a finished transfer did not copy everything it found (one line), or None when it is whole: no object
    failed, no error is summarised, and the objects copied are the objects found."""
    metadata = transfer_metadata(operation)
    counters = metadata.get("counters") or {}
    found, copied = _count(counters, "foundObjectsCount"), _count(counters, "objectsCopiedCount")
    failed, summaries = _count(counters, "objectsFailedCount"), metadata.get("errorSummaries") or []
    if not failed and not summaries and copied == found:
        return None
    line = f"{what} is not whole: {copied} of {found} objects copied, {failed} failed"
    for summary in summaries[:1]:
        entry = (summary.get("errorLogEntries") or [{}])[0]
        detail = "; ".join(entry.get("errorDetails") or [])
        line += f"; {summary.get('errorCode')} x{summary.get('errorCount')}: {entry.get('uri', '')} {detail}".rstrip()
    return line.splitlines()[0][:400]


def progress_of(operation: dict[str, Any]) -> str:
    """What an Operation's metadata says of its progress: the TransferCounters' bytes copied of bytes found, else
    its status message, else nothing."""
    metadata = operation.get("metadata") or {}
    counters = transfer_metadata(operation).get("counters") or {}
    if "bytesFoundCount" in counters:
        copied, found = _count(counters, "bytesCopiedCount"), _count(counters, "bytesFoundCount")
        return f"{copied / 2**30:.1f} of {found / 2**30:.1f} GiB"
    return str(metadata.get("statusMessage") or "")


def wait_for(
    transfers: Transfers,
    operation: dict[str, Any],
    what: str,
    deadline_seconds: float,
    report: Callable[[str], None],
    poll: float = POLL_SECONDS,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> dict[str, Any]:
    """Poll the Operation until `done`, with a progress line per read; its `response`. A transient read (Unavailable)
    is retried with incluster/backoff.py's backoff and a progress line until the deadline. TransferError when it
    ends with `error` or is still running after `deadline_seconds` (it then keeps running in the cloud: the message
    names it)."""
    name = operation.get("name", "")
    start = clock()
    while not operation.get("done"):
        elapsed = clock() - start
        if elapsed > deadline_seconds:
            raise TransferError(
                f"{what} still running after {deadline_seconds:g} s; it goes on in the cloud as {name}"
                " (gcloud lustre operations describe); run the command again once it is done"
            )
        shown = progress_of(operation)
        report(f"{what}: running for {elapsed:.0f} s{f', {shown}' if shown else ''}")
        sleep(poll)
        operation = retrying(
            lambda: transfers.get_operation(name), what, deadline_seconds, report, clock=clock, sleep=sleep, since=start
        )
    if operation.get("error"):
        error = operation["error"]
        message = str(error.get("message") or json.dumps(error, sort_keys=True)).splitlines()[0][:200]
        raise TransferError(f"{what} failed (code {error.get('code')}): {message}")
    return operation.get("response") or {}
