"""The GKE cluster: one set of Args shared by Standard and Autopilot, branched where they differ."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pulumi
import pulumi_gcp as gcp

from infra import facts
from infra.names import fixed_name_options
from infra.config import StackConfig
from infra.network import POD_RANGE_NAME, SERVICE_RANGE_NAME


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
    return facts.GkeVersion.parse(min_version).key() < facts.GkeVersion.parse(floor).key()


def lustre_port(config: StackConfig) -> LustrePort:
    """Port 988 on nodes at or above LUSTRE_DEFAULT_PORT_FLOOR, otherwise the legacy port."""
    if version_below(config.cluster.min_version, facts.LUSTRE_DEFAULT_PORT_FLOOR):
        return LustrePort(port=facts.LUSTRE_LEGACY_PORT, legacy=True)
    return LustrePort(port=facts.LUSTRE_PORT, legacy=False)


def workload_pool(project: str) -> str:
    """The workload identity pool of `project`."""
    return facts.WORKLOAD_POOL.format(project=project)


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


def cluster_args(
    config: StackConfig, network: pulumi.Input[str], subnetwork: pulumi.Input[str]
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
        enable_multi_networking=True,
        addons_config=addons_config(config),
        release_channel=gcp.container.ClusterReleaseChannelArgs(channel=channel) if channel else None,
        min_master_version=config.cluster.min_version,
        deletion_protection=config.cluster.deletion_protection,
    )
    if config.cluster.mode == "autopilot":
        # Autopilot brings workload identity and Dataplane V2 itself.
        return gcp.container.ClusterArgs(enable_autopilot=True, **shared)
    return gcp.container.ClusterArgs(
        datapath_provider="ADVANCED_DATAPATH",
        workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
            workload_pool=workload_pool(config.project)
        ),
        remove_default_node_pool=True,
        initial_node_count=1,
        **shared,
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
            cluster_args(args.config, args.network, args.subnetwork),
            opts=fixed_name_options(parent=self, depends_on=[args.container_api, *args.node_networks]),
        )
        self.register_outputs({})
