"""Google access tokens that stay fresh (incluster/google_token.py): FreshBearer renews before the stated end, and
the metadata server's token as the GKE metadata server serves it to a pod (the Compute Engine token path, answered
`{"access_token", "expires_in", "token_type"}`: cloud.google.com/compute/docs/access/authenticate-workloads)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

from incluster import google_token
from incluster.google_token import RENEW_BEFORE_SECONDS, Credential, FreshBearer, TokenError, metadata_credential
from tests.support.clock import Clock

TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"


def test_a_fresh_bearer_renews_its_token_shortly_before_the_expiry_it_was_given_whoever_reads_it():
    clock, issued = Clock(1_800_000_000.0), []

    def fetch() -> Credential:
        issued.append(clock())
        return Credential(f"token-{len(issued)}", clock() + 3600)

    headers = FreshBearer(fetch, clock)
    assert headers["Authorization"] == "Bearer token-1" and dict(headers) == {"Authorization": "Bearer token-1"}
    clock.now += 3600 - RENEW_BEFORE_SECONDS - 1
    assert {**headers} == {"Authorization": "Bearer token-1"} and len(issued) == 1
    clock.now += 1
    assert requests.Request("GET", "https://api", headers=headers).prepare().headers["Authorization"] == (
        "Bearer token-2"
    )
    clock.now += 3600
    assert list(headers.items()) == [("Authorization", "Bearer token-3")]
    assert {**headers, "Content-Type": "application/json"}["Authorization"] == "Bearer token-3"
    assert "token" not in repr(headers) and isinstance(headers, dict)


class MetadataServer(BaseHTTPRequestHandler):
    """The metadata server's token path: refuses a request without `Metadata-Flavor: Google` (the header every request
    must carry: cloud.google.com/compute/docs/metadata/querying-metadata; the 403 status is assumed, the page does not
    give it), else answers the next of `answers` (status, body)."""

    answers: list[tuple[int, str]] = []
    seen: list[dict[str, str]] = []

    def do_GET(self) -> None:
        self.seen.append(dict(self.headers))
        status, body = (403, "Missing Metadata-Flavor:Google header.")
        if self.path == TOKEN_PATH and self.headers.get("Metadata-Flavor") == "Google":
            status, body = self.answers.pop(0)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def metadata_url() -> Iterator[str]:
    MetadataServer.answers, MetadataServer.seen = [], []
    server = ThreadingHTTPServer(("127.0.0.1", 0), MetadataServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}{TOKEN_PATH}"
    server.shutdown()
    server.server_close()


def test_the_metadata_servers_token_ends_when_its_expires_in_says_and_is_fetched_again_before_then(metadata_url):
    MetadataServer.answers = [
        (200, json.dumps({"access_token": "ya29.first", "expires_in": 3599, "token_type": "Bearer"})),
        (200, json.dumps({"access_token": "ya29.second", "expires_in": 3599, "token_type": "Bearer"})),
    ]
    before = time.time()
    first = metadata_credential(metadata_url)
    assert first.token == "ya29.first" and before + 3599 <= first.expires_at <= time.time() + 3599
    assert MetadataServer.seen[0]["Metadata-Flavor"] == "Google"
    clock = Clock(time.time())
    headers = FreshBearer(lambda: metadata_credential(metadata_url), clock)
    assert headers["Authorization"] == "Bearer ya29.second"


def test_no_token_from_the_metadata_server_is_one_line_that_says_what_to_link(metadata_url):
    MetadataServer.answers = [(404, "not found")]
    with pytest.raises(TokenError, match=r"HTTP 404.*iam\.gke\.io/gcp-service-account"):
        metadata_credential(metadata_url)
    MetadataServer.answers = [(200, json.dumps({"token_type": "Bearer"}))]
    with pytest.raises(TokenError, match="HTTP 200"):
        metadata_credential(metadata_url)


def test_a_metadata_server_that_does_not_answer_is_a_token_error_within_the_deadline(monkeypatch):
    monkeypatch.setattr(google_token, "METADATA_REQUEST_SECONDS", 0.5)
    with pytest.raises(TokenError, match="did not answer"):
        metadata_credential("http://127.0.0.1:9/computeMetadata/v1/instance/service-accounts/default/token")
