"""The nodes' own Google identity and the grants the cluster needs before it exists: the node service
account with GKE's node role only, and, with `cluster.secretsKmsKey`, the GKE service agent's use of the key."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core import names
from core.config.model import StackConfig
from core.facts.privilege import GKE_SERVICE_AGENT, KMS_ENCRYPTER_ROLE, NODE_SERVICE_ACCOUNT_ROLES
from core.resource_options import fixed_name_options
from infra.apis import project_number


def role_resource_name(cluster: str, role: str) -> str:
    """Logical name of the nodes' grant of `role`: `<account id>-container-defaultNodeServiceAccount`."""
    return f"{names.node_service_account_id(cluster)}-{role.removeprefix('roles/').replace('.', '-')}"


def gke_service_agent(project_number: str) -> str:
    """IAM member of the GKE service agent of the project with this number."""
    return GKE_SERVICE_AGENT.format(number=project_number)


@dataclass(frozen=True)
class ClusterIdentityArgs:
    """Inputs of the ClusterIdentity component."""

    config: StackConfig
    """The stack config."""
    apis: dict[str, pulumi.Resource]
    """The project's Service resources by API name: the account waits for IAM, the project grants and the
    project lookup for Cloud Resource Manager, the key grant for GKE (which creates its service agent)."""


class ClusterIdentity(pulumi.ComponentResource):
    """The nodes' service account and its project roles, and the GKE service agent's grant on the Secrets key."""

    node_account: gcp.serviceaccount.Account
    node_grants: list[gcp.projects.IAMMember]
    kms_grant: gcp.kms.CryptoKeyIAMMember | None = None

    def __init__(self, name: str, args: ClusterIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:ClusterIdentity", name, None, opts)
        config = args.config
        cluster = config.cluster_name
        self.node_account = gcp.serviceaccount.Account(
            names.node_service_account_id(cluster),
            gcp.serviceaccount.AccountArgs(
                project=config.project,
                account_id=names.node_service_account_id(cluster),
                display_name=f"GKE nodes of {cluster}",
                description="Node identity of the grpo-gke cluster: logs, metrics, metadata only; workloads use workload identity.",
            ),
            opts=fixed_name_options(parent=self, depends_on=[args.apis["iam.googleapis.com"]]),
        )
        # Non-authoritative members: the project's other holders of each role are left as they are.
        self.node_grants = [
            gcp.projects.IAMMember(
                role_resource_name(cluster, role),
                gcp.projects.IAMMemberArgs(project=config.project, role=role, member=self.node_account.member),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[args.apis["cloudresourcemanager.googleapis.com"]]),
            )
            for role in NODE_SERVICE_ACCOUNT_ROLES
        ]
        key = config.cluster.secrets_kms_key
        if key is not None:
            number = project_number(config.project, args.apis, self)
            self.kms_grant = gcp.kms.CryptoKeyIAMMember(
                f"{cluster}-secrets-key",
                gcp.kms.CryptoKeyIAMMemberArgs(
                    crypto_key_id=key,
                    role=KMS_ENCRYPTER_ROLE,
                    member=number.apply(gke_service_agent),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[args.apis["container.googleapis.com"]]),
            )
        self.register_outputs({})

    @property
    def cluster_waits_for(self) -> list[pulumi.Resource]:
        """What the cluster and its pools wait for: the node roles and the key grant."""
        return [*self.node_grants, *([self.kms_grant] if self.kms_grant is not None else [])]
