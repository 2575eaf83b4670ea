"""Builds every in-cluster object of the stack through the cluster's Kubernetes provider."""

from __future__ import annotations

import pulumi

from core.config.model import StackConfig
from infra.outputs import InfraOutputs, ParkedStorage
from workloads.computeclass import GpuComputeClass, GpuComputeClassArgs
from workloads.gib import GibInstaller, GibInstallerArgs
from workloads.identity import Identity, IdentityArgs
from workloads.instance_groups import InstanceGroups, InstanceGroupsArgs
from workloads.network import GkeNetworks, GkeNetworksArgs, network_specs
from workloads.outputs import WorkloadOutputs
from workloads.policies import NetworkPolicies, NetworkPoliciesArgs
from workloads.raycluster import RayCluster, RayClusterArgs
from workloads.staging import Staging, StagingArgs
from workloads.storage import SharedStorage, SharedStorageArgs


def _token(config: StackConfig) -> pulumi.Output[str] | None:
    if config.hf_token is None:
        return None
    return pulumi.Output.secret(config.hf_token.get_secret_value())


def _wandb_key(config: StackConfig) -> pulumi.Output[str] | None:
    if config.wandb_api_key is None:
        return None
    return pulumi.Output.secret(config.wandb_api_key.get_secret_value())


def _secret_env(config: StackConfig) -> dict[str, pulumi.Output[str]]:
    return {name: pulumi.Output.secret(value.get_secret_value()) for name, value in config.secret_env.items()}


def build_workloads(config: StackConfig, infra: InfraOutputs) -> WorkloadOutputs | None:
    """Network objects and gIB installer (a machine with RDMA NICs), identity, NetworkPolicies, the GPU pools' instance groups (Standard), storage,
    staging Job and RayCluster, in that order of need; while the Lustre storage is parked (storage.parked) nothing that mounts it (the volume and
    its claim, the staging Job, the RayCluster): None."""
    provider = infra.k8s_provider
    cluster = list(infra.cluster_ready)
    # The GPU fabric's objects only for a machine with RDMA NICs (core/facts/platform.py GpuMachine.rdma_nics): a
    # one-GPU node has no GPU traffic between nodes, so no pod networks for it and no gIB to carry it.
    fabric: list[pulumi.Resource] = []
    if infra.gpu_networks is not None:
        fabric.append(
            GkeNetworks(
                "pod-networks",
                GkeNetworksArgs(specs=network_specs(infra.gpu_networks), provider=provider, depends_on=cluster),
            )
        )
        fabric.append(
            GibInstaller("gib", GibInstallerArgs(mode=config.cluster.mode, provider=provider, depends_on=cluster))
        )
    identity = Identity(
        "identity",
        IdentityArgs(
            token=_token(config),
            secret_env=_secret_env(config),
            wandb_api_key=_wandb_key(config),
            provider=provider,
            depends_on=cluster,
        ),
    )
    # The namespace is closed before any pod starts in it: the head's ports are never open to the cluster.
    policies = NetworkPolicies("network-policies", NetworkPoliciesArgs(provider=provider, namespace=identity.namespace))
    if config.cluster.mode == "standard":
        # The GPU pools' MIGs for whoever reads the autoscaler's events; nothing else takes their values.
        InstanceGroups(
            "gpu-instance-groups",
            InstanceGroupsArgs(groups=infra.gpu_instance_groups, provider=provider, depends_on=[identity.namespace]),
        )
    if isinstance(infra.storage, ParkedStorage):
        return None
    shared = SharedStorage(
        "shared-storage",
        SharedStorageArgs(
            config=config,
            storage=infra.storage,
            provider=provider,
            namespace=identity.namespace,
            depends_on=list(infra.storage_ready),
        ),
    )
    # Both pod kinds run as the service account (workload identity for the bucket), mount the claim,
    # start only once the NetworkPolicies close the namespace and, when set, read the token Secret; the Ray
    # pods also read the W&B key's and the secretEnv Secrets.
    pod_needs = [identity.service_account, shared.claim, *policies.policies]
    if identity.token_secret is not None:
        pod_needs.append(identity.token_secret)
    ray_needs = [*pod_needs]
    for secret in (identity.wandb_secret, identity.secret_env_secret):
        if secret is not None:
            ray_needs.append(secret)
    staging = Staging(
        "staging",
        StagingArgs(config=config, provider=provider, namespace=identity.namespace, depends_on=pod_needs),
    )
    gpu_needs = [*infra.gpu_ready]
    if config.gpu.capacity is not None:
        # The class names the rungs' pools; the workers select it (workloads/placement.py).
        gpu_class = GpuComputeClass(
            "gpu-compute-class",
            GpuComputeClassArgs(config=config, provider=provider, depends_on=[*cluster, *infra.gpu_ready]),
        )
        gpu_needs.append(gpu_class.compute_class)
    ray = RayCluster(
        "ray",
        RayClusterArgs(
            config=config,
            provider=provider,
            depends_on=[*cluster, *gpu_needs, *fabric, *ray_needs],
        ),
    )
    return WorkloadOutputs(
        ray_cluster=ray.cluster,
        staging_job=staging.job,
        data_claim=shared.claim,
        token_secret=identity.token_secret,
    )
