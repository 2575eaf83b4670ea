"""The Lustre transfers' REST clients: a wait longer than one Google access token's lifetime keeps every request
authorised, because the Authorization header they read at each request is a FreshBearer (incluster/google_token.py);
the answers of the two APIs read as they document them (Cloud Storage JSON API objects.list pages, objects.get,
objects.insert with ifGenerationMatch and its 412; Managed Lustre v1 Operations and TransferCounters), `requests`
patched at the boundary."""

from __future__ import annotations

import json
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


class Answer:
    """A `requests` response with a JSON body (or a text one), as `_checked` reads it."""

    def __init__(self, body: dict[str, Any] | str, status: int = 200, reason: str = "OK") -> None:
        self.status_code, self.reason = status, reason
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
        RestObjects("parked", {}).read("parked/marker.json")
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
