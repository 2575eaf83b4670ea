"""Standard node pools: a CPU pool for the Ray head and the 8-GPU pool on the RDMA networks."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core import names
from core.config.model import StackConfig
from core.facts.capacity import COMPUTE_CLASS_NODE_KEY, Rung
from core.facts.gcp import (
    CLOUD_PLATFORM_SCOPE,
    COMPACT_PLACEMENT,
    GPU_TAINT_KEY,
    NODE_IMAGE_TYPE,
    RESERVATION_AFFINITY_KEY,
)
from core.facts.imagecache import CACHE_MODE
from core.facts.privilege import (
    FLEX_START_LOCATION_POLICY,
    GPU_POOL_MAX_SURGE,
    GPU_POOL_MAX_UNAVAILABLE,
    SHIELDED_INTEGRITY_MONITORING,
    SHIELDED_SECURE_BOOT,
)
from core.resource_options import fixed_name_options
from incluster.capacity_events import group_rungs
from infra.outputs import GpuNetworks

HEAD_NODE_COUNT = 1
"""The Ray head runs alone on one CPU node."""


def gpu_driver_version(config: StackConfig) -> str:
    """The pool's `gpu_driver_version`: the driver that runs the image's CUDA (StackConfig.gpu_driver)."""
    return config.gpu_driver


def reservation_affinity(
    config: StackConfig, rung: Rung | None = None
) -> gcp.container.NodePoolNodeConfigReservationAffinityArgs:
    """SPECIFIC_RESERVATION naming the reservation for the reservation rung (default: gpu.provisioning's);
    otherwise NO_RESERVATION.

    On-demand uses NO_RESERVATION too (CT's "On-Demand without Reservation" default): a reservation
    is consumed only when named, so on-demand nodes never silently take capacity held for other work.
    """
    if (rung or config.gpu.provisioning) == "reservation":
        return gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type="SPECIFIC_RESERVATION",
            key=RESERVATION_AFFINITY_KEY,
            values=[config.gpu.reservation],
        )
    return gcp.container.NodePoolNodeConfigReservationAffinityArgs(consume_reservation_type="NO_RESERVATION")


def placement_policy(config: StackConfig, rung: Rung | None = None) -> gcp.container.NodePoolPlacementPolicyArgs | None:
    """COMPACT for 2 or more on-demand or Spot GPU nodes of a machine with RDMA NICs (COMPACT_PLACEMENT: it keeps
    the RDMA traffic between nodes short); otherwise none."""
    if config.gpu_machine.rdma and config.gpu.nodes >= 2 and (rung or config.gpu.provisioning) in ("on-demand", "spot"):
        return gcp.container.NodePoolPlacementPolicyArgs(type=COMPACT_PLACEMENT)
    return None


def additional_networks(
    networks: GpuNetworks | None,
) -> list[gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs]:
    """The extra NICs in order: gVNIC first, then rdma-0 ... rdma-7; none without the RDMA networks."""
    if networks is None:
        return []
    nics = [
        gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
            network=networks.gvnic_vpc, subnetwork=networks.gvnic_subnet
        )
    ]
    nics += [
        gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(network=networks.rdma_vpc, subnetwork=subnet)
        for subnet in networks.rdma_subnets
    ]
    return nics


def shielded_instance_config() -> gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs:
    """Secure boot and integrity monitoring (SHIELDED_SECURE_BOOT says why both fit GPU nodes)."""
    return gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
        enable_secure_boot=SHIELDED_SECURE_BOOT,
        enable_integrity_monitoring=SHIELDED_INTEGRITY_MONITORING,
    )


GPU_POOL_IGNORED = ["initialNodeCount"]
"""Inputs of the GPU pool a later `up` leaves alone: the first count only sizes the pool GKE creates (the
nodes boot while the pool is made); from then on the cluster autoscaler owns the count, and a changed
`initialNodeCount` would replace the pool (ForceNew in terraform-provider-google's node pool schema)."""


def gpu_autoscaling(config: StackConfig, rung: Rung | None = None) -> gcp.container.NodePoolAutoscalingArgs:
    """The GPU pool autoscales between 0 and `gpu.nodes`: nodes come for the RayCluster's worker pods and go
    once the run guardian scales the workers to zero (job.idleMinutes) and the autoscaler finds them empty.
    Flex-start also takes its location policy (FLEX_START_LOCATION_POLICY)."""
    return gcp.container.NodePoolAutoscalingArgs(
        total_min_node_count=0,
        total_max_node_count=config.gpu.nodes,
        location_policy=FLEX_START_LOCATION_POLICY if (rung or config.gpu.provisioning) == "flex-start" else None,
    )


def gpu_pool_args(
    config: StackConfig,
    cluster: pulumi.Input[str],
    nics: list[gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs],
    service_account: pulumi.Input[str],
    rung: Rung | None = None,
) -> gcp.container.NodePoolArgs:
    """The GPU pool of one rung (default gpu.provisioning's): machine and accelerators from GPU_MACHINES; every
    rung's pool is built here, so that pools differ only in the rung's own fields. With `gpu.capacity` each pool
    starts empty and carries the ComputeClass's node label and taint (COMPUTE_CLASS_NODE_KEY)."""
    machine = config.gpu_machine
    provisioning = rung or config.gpu.provisioning
    flex_start = provisioning == "flex-start"
    ladder = config.gpu.capacity is not None
    taints = [gcp.container.NodePoolNodeConfigTaintArgs(key=GPU_TAINT_KEY, value="present", effect="NO_SCHEDULE")]
    if ladder:
        taints.append(
            gcp.container.NodePoolNodeConfigTaintArgs(
                key=COMPUTE_CLASS_NODE_KEY, value=names.GPU_COMPUTE_CLASS, effect="NO_SCHEDULE"
            )
        )
    node_config = gcp.container.NodePoolNodeConfigArgs(
        machine_type=machine.machine_type,
        image_type=NODE_IMAGE_TYPE,
        guest_accelerators=[
            gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                type=machine.accelerator,
                count=config.gpus_per_node,
                gpu_driver_installation_config=(
                    gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                        gpu_driver_version=gpu_driver_version(config)
                    )
                ),
            )
        ],
        gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True),
        ephemeral_storage_local_ssd_config=(
            gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(local_ssd_count=machine.local_ssd_count)
            if machine.local_ssd_count
            else None
        ),
        boot_disk=(
            gcp.container.NodePoolNodeConfigBootDiskArgs(disk_type=machine.boot_disk_type)
            if machine.boot_disk_type
            else None
        ),
        workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        labels={COMPUTE_CLASS_NODE_KEY: names.GPU_COMPUTE_CLASS} if ladder else None,
        taints=taints,
        service_account=service_account,
        oauth_scopes=[CLOUD_PLATFORM_SCOPE],
        shielded_instance_config=shielded_instance_config(),
        spot=provisioning == "spot" or None,
        flex_start=flex_start or None,
        reservation_affinity=reservation_affinity(config, provisioning),
        gcfs_config=pool_gcfs_config(config),
        secondary_boot_disks=image_cache_disks(config),
    )
    return gcp.container.NodePoolArgs(
        name=names.gpu_pool_name(config.gpu.provisioning, provisioning),
        project=config.project,
        cluster=cluster,
        location=config.region,
        node_locations=[config.zone],
        # A ladder's pools all start empty: the autoscaler fills one rung at a time, up to gpu.nodes in all.
        initial_node_count=0 if flex_start or ladder else config.gpu.nodes,
        autoscaling=gpu_autoscaling(config, provisioning),
        management=gcp.container.NodePoolManagementArgs(auto_repair=not flex_start, auto_upgrade=True),
        # Flex-start nodes are upgraded by replacement at the end of their run, not by surge.
        upgrade_settings=(
            None
            if flex_start
            else gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE",
                max_surge=GPU_POOL_MAX_SURGE,
                max_unavailable=GPU_POOL_MAX_UNAVAILABLE,
            )
        ),
        network_config=gcp.container.NodePoolNetworkConfigArgs(additional_node_network_configs=nics) if nics else None,
        placement_policy=placement_policy(config, provisioning),
        node_config=node_config,
    )


