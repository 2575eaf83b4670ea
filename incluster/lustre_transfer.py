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
  ImportDataMetadata) carries `operationMetadata.counters` (TransferCounters) for the progress line.
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

    def read_text(self, name: str) -> str | None:
        """The text of object `name`; None when there is none."""
        ...

    def write_text(self, name: str, text: str) -> None:
        """Write `text` as object `name` (JSON content)."""
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

    def read_text(self, name: str) -> str | None:
        """objects.get with `alt=media`; None on 404."""
        url = f"{self.api}/b/{self.bucket}/o/{quote(name, safe='')}"
        response = self._get(url, {"alt": "media"}, f"reading gs://{self.bucket}/{name}")
        if response.status_code == 404:
            return None
        if response.status_code >= 400:
            _checked(response, f"reading gs://{self.bucket}/{name}")
        return response.text

    def write_text(self, name: str, text: str) -> None:
        """objects.insert with `uploadType=media` (a retry writes the same bytes again)."""
        what = f"writing gs://{self.bucket}/{name}"

        def send() -> requests.Response:
            return requests.post(
                f"{self.upload_api}/b/{self.bucket}/o",
                params={"uploadType": "media", "name": name},
                data=text.encode(),
                headers={**self.headers, "Content-Type": "application/json"},
                timeout=REQUEST_SECONDS,
            )

        retrying(lambda: _checked(_sent(send, what, "Cloud Storage"), what), what, self.retry_seconds, self.report,
                 sleep=self.sleep)  # fmt: skip


def progress_of(operation: dict[str, Any]) -> str:
    """What an Operation's metadata says of its progress: the TransferCounters' bytes copied of bytes found, else
    its status message, else nothing."""
    metadata = operation.get("metadata") or {}
    counters = (metadata.get("operationMetadata") or {}).get("counters") or {}
    copied, found = counters.get("bytesCopied"), counters.get("bytesFound")
    if copied is not None and found:
        return f"{int(copied) / 2**30:.1f} of {int(found) / 2**30:.1f} GiB"
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
