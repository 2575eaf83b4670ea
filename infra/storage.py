"""The shared storage: a Cloud Storage bucket granted to the Ray pods, or a Managed Lustre
instance on the cluster VPC. Either is kept on `pulumi destroy` when storage.keepOnDestroy."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core import names
from core.config.model import StackConfig
from core.facts.gcp import BUCKET_OBJECT_ROLE, WORKLOAD_PRINCIPAL
from core.facts.platform import PSA_DELETION_POLICY
from core.resource_options import fixed_name_options
from infra.apis import project_number
from infra.cluster import lustre_port
from infra.network import cidr_address, ingress_firewall_args
from infra.outputs import GcsStorage, LustreStorage, StorageHandOff


def workload_principal(project: str, project_number: str, ksa: str = names.RAY_SERVICE_ACCOUNT) -> str:
    """IAM principal of a Kubernetes service account of the namespace (workload identity federation)."""
    return WORKLOAD_PRINCIPAL.format(number=project_number, project=project, namespace=names.NAMESPACE, ksa=ksa)


def bucket_accounts(config: StackConfig) -> dict[str, str]:
    """The Kubernetes service accounts that mount the bucket through GCS FUSE, by the grant's name suffix: the
    Ray pods' and, with job.recover, the run guardian's (it reads and appends the run's record on /data)."""
    accounts = {"ray": names.RAY_SERVICE_ACCOUNT}
    if config.job.recover:
        accounts["guardian"] = names.GUARDIAN
    return accounts


@dataclass(frozen=True)
class StorageArgs:
    """Inputs of the Storage component."""

    config: StackConfig
    """The stack config."""
    apis: dict[str, pulumi.Resource]
    """The project services by API name; each resource waits for its own API."""
    cluster: pulumi.Resource
    """The cluster; only the bucket grant waits for it (its workload identity pool)."""
    cluster_vpc: pulumi.Input[str]
    """Name of the cluster VPC (Lustre firewall)."""
    cluster_vpc_id: pulumi.Input[str]
    """`projects/<p>/global/networks/<vpc>` of the cluster VPC (Lustre and its peering)."""


class Storage(pulumi.ComponentResource):
    """The bucket and its grant (gcs), or private service access and the Lustre instance (lustre)."""

    bucket: gcp.storage.Bucket | None = None
    bucket_grants: tuple[gcp.storage.BucketIAMMember, ...] = ()
    peering_range: gcp.compute.GlobalAddress | None = None
    peering: gcp.servicenetworking.Connection | None = None
    lustre_firewall: gcp.compute.Firewall | None = None
    lustre: gcp.lustre.Instance | None = None
    hand_off: StorageHandOff
    """What the workloads mount: the bucket, or the Lustre instance."""

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:Storage", name, None, opts)
        if args.config.storage.type == "gcs":
            self._bucket(args)
        else:
            self._lustre(args)
        self.register_outputs({})

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a pod mounting the storage waits for."""
        if self.bucket_grants:
            return list(self.bucket_grants)
        return [self.lustre, self.lustre_firewall]

    def _bucket(self, args: StorageArgs) -> None:
        config = args.config
        keep = config.storage.keep_on_destroy
        self.bucket = gcp.storage.Bucket(
            config.bucket_name,
            gcp.storage.BucketArgs(
                name=config.bucket_name,
                project=config.project,
                location=config.region,
                uniform_bucket_level_access=True,
                hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True),
                public_access_prevention="enforced",
                force_destroy=not keep,
            ),
            opts=fixed_name_options(
                parent=self,
                depends_on=[args.apis["storage.googleapis.com"]],
                retain_on_delete=keep,
            ),
        )
        number = project_number(config.project, args.apis, self)
        self.bucket_grants = tuple(
            gcp.storage.BucketIAMMember(
                f"{config.bucket_name}-{suffix}-object-user",
                gcp.storage.BucketIAMMemberArgs(
                    bucket=self.bucket.name,
                    role=BUCKET_OBJECT_ROLE,
                    member=number.apply(lambda number, ksa=ksa: workload_principal(config.project, number, ksa)),
                ),
                opts=pulumi.ResourceOptions(parent=self, depends_on=[args.cluster]),
            )
            for suffix, ksa in bucket_accounts(config).items()
        )
        self.hand_off = GcsStorage(bucket_name=self.bucket.name)

    def _lustre(self, args: StorageArgs) -> None:
        config = args.config
        keep = config.storage.keep_on_destroy
        lustre = names.lustre_names(config.cluster_name)
        address, prefix_length = cidr_address(config.network.lustre_range)
        port = lustre_port(config)
        self.peering_range = gcp.compute.GlobalAddress(
            lustre.peering_range,
            gcp.compute.GlobalAddressArgs(
                name=lustre.peering_range,
                project=config.project,
                network=args.cluster_vpc_id,
                purpose="VPC_PEERING",
                address_type="INTERNAL",
                address=address,
                prefix_length=prefix_length,
            ),
            opts=fixed_name_options(parent=self, retain_on_delete=keep),
        )
        self.peering = gcp.servicenetworking.Connection(
            f"{config.cluster_name}-lustre-peering",
            gcp.servicenetworking.ConnectionArgs(
                network=args.cluster_vpc_id,
                service="servicenetworking.googleapis.com",
                reserved_peering_ranges=[self.peering_range.name],
                # Kept: never deleted, so the provider's default. Not kept: the Lustre instance (which
                # waits for this connection) is deleted first, then this, then the range and the VPC.
                deletion_policy=None if keep else PSA_DELETION_POLICY,
            ),
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[args.apis["servicenetworking.googleapis.com"]],
                retain_on_delete=keep,
            ),
        )
        self.lustre_firewall = gcp.compute.Firewall(
            lustre.firewall,
            ingress_firewall_args(
                lustre.firewall,
                config.project,
                args.cluster_vpc,
                config.network.lustre_range,
                [gcp.compute.FirewallAllowArgs(protocol="tcp", ports=[str(port.port)])],
            ),
            opts=fixed_name_options(parent=self),
        )
        self.lustre = gcp.lustre.Instance(
            lustre.instance_id,
            gcp.lustre.InstanceArgs(
                instance_id=lustre.instance_id,
                project=config.project,
                location=config.zone,
                network=args.cluster_vpc_id,
                filesystem=lustre.filesystem,
                capacity_gib=str(config.storage.capacity_gib),
                per_unit_storage_throughput=str(config.storage.throughput),
                gke_support_enabled=port.legacy,
            ),
            opts=fixed_name_options(
                parent=self,
                depends_on=[self.peering, args.apis["lustre.googleapis.com"]],
                retain_on_delete=keep,
            ),
        )
        self.hand_off = LustreStorage(
            instance_id=self.lustre.instance_id,
            mount_point=self.lustre.mount_point,
            filesystem=lustre.filesystem,
            capacity_gib=config.storage.capacity_gib,
        )