def head_pool_args(
    config: StackConfig, cluster: pulumi.Input[str], service_account: pulumi.Input[str]
) -> gcp.container.NodePoolArgs:
    """The on-demand CPU pool of the Ray head, in the GPU zone."""
    return gcp.container.NodePoolArgs(
        name=names.HEAD_NODE_POOL,
        project=config.project,
        cluster=cluster,
        location=config.region,
        node_locations=[config.zone],
        node_count=HEAD_NODE_COUNT,
        management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
        node_config=gcp.container.NodePoolNodeConfigArgs(
            machine_type=config.cluster.head_machine_type,
            image_type=NODE_IMAGE_TYPE,
            workload_metadata_config=gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
            service_account=service_account,
            oauth_scopes=[CLOUD_PLATFORM_SCOPE],
            shielded_instance_config=shielded_instance_config(),
            gcfs_config=pool_gcfs_config(config),
        ),
    )


def pool_gcfs_config(config: StackConfig) -> gcp.container.NodePoolNodeConfigGcfsConfigArgs | None:
    """Image streaming on a Standard pool with `workload.imageSource: registry` (the pods then pull from
    Artifact Registry, which GKE streams from: core/facts/gcp.py STREAMING_SOURCES); unset otherwise."""
    if not config.streams_images_on_pools():
        return None
    return gcp.container.NodePoolNodeConfigGcfsConfigArgs(enabled=True)


