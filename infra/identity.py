"""The stack's Google identities: the nodes' (the node service account with GKE's node role only, and, with
`cluster.secretsKmsKey`, the GKE service agent's use of the key) and, with `storage.parkWhenIdle`, the run guardian's
(a Google service account its Kubernetes one acts as, with Managed Lustre's export and the operations' reads on the
project, and the parked bucket's objects: what that reaches is in docs/security.md)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core import names
from core.config.model import StackConfig
from core.facts.gcp import BUCKET_OBJECT_ROLE, PARK_PERMISSIONS, WORKLOAD_IDENTITY_USER_ROLE, WORKLOAD_KSA_MEMBER
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


def guardian_ksa_member(project: str) -> str:
    """The IAM member of the guardian's Kubernetes service account in its workload identity grant."""
    return WORKLOAD_KSA_MEMBER.format(project=project, namespace=names.NAMESPACE, ksa=names.GUARDIAN)


@dataclass(frozen=True)
class GuardianIdentityArgs:
    """Inputs of the GuardianIdentity component."""

    config: StackConfig
    """The stack config (storage.parkWhenIdle on a Lustre stack)."""
    apis: dict[str, pulumi.Resource]
    """The project's Service resources by API name: the account waits for IAM."""
    cluster: pulumi.Resource
    """The cluster: the workload identity grant waits for its pool."""
    instance_uid: pulumi.Output[str]
    """The Lustre instance's uid: the park role's id follows this instance (names.park_role_id; IAM keeps a deleted
    custom role's id for days), though its grant is on the project (GuardianIdentity)."""
    parked_bucket: pulumi.Input[str]
    """The parked bucket's name: the guardian lists it and writes the park marker there."""


class GuardianIdentity(pulumi.ComponentResource):
    """The run guardian's Google service account, acted as by its Kubernetes service account (Workload Identity
    Federation for GKE), with a custom role of PARK_PERMISSIONS on the project (no predefined role holds
    exportData without delete, core/facts/gcp.py) and object use of the parked bucket.

    The project grant reaches every Managed Lustre instance of the project, not only the stack's, and exports as the
    project's Lustre service agent into any bucket that agent may write. Nothing narrower is available here: IAM
    Conditions on resource names do not list lustre.googleapis.com (cloud.google.com/iam/docs/conditions-resource-
    attributes, read 2026-12-07); the v1 API has setIamPolicy on instances (googleapis google/cloud/lustre/v1/
    lustre_v1.yaml, commit 6c345acd, `/v1/{resource=projects/*/locations/*/instances/*}:setIamPolicy`), which
    pulumi-gcp 10.2.0 does not wrap (its lustre module holds Instance and get_instance only); ExportDataRequest's
    `serviceAccount` (transfer.proto, same commit) picks who moves the data, but a caller with exportData may leave
    it out, so it bounds nothing the guardian's token could do."""

    account: gcp.serviceaccount.Account
    park_role: gcp.projects.IAMCustomRole
    grants: list[pulumi.Resource]

    def __init__(self, name: str, args: GuardianIdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:GuardianIdentity", name, None, opts)
        config = args.config
        cluster = config.cluster_name
        account_id = names.guardian_account_id(cluster)
        self.account = gcp.serviceaccount.Account(
            account_id,
            gcp.serviceaccount.AccountArgs(
                project=config.project,
                account_id=account_id,
                display_name=f"Run guardian of {cluster}",
                description="The grpo-gke run guardian parks the run: Managed Lustre export into the parked bucket.",
            ),
            opts=fixed_name_options(parent=self, depends_on=[args.apis["iam.googleapis.com"]]),
        )
        self.park_role = gcp.projects.IAMCustomRole(
            f"{cluster}{names.PARK_ROLE_SUFFIX}",
            gcp.projects.IAMCustomRoleArgs(
                project=config.project,
                role_id=args.instance_uid.apply(lambda uid: names.park_role_id(cluster, uid)),
                title=f"grpo-gke park ({cluster})",
                description="Export from the stack's Managed Lustre instance and read the transfer's operation.",
                permissions=list(PARK_PERMISSIONS),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.apis["iam.googleapis.com"]]),
        )
        self.grants = [
            gcp.projects.IAMMember(
                f"{account_id}{names.GUARDIAN_GRANTS['park']}",
                gcp.projects.IAMMemberArgs(
                    project=config.project, role=self.park_role.name, member=self.account.member
                ),
                opts=pulumi.ResourceOptions(parent=self),
            ),
            gcp.storage.BucketIAMMember(
                f"{account_id}{names.GUARDIAN_GRANTS['bucket']}",
                gcp.storage.BucketIAMMemberArgs(
                    bucket=args.parked_bucket, role=BUCKET_OBJECT_ROLE, member=self.account.member
                ),
                opts=pulumi.ResourceOptions(parent=self),
            ),
            gcp.serviceaccount.IAMMember(
                f"{account_id}{names.GUARDIAN_GRANTS['link']}",
                gcp.serviceaccount.IAMMemberArgs(
                    service_account_id=self.account.name,
                    role=WORKLOAD_IDENTITY_USER_ROLE,
                    member=guardian_ksa_member(config.project),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster]),
            ),
        ]
        self.register_outputs({"account": self.account.email, "parkRole": self.park_role.name})
