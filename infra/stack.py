"""Builds the Google Cloud graph of the stack: APIs, networks, cluster, node pools, storage and the
Kubernetes provider, and exports the stack outputs."""

from __future__ import annotations

import pulumi

from core import names
from core.config.model import StackConfig
from infra.apis import Apis, ApisArgs, required_services
from infra.cluster import Cluster, ClusterArgs
from infra.dashboard import RunDashboard, RunDashboardArgs
from infra.identity import ClusterIdentity, ClusterIdentityArgs, GuardianIdentity, GuardianIdentityArgs
from infra.kubernetes import KubernetesAccess, KubernetesAccessArgs
from infra.network import Networks, NetworksArgs
from infra.nodepools import NodePools, NodePoolsArgs
from infra.outputs import InfraOutputs
from infra.registry import ImageRepositories, ImageRepositoriesArgs
from infra.storage import Storage, StorageArgs


def build_infra(config: StackConfig, run: str) -> InfraOutputs:
    """Register every Google Cloud resource of `config` and return the hand-off to the workloads; `run` is the
    config's run id (jobs/spec/training.py training_spec), which a park marker must name (infra/storage.py)."""
    prefix = config.cluster_name
    lustre = config.storage.type == "lustre"
    apis = Apis(
        "apis",
        ApisArgs(
            project=config.project,
            services=required_services(config.storage.type, config.workload.resolved_image_source()),
        ),
    )
    networks = Networks(
        "networks",
        NetworksArgs(
            project=config.project,
            region=config.region,
            zone=config.zone,
            prefix=prefix,
            ranges=config.network,
            compute_api=apis.service("compute.googleapis.com"),
            keep_cluster_vpc=lustre and config.storage.keep_on_destroy,
            rdma=config.gpu_machine.rdma,
        ),
    )
    identity = ClusterIdentity("identity", ClusterIdentityArgs(config=config, apis=dict(apis.services)))
    cluster = Cluster(
        "cluster",
        ClusterArgs(
            config=config,
            network=networks.cluster_vpc.name,
            subnetwork=networks.node_subnet.name,
            container_api=apis.service("container.googleapis.com"),
            node_service_account=identity.node_account.email,
            grants=identity.cluster_waits_for,
            node_networks=(
                [networks.gvnic_subnet, *networks.rdma_subnets]
                if config.cluster.mode == "autopilot" and networks.gvnic_subnet is not None
                else []
            ),
        ),
    ).cluster
    # The in-cluster objects wait for the cluster, its NAT and the head's CPU pool; only the RayCluster
    # waits for the GPU pool too (gpu_ready), so the staging Job downloads while the GPU nodes come up.
    cluster_ready: list[pulumi.Resource] = [cluster, networks.nat]
    gpu_ready: list[pulumi.Resource] = []
    gpu_instance_groups: pulumi.Input[dict[str, str]] = {}
    if config.cluster.mode == "standard":
        pools = NodePools(
            "node-pools",
            NodePoolsArgs(
                config=config,
                cluster=cluster.name,
                networks=networks.gpu_networks,
                service_account=identity.node_account.email,
            ),
        )
        cluster_ready.append(pools.head)
        gpu_ready.extend(pools.gpu_pools.values())
        gpu_instance_groups = pools.gpu_instance_groups
    storage = Storage(
        "storage",
        StorageArgs(
            config=config,
            apis=dict(apis.services),
            cluster=cluster,
            cluster_vpc=networks.cluster_vpc.name,
            cluster_vpc_id=networks.cluster_vpc_id,
            run=run,
        ),
    )
    guardian = None
    if config.storage.park_when_idle and storage.lustre is not None and storage.parked_bucket is not None:
        guardian = GuardianIdentity(
            "guardian-identity",
            GuardianIdentityArgs(
                config=config,
                apis=dict(apis.services),
                cluster=cluster,
                instance_uid=storage.lustre.uid,
                parked_bucket=storage.parked_bucket.name,
            ),
        )
    access = KubernetesAccess(
        "gke",
        KubernetesAccessArgs(
            project=config.project, cluster=cluster, ready=cluster_ready, dns_endpoint=config.cluster.dns_endpoint
        ),
    )

    # With workload.imageSource: registry, every pod pulls through these: the in-cluster objects wait for them.
    images_ready: list[pulumi.Resource] = []
    if config.workload.resolved_image_source() == "registry":
        images = ImageRepositories(
            "images",
            ImageRepositoriesArgs(
                config=config,
                node_service_account=identity.node_account.member,
                apis=dict(apis.services),
            ),
        )
        images_ready = images.ready

    dashboard = RunDashboard(
        "monitoring", RunDashboardArgs(config=config, monitoring_api=apis.service("monitoring.googleapis.com"))
    )

    pulumi.export("clusterName", cluster.name)
    pulumi.export("clusterLocation", cluster.location)
    pulumi.export("kubeconfig", access.kubeconfig)
    if storage.bucket is not None:
        pulumi.export("bucket", storage.bucket.url)
    if storage.lustre is not None:
        pulumi.export("lustreMountPoint", storage.lustre.mount_point)
    if storage.parked_bucket is not None:
        pulumi.export("parkedBucket", storage.parked_bucket.url)
    pulumi.export("monitoringDashboardUrl", dashboard.url)
    pulumi.export(
        "dashboardCommand",
        names.dashboard_port_forward_command(prefix, config.region, config.project, config.cluster.dns_endpoint),
    )

    return InfraOutputs(
        k8s_provider=access.provider,
        kubeconfig=access.kubeconfig,
        gpu_networks=networks.gpu_networks,
        storage=storage.hand_off,
        cluster_ready=[*cluster_ready, *images_ready],
        gpu_ready=gpu_ready,
        gpu_instance_groups=gpu_instance_groups,
        storage_ready=storage.ready,
        guardian_account=names.service_account_email(names.guardian_account_id(prefix), config.project)
        if guardian is not None
        else None,
        guardian_grants=list(guardian.grants) if guardian is not None else [],
    )
