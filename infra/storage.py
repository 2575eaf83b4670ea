"""The shared storage: a Cloud Storage bucket granted to the Ray pods, or a Managed Lustre
instance on the cluster VPC. Either is kept on `pulumi destroy` when storage.keepOnDestroy."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core import names
from core.config.model import StackConfig
from core.facts.gcp import BUCKET_OBJECT_ROLE, LUSTRE_SERVICE_AGENT, LUSTRE_TRANSFER_ROLE, WORKLOAD_PRINCIPAL
from core.facts.platform import PSA_DELETION_POLICY
from core.resource_options import fixed_name_options
from infra.apis import project_number
from infra.cluster import lustre_port
from infra.network import cidr_address, ingress_firewall_args
from infra.outputs import GcsStorage, LustreStorage, ParkedStorage, StorageHandOff


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


def private_bucket_args(config: StackConfig, name: str, force_destroy: bool) -> gcp.storage.BucketArgs:
    """A bucket `name` of the stack in its region: uniform access, hierarchical namespace, no public access;
    `force_destroy`: `pulumi destroy` deletes it with its objects (the run's bucket without keepOnDestroy)."""
    return gcp.storage.BucketArgs(
        name=name,
        project=config.project,
        location=config.region,
        uniform_bucket_level_access=True,
        hierarchical_namespace=gcp.storage.BucketHierarchicalNamespaceArgs(enabled=True),
        public_access_prevention="enforced",
        force_destroy=force_destroy,
    )


def lustre_agent_member(project_number: str) -> str:
    """The IAM member of the project's Managed Lustre service agent, which moves exportData's and importData's data."""
    return f"serviceAccount:{LUSTRE_SERVICE_AGENT.format(number=project_number)}"


def park_refusal(marker_text: str | None, config: StackConfig, run: str) -> str | None:
    """Why `pulumi up` with storage.parked true must not delete the Lustre instance, from the parked bucket's marker
    alone (incluster/park.py writes it); None when `run`, the config's run, is parked. `run` is
    `<stack>-<spec hash>` (jobs/spec/training.py training_spec), computed above this layer by its caller. Refused:
    no marker; one that is not `parked` (`parking`: a park that has not finished or failed; `stale`: an attempt was
    submitted after the park; `restored`: the run was imported back since); one of another stack; one that parked
    another run than `run` (the config's spec changed since the park); one that does not list `run` among the run
    directories it exported."""
    command = f"python -m jobs park --stack {config.stack}"
    if config.storage.park_when_idle:
        command += f" or wait for the guardian's parked entry (python -m jobs status --stack {config.stack})"
    where = f"gs://{config.parked_bucket_name}/{names.PARK_MARKER}"
    if marker_text is None:
        return (
            f"grpo-gke:storage.parked is true but {where} does not exist: the run is not parked, and deleting the"
            f" Lustre instance would lose it; run {command} first (or set storage.parked false)"
        )
    try:
        marker = json.loads(marker_text)
        marker = marker if isinstance(marker, dict) else {}
    except ValueError:
        marker = {}
    state, parked = marker.get("state"), str(marker.get("run") or "")
    if state != "parked":
        return (
            f"grpo-gke:storage.parked is true but {where} says {state!r}, not 'parked': the run on the instance is"
            f" newer than the bucket's; run {command} first (or set storage.parked false)"
        )
    if marker.get("stack") != config.stack:
        return (
            f"grpo-gke:storage.parked is true but {where} parked {parked or 'no run'} of stack {marker.get('stack')!r},"
            f" not a run of {config.stack!r}: deleting the Lustre instance would lose this stack's run; run {command}"
            " first (or set storage.parked false)"
        )
    if parked != run:
        return (
            f"grpo-gke:storage.parked is true but {where} parked {parked or 'no run'} of stack {config.stack!r}, and"
            f" this config names the run {run} (its spec changed since the park): the park does not speak for {run},"
            f" and deleting the Lustre instance could lose it; undo the config's change, or run {command} again with"
            " this config (or set storage.parked false)"
        )
    if run not in (marker.get("runs") or []):
        return (
            f"grpo-gke:storage.parked is true but {where} does not list {run} among the runs it exported: the park is"
            f" not whole; run {command} first (or set storage.parked false)"
        )
    return None


def read_park_marker(config: StackConfig) -> str | None:
    """The parked bucket's marker object, read at `pulumi up` through the provider (getBucketObjectContent); None when
    the provider cannot read it (no bucket or no object: the Terraform data source fails for either)."""
    try:
        result = gcp.storage.get_bucket_object_content(bucket=config.parked_bucket_name, name=names.PARK_MARKER)
    except Exception:  # noqa: BLE001 - a failed invoke raises a plain Exception naming the provider's error
        return None
    return result.content


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
    run: str
    """The config's run id, `<stack>-<spec hash>` (jobs/spec/training.py training_spec, computed by the program):
    the run a park marker must name before storage.parked deletes the Lustre instance (park_refusal)."""


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

    parked_bucket: gcp.storage.Bucket | None = None
    lustre_agent_grant: gcp.storage.BucketIAMMember | None = None

    def __init__(self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:Storage", name, None, opts)
        if args.config.storage.type == "gcs":
            self._bucket(args)
        else:
            self._lustre(args)
        self.register_outputs({})

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a pod mounting the storage waits for (nothing while parked: no pod mounts it)."""
        if self.bucket_grants:
            return list(self.bucket_grants)
        if self.lustre is None:
            return []
        return [self.lustre, self.lustre_firewall, self.lustre_agent_grant]

    def _bucket(self, args: StorageArgs) -> None:
        config = args.config
        keep = config.storage.keep_on_destroy
        self.bucket = gcp.storage.Bucket(
            config.bucket_name,
            private_bucket_args(config, config.bucket_name, force_destroy=not keep),
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
        self._parked_bucket(args)
        if config.storage.parked:
            refusal = park_refusal(read_park_marker(config), config, args.run)
            if refusal is not None:
                raise pulumi.RunError(refusal)
            self._agent_grant(args, [])
            self.hand_off = ParkedStorage(bucket_name=self.parked_bucket.name)
            return
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
        self._agent_grant(args, [self.lustre])
        self.hand_off = LustreStorage(
            instance_id=self.lustre.instance_id,
            mount_point=self.lustre.mount_point,
            filesystem=lustre.filesystem,
            capacity_gib=config.storage.capacity_gib,
            instance_name=self.lustre.instance_id.apply(
                lambda instance: f"projects/{config.project}/locations/{config.zone}/instances/{instance}"
            ),
            uid=self.lustre.uid,
        )

    def _parked_bucket(self, args: StorageArgs) -> None:
        """The bucket `python -m jobs park` exports the run to. Always
        kept on `pulumi destroy` (retainOnDelete, no forceDestroy): it may hold the only copy of a parked run.
        Hierarchical namespace: such buckets transfer faster to and from Managed Lustre (transfer-data page)."""
        config = args.config
        self.parked_bucket = gcp.storage.Bucket(
            config.parked_bucket_name,
            private_bucket_args(config, config.parked_bucket_name, force_destroy=False),
            opts=fixed_name_options(
                parent=self, depends_on=[args.apis["storage.googleapis.com"]], retain_on_delete=True
            ),
        )

    def _agent_grant(self, args: StorageArgs, waits_for: list[pulumi.Resource]) -> None:
        """The Lustre service agent's role on the parked bucket. The agent exists once the project's first instance
        does (transfer-data page): the grant waits for ours, and stays while parked."""
        config = args.config
        number = project_number(config.project, args.apis, self)
        self.lustre_agent_grant = gcp.storage.BucketIAMMember(
            f"{config.parked_bucket_name}-lustre-agent",
            gcp.storage.BucketIAMMemberArgs(
                bucket=self.parked_bucket.name,
                role=LUSTRE_TRANSFER_ROLE,
                member=number.apply(lustre_agent_member),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=waits_for),
        )
