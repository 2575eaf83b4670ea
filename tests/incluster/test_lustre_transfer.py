"""The Lustre transfers' REST clients: a wait longer than one Google access token's lifetime keeps every request
authorised, because the Authorization header they read at each request is a FreshBearer (incluster/google_token.py);
the answers of the two APIs read as they document them (Cloud Storage JSON API objects.list pages, objects.get,
objects.insert with ifGenerationMatch and its 412; Managed Lustre v1 Operations and TransferCounters), `requests`
patched at the boundary; through the fault proxy in front of the Google APIs stand-in (tests/support/lustre_stand_in.py
served over HTTP), a transient answer (UNAVAILABLE, a reset, a cut body) is retried with the backoff and Retry-After, a
refusal is not, a retried conditional write stays conditional, and an export asked again while it runs is picked up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from core.facts.gcp import GCLOUD_TOKEN_LIFETIME_SECONDS
from incluster import lustre_transfer
from incluster.google_token import Credential, FreshBearer
from incluster.lustre_transfer import (
    PreconditionFailed,
    RestObjects,
    RestTransfers,
    Stored,
    TransferError,
    progress_of,
    transfer_faults,
    wait_for,
)
from tests.support.clock import Clock
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy
from tests.support.lustre_stand_in import BUCKET, INSTANCE, StandInGoogleApis, google_apis, stand_in_apis


class Answer:
    """A `requests` response with a JSON body (or a text one), as `_checked` reads it."""

    def __init__(self, body: dict[str, Any] | str, status: int = 200, reason: str = "OK") -> None:
        self.status_code, self.reason, self.headers = status, reason, {}
        self.text = body if isinstance(body, str) else json.dumps(body)
        self.content = self.text.encode()
        self._body = body

    def json(self) -> dict[str, Any]:
        if isinstance(self._body, str):
            raise ValueError("not JSON")
        return self._body


def gcloud_tokens(clock: Clock, fetched: list[float]) -> FreshBearer:
    """The header of tokens as gcloud hands them out, each for GCLOUD_TOKEN_LIFETIME_SECONDS; the n-th is `ya29.t<n>`."""

    def fetch() -> Credential:
        fetched.append(clock())
        return Credential(f"ya29.t{len(fetched)}", clock() + GCLOUD_TOKEN_LIFETIME_SECONDS)

    return FreshBearer(fetch, clock)


def test_a_transfer_waited_on_for_three_hours_reads_its_operation_with_a_live_token_every_time(monkeypatch):
    """Each operations.get of a 3-hour export, one every 10 minutes, goes out with a token that has not ended; one
    token fetched at the start would have been two hours dead by the end."""
    clock, fetched = Clock(1_800_000_000.0), []
    sent: list[tuple[float, str]] = []
    polls = 18

    def get(url: str, headers: dict[str, str], timeout: float) -> Answer:
        sent.append((clock(), headers["Authorization"]))
        return Answer({"name": "operations/export-1", "done": len(sent) >= polls, "response": {}})

    monkeypatch.setattr(lustre_transfer.requests, "get", get)
    transfers = RestTransfers(gcloud_tokens(clock, fetched))
    started = {"name": "operations/export-1", "done": False}
    wait_for(transfers, started, "exporting /checkpoints/run", 6 * 3600, lambda _: None, 600, clock, clock.sleep)
    assert len(sent) == polls and clock.now - fetched[0] == polls * 600
    issued = {f"Bearer ya29.t{number}": at for number, at in enumerate(fetched, start=1)}
    assert all(at - issued[header] < GCLOUD_TOKEN_LIFETIME_SECONDS for at, header in sent)
    assert len(fetched) == 4


def test_the_marker_is_written_with_the_token_of_the_moment_and_its_content_type(monkeypatch):
    clock, fetched = Clock(1_800_000_000.0), []
    posted: list[dict[str, str]] = []

    def post(url: str, params: dict[str, str], data: bytes, headers: dict[str, str], timeout: float) -> Answer:
        posted.append(headers)
        assert params == {"uploadType": "media", "name": "parked/marker.json", "ifGenerationMatch": "0"}
        return Answer({"name": params["name"], "generation": "17"})

    monkeypatch.setattr(lustre_transfer.requests, "post", post)
    objects = RestObjects("parked", gcloud_tokens(clock, fetched))
    assert objects.write_text("parked/marker.json", "{}", if_generation=0) == 17
    clock.now += GCLOUD_TOKEN_LIFETIME_SECONDS
    objects.write_text("parked/marker.json", "{}", if_generation=0)
    assert posted == [
        {"Authorization": "Bearer ya29.t1", "Content-Type": "application/json"},
        {"Authorization": "Bearer ya29.t2", "Content-Type": "application/json"},
    ]


def test_a_write_over_another_generation_is_refused_as_cloud_storage_answers_it(monkeypatch):
    """HTTP 412 Precondition Failed is Cloud Storage's answer to an ifGenerationMatch that does not match
    (cloud.google.com/storage/docs/request-preconditions)."""
    error = {"error": {"code": 412, "message": "At least one of the pre-conditions you specified did not hold."}}
    monkeypatch.setattr(
        lustre_transfer.requests, "post", lambda url, **kwargs: Answer(error, 412, "Precondition Failed")
    )
    with pytest.raises(PreconditionFailed, match="writing gs://parked/parked/marker.json: HTTP 412"):
        RestObjects("parked", {}).write_text("parked/marker.json", "{}", if_generation=5)


def test_the_marker_is_read_with_its_generation_and_an_error_page_is_no_marker(monkeypatch):
    asked: list[dict[str, str]] = []

    def get(url: str, params: dict[str, str], headers: dict[str, str], timeout: float) -> Answer:
        asked.append(params)
        if params.get("fields") == "generation":
            return Answer({"generation": "42"})
        return Answer('{"state": "parked"}\n')

    monkeypatch.setattr(lustre_transfer.requests, "get", get)
    assert RestObjects("parked", {}).read("parked/marker.json") == Stored('{"state": "parked"}\n', 42)
    assert asked == [{"fields": "generation"}, {"alt": "media", "ifGenerationMatch": "42"}]

    def failing(url: str, params: dict[str, str], headers: dict[str, str], timeout: float) -> Answer:
        if params.get("fields") == "generation":
            return Answer({"generation": "42"})
        return Answer("<html>Server Error</html>", 503, "Service Unavailable")

    monkeypatch.setattr(lustre_transfer.requests, "get", failing)
    with pytest.raises(TransferError, match="reading gs://parked/parked/marker.json: HTTP 503"):
        RestObjects("parked", {}, retry_seconds=0).read("parked/marker.json")
    monkeypatch.setattr(lustre_transfer.requests, "get", lambda url, **kwargs: Answer({"error": {"message": "x"}}, 404))
    assert RestObjects("parked", {}).read("parked/marker.json") is None


def test_objects_are_listed_over_every_page(monkeypatch):
    pages = {None: {"items": [{"name": "b"}], "nextPageToken": "t1"}, "t1": {"items": [{"name": "a"}]}}
    monkeypatch.setattr(
        lustre_transfer.requests, "get", lambda url, params, **kwargs: Answer(pages[params.get("pageToken")])
    )
    assert RestObjects("parked", {}).names("parked/") == ["a", "b"]


def test_a_refused_transfer_request_is_an_error_not_an_operation(monkeypatch):
    refusal = {"error": {"code": 400, "message": "a path inside the bucket must end with a forward slash"}}
    monkeypatch.setattr(lustre_transfer.requests, "post", lambda url, **kwargs: Answer(refusal, 400, "Bad Request"))
    with pytest.raises(TransferError, match="exporting /checkpoints: HTTP 400: a path inside the bucket must end"):
        RestTransfers({}).export_data("projects/p/locations/z/instances/i", "/checkpoints", "gs://b/p")


def operation(counters: dict[str, str], summaries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A finished export Operation with these TransferCounters (googleapis google/cloud/lustre/v1/transfer.proto)."""
    metadata: dict[str, Any] = {"counters": counters, "transferType": "EXPORT"}
    if summaries is not None:
        metadata["errorSummaries"] = summaries
    return {"name": "ops/1", "done": True, "response": {}, "metadata": {"operationMetadata": metadata}}


