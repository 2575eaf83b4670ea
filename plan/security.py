"""The plan's security summary: who reaches the control plane and the Ray head, which identities the nodes and
the workloads use with which roles, what is encrypted with which key, and every warning. Pure: config in, text out."""

from __future__ import annotations

from core import names
from core.config.load import LoadedConfig
from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.config.rules import any_address_ranges
from core.facts.gcp import (
    ARTIFACT_REGISTRY_READER_ROLE,
    BUCKET_OBJECT_ROLE,
    PARK_PERMISSIONS,
    STREAMING_CONSUMER_ROLE,
)
from core.facts.pods import KONNECTIVITY_AGENT_LABELS, KONNECTIVITY_AGENT_NAMESPACE
from core.facts.privilege import KMS_ENCRYPTER_ROLE, NODE_SERVICE_ACCOUNT_ROLES
from infra.storage import bucket_accounts
from workloads import policies
from workloads.raycluster import HEAD_PORTS


def control_plane_access(config: StackConfig) -> str:
    """Who can reach the Kubernetes API server, and how."""
    cidrs = ", ".join(config.cluster.authorized_networks)
    open_ranges = ", ".join(any_address_ranges(config.cluster.authorized_networks))
    if open_ranges:
        ip_endpoint = f"public IP endpoint from any address ({open_ranges}; a Google identity with cluster access is still needed)"
        return (
            f"DNS endpoint for Google identities with container.clusters.connect; {ip_endpoint}"
            if config.cluster.dns_endpoint
            else ip_endpoint
        )
    if config.cluster.dns_endpoint:
        ip_endpoint = f"its public IP endpoint admits {cidrs} only" if cidrs else "its public IP endpoint admits no one"
        return f"DNS endpoint for Google identities with container.clusters.connect; {ip_endpoint}"
    if cidrs:
        return f"public IP endpoint from {cidrs} only"
    return "public IP endpoint from any address (a Google identity with cluster access is still needed)"


def ray_head_access() -> str:
    """Who can reach the Ray head's ports: what the namespace's NetworkPolicies (workloads/policies.py) admit."""
    ports = ", ".join(f"{port} ({name})" for name, port in sorted(HEAD_PORTS.items(), key=lambda item: item[1]))
    guardian = ", ".join(f"{key}={value}" for key, value in names.GUARDIAN_LABELS.items())
    agents = ", ".join(f"{key}={value}" for key, value in KONNECTIVITY_AGENT_LABELS.items())
    return (
        f"ports {ports} of {names.NAMESPACE}/{names.RAY_HEAD_SERVICE} only from the RayCluster's own pods"
        f" ({policies.RAY_INTERNAL}); {names.RAY_DASHBOARD_PORT} also from the run guardian ({guardian}) and"
        f" {KONNECTIVITY_AGENT_NAMESPACE}'s konnectivity agents ({agents}), the path of the API server's"
        f" service proxy ({policies.HEAD_DASHBOARD}); every other pod is refused ({policies.DEFAULT_DENY});"
        f" users reach the dashboard through the service proxy"
    )


def node_identity(config: StackConfig) -> str:
    """The nodes' Google service account, its roles and its shielding."""
    email = names.service_account_email(names.node_service_account_id(config.cluster_name), config.project)
    roles = ", ".join(NODE_SERVICE_ACCOUNT_ROLES)
    if config.cluster.mode == "autopilot":
        shielding = "Autopilot's Shielded GKE Nodes with secure boot"
    else:
        shielding = "Shielded GKE Nodes with secure boot and integrity monitoring"
    if config.workload.resolved_image_source() == "registry":
        # infra/registry.py: the pulls through the stack's remote repositories, streamed
        roles += (
            f", {ARTIFACT_REGISTRY_READER_ROLE} on the stack's remote repositories and {STREAMING_CONSUMER_ROLE} on"
            f" project {config.project} (image streaming from them)"
        )
    return f"{email} with {roles}; {shielding}"


def workload_identity(config: StackConfig) -> str:
    """The identities of the Ray pods (and the run guardian, with job.recover) and their Google roles; with
    storage.parkWhenIdle, the Google service account the guardian acts as to park the run."""
    accounts = [f"{names.NAMESPACE}/{ksa}" for ksa in bucket_accounts(config).values()]
    if len(accounts) == 1:
        account = f"Kubernetes service account {accounts[0]} through workload identity"
    else:
        account = f"Kubernetes service accounts {' and '.join(accounts)} through workload identity"
    if config.storage.type == "gcs":
        return f"{account}, {BUCKET_OBJECT_ROLE} on bucket {config.bucket_name} only"
    lustre = f"{account}, no Google role (Managed Lustre is reached over the VPC)"
    if not config.storage.park_when_idle or config.storage.parked:
        return lustre
    return (
        f"{lustre}; to park the run, {names.NAMESPACE}/{names.GUARDIAN} acts as"
        f" {names.service_account_email(names.guardian_account_id(config.cluster_name), config.project)} with a custom role of"
        f" {' and '.join(PARK_PERMISSIONS)} alone on project {config.project} (no narrower grant exists:"
        f" docs/security.md), so it may export every Managed Lustre instance of the project into any bucket the"
        f" project's Lustre service agent may write (this stack grants it bucket {config.parked_bucket_name}) and read"
        f" every Lustre operation there, and {BUCKET_OBJECT_ROLE} on bucket {config.parked_bucket_name} only"
    )


def encryption(config: StackConfig) -> str:
    """What is encrypted with which key."""
    key = config.cluster.secrets_kms_key
    if key is None:
        return (
            f"Secrets with Google-managed keys at rest; {PROJECT_NAMESPACE}:cluster.secretsKmsKey adds a Cloud KMS key"
        )
    return f"Secrets at the application layer with {key} ({KMS_ENCRYPTER_ROLE} to the GKE service agent)"


def security_summary(loaded: LoadedConfig) -> str:
    """The plan's security block: one line per question, then every warning."""
    config = loaded.config
    lines = [
        "Security:",
        f"  control plane: {control_plane_access(config)}",
        f"  ray head: {ray_head_access()}",
        f"  nodes: {node_identity(config)}",
        f"  workloads: {workload_identity(config)}",
        f"  encryption: {encryption(config)}",
    ]
    lines += [f"  warning: {warning}" for warning in loaded.warnings]
    return "\n".join(lines)