def image_cache_disks(config: StackConfig) -> list[gcp.container.NodePoolNodeConfigSecondaryBootDiskArgs] | None:
    """With `gpu.imageCacheDisk`: the disk image as each GPU node's container image cache (a secondary boot disk
    of the node's boot disk type, core/facts/imagecache.py); unset otherwise. Every rung's pool takes it."""
    disk_image = config.image_cache_disk_image()
    if disk_image is None:
        return None
    return [gcp.container.NodePoolNodeConfigSecondaryBootDiskArgs(disk_image=disk_image, mode=CACHE_MODE)]


@dataclass(frozen=True)
class NodePoolsArgs:
    """Inputs of the NodePools component."""

    config: StackConfig
    """The stack config."""
    cluster: pulumi.Input[str]
    """Name of the cluster the pools join."""
    networks: GpuNetworks | None
    """The gVNIC and RDMA networks of the GPU nodes, from the Networks component; None without RDMA NICs."""
    service_account: pulumi.Input[str]
    """Email of the nodes' service account."""


class NodePools(pulumi.ComponentResource):
    """Standard only: the Ray head's CPU pool and the GPU pool."""

    head: gcp.container.NodePool
    gpu: gcp.container.NodePool
    gpu_pools: dict[str, gcp.container.NodePool]
    gpu_instance_groups: pulumi.Output[dict[str, str]]

    def __init__(self, name: str, args: NodePoolsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:NodePools", name, None, opts)
        config = args.config
        child = fixed_name_options(parent=self)
        self.head = gcp.container.NodePool(
            f"{config.cluster_name}-{names.HEAD_NODE_POOL}",
            head_pool_args(config, args.cluster, args.service_account),
            opts=child,
        )
        nics = additional_networks(args.networks)
        self.gpu_pools = {}
        for rung in config.gpu.ladder:
            pool = names.gpu_pool_name(config.gpu.provisioning, rung)
            self.gpu_pools[rung] = gcp.container.NodePool(
                f"{config.cluster_name}-{pool}",
                gpu_pool_args(config, args.cluster, nics, args.service_account, rung),
                opts=fixed_name_options(parent=self, ignore_changes=list(GPU_POOL_IGNORED)),
            )
        self.gpu = self.gpu_pools[config.gpu.provisioning]
        urls = {rung: pool.instance_group_urls for rung, pool in self.gpu_pools.items()}
        # The autoscaler's events name a MIG, whose name GKE shortens for long cluster and pool names
        # (incluster/capacity_events.py): the pools' own URLs map each MIG to its rung.
        self.gpu_instance_groups = pulumi.Output.all(**urls).apply(group_rungs)
        self.register_outputs({})

    @property
    def pools(self) -> list[gcp.container.NodePool]:
        """Every pool: the head's first, then the GPU pools in the ladder's order."""
        return [self.head, *self.gpu_pools.values()]
