"""What the guardian reads and asks through the Kubernetes API server (the GPU nodes, the GPU worker pods, as its
views), and from the run's directory (a failed attempt's last lines), and
the submission told its deadline."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from incluster import readiness
from incluster.attempt import logged_lines
from incluster.capacity_events import rungs_of_nodes
from incluster.deadline import attempt_overrides
from incluster.endpoint import Endpoint
from incluster.google_token import Credential, FreshBearer
from incluster.guardian.policy import KubeNodeView, PodView
from incluster.guardian.settings import Settings
from incluster.logs import ERROR_SCAN_LINES, error_line

LAST_LINES = 20
"""Log lines of a failed attempt kept in the record."""


IN_CLUSTER_API = "https://kubernetes.default.svc"
"""The API server as a pod reaches it (Kubernetes' `kubernetes` Service in `default`)."""

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where a pod's service account token and the cluster CA are mounted."""


TOKEN_FILE_PERIOD_SECONDS = 60.0
"""How long a token read from the service account's file is used before the file is read again, less
TOKEN_FILE_LEEWAY_SECONDS: client-go's (kubernetes/client-go v0.36.3 transport/token_source.go L69-82
NewCachedFileTokenSource: period time.Minute, "half of the duration between when the kubelet refreshes a projected
service account token and when the original token expires"; rest/config.go L545-572 InClusterConfig hands it the
token file, transport/round_trippers.go L289-305)."""

TOKEN_FILE_LEEWAY_SECONDS = 10.0
"""client-go's leeway (token_source.go L72, L169): the file is read again once the token is within 10 s of its period's
end, so every 50 s."""


class ServiceAccountToken:
    """The pod's projected service account token as a Credential source: the kubelet rotates the file (Kubernetes'
    bound service account tokens: "the kubelet will start trying to rotate the token if the token is older than 80
    percent of its time to live or if the token is older than 24 hours", default 1 hour, k8s.io/api v0.36.3
    core/v1/types.go L1944-1949 ServiceAccountTokenProjection.expirationSeconds), so it is read again every TOKEN_FILE_PERIOD_SECONDS less the leeway (FreshBearer);
    a read that fails or finds the file empty keeps the last token, as client-go does (token_source.go L180-190:
    "Unable to rotate token")."""

    def __init__(self, path: Path, clock: Callable[[], float] = time.time) -> None:
        self.path, self.clock = path, clock
        self._last = ""

    def __call__(self) -> Credential:
        """The token in the file now (or the last one read), used for TOKEN_FILE_PERIOD_SECONDS."""
        try:
            token = self.path.read_text().strip()
        except OSError:
            token = ""
        self._last = token or self._last
        return Credential(self._last, self.clock() + TOKEN_FILE_PERIOD_SECONDS)


def service_account_headers(path: Path, clock: Callable[[], float] = time.time) -> FreshBearer:
    """The Authorization header of the pod's service account token at `path`, read again as client-go does."""
    return FreshBearer(ServiceAccountToken(path, clock), clock, renew_before=TOKEN_FILE_LEEWAY_SECONDS)


def api_endpoint(endpoint: Endpoint) -> Endpoint | None:
    """The Kubernetes API server: the one behind the dashboard's service proxy, else the pod's own service
    account's (its token read again as the kubelet rotates it: service_account_headers); None when neither is at
    hand (a plain dashboard address on this machine)."""
    if "/api/v1/" in endpoint.address:
        return Endpoint(
            address=endpoint.address.split("/api/v1/", 1)[0], headers=endpoint.headers, verify=endpoint.verify
        )
    token = SERVICE_ACCOUNT_DIR / "token"
    if not token.is_file():
        return None
    ca = SERVICE_ACCOUNT_DIR / "ca.crt"
    return Endpoint(IN_CLUSTER_API, service_account_headers(token), str(ca) if ca.is_file() else True)


GPU_NODE_SELECTOR = "cloud.google.com/gke-accelerator"
"""The label every GKE GPU node carries (Standard and Autopilot): the nodes whose end the attempts are told."""


def gpu_nodes_of(api: Endpoint) -> list[dict[str, Any]]:
    """The cluster's GPU node objects, from the API server within DEADLINES.request (the guardian's ClusterRole
    lists nodes); JobError when it refuses or is silent."""
    return _api_list(api, "/api/v1/nodes", GPU_NODE_SELECTOR, "the GPU nodes")


def worker_pods_of(api: Endpoint, settings: Settings) -> list[dict[str, Any]]:
    """The GPU worker pods of the stack's RayCluster (KubeRay's labels ray.io/cluster and ray.io/group,
    ray-operator/controllers/ray/utils/constant.go L19-21, v1.7.0), from the API server within DEADLINES.request
    (the guardian's Role lists pods); JobError when it refuses or is silent."""
    raw = settings.raw
    selector = f"ray.io/cluster={raw.get('rayCluster', '')},ray.io/group={raw.get('gpuWorkerGroup', '')}"
    return _api_list(api, f"/api/v1/namespaces/{raw.get('namespace', '')}/pods", selector, "the GPU worker pods")


def _api_list(api: Endpoint, path: str, selector: str, what: str) -> list[dict[str, Any]]:
    return readiness.api_items(api, path, {"labelSelector": selector}, what)


def _moment(stamp: Any) -> float | None:
    """An RFC 3339 time of the API server (`2026-12-01T11:50:03Z`) in seconds since the epoch; None when absent."""
    try:
        return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def gpu_rungs(nodes: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    """A `gpu-rungs` entry's details: the Ready GPU nodes of `nodes` per rung (incluster/capacity_events.py
    rungs_of_nodes, by the settings' `provisioning` and `ladder`) and how many Ready GPU nodes are of no rung's pool
    (another pool's: not the run's). Only Ready nodes count: a node that is not Ready (a preempted one not yet
    deleted) runs none of the attempt's workers."""
    ready = [node for node in nodes if kube_node_view(node).ready == "True"]
    labels = [(node.get("metadata") or {}).get("labels") or {} for node in ready]
    raw = settings.raw
    rungs = rungs_of_nodes(labels, str(raw.get("provisioning", "")), bool(raw.get("ladder")))
    return {"rungs": rungs, "otherNodes": len(ready) - sum(rungs.values())}


def pod_view(pod: dict[str, Any]) -> PodView:
    """A PodView of one pod object as the API server returns it (k8s.io/api core/v1 Pod: status.phase, reason,
    message, conditions[].type/status/reason/lastTransitionTime, containerStatuses[].state.terminated.finishedAt)."""
    status = pod.get("status") or {}
    disrupted = next((item for item in status.get("conditions") or [] if item.get("type") == "DisruptionTarget"), None)
    since = _moment(disrupted.get("lastTransitionTime")) if disrupted else None
    if since is None:
        ended = [
            _moment(((item.get("state") or {}).get("terminated") or {}).get("finishedAt"))
            for item in status.get("containerStatuses") or []
        ]
        since = max((moment for moment in ended if moment is not None), default=None)
    return PodView(
        name=str((pod.get("metadata") or {}).get("name", "")),
        phase=str(status.get("phase", "")),
        reason=str(status.get("reason", "")),
        message=str(status.get("message", "")),
        disruption=str(disrupted.get("reason", "")) if disrupted and disrupted.get("status") == "True" else "",
        since=since,
    )


def kube_node_view(node: dict[str, Any]) -> KubeNodeView:
    """A KubeNodeView of one node object as the API server returns it (status.conditions[] of type Ready)."""
    ready = next(
        (item for item in (node.get("status") or {}).get("conditions") or [] if item.get("type") == "Ready"), {}
    )
    why = ": ".join(part for part in (ready.get("reason"), ready.get("message")) if part)
    return KubeNodeView(
        name=str((node.get("metadata") or {}).get("name", "")),
        ready=str(ready.get("status", "")),
        since=_moment(ready.get("lastTransitionTime")),
        why=why,
    )


def failure_lines(run_dir: Path, attempt: int, message: str) -> tuple[str, ...]:
    """The last LAST_LINES lines of a failed attempt: its log on the shared storage read from the end (incluster/attempt.py
    logged_lines), else the lines of Ray's message, which holds the driver's last 10 lines for a failed entrypoint
    (ray 2.60.0 python/ray/dashboard/modules/job/job_supervisor.py L449-455). Never the whole log: Ray's get_job_logs
    reads the whole driver log into one string (job_log_storage_client.py L20-24) and the guardian's pod has 512 Mi."""
    logged = logged_lines(run_dir, attempt, LAST_LINES)
    return tuple(logged or message.splitlines()[-LAST_LINES:])


RAY_FAILED_ENTRYPOINT = "Job entrypoint command failed with exit code"
"""How Ray's message about a failed entrypoint starts, before the driver's last log lines (ray 2.60.0
python/ray/dashboard/modules/job/job_supervisor.py L449-455): its boilerplate, not the attempt's error."""


def failure_error(run_dir: Path, attempt: int, message: str) -> str | None:
    """The line that says why a failed attempt failed, as `python -m jobs status` finds it (incluster/logs.py
    error_line over the last ERROR_SCAN_LINES lines): in its log on the shared storage read from the end, else in the
    log lines of Ray's message without Ray's own first line (RAY_FAILED_ENTRYPOINT); None when no line says."""
    lines = logged_lines(run_dir, attempt, ERROR_SCAN_LINES)
    if not lines:
        lines = message.splitlines()
        if lines and lines[0].startswith(RAY_FAILED_ENTRYPOINT):
            lines = lines[1:]
    return error_line("\n".join(lines))


def with_deadline(submission: dict[str, Any], framework: str, ends: Any, now: float) -> dict[str, Any]:
    """`submission` with the save-before-deadline of `ends` (a incluster/deadline.py Deadline, or None): NeMo-RL's
    save-by override appended to the framework's command (the last word of the attempt wrapper's entrypoint,
    `sh -c '<command>'`); verl unchanged (nothing of its default trainer reads a deadline: the guardian stops it)."""
    overrides = attempt_overrides(framework, ends, now)
    if not overrides:
        return submission
    words = shlex.split(submission["entrypoint"])
    words[-1] = " ".join([words[-1], *map(shlex.quote, overrides)])
    return {**submission, "entrypoint": shlex.join(words)}