def test_a_transfer_is_whole_only_when_every_object_found_was_copied_and_none_failed():
    assert transfer_faults(operation({"foundObjectsCount": "3", "objectsCopiedCount": "3"}), "x") is None
    assert transfer_faults(operation({"objectsSkippedCount": "3"}), "x") is None, "all already there"
    assert transfer_faults(operation({"foundObjectsCount": "3", "objectsCopiedCount": "2"}), "x") == (
        "x is not whole: 2 of 3 objects copied, 0 failed"
    )
    failed = {"foundObjectsCount": "3", "objectsCopiedCount": "3", "objectsFailedCount": "1"}
    assert transfer_faults(operation(failed), "x") == "x is not whole: 3 of 3 objects copied, 1 failed"
    summary = {
        "errorCode": "UNAVAILABLE",
        "errorCount": "1",
        "errorLogEntries": [{"uri": "gs://b/o", "errorDetails": ["d"]}],
    }
    whole = {"foundObjectsCount": "3", "objectsCopiedCount": "3"}
    assert transfer_faults(operation(whole, [summary]), "x") == (
        "x is not whole: 3 of 3 objects copied, 0 failed; UNAVAILABLE x1: gs://b/o d"
    )


def test_the_progress_line_reads_the_v1_byte_counters():
    running = operation({"bytesFoundCount": str(3 * 2**30), "bytesCopiedCount": str(2**30)})
    assert progress_of(running) == "1.0 of 3.0 GiB"
    assert progress_of({"metadata": {"statusMessage": "queued"}}) == "queued"


