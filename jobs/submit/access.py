"""How the job layer reaches the Ray dashboard without exposing it: the API server's service proxy.

`https://<api-server>/api/v1/namespaces/<ns>/services/<svc>:<port>/proxy` forwards to the head
service's dashboard port, authorised by the caller's Google access token (the kubeconfig's
exec plugin, `gke-gcloud-auth-plugin`, or `gcloud auth print-access-token`). The cluster CA
comes from the kubeconfig. URL and header construction are pure; only getting a token runs a
command, when the header is made and again shortly before the token ends (FreshBearer).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

from core.facts.gcp import GCLOUD_NOT_LOGGED_IN, GCLOUD_TOKEN_LIFETIME_SECONDS, GKE_AUTH_PLUGIN
from incluster.endpoint import AccessError, Endpoint, bearer_headers, service_proxy_url
from incluster.google_token import Credential, FreshBearer


class KubeconfigUnreadable(AccessError):
    """The kubeconfig file cannot be read (most often: it does not exist yet)."""


class MissingContext(AccessError):
    """The kubeconfig has no entry for the context asked for."""


@dataclass(frozen=True)
class KubeTarget:
    """The API server, CA and user of one kubeconfig context."""

    server: str
    """API server URL."""
    ca_data: str | None
    """Base64 cluster CA certificate, or None to use the system's."""
    user: dict[str, Any]
    """The context's user entry (exec plugin, token, ...)."""
    insecure: bool = False
    """The context skips TLS verification."""


def _entries(kubeconfig: dict[str, Any], section: str) -> dict[str, dict[str, Any]]:
    """A kubeconfig list section (`clusters`, `users`, `contexts`) as name -> its inner mapping."""
    inner = section[:-1]
    return {item["name"]: item.get(inner) or {} for item in kubeconfig.get(section) or []}


def kube_target(kubeconfig: dict[str, Any], context: str | None = None) -> KubeTarget:
    """The server, CA and user of `context`, else of the kubeconfig's current context."""
    contexts = _entries(kubeconfig, "contexts")
    context_name = context or kubeconfig.get("current-context")
    if not context_name:
        raise AccessError("the kubeconfig has no current context; pass --context or --address")
    if context_name not in contexts:
        current = kubeconfig.get("current-context")
        raise MissingContext(
            f"the kubeconfig has no context {context_name!r}"
            f" (has: {', '.join(sorted(contexts)) or 'none'}; current: {current or 'none'})"
        )
    cluster = _entries(kubeconfig, "clusters").get(contexts[context_name].get("cluster"))
    user = _entries(kubeconfig, "users").get(contexts[context_name].get("user"), {})
    if not cluster or not cluster.get("server"):
        raise AccessError(f"the kubeconfig context {context_name!r} names no cluster server")
    return KubeTarget(
        server=cluster["server"],
        ca_data=cluster.get("certificate-authority-data"),
        user=user or {},
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
    )


def exec_credential(output: str) -> Credential:
    """The token of a client-go ExecCredential printed by a credential plugin (`status.token`) and its
    `status.expirationTimestamp`, "a time when the provided credentials expire" (kubernetes/client-go
    pkg/apis/clientauthentication/v1beta1/types.go; RFC 3339, optional)."""
    try:
        status = json.loads(output)["status"]
        token, expiry = status["token"], status.get("expirationTimestamp")
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AccessError("the kubeconfig's credential plugin printed no ExecCredential token") from None
    if not token:
        raise AccessError("the kubeconfig's credential plugin returned an empty token")
    try:
        expires_at = datetime.fromisoformat(expiry.replace("Z", "+00:00")).timestamp() if expiry else None
    except (ValueError, AttributeError):
        raise AccessError(f"the kubeconfig's credential plugin printed an unreadable expiry {expiry!r}") from None
    return Credential(token, expires_at)


def _run(command: list[str], env: dict[str, str] | None = None) -> str:
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, check=False)
    except FileNotFoundError:
        raise AccessError(
            f"{command[0]} is not installed; it is needed to get a Google access token"
            f" (gcloud components install {GKE_AUTH_PLUGIN}; gcloud auth login)"
        ) from None
    except subprocess.TimeoutExpired:
        raise AccessError(f"{command[0]} did not answer within 60 s") from None
    if result.returncode != 0:
        raise AccessError(credential_failure(command[0], result.stderr))
    return result.stdout


