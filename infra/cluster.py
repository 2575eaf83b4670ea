"""The GKE cluster: one set of Args shared by Standard and Autopilot, branched where they differ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pulumi
import pulumi_gcp as gcp

from core.config.model import StackConfig
from core.facts.gcp import CLOUD_PLATFORM_SCOPE, WORKLOAD_POOL
from core.facts.monitoring import MONITORING_COMPONENTS
from core.facts.platform import LUSTRE_DEFAULT_PORT_FLOOR, LUSTRE_LEGACY_PORT, LUSTRE_PORT, GkeVersion
from core.facts.privilege import SHIELDED_INTEGRITY_MONITORING, SHIELDED_SECURE_BOOT
from core.resource_options import fixed_name_options
from infra.network import POD_RANGE_NAME, SERVICE_RANGE_NAME

DEFAULT_POOL_CONFIG = "nodeConfig"
"""The cluster input that configures only GKE's initial default pool (Standard)."""


class LustrePort(NamedTuple):
    """How GKE nodes reach Managed Lustre."""

    port: int
    """TCP port of LNet that the firewall opens."""
    legacy: bool
    """True below LUSTRE_DEFAULT_PORT_FLOOR: instance `gke_support_enabled` + add-on `enable_legacy_lustre_port`."""


def version_below(min_version: str | None, floor: str) -> bool:
    """True when a pinned minimum version is older than `floor` (no pin: the channel default, far above)."""
    if min_version is None:
        return False
    return GkeVersion.parse(min_version).key() < GkeVersion.parse(floor).key()


def lustre_port(config: StackConfig) -> LustrePort:
    """Port 988 on nodes at or above LUSTRE_DEFAULT_PORT_FLOOR, otherwise the legacy port."""
    if version_below(config.cluster.min_version, LUSTRE_DEFAULT_PORT_FLOOR):
        return LustrePort(port=LUSTRE_LEGACY_PORT, legacy=True)
    return LustrePort(port=LUSTRE_PORT, legacy=False)


def workload_pool(project: str) -> str:
    """The workload identity pool of `project`."""
    return WORKLOAD_POOL.format(project=project)


def addons_config(config: StackConfig) -> gcp.container.ClusterAddonsConfigArgs:
    """Ray operator always; GCS FUSE CSI on Standard with gcs (Autopilot has it on); Lustre CSI with lustre."""
    standard = config.cluster.mode == "standard"
    storage = config.storage.type
    return gcp.container.ClusterAddonsConfigArgs(
        ray_operator_configs=[gcp.container.ClusterAddonsConfigRayOperatorConfigArgs(enabled=True)],
        gcs_fuse_csi_driver_config=(
            gcp.container.ClusterAddonsConfigGcsFuseCsiDriverConfigArgs(enabled=True)
            if standard and storage == "gcs"
            else None
        ),
        lustre_csi_driver_config=(
            gcp.container.ClusterAddonsConfigLustreCsiDriverConfigArgs(
                enabled=True, enable_legacy_lustre_port=lustre_port(config).legacy
            )
            if storage == "lustre"
            else None
        ),
    )


def authorized_networks_config(config: StackConfig) -> gcp.container.ClusterMasterAuthorizedNetworksConfigArgs | None:
    """The CIDRs the public IP endpoint admits: `cluster.authorizedNetworks`; none at all with only the DNS
    endpoint (an enabled list without blocks closes the public IP); unrestricted (None) with neither."""
    cluster = config.cluster
    if not cluster.authorized_networks and not cluster.dns_endpoint:
        return None
    return gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
        cidr_blocks=[
            gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                cidr_block=cidr, display_name=f"grpo-gke-authorized-{index}"
            )
            for index, cidr in enumerate(cluster.authorized_networks)
        ],
        gcp_public_cidrs_access_enabled=False,
    )


def control_plane_endpoints_config(config: StackConfig) -> gcp.container.ClusterControlPlaneEndpointsConfigArgs | None:
    """With `cluster.dnsEndpoint`: user traffic admitted on the IAM-authenticated DNS endpoint."""
    if not config.cluster.dns_endpoint:
        return None
    return gcp.container.ClusterControlPlaneEndpointsConfigArgs(
        dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
            allow_external_traffic=True
        )
    )


def database_encryption(config: StackConfig) -> gcp.container.ClusterDatabaseEncryptionArgs | None:
    """With `cluster.secretsKmsKey`: Secrets encrypted at the application layer with that key."""
    key = config.cluster.secrets_kms_key
    if key is None:
        return None
    return gcp.container.ClusterDatabaseEncryptionArgs(state="ENCRYPTED", key_name=key)


def monitoring_config() -> gcp.container.ClusterMonitoringConfigArgs:
    """GKE's system metrics and its managed DCGM metrics of the GPUs, through Managed Service for Prometheus
    (core/facts/monitoring.py MONITORING_COMPONENTS): what the run's dashboard charts, Standard and Autopilot."""
    return gcp.container.ClusterMonitoringConfigArgs(
        enable_components=list(MONITORING_COMPONENTS),
        managed_prometheus=gcp.container.ClusterMonitoringConfigManagedPrometheusArgs(enabled=True),
    )


