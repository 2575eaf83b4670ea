"""Scaling the RayCluster's GPU worker group to zero and back: the request the run guardian sends when the run
is done (job.idleMinutes), and the one `pulumi up` and `python -m jobs submit` send before a submission.

Which mechanism, and why: a JSON patch (RFC 6902) of the group's `replicas`, which Pulumi's RayCluster ignores
(workloads/raycluster.py IGNORE_CHANGES); it imports no Pulumi, for the in-cluster guardian. The stack renders
minReplicas 0, so `replicas` alone decides: 0 scales to zero, names.WORKER_REPLICAS brings back maxReplicas =
gpu.nodes workers (GetWorkerGroupDesiredReplicas, KubeRay v1.7.0 util.go L389-407). Never a node count: a later
`pulumi up` that replaces the RayCluster keeps whatever the state holds for `replicas`, so the only values it
can hold are 0 (the guardian's scale to zero, which a refresh put in the state) and a value that fits any
gpu.nodes.

- Not the RayCluster's `spec.suspend`: it deletes the head with the workers (raycluster_types.go, KubeRay
  v1.7.0: "A suspended RayCluster will have head pods and worker pods deleted"), and the head, its dashboard
  and the guardian's Jobs API stay.
- Not the worker group's `suspend`: "not a user-facing API and is only used by RayJob DeletionStrategy", and
  KubeRay refuses it unless the operator runs with the RayJobDeletionPolicy feature gate
  (ray-operator/controllers/ray/utils/validation.go, v1.7.0), a flag of the operator, not of this stack.
- Not Server-Side Apply field ownership: `workerGroupSpecs` has no `x-kubernetes-list-type` in the CRD, so the
  list is atomic and one applier owns all of it; an apply of the count alone would replace the whole list.
  After this patch the guardian's manager owns the list, which is why `pulumi up` never updates the RayCluster
  in place (workloads/raycluster.py REPLACE_ON_CHANGES).

A JSON patch with a `test` of the group's name changes exactly the count of the group the stack renders,
and fails rather than scaling another group if the list ever changes. Requests are plain data here; `scale_to`,
`gpu_workers` (the guardian's look, after its scale to zero, at whether the workers came back) and `bring_back` talk
to the API server, each request within DEADLINES.request.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core import names
from incluster.backoff import Transient, retry_after, retrying, transient_status
from incluster.endpoint import Endpoint, service_proxy_url
from incluster.job_client import DEADLINES, JobError, Unreachable

FIELD_MANAGER = "grpo-gke-guardian"
"""Field manager of the guardian's and the CLI's patches (managedFields say who scaled the workers)."""

JSON_PATCH = "application/json-patch+json"
"""Content type of an RFC 6902 JSON patch."""

PATCH_RETRY_SECONDS = 120.0
"""How long a patch of the worker count keeps trying a silent or transient API server before the caller hears of it
(the guardian then looks again at its next poll)."""

WORKER_GROUP_INDEX = 0
"""The stack's RayCluster has one worker group, the first (workloads/raycluster.py render_spec)."""


@dataclass(frozen=True)
class ScaleRequest:
    """One HTTP request to the Kubernetes API server that sets the GPU worker count."""

    method: str
    """HTTP method."""
    path: str
    """Path below the API server URL."""
    query: dict[str, str]
    """Query parameters."""
    content_type: str
    """Content-Type header."""
    body: list[dict[str, Any]]
    """The JSON patch."""


def raycluster_path() -> str:
    """API path of the stack's RayCluster."""
    group, version = names.RAY_API_VERSION.split("/")
    return f"/apis/{group}/{version}/namespaces/{names.NAMESPACE}/rayclusters/{names.RAY_CLUSTER}"


def worker_patch(replicas: int) -> list[dict[str, Any]]:
    """The JSON patch that sets the GPU worker group's `replicas` to `replicas` (0: scale to zero;
    names.WORKER_REPLICAS: back to gpu.nodes), after testing that the group is the stack's."""
    group = f"/spec/workerGroupSpecs/{WORKER_GROUP_INDEX}"
    patch: list[dict[str, Any]] = [{"op": "test", "path": f"{group}/groupName", "value": names.RAY_WORKER_GROUP}]
    patch += [{"op": "replace", "path": f"{group}/{field}", "value": replicas} for field in names.GUARDIAN_OWNED_FIELDS]
    return patch


def scale_request(replicas: int) -> ScaleRequest:
    """The request that scales the GPU worker group to `replicas`."""
    return ScaleRequest(
        method="PATCH",
        path=raycluster_path(),
        query={"fieldManager": FIELD_MANAGER},
        content_type=JSON_PATCH,
        body=worker_patch(replicas),
    )


