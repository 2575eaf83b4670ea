"""The Lustre transfers' REST clients: a wait longer than one Google access token's lifetime keeps every request
authorised, because the Authorization header they read at each request is a FreshBearer (incluster/google_token.py)."""

from __future__ import annotations

import json
from typing import Any

from core.facts.gcp import GCLOUD_TOKEN_LIFETIME_SECONDS
from incluster import lustre_transfer
from incluster.google_token import Credential, FreshBearer
from incluster.lustre_transfer import RestObjects, RestTransfers, wait_for
from tests.support.clock import Clock


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
