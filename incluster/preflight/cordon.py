"""Cordon the nodes a failed preflight names (`job.cordonBadNodes`): through the Kubernetes API server, with the
job layer's deadlines (incluster/job_client.py DEADLINES).

The preflight names each GPU node by its Ray worker pod (the hostname its task saw); the pod's `spec.nodeName` is the
node. Cordoning is `kubectl cordon`'s request: a strategic merge patch setting `spec.unschedulable` on the node
(kubectl/pkg/drain cordon.go; the Node API's `unschedulable` field: "Unschedulable controls node schedulability of
new pods"). No new pod lands there: once its Ray pod goes (the node is deleted, or the pod is), KubeRay places the
worker on another node. The caller needs `get pods` in the namespace and `patch nodes` (roles/container.admin, which
`pulumi up` already needs, has both).
"""

from __future__ import annotations

from collections.abc import Callable

from core import names
from incluster.endpoint import Endpoint
from incluster.job_client import DEADLINES, JobError

PATCH_TYPE = "application/strategic-merge-patch+json"
"""The patch type `kubectl cordon` sends."""


class CordonError(JobError):
    """A node could not be found or cordoned; one line."""


def _request(api: Endpoint, method: str, path: str, body: dict | None = None) -> dict:
    import requests  # lazy: every `python -m jobs` start imports it (via the guardian); requests adds 50-130 ms

    headers = dict(api.headers)
    if body is not None:
        headers["Content-Type"] = PATCH_TYPE
    url = f"{api.address}{path}"
    try:
        response = requests.request(
            method, url, headers=headers, json=body, verify=api.verify, timeout=DEADLINES.request
        )
    except requests.exceptions.RequestException as error:  # no connection, no answer in time, or a cut answer
        raise CordonError(
            f"the API server at {api.address} did not answer {method} {path}: {type(error).__name__}"
        ) from None
    if response.status_code >= 400:
        reason = response.reason or "error"
        raise CordonError(f"the API server refused {method} {path}: {response.status_code} {reason}")
    try:
        return response.json()
    except ValueError:
        raise CordonError(f"the API server answered {method} {path} with no JSON object") from None


def node_of_pod(api: Endpoint, pod: str) -> str:
    """The node the Ray pod `pod` (in the stack's namespace) runs on."""
    found = _request(api, "GET", f"/api/v1/namespaces/{names.NAMESPACE}/pods/{pod}")
    node = (found.get("spec") or {}).get("nodeName")
    if not node:
        raise CordonError(f"pod {pod} is not on a node")
    return node


def cordon(api: Endpoint, node: str) -> None:
    """Mark `node` unschedulable (`kubectl cordon`)."""
    _request(api, "PATCH", f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}})


def cordon_pods_nodes(api: Endpoint, pods: list[str], report: Callable[[str], None]) -> list[str]:
    """Cordon the node of each of `pods`, reporting one line each; the nodes cordoned. A pod or node the API server
    does not find or refuses is reported and skipped: the preflight has already failed, the rest still gets cordoned."""
    cordoned = []
    for pod in pods:
        try:
            node = node_of_pod(api, pod)
            cordon(api, node)
        except CordonError as error:
            report(f"grpo-gke preflight: not cordoned {pod}: {error}")
            continue
        report(f"grpo-gke preflight: cordoned node {node} (Ray pod {pod}): no new pod is scheduled there")
        cordoned.append(node)
    return cordoned