@pytest.fixture
def proxied_apis(tmp_path) -> Iterator[tuple[StandInGoogleApis, FaultProxy]]:
    """The Google APIs stand-in behind the fault proxy, its instance holding /checkpoints/run."""
    (tmp_path / "lustre" / "checkpoints" / "run").mkdir(parents=True)
    (tmp_path / "lustre" / "checkpoints" / "run" / "data.pt").write_text("data")
    with google_apis(stand_in_apis(tmp_path)) as apis, fault_proxy(apis.url) as proxy:
        yield apis, proxy


def clients(proxy: FaultProxy, lines: list[str], slept: list[float]) -> tuple[RestTransfers, RestObjects]:
    """The REST clients through the proxy, their progress lines into `lines`, their pauses into `slept`."""
    token = {"Authorization": "Bearer ya29.test"}
    transfers = RestTransfers(token, lines.append, api=f"{proxy.url}/v1", sleep=slept.append)
    objects = RestObjects(BUCKET, token, lines.append, f"{proxy.url}/storage/v1", f"{proxy.url}/upload/storage/v1",
                          sleep=slept.append)  # fmt: skip
    return transfers, objects


UNAVAILABLE = json.dumps(
    {"error": {"code": 503, "message": "The service is currently unavailable.", "status": "UNAVAILABLE"}}
)
"""Google's JSON error for UNAVAILABLE (cloud.google.com/apis/design/errors)."""


def test_an_unavailable_read_of_a_running_export_is_retried_after_its_retry_after_until_the_export_ends(proxied_apis):
    """Fault injected: operations.get answers 503 UNAVAILABLE with Retry-After: 7 twice, then a cut answer."""
    apis, proxy = proxied_apis
    lines, slept = [], []
    transfers, _ = clients(proxy, lines, slept)
    started = transfers.export_data(INSTANCE, "/checkpoints/run", f"gs://{BUCKET}/parked/data/checkpoints/run/")
    proxy.inject(Fault(503, "/operations/", "GET", times=2, headers={"Retry-After": "7"}, body=UNAVAILABLE),
                 Fault("cut", "/operations/", "GET"))  # fmt: skip
    clock = Clock(0.0)
    done = wait_for(transfers, started, "exporting /checkpoints/run", 600, lines.append, 10, clock,
                    lambda s: (slept.append(s), clock.sleep(s)))  # fmt: skip
    assert done["@type"].endswith("ExportDataResponse") and apis.lustre.starts == 1
    # The poll, Retry-After twice (longer than the backoff's 1 s and 2 s), the backoff's 4 s after the cut answer, then
    # the poll before the second read, which finds it done.
    assert slept == [10, 7, 7, 4, 10]
    retried = [line for line in lines if "trying again" in line]
    assert len(retried) == 3 and "HTTP 503: The service is currently unavailable." in retried[0], lines


def test_an_unavailable_export_is_started_again_with_its_request_id_and_starts_once(proxied_apis):
    """Fault injected: exportData answers 503 UNAVAILABLE once, and the connection is reset once."""
    apis, proxy = proxied_apis
    lines, slept = [], []
    transfers, _ = clients(proxy, lines, slept)
    proxy.inject(Fault(503, ":exportData", "POST", body=UNAVAILABLE), Fault("refused", ":exportData", "POST"))
    started = transfers.export_data(INSTANCE, "/checkpoints/run", f"gs://{BUCKET}/parked/data/checkpoints/run/")
    assert started["done"] is False and apis.lustre.starts == 1 and slept == [1.0, 2.0]


