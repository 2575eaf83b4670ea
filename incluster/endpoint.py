"""Where and how to reach a Ray dashboard or the Kubernetes API server: the address, its headers and TLS check,
shared by the in-cluster code and the client that builds them from a kubeconfig (jobs/submit/access.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

from core import names


class AccessError(Exception):
    """The cluster cannot be reached or authorised; the message is one line."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to talk to a Ray dashboard."""

    address: str
    """Dashboard base URL (a service-proxy URL or any `http(s)://host:port`)."""
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    """Request headers (the Authorization bearer token through the proxy); never printed."""
    verify: str | bool = True
    """TLS verification: True, or a CA bundle path (the cluster CA)."""


def service_proxy_url(server: str) -> str:
    """The API server URL that proxies to the Ray head service's dashboard port."""
    return (
        f"{server.rstrip('/')}/api/v1/namespaces/{names.NAMESPACE}/services/"
        f"{names.RAY_HEAD_SERVICE}:{names.RAY_DASHBOARD_PORT}/proxy"
    )


def bearer_headers(token: str) -> dict[str, str]:
    """Request headers carrying `token` as a bearer token."""
    return {"Authorization": f"Bearer {token}"}
