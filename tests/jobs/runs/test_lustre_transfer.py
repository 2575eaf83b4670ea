"""The Lustre transfers' REST clients: a wait longer than one Google access token's lifetime keeps every request
authorised, because the token is fetched again before it ends (jobs/runs/lustre_transfer.py FreshToken)."""

from __future__ import annotations

import json
from typing import Any

from core.facts.gcp import GCLOUD_TOKEN_LIFETIME_SECONDS
from jobs.runs import lustre_transfer
from jobs.runs.lustre_transfer import TOKEN_REFRESH_SECONDS, FreshToken, RestTransfers, wait_for


class Clock:
    """Seconds that move only when a test says so."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class Answer:
    """A `requests` response of status 200 and a JSON body, as `_checked` reads it."""

    def __init__(self, body: dict[str, Any]) -> None:
        self.status_code, self.reason = 200, "OK"
        self.content = json.dumps(body).encode()
        self._body = body

    def json(self) -> dict[str, Any]:
        return self._body


def numbered_tokens(clock: Clock, fetched: list[float]) -> FreshToken:
    """A FreshToken whose n-th fetch is `token-n`, recording when each was fetched."""

    def fetch() -> str:
        fetched.append(clock())
        return f"token-{len(fetched)}"

    return FreshToken(fetch, clock)


def test_a_token_is_fetched_once_and_again_when_it_is_half_its_lifetime_old():
    clock, fetched = Clock(), []
    token = numbered_tokens(clock, fetched)
    assert [token(), token()] == ["token-1", "token-1"]
    clock.now = TOKEN_REFRESH_SECONDS - 1
    assert token() == "token-1"
    clock.now = TOKEN_REFRESH_SECONDS
    assert token() == "token-2"
    assert fetched == [0.0, TOKEN_REFRESH_SECONDS]
    assert TOKEN_REFRESH_SECONDS < GCLOUD_TOKEN_LIFETIME_SECONDS


def test_a_transfer_waited_on_for_three_hours_reads_its_operation_with_a_live_token_every_time(monkeypatch):
    """Each operations.get of a 3-hour export, one every 10 minutes, goes out with a token younger than its
    3600 s lifetime; a token fetched once at the start would have been 50 minutes dead by the end."""
    clock, fetched = Clock(), []
    sent: list[tuple[float, str]] = []
    polls = 18

    def get(url: str, headers: dict[str, str], timeout: float) -> Answer:
        sent.append((clock(), headers["Authorization"]))
        return Answer({"name": "operations/export-1", "done": len(sent) >= polls, "response": {}})

    monkeypatch.setattr(lustre_transfer.requests, "get", get)
    transfers = RestTransfers(numbered_tokens(clock, fetched))
    started = {"name": "operations/export-1", "done": False}
    lines: list[str] = []
    wait_for(transfers, started, "exporting /checkpoints/run", 6 * 3600, lines.append, 600, clock, clock.sleep)
    assert len(sent) == polls and clock.now == polls * 600
    issued = dict(zip((f"Bearer token-{n}" for n in range(1, len(fetched) + 1)), fetched, strict=True))
    assert all(at - issued[header] < GCLOUD_TOKEN_LIFETIME_SECONDS for at, header in sent)
    assert len(fetched) == 6