def desired_workers(raycluster: dict[str, Any]) -> int:
    """The worker pods KubeRay keeps for the stack's group of a RayCluster object: replicas held between
    minReplicas and maxReplicas (GetWorkerGroupDesiredReplicas, KubeRay v1.7.0)."""
    group = next(
        (
            item
            for item in raycluster.get("spec", {}).get("workerGroupSpecs", [])
            if item.get("groupName") == names.RAY_WORKER_GROUP
        ),
        None,
    )
    if group is None:
        raise JobError(
            f"the RayCluster {names.NAMESPACE}/{names.RAY_CLUSTER} has no worker group {names.RAY_WORKER_GROUP!r}"
        )
    low, high = group.get("minReplicas", 0), group.get("maxReplicas", 2**31 - 1)
    return min(max(group.get("replicas", low), low), high)


def api_of(endpoint: Endpoint) -> Endpoint | None:
    """The API server behind a service-proxy endpoint (jobs/submit/access.py), with the endpoint's credentials; None
    for a plain dashboard address."""
    suffix = service_proxy_url("")
    if not endpoint.address.endswith(suffix):
        return None
    return Endpoint(endpoint.address[: -len(suffix)], endpoint.headers, endpoint.verify)


def bring_back(endpoint: Endpoint, nodes: int, report: Callable[[str], None]) -> bool:
    """Scale the GPU workers back to `nodes` (= the group's maxReplicas, by names.WORKER_REPLICAS) when the
    guardian scaled them down; True when it sent the patch.

    Does nothing through a plain dashboard address (no API server to ask: a local run). A refused or silent API
    server is a JobError naming what to do.
    """
    api = api_of(endpoint)
    if api is None or gpu_workers(api) >= nodes:
        return False
    report(f"the GPU workers were scaled to zero: scaling them back to {nodes}")
    scale_to(api, names.WORKER_REPLICAS, report)
    return True


def gpu_workers(api: Endpoint) -> int:
    """The GPU worker pods KubeRay keeps for the stack's RayCluster now (desired_workers of the object the API server
    `api` holds), read within DEADLINES.request; a refused or silent API server is a JobError naming what to do."""
    import requests  # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms (measured)

    try:
        answer = requests.get(
            f"{api.address}{raycluster_path()}", headers=dict(api.headers), verify=api.verify, timeout=DEADLINES.request
        )
    except requests.exceptions.RequestException:
        raise Unreachable(
            f"the API server at {api.address} did not answer within {DEADLINES.connect:g} + {DEADLINES.read:g} s"
        ) from None
    _refused(answer, "read")
    try:
        return desired_workers(answer.json())
    except (ValueError, AttributeError):
        raise JobError(f"the API server at {api.address} answered the read of rayclusters/{names.RAY_CLUSTER}"
                       " with no object") from None  # fmt: skip


class ApiUnavailable(Transient, Unreachable):
    """The API server did not answer the patch, or answered it with a transient status: tried again."""


def scale_to(
    api: Endpoint,
    replicas: int,
    report: Callable[[str], None] = lambda _: None,
    deadline_seconds: float = PATCH_RETRY_SECONDS,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Send scale_request(`replicas`) to the API server `api` (its base URL), each try within DEADLINES.request; a
    silent API server or a transient answer (a 503, a 429 or 5xx with Retry-After) is tried again with
    incluster/backoff.py's backoff and a progress line for `deadline_seconds`; a refused or still silent API server is
    a JobError naming what to do."""
    import requests  # lazy: every `python -m jobs` start imports this module; requests adds 50-130 ms (measured)

    request = scale_request(replicas)

    def once() -> None:
        try:
            answer = requests.request(
                request.method,
                f"{api.address}{request.path}",
                params=request.query,
                data=json.dumps(request.body),
                headers={**api.headers, "Content-Type": request.content_type},
                verify=api.verify,
                timeout=DEADLINES.request,
            )
        except requests.exceptions.RequestException:
            raise ApiUnavailable(
                f"the API server at {api.address} did not answer within {DEADLINES.connect:g} + {DEADLINES.read:g} s"
            ) from None
        wait = retry_after(answer.headers.get("Retry-After")) if answer.status_code >= 400 else None
        if answer.status_code >= 400 and transient_status(answer.status_code, wait):
            raise ApiUnavailable(f"the API server answered HTTP {answer.status_code} to the patch", wait)
        _refused(answer, "patch")
        try:
            answer.json()
        except ValueError:
            raise JobError(
                f"the API server at {api.address} answered the patch of rayclusters/{names.RAY_CLUSTER} with no"
                " object: the workers' count is not known to have changed"
            ) from None

    retrying(once, f"patching rayclusters/{names.RAY_CLUSTER}", deadline_seconds, report, sleep=sleep)


def _refused(answer: Any, verb: str) -> None:
    if answer.status_code in (401, 403):
        raise JobError(
            f"the API server refused to {verb} rayclusters/{names.RAY_CLUSTER} in namespace {names.NAMESPACE}"
            f" (HTTP {answer.status_code}): scaling the GPU workers back needs get and patch on it"
            " (for example roles/container.developer)"
        )
    if answer.status_code >= 400:
        raise JobError(
            f"the API server answered HTTP {answer.status_code} to the {verb} of rayclusters/{names.RAY_CLUSTER}"
            f" in namespace {names.NAMESPACE}"
        )