def test_a_second_export_of_the_same_path_picks_up_the_one_running(proxied_apis):
    """A guardian that restarted while its export ran asks again: the instance refuses to queue it (ABORTED), and the
    export running is the same one, so it is waited on instead; another path's export is still refused."""
    apis, proxy = proxied_apis
    lines, slept = [], []
    transfers, _ = clients(proxy, lines, slept)
    uri = f"gs://{BUCKET}/parked/data/checkpoints/run/"
    first = transfers.export_data(INSTANCE, "/checkpoints/run", uri)
    again = transfers.export_data(INSTANCE, "/checkpoints/run", uri)
    assert again["name"] == first["name"] and apis.lustre.starts == 1
    assert lines == [f"exporting /checkpoints/run: picking up {first['name']}, which runs it already"]
    with pytest.raises(TransferError, match="HTTP 409: unable to queue the operation"):
        transfers.export_data(INSTANCE, "/exports/run", f"gs://{BUCKET}/parked/data/exports/run/")


def test_a_refused_read_is_not_retried_and_a_transient_one_gives_up_at_the_deadline(proxied_apis):
    """Faults injected: a 403 (not retried: AIP-194), then 503s past the wait's deadline."""
    apis, proxy = proxied_apis
    lines, slept = [], []
    transfers, objects = clients(proxy, lines, slept)
    proxy.inject(Fault(403, "/o", "GET", body=json.dumps({"error": {"code": 403, "message": "denied"}})))
    with pytest.raises(TransferError, match="HTTP 403: denied"):
        objects.names("parked/")
    assert slept == []
    started = transfers.export_data(INSTANCE, "/checkpoints/run", f"gs://{BUCKET}/parked/data/checkpoints/run/")
    proxy.inject(Fault(503, "/operations/", "GET", times=100, body=UNAVAILABLE))
    clock = Clock(0.0)
    with pytest.raises(TransferError, match="HTTP 503"):
        wait_for(transfers, started, "exporting /checkpoints/run", 30, lines.append, 10, clock, clock.sleep)
    assert 10 + 1 + 2 + 4 + 8 <= clock.now <= 30


def test_a_retried_conditional_write_stays_conditional_and_its_own_stored_try_is_no_conflict(tmp_path, monkeypatch):
    """Fault injected at the boundary: the first insert reaches the bucket and its answer is lost (a reset). The retry
    names the same ifGenerationMatch and meets 412; the object holds this very text, so the write succeeded. When
    another writer's text is there instead, the 412 stands; a 412 on the first try is not retried."""
    name = "parked/marker.json"
    sent: list[str] = []
    real_post = lustre_transfer.requests.post

    def lossy(url: str, **kwargs: Any) -> Any:
        sent.append(kwargs["params"]["ifGenerationMatch"])
        answer = real_post(url, **{**kwargs, "data": other} if len(sent) == 1 and other else kwargs)
        if len(sent) == 1:
            raise lustre_transfer.requests.ConnectionError("connection reset after the request was sent")
        return answer

    with google_apis(stand_in_apis(tmp_path)) as apis:
        lines: list[str] = []
        objects = RestObjects(BUCKET, {}, lines.append, f"{apis.url}/storage/v1", f"{apis.url}/upload/storage/v1",
                              sleep=lambda s: None)  # fmt: skip
        monkeypatch.setattr(lustre_transfer.requests, "post", lossy)
        other = b""
        generation = objects.write_text(name, '{"state": "parking"}', if_generation=0)
        assert sent == ["0", "0"] and objects.read(name) == Stored('{"state": "parking"}', generation)
        assert lines[-1].endswith("a retry met HTTP 412 and the object holds this text: an earlier try stored it")

        sent.clear()
        other = b'{"state": "stale"}'
        with pytest.raises(PreconditionFailed, match="HTTP 412"):
            objects.write_text(name, '{"state": "parked"}', if_generation=generation)
        assert sent == [str(generation)] * 2 and objects.read(name).text == '{"state": "stale"}'

        monkeypatch.setattr(
            lustre_transfer.requests, "post", lambda url, **kwargs: (sent.append("x"), real_post(url, **kwargs))[1]
        )
        sent.clear()
        with pytest.raises(PreconditionFailed, match="HTTP 412"):
            objects.write_text(name, '{"state": "parked"}', if_generation=generation)
        assert sent == ["x"]
