"""A stand-in for W&B's GraphQL endpoint (`POST /graphql`, HTTP basic auth `api:<key>`), in process on 127.0.0.1,
holding runs by entity, project and name, answering the three operations incluster/wandb_summary.py sends in W&B's
published shapes (wandb/wandb at v0.28.2):

- `query Viewer`: `{"data": {"viewer": {"entity": ...}}}` (wandb/apis/public/api.py L704-715 `default_entity` reads
  `viewer.entity`);
- `query Run`: `{"data": {"project": {"run": {"id", "summaryMetrics"}}}}`, `summaryMetrics` a JSONString (runs.py
  L73-93 RUN_FRAGMENT, L855-857 parses it), `run` null for a run it does not hold and `project` null for a project it
  does not hold (runs.py L813-818 reads both as "Could not find run");
- `mutation UpsertBucket` with `{id, summaryMetrics}`: replaces the run's summary whole and answers
  `{"data": {"upsertBucket": {"bucket": {"id"}}}}` (wandb/apis/public/summary.py L378-397);
- a request without the key: HTTP 401 (W&B's client does not retry it: core/internal/clients/retry_policy.go L64);
  its body `{"errors": [{"message"}]}` is GraphQL's error shape (spec.graphql.org/October2021 "Response Format"),
  assumed for W&B's 401 (not read);
- another operation: `{"errors": [{"message"}], "data": null}` (GraphQL's error shape).

Storage ids are the run's name base64-encoded after `Run:v1:`, the form W&B's ids take (assumed; the client treats
the id as opaque, runs.py L706-711)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.support.loopback import serving


@dataclass
class StandInWandb:
    """The stand-in's state: its key, the key's default entity, and each run's summary by (entity, project, name)."""

    api_key: str = "wandb-stand-in-key"
    """The one key it accepts."""
    entity: str = "stand-in-team"
    """The key's default entity (`viewer.entity`)."""
    summaries: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    """Each run's summary."""
    writes: list[str] = field(default_factory=list)
    """The storage id of each summary write, in order."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def storage_id(self, entity: str, project: str, name: str) -> str:
        """The run's storage id."""
        return base64.b64encode(f"Run:v1:{name}:{project}:{entity}".encode()).decode()

    def answer(self, authorized: bool, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """The status and JSON body for one GraphQL request."""
        if not authorized:
            return 401, {"errors": [{"message": "user is not logged in"}]}
        query, variables = str(body.get("query", "")), body.get("variables") or {}
        with self.lock:
            if query.lstrip().startswith("query Viewer"):
                return 200, {"data": {"viewer": {"entity": self.entity}}}
            if query.lstrip().startswith("query Run"):
                key = (variables["entity"], variables["project"], variables["name"])
                if not any(held[:2] == key[:2] for held in self.summaries):
                    return 200, {"data": {"project": None}}
                if key not in self.summaries:
                    return 200, {"data": {"project": {"run": None}}}
                run = {"id": self.storage_id(*key), "summaryMetrics": json.dumps(self.summaries[key])}
                return 200, {"data": {"project": {"run": run}}}
            if query.lstrip().startswith("mutation UpsertBucket"):
                for key in self.summaries:
                    if self.storage_id(*key) == variables.get("id"):
                        self.summaries[key] = json.loads(variables["summaryMetrics"])
                        self.writes.append(variables["id"])
                        return 200, {"data": {"upsertBucket": {"bucket": {"id": variables["id"]}}}}
                return 200, {"errors": [{"message": "run not found"}], "data": None}
        return 200, {"errors": [{"message": "operation not served by the stand-in"}], "data": None}


@contextmanager
def wandb_stand_in(state: StandInWandb) -> Iterator[str]:
    """Serve `state` on 127.0.0.1 while the block runs; the base URL (WANDB_BASE_URL)."""
    expected = "Basic " + base64.b64encode(f"api:{state.api_key}".encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            if self.path != "/graphql":
                status, answer = 404, {"errors": [{"message": "not found"}]}
            else:
                status, answer = state.answer(self.headers.get("Authorization") == expected, body)
            data = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as url:
        yield url
