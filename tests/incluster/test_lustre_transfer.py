"""The Lustre transfers' REST clients: a wait longer than one Google access token's lifetime keeps every request
authorised, because the Authorization header they read at each request is a FreshBearer (incluster/google_token.py);
through the fault proxy in front of the Google APIs stand-in, a transient answer (UNAVAILABLE, a reset, a cut body) is
retried with the backoff and Retry-After, a refusal is not, and an export asked again while it runs is picked up."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from core.facts.gcp import GCLOUD_TOKEN_LIFETIME_SECONDS
from incluster import lustre_transfer
from incluster.google_token import Credential, FreshBearer
from incluster.lustre_transfer import RestObjects, RestTransfers, TransferError, wait_for
from tests.support.clock import Clock
from tests.support.fault_proxy import Fault, FaultProxy, fault_proxy
from tests.support.google_apis_stand_in import BUCKET, INSTANCE, GoogleApis, google_apis


class Answer:
    """A `requests` response of status 200 and a JSON body, as `_checked` reads it."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.status_code, self.reason = 200, "OK"
        self.content = json.dumps(body).encode()
        self._body = body

    def json(self) -> dict[str, Any]:
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
        return Answer({"name": params["name"]})

    monkeypatch.setattr(lustre_transfer.requests, "post", post)
    objects = RestObjects("parked", gcloud_tokens(clock, fetched))
    objects.write_text("parked/marker.json", "{}")
    clock.now += GCLOUD_TOKEN_LIFETIME_SECONDS
    objects.write_text("parked/marker.json", "{}")
    assert posted == [
        {"Authorization": "Bearer ya29.t1", "Content-Type": "application/json"},
        {"Authorization": "Bearer ya29.t2", "Content-Type": "application/json"},
    ]


@pytest.fixture
def proxied_apis() -> Iterator[tuple[GoogleApis, FaultProxy]]:
    """The Google APIs stand-in behind the fault proxy."""
    with google_apis(GoogleApis()) as apis, fault_proxy(apis.url) as proxy:
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
    assert done["@type"].endswith("ExportDataResponse") and apis.starts == 1
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
    assert started["done"] is False and apis.starts == 1 and slept == [1.0, 2.0]


def test_a_second_export_of_the_same_path_picks_up_the_one_running(proxied_apis):
    """A guardian that restarted while its export ran asks again: the instance refuses to queue it (ABORTED), and the
    export running is the same one, so it is waited on instead; another path's export is still refused."""
    apis, proxy = proxied_apis
    lines, slept = [], []
    transfers, _ = clients(proxy, lines, slept)
    uri = f"gs://{BUCKET}/parked/data/checkpoints/run/"
    first = transfers.export_data(INSTANCE, "/checkpoints/run", uri)
    again = transfers.export_data(INSTANCE, "/checkpoints/run", uri)
    assert again["name"] == first["name"] and apis.starts == 1
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
