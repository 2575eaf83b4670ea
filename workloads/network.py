"""GKE multi-network objects: one GKENetworkParamSet and one Network per extra pod interface.

`gvnic-1` (NetDevice) names the gVNIC VPC; `rdma-0` .. `rdma-7` (RDMA) name the RDMA VPC and its
eight subnets (gcp-infrastructure.md K1, K2; CT gke-cluster templates and `k8s_network_names`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from core import names
from core.resource_options import fixed_name_options
from infra.outputs import GpuNetworks

API_VERSION = "networking.gke.io/v1"
"""API group and version of both kinds."""


@dataclass(frozen=True)
class NetworkSpec:
    """One extra pod network: its GKE name, VPC, subnet and device mode."""

    name: str
    """Kubernetes name of both the Network and its GKENetworkParamSet."""
    vpc: pulumi.Input[str]
    """VPC name."""
    subnet: pulumi.Input[str]
    """Subnet name in that VPC."""
    device_mode: str
    """`NetDevice` (gVNIC) or `RDMA`."""


def network_specs(networks: GpuNetworks) -> list[NetworkSpec]:
    """The nine extra networks in interface order: gvnic-1, then rdma-0 .. rdma-7."""
    specs = [NetworkSpec(names.GVNIC_NETWORK, networks.gvnic_vpc, networks.gvnic_subnet, "NetDevice")]
    specs += [
        NetworkSpec(name, networks.rdma_vpc, subnet, "RDMA")
        for name, subnet in zip(names.RDMA_NETWORKS, networks.rdma_subnets, strict=True)
    ]
    return specs


def render_param_set_spec(spec: NetworkSpec) -> dict[str, Any]:
    """The GKENetworkParamSet spec of one network."""
    return {"deviceMode": spec.device_mode, "vpc": spec.vpc, "vpcSubnet": spec.subnet}


def render_network_spec(spec: NetworkSpec) -> dict[str, Any]:
    """The Network spec that points at the parameter set of the same name."""
    return {
        "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": spec.name},
        "type": "Device",
    }


@dataclass(frozen=True)
class GkeNetworksArgs:
    """Inputs of the GkeNetworks component."""

    specs: Sequence[NetworkSpec]
    """The networks to declare, from `network_specs`."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist first: the cluster (multi-networking enabled)."""


class GkeNetworks(pulumi.ComponentResource):
    """The GKENetworkParamSet and Network objects the RDMA pods attach to."""

    param_sets: list[k8s.apiextensions.CustomResource]
    networks: list[k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: GkeNetworksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:GkeNetworks", name, None, opts)

        def declare(kind: str, name: str, spec: dict[str, Any], after: list[pulumi.Resource]):
            return k8s.apiextensions.CustomResource(
                name,
                api_version=API_VERSION,
                kind=kind,
                metadata=k8s.meta.v1.ObjectMetaArgs(name=name),
                spec=spec,
                opts=fixed_name_options(parent=self, provider=args.provider, depends_on=after),
            )

        self.param_sets, self.networks = [], []
        for spec in args.specs:
            param_set = declare("GKENetworkParamSet", spec.name, render_param_set_spec(spec), list(args.depends_on))
            self.param_sets.append(param_set)
            self.networks.append(declare("Network", spec.name, render_network_spec(spec), [param_set]))
        self.register_outputs({"networks": [spec.name for spec in args.specs]})