def cluster_args(
    config: StackConfig,
    network: pulumi.Input[str],
    subnetwork: pulumi.Input[str],
    node_service_account: pulumi.Input[str],
) -> gcp.container.ClusterArgs:
    """The cluster's Args: shared settings once, then the Standard- or Autopilot-only ones."""
    channel = config.cluster.release_channel
    shared = dict(
        name=config.cluster_name,
        project=config.project,
        location=config.region,
        network=network,
        subnetwork=subnetwork,
        networking_mode="VPC_NATIVE",
        ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
            cluster_secondary_range_name=POD_RANGE_NAME,
            services_secondary_range_name=SERVICE_RANGE_NAME,
        ),
        private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
            enable_private_nodes=True, enable_private_endpoint=False
        ),
        master_authorized_networks_config=authorized_networks_config(config),
        control_plane_endpoints_config=control_plane_endpoints_config(config),
        database_encryption=database_encryption(config),
        enable_multi_networking=True,
        addons_config=addons_config(config),
        monitoring_config=monitoring_config(),
        release_channel=gcp.container.ClusterReleaseChannelArgs(channel=channel) if channel else None,
        min_master_version=config.cluster.min_version,
        deletion_protection=config.cluster.deletion_protection,
    )
    if config.cluster.mode == "autopilot":
        # Autopilot brings workload identity, Dataplane V2 and Shielded GKE Nodes with secure boot itself; its
        # nodes take their identity from the auto-provisioning defaults.
        return gcp.container.ClusterArgs(
            enable_autopilot=True,
            cluster_autoscaling=gcp.container.ClusterClusterAutoscalingArgs(
                auto_provisioning_defaults=gcp.container.ClusterClusterAutoscalingAutoProvisioningDefaultsArgs(
                    service_account=node_service_account, oauth_scopes=[CLOUD_PLATFORM_SCOPE]
                )
            ),
            **shared,
        )
    return gcp.container.ClusterArgs(
        enable_shielded_nodes=True,
        # The default pool GKE creates before removing it runs as the nodes' account too: a project whose
        # Compute Engine default account is disabled or unprivileged could not create it otherwise.
        node_config=gcp.container.ClusterNodeConfigArgs(
            service_account=node_service_account,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
                enable_secure_boot=SHIELDED_SECURE_BOOT,
                enable_integrity_monitoring=SHIELDED_INTEGRITY_MONITORING,
            ),
        ),
        datapath_provider="ADVANCED_DATAPATH",
        workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
            workload_pool=workload_pool(config.project)
        ),
        remove_default_node_pool=True,
        initial_node_count=1,
        node_pool_defaults=node_pool_defaults(config),
        **shared,
    )


def node_pool_defaults(config: StackConfig) -> gcp.container.ClusterNodePoolDefaultsArgs | None:
    """Image streaming as the Standard cluster's default for its pools with `workload.imageSource: registry`
    (pulumi-gcp 10.2.0 ClusterNodePoolDefaultsNodeConfigDefaultsGcfsConfigArgs: "enable image streaming across
    all the node pools within the cluster"); unset otherwise. Each pool sets it too (infra/nodepools.py)."""
    if not config.streams_images_on_pools():
        return None
    return gcp.container.ClusterNodePoolDefaultsArgs(
        node_config_defaults=gcp.container.ClusterNodePoolDefaultsNodeConfigDefaultsArgs(
            gcfs_config=gcp.container.ClusterNodePoolDefaultsNodeConfigDefaultsGcfsConfigArgs(enabled=True)
        )
    )


@dataclass(frozen=True)
class ClusterArgs:
    """Inputs of the Cluster component."""

    config: StackConfig
    """The stack config."""
    network: pulumi.Input[str]
    """The cluster VPC."""
    subnetwork: pulumi.Input[str]
    """The node subnet with the pod and service secondary ranges."""
    container_api: pulumi.Resource
    """The container API; the cluster waits for it."""
    node_service_account: pulumi.Input[str]
    """Email of the nodes' service account (Autopilot's node defaults)."""
    grants: Sequence[pulumi.Resource] = ()
    """The node roles and the Secrets key grant: a cluster without them cannot start nodes or encrypt."""
    node_networks: Sequence[pulumi.Resource] = ()
    """Autopilot: the gVNIC and RDMA subnets its GPU nodes attach to. The cluster waits for them, so that
    `pulumi destroy` deletes them only once the cluster has removed the nodes that use them (a subnet in
    use cannot be deleted). On Standard the GPU node pool carries this ordering."""


class Cluster(pulumi.ComponentResource):
    """The GKE cluster (Standard or Autopilot)."""

    cluster: gcp.container.Cluster

    def __init__(self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:Cluster", name, None, opts)
        self.cluster = gcp.container.Cluster(
            args.config.cluster_name,
            cluster_args(args.config, args.network, args.subnetwork, args.node_service_account),
            opts=fixed_name_options(
                parent=self,
                depends_on=[args.container_api, *args.node_networks, *args.grants],
                # nodeConfig describes only the default pool, removed once the cluster exists: what GKE reports
                # for it afterwards is no reason to replace the cluster.
                ignore_changes=[DEFAULT_POOL_CONFIG] if args.config.cluster.mode == "standard" else None,
            ),
        )
        self.register_outputs({})