def credential_failure(command: str, stderr: str) -> str:
    """One line for a credential command that failed with `stderr`: not logged in, or its first error line."""
    if any(sign in stderr for sign in GCLOUD_NOT_LOGGED_IN):
        return f"gcloud is not logged in, so {command} got no Google access token; run gcloud auth login"
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    reason = next((line for line in lines if "error" in line.lower()), lines[0] if lines else "no output")
    return f"{command} got no Google access token: {reason[:200]}; check gcloud auth login"


def user_credential(user: dict[str, Any]) -> Credential:
    """A bearer token for the kubeconfig `user` with its expiry where known: its token, its exec plugin's (with the
    expiry the plugin states), or gcloud's (GCLOUD_TOKEN_LIFETIME_SECONDS from now)."""
    if user.get("token"):
        return Credential(user["token"], None)
    plugin = user.get("exec")
    if plugin:
        env = {**os.environ, **{item["name"]: item["value"] for item in plugin.get("env") or []}}
        return exec_credential(_run([plugin["command"], *(plugin.get("args") or [])], env))
    return Credential(
        _run(["gcloud", "auth", "print-access-token"]).strip(), time.time() + GCLOUD_TOKEN_LIFETIME_SECONDS
    )


def user_headers(user: dict[str, Any]) -> dict[str, str]:
    """The Authorization header for the kubeconfig `user`: fixed for a token written in the kubeconfig, renewed
    before it ends (FreshBearer) for an exec plugin's or gcloud's."""
    if user.get("token"):
        return bearer_headers(user["token"])
    return FreshBearer(lambda: user_credential(user))


def ca_bundle(ca_data: str) -> str:
    """Path of a file holding the base64 `ca_data` certificate (public), written once per content."""
    pem = base64.b64decode(ca_data)
    path = Path(tempfile.gettempdir()) / f"grpo-gke-ca-{hashlib.sha256(pem).hexdigest()[:16]}.crt"
    if not path.exists():
        path.write_bytes(pem)
    return str(path)


def endpoint_from_kubeconfig(text: str, context: str | None = None) -> Endpoint:
    """The Ray dashboard of the stack's cluster through the API server's service proxy (contexts as kube_target)."""
    try:
        kubeconfig = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        raise AccessError("the kubeconfig is not valid YAML") from None
    if not isinstance(kubeconfig, dict):
        raise AccessError("the kubeconfig is not a kubeconfig mapping")
    target = kube_target(kubeconfig, context)
    verify: str | bool = ca_bundle(target.ca_data) if target.ca_data else not target.insecure
    return Endpoint(address=service_proxy_url(target.server), headers=user_headers(target.user), verify=verify)


def endpoint_from_kubeconfig_file(path: Path, context: str | None = None) -> Endpoint:
    """`endpoint_from_kubeconfig` of the file at `path`."""
    try:
        text = path.read_text()
    except OSError as error:
        raise KubeconfigUnreadable(f"cannot read the kubeconfig {path}: {error.strerror}") from None
    return endpoint_from_kubeconfig(text, context)


def default_kubeconfig_path() -> Path:
    """The kubeconfig kubectl uses: the first file in $KUBECONFIG, else ~/.kube/config."""
    configured = os.environ.get("KUBECONFIG", "")
    first = next((item for item in configured.split(os.pathsep) if item), None)
    return Path(first) if first else Path.home() / ".kube" / "config"


def api_server_from_kubeconfig(text: str, context: str | None = None) -> Endpoint:
    """The Kubernetes API server itself (not the dashboard's proxy) of `context` in the kubeconfig `text`, with the
    same token and CA: for the few calls the job layer makes to the API (cordoning a node)."""
    proxy = endpoint_from_kubeconfig(text, context)
    return Endpoint(address=proxy.address.split("/api/v1/", 1)[0], headers=proxy.headers, verify=proxy.verify)
