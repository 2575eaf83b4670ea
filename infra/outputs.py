"""What the infrastructure graph hands to the workloads and the job layer: one type per hand-off."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s

from core.facts.platform import RDMA_SUBNET_COUNT


@dataclass(frozen=True)
class GpuNetworks:
    """The GPU nodes' extra networks by name: the gVNIC VPC and its subnet, the RDMA VPC and its subnets.
    The Networks component returns it; the node pools and the GKE network objects take it unchanged."""

    gvnic_vpc: pulumi.Input[str]
    """Name of the gVNIC VPC."""
    gvnic_subnet: pulumi.Input[str]
    """Name of the gVNIC subnet."""
    rdma_vpc: pulumi.Input[str]
    """Name of the RDMA VPC."""
    rdma_subnets: tuple[pulumi.Input[str], ...]
    """Names of RDMA subnets 0..7, in order."""

    def __post_init__(self) -> None:
        if len(self.rdma_subnets) != RDMA_SUBNET_COUNT:
            raise ValueError(f"need {RDMA_SUBNET_COUNT} RDMA subnets, got {len(self.rdma_subnets)}")


@dataclass(frozen=True)
class GcsStorage:
    """The shared storage as a Cloud Storage bucket (storage.type gcs)."""

    bucket_name: pulumi.Input[str]
    """The bucket's name."""


@dataclass(frozen=True)
class LustreStorage:
    """The shared storage as a Managed Lustre instance (storage.type lustre)."""

    instance_id: pulumi.Input[str]
    """The instance id."""
    mount_point: pulumi.Input[str]
    """The mount point `<ip>@tcp:/<fs>`."""
    filesystem: str
    """The filesystem name."""
    capacity_gib: int
    """The instance's capacity in GiB."""
    instance_name: pulumi.Input[str] = ""
    """`projects/<project>/locations/<zone>/instances/<id>`: the instance as Managed Lustre's API names it."""
    uid: pulumi.Input[str] | None = None
    """The instance's unique id: another instance has another."""


@dataclass(frozen=True)
class ParkedStorage:
    """A Lustre stack's storage while parked (storage.parked): no instance, the run in the parked bucket; nothing
    mounts it."""

    bucket_name: pulumi.Input[str]
    """The parked bucket's name."""


StorageHandOff = GcsStorage | LustreStorage | ParkedStorage
"""The shared storage the infrastructure created: a bucket, a Lustre instance, or a parked Lustre stack's bucket."""


@dataclass(frozen=True)
class InfraOutputs:
    """Handles on the Google Cloud resources that the in-cluster objects build on."""

    k8s_provider: k8s.Provider
    """Kubernetes provider for the cluster, ordered after the cluster, its NAT and the head pool."""
    kubeconfig: pulumi.Output[str]
    """The provider's kubeconfig (secret; exec auth through gke-gcloud-auth-plugin)."""
    gpu_networks: GpuNetworks | None
    """The GPU nodes' extra networks (gVNIC and RDMA); None for a machine without RDMA NICs."""
    storage: StorageHandOff
    """The shared storage: the bucket or the Lustre instance."""
    cluster_ready: list[pulumi.Resource] = field(default_factory=list)
    """What in-cluster objects wait for: the cluster, its Cloud NAT (private nodes pull public
    images through it) and, on Standard, the head's CPU pool."""
    gpu_ready: list[pulumi.Resource] = field(default_factory=list)
    """What only the GPU pods wait for besides: on Standard, the GPU pool (Autopilot makes GPU nodes
    for the pods)."""
    gpu_instance_groups: pulumi.Input[Mapping[str, str]] = field(default_factory=dict)
    """On Standard, the GPU pools' MIGs by name, each to its pool's rung, from the pools' `instanceGroupUrls`
    (incluster/capacity_events.py group_rungs): the autoscaler's events name the MIG; empty on Autopilot."""
    storage_ready: list[pulumi.Resource] = field(default_factory=list)
    """What a pod mounting the storage waits for (bucket grant; Lustre instance)."""
    guardian_account: str | None = None
    """The email of the Google service account the run guardian acts as (storage.parkWhenIdle), known before it
    exists: the Kubernetes service account names it without waiting (a computed input would replace that account);
    None: it has none."""
    guardian_grants: list[pulumi.Resource] = field(default_factory=list)
    """What the guardian waits for to park: its account's grants (the park role, the parked bucket, its link)."""
