"""The run's projected end in W&B's run summary: which attempt's W&B run gets it and what (pure), and the writer that
reads that run's summary and writes it back merged, through W&B's GraphQL API (stdlib + requests; no wandb package).

W&B's shapes, read in wandb/wandb at v0.28.2:
- the endpoint is `<base URL>/graphql` (core/internal/api/gql_client.go L72), the base URL `WANDB_BASE_URL`
  (wandb/env.py L38), else `https://api.wandb.ai` (wandb/sdk/internal/internal_api.py L230), with HTTP basic auth
  `("api", <key>)` (internal_api.py L290);
- a run is read by `project(name, entityName) { run(name) { id summaryMetrics } }` (wandb/apis/public/runs.py
  L800-818, `Run._load_with_fragment`; a null `run` is "Could not find run"), `id` its storage id (runs.py L706-711)
  and `summaryMetrics` a JSONString (runs.py L855-857 parses it);
- the summary is written whole by `upsertBucket(input: {id, summaryMetrics})` returning `bucket { id }`
  (wandb/apis/public/summary.py L378-397, `HTTPSummary._write`), so the writer merges into what it read;
- a live run sends its whole consolidated summary on every summary update (wandb/sdk/internal/sender.py
  L1110-1124, `_update_summary`), so a write while the attempt runs would be overwritten: only an ended attempt's
  run is written;
- W&B's own client retries every 4xx and 5xx but 400, 401, 403, 404, 410, 413, 422 and 501, and an upsertBucket's
  409 (core/internal/clients/retry_policy.go L61-104): here 409, 429 and those 5xx are retried with the project's
  backoff (incluster/backoff.py), a 401, 403, 404 or a GraphQL error is one line, never retried.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import requests

from incluster.backoff import BACKOFF, Backoff, Transient, retry_after, retrying
from incluster.budget import Projection

DEFAULT_BASE_URL = "https://api.wandb.ai"
"""W&B's API when `WANDB_BASE_URL` is unset (wandb/sdk/internal/internal_api.py L230 at v0.28.2)."""

CONNECT_SECONDS = 10.0
"""Connect deadline of each request to W&B."""

READ_SECONDS = 30.0
"""Read deadline of each request to W&B."""

WRITE_SECONDS = 300.0
"""How long one summary write keeps retrying W&B's transient failures before it gives up with one line."""

PROJECTED_END_S = "grpo/projected_end_s"
"""Summary key: seconds from the attempt's end to the schedule's last step at the measured pace."""

PROJECTED_COST_USD = "grpo/projected_cost_usd"
"""Summary key: US dollars of those seconds at the attempt's rungs (absent without `gpuPrices`)."""

STEPS_LEFT = "grpo/steps_left"
"""Summary key: the schedule's steps still to run."""

RUN_QUERY = """query Run($project: String!, $entity: String!, $name: String!) {
  project(name: $project, entityName: $entity) { run(name: $name) { id summaryMetrics } }
}"""
"""The run's storage id and summary (wandb/apis/public/runs.py L800-818 at v0.28.2, fields of RUN_FRAGMENT L73-93)."""

VIEWER_QUERY = "query Viewer { viewer { entity } }"
"""The key's default entity, for a stack without `tracking.wandbEntity` (wandb/apis/public/api.py L704-715
`default_entity` at v0.28.2: `viewer.entity`; internal_api.py L647-651 `query Viewer { viewer { entity ... } }`)."""

UPSERT_SUMMARY = """mutation UpsertBucket($id: String, $summaryMetrics: JSONString) {
  upsertBucket(input: { id: $id, summaryMetrics: $summaryMetrics }) { bucket { id } }
}"""
"""The summary write (wandb/apis/public/summary.py L380-385 at v0.28.2)."""

NOT_RETRIED = frozenset({400, 401, 403, 404, 410, 413, 422, 501})
"""Statuses W&B's own client does not retry (core/internal/clients/retry_policy.go L61-80 at v0.28.2)."""


class SummaryError(Exception):
    """The summary could not be written; the message is one line and never holds the key."""


@dataclass(frozen=True)
class WandbTarget:
    """Where an attempt's W&B run lives and the key that writes it."""

    project: str
    """W&B project (`tracking.wandbProject`, the attempt's WANDB_PROJECT)."""
    entity: str | None
    """W&B entity (the attempt's WANDB_ENTITY), None: the key's default entity."""
    api_key: str = field(repr=False)
    """The W&B key (the guardian's WANDB_API_KEY, from the stack's W&B Secret); never printed."""
    base_url: str = DEFAULT_BASE_URL
    """W&B's API base URL (WANDB_BASE_URL)."""


