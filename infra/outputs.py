"""What the infrastructure graph hands to the workloads and the job layer."""

from __future__ import annotations

from dataclasses import dataclass, field

import pulumi
import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class InfraOutputs:
    """Handles on the Google Cloud resources that the in-cluster objects build on."""

    k8s_provider: k8s.Provider
    """Kubernetes provider for the cluster, ordered after the cluster, its NAT and the head pool."""
    kubeconfig: pulumi.Output[str]
    """The provider's kubeconfig (secret; exec auth through gke-gcloud-auth-plugin)."""
    gvnic_network: pulumi.Output[str]
    """Name of the gVNIC VPC."""
    gvnic_subnet: pulumi.Output[str]
    """Name of the gVNIC subnet."""
    rdma_network: pulumi.Output[str]
    """Name of the RDMA VPC."""
    rdma_subnets: list[pulumi.Output[str]]
    """Names of rdma subnets 0..7, in order."""
    cluster_ready: list[pulumi.Resource] = field(default_factory=list)
    """What in-cluster objects wait for: the cluster, its Cloud NAT (private nodes pull public
    images through it) and, on Standard, the head's CPU pool."""
    gpu_ready: list[pulumi.Resource] = field(default_factory=list)
    """What only the GPU pods wait for besides: on Standard, the GPU pool (Autopilot makes GPU nodes
    for the pods)."""
    storage_ready: list[pulumi.Resource] = field(default_factory=list)
    """What a pod mounting the storage waits for (bucket grant; Lustre instance)."""
    bucket_name: pulumi.Output[str] | None = None
    """The bucket (gcs)."""
    lustre_instance_id: pulumi.Output[str] | None = None
    """The Lustre instance id (lustre)."""
    lustre_mount_point: pulumi.Output[str] | None = None
    """The Lustre mount point `<ip>@tcp:/<fs>` (lustre)."""
    lustre_filesystem: str | None = None
    """The Lustre filesystem name (lustre)."""
