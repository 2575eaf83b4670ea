"""Google access tokens that stay fresh: a Credential (a token and when it ends), FreshBearer (the Authorization
header that fetches a new one shortly before the old one ends) and the in-cluster source, the metadata server.

Client side, jobs/submit/access.py fetches the user's tokens (the kubeconfig's plugin, gcloud); in the cluster, a pod
whose Kubernetes service account is linked to a Google service account (Workload Identity Federation for GKE) gets that
account's token from the GKE metadata server at the Compute Engine path
`http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token` with the header
`Metadata-Flavor: Google`, answered as `{"access_token", "expires_in", "token_type": "Bearer"}`
(cloud.google.com/compute/docs/access/authenticate-workloads#applications; kubernetes-engine/docs/concepts/
workload-identity: the GKE metadata server serves the pod's identity on the same path).

Pod-side (the in-cluster guardian runs it in the framework image): the standard library and requests.
"""

from __future__ import annotations

import time
from collections.abc import Callable, ItemsView, Iterator, KeysView, ValuesView
from dataclasses import dataclass, field
from typing import Any

import requests

from core.facts.gcp import GCLOUD_TOKEN_LIFETIME_SECONDS

METADATA_TOKEN_URL = "http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/token"
"""The metadata server's access token of the pod's (or VM's) Google service account."""

METADATA_REQUEST_SECONDS = 10.0
"""Deadline of a request to the metadata server (a node-local server)."""


class TokenError(Exception):
    """No Google access token could be fetched; the message is one line saying why and what to do."""


@dataclass(frozen=True)
class Credential:
    """A bearer token and when it stops being accepted."""

    token: str = field(repr=False)
    """The token; never printed."""
    expires_at: float | None = None
    """Its expiry in seconds since the epoch, where its source states one; None otherwise."""


RENEW_BEFORE_SECONDS = 300.0
"""How long before its stated expiry FreshBearer fetches a new token: more than a request's deadline and a status
poll's interval, so no request of a long follow goes out with a token about to end."""


class FreshBearer(dict):
    """`{"Authorization": "Bearer <token>"}` whose token is fetched again, whenever the header is read, once it is
    within RENEW_BEFORE_SECONDS of its expiry: a follow, a wait or the foreground guardian that talks to the API server
    for hours keeps a live token (gke-gcloud-auth-plugin's and gcloud's last an hour, GCLOUD_TOKEN_LIFETIME_SECONDS).

    A dict, because Ray's JobSubmissionClient refuses any other type for its headers (ray 2.60.0
    dashboard/modules/job/sdk.py L97) and keeps the very object (dashboard_sdk.py L242, `self._headers =
    cluster_info.headers or {}`) for every request (L332) and each log stream's session (job/sdk.py L505-510).
    Every Python-level read renews: requests' header preparation (items), dict() and `{**...}` (keys and
    __getitem__, since __iter__ is overridden), get. A reader in C that walks the dict's storage (aiohttp's
    CIMultiDict) sees the value the last read left, which the status polls of a follow renew every second.
    """

    def __init__(
        self,
        fetch: Callable[[], Credential],
        clock: Callable[[], float] = time.time,
        renew_before: float = RENEW_BEFORE_SECONDS,
    ) -> None:
        super().__init__()
        self._fetch, self._clock, self._renew_before = fetch, clock, renew_before
        self._renew_at = float("-inf")
        self._renew()

    def _renew(self) -> None:
        if self._clock() < self._renew_at:
            return
        credential = self._fetch()
        dict.__setitem__(self, "Authorization", f"Bearer {credential.token}")
        fetched = self._clock()
        expiry = credential.expires_at if credential.expires_at is not None else fetched + GCLOUD_TOKEN_LIFETIME_SECONDS
        self._renew_at = max(fetched, expiry - self._renew_before)

    def __getitem__(self, key: str) -> str:
        self._renew()
        return dict.__getitem__(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """The header `key`, the token renewed first when due."""
        self._renew()
        return dict.get(self, key, default)

    def __iter__(self) -> Iterator[str]:
        self._renew()
        return dict.__iter__(self)

    def keys(self) -> KeysView[str]:
        """The header names, the token renewed first when due."""
        self._renew()
        return dict.keys(self)

    def values(self) -> ValuesView[str]:
        """The header values, the token renewed first when due."""
        self._renew()
        return dict.values(self)

    def items(self) -> ItemsView[str, str]:
        """The headers, the token renewed first when due."""
        self._renew()
        return dict.items(self)

    def copy(self) -> dict[str, str]:
        """A plain dict of the headers as they are now (renewed first when due)."""
        return dict(self.items())

    def __repr__(self) -> str:
        return "FreshBearer(Authorization=<hidden>)"


def metadata_credential(url: str = METADATA_TOKEN_URL) -> Credential:
    """The pod's Google access token from the metadata server and its end (`expires_in` seconds from now);
    TokenError when the server does not answer or answers no token (no workload identity on the node pool, or the
    Kubernetes service account not linked to a Google service account)."""
    try:
        response = requests.get(url, headers={"Metadata-Flavor": "Google"}, timeout=METADATA_REQUEST_SECONDS)
    except requests.RequestException as error:
        raise TokenError(
            f"the metadata server did not answer ({type(error).__name__}): no Google access token"
        ) from None
    try:
        answer = response.json() if response.status_code == 200 else {}
        token, lifetime = answer.get("access_token"), float(answer.get("expires_in", 0))
    except (ValueError, AttributeError, TypeError):
        token, lifetime = None, 0.0
    if not token:
        raise TokenError(
            f"the metadata server gave no access token (HTTP {response.status_code}): is the pod's Kubernetes"
            " service account linked to a Google service account (iam.gke.io/gcp-service-account)?"
        )
    return Credential(token, time.time() + lifetime if lifetime > 0 else None)