def target_from(env: Mapping[str, str], attempt_env: Mapping[str, str]) -> WandbTarget | None:
    """The W&B run's place from the guardian's environment (WANDB_API_KEY, WANDB_BASE_URL) and the attempt's
    (WANDB_PROJECT, WANDB_ENTITY, jobs/spec/training.py wandb_env); None where the stack does not log to W&B."""
    key, project = env.get("WANDB_API_KEY"), attempt_env.get("WANDB_PROJECT")
    if not key or not project:
        return None
    base = env.get("WANDB_BASE_URL") or DEFAULT_BASE_URL
    return WandbTarget(project, attempt_env.get("WANDB_ENTITY") or None, key, base.rstrip("/"))


def summary_values(found: Projection, priced: bool) -> dict[str, float | int]:
    """The projection's summary keys: the seconds and steps left and, when `priced`, the dollars."""
    values: dict[str, float | int] = {PROJECTED_END_S: round(found.seconds, 1), STEPS_LEFT: found.steps_left}
    if priced:
        values[PROJECTED_COST_USD] = round(found.dollars, 2)
    return values


def write_due(status: str, ended: bool, written: bool) -> bool:
    """Whether an attempt's W&B run gets the projection now: once, after the attempt ended (its status final and
    its end known: a live run would overwrite the write with its own summary), never twice."""
    return not written and ended and status in ("SUCCEEDED", "FAILED", "STOPPED")


def _post(target: WandbTarget, query: str, variables: dict[str, Any]) -> dict[str, Any]:
    """One GraphQL request's `data`; Transient for what is worth another try, SummaryError otherwise."""
    try:
        answer = requests.post(
            f"{target.base_url}/graphql",
            json={"query": query, "variables": variables},
            auth=("api", target.api_key),
            timeout=(CONNECT_SECONDS, READ_SECONDS),
        )
        status = answer.status_code
        if status >= 400:
            if status in NOT_RETRIED:
                meaning = {401: "the W&B key was refused (grpo-gke:wandbApiKey)", 404: "not found"}.get(status, "")
                raise SummaryError(f"W&B answered HTTP {status}" + (f": {meaning}" if meaning else ""))
            raise Transient(f"W&B answered HTTP {status}", retry_after(answer.headers.get("Retry-After")))
        body = answer.json()
    except requests.exceptions.JSONDecodeError:
        raise Transient("W&B answered with no JSON") from None
    except requests.RequestException as error:
        raise Transient(f"W&B unreachable: {type(error).__name__}") from None
    if not isinstance(body, dict):
        raise Transient("W&B answered with no JSON object")
    if body.get("errors"):
        first = body["errors"][0]
        message = first.get("message", "") if isinstance(first, dict) else str(first)
        raise SummaryError(f"W&B refused the request: {' '.join(str(message).split())}")
    data = body.get("data")
    if not isinstance(data, dict):
        raise Transient("W&B answered with no data")
    return data


def write_summary(
    target: WandbTarget,
    run_name: str,
    values: Mapping[str, Any],
    report: Callable[[str], None],
    deadline_s: float = WRITE_SECONDS,
    backoff: Backoff = BACKOFF,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Merge `values` into the summary of W&B run `run_name`: read it (RUN_QUERY), write it back (UPSERT_SUMMARY),
    each request retried on W&B's transient failures until `deadline_s`; SummaryError (one line) when it cannot."""

    def call(query: str, variables: dict[str, Any]) -> Callable[[], dict[str, Any]]:
        return lambda: _post(target, query, variables)

    what = f"W&B run {run_name}'s summary"
    try:
        entity = target.entity
        if entity is None:
            viewer = retrying(call(VIEWER_QUERY, {}), what, deadline_s, report, backoff, clock, sleep).get("viewer")
            entity = (viewer or {}).get("entity")
            if not entity:
                raise SummaryError("W&B names no default entity for the key; set tracking.wandbEntity")
        names = {"project": target.project, "entity": entity, "name": run_name}
        data = retrying(call(RUN_QUERY, names), what, deadline_s, report, backoff, clock, sleep)
        run = (data.get("project") or {}).get("run")
        if not run:
            raise SummaryError(f"W&B has no run {entity}/{target.project}/{run_name}")
        summary = run.get("summaryMetrics") or "{}"
        merged = {**(json.loads(summary) if isinstance(summary, str) else summary), **values}
        update = {"id": run["id"], "summaryMetrics": json.dumps(merged)}
        retrying(call(UPSERT_SUMMARY, update), what, deadline_s, report, backoff, clock, sleep)
    except Transient as error:
        raise SummaryError(f"{what} not written: {error}; gave up after {deadline_s:.0f} s") from None
    except (ValueError, TypeError, AttributeError) as error:
        raise SummaryError(f"{what} not written: W&B's answer is not the run's shape ({error})") from None
    except SummaryError as error:
        raise SummaryError(f"{what} not written: {error}") from None
