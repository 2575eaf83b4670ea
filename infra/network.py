"""The three VPCs: the cluster's own VPC-native network (private nodes behind Cloud NAT), the
gVNIC VPC and the RoCE (RDMA) VPC with its eight subnets."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core.config.model import NetworkConfig
from core.facts.gcp import RDMA_NETWORK_PROFILE
from core.facts.platform import MAX_MTU
from core.names import NetworkNames, network_names
from core.resource_options import fixed_name_options
from infra.outputs import GpuNetworks

POD_RANGE_NAME = "pods"
"""Secondary range of the node subnet holding pod addresses."""

SERVICE_RANGE_NAME = "services"
"""Secondary range of the node subnet holding service addresses."""


def rdma_network_profile(project: str, zone: str) -> str:
    """The zonal RoCE network profile of `zone` (never `<region>-vpc-roce`)."""
    return RDMA_NETWORK_PROFILE.format(project=project, zone=zone)


def network_id(project: str, vpc: str) -> str:
    """The `projects/<p>/global/networks/<vpc>` id of a VPC."""
    return f"projects/{project}/global/networks/{vpc}"


def cidr_address(cidr: str) -> tuple[str, int]:
    """Network address and prefix length of a CIDR range."""
    network = ipaddress.IPv4Network(cidr)
    return str(network.network_address), network.prefixlen


def vpc_args(name: str, project: str, routing_mode: str, network_profile: str | None = None) -> gcp.compute.NetworkArgs:
    """A custom-mode VPC at the largest MTU (CT vpc and gpu-rdma-vpc defaults)."""
    return gcp.compute.NetworkArgs(
        name=name,
        project=project,
        auto_create_subnetworks=False,
        mtu=MAX_MTU,
        routing_mode=routing_mode,
        network_profile=network_profile,
    )


def subnet_args(
    name: str,
    project: str,
    region: str,
    network: pulumi.Input[str],
    cidr: str,
    **extra: object,
) -> gcp.compute.SubnetworkArgs:
    """A regional subnet of `network` (extra: further SubnetworkArgs fields)."""
    return gcp.compute.SubnetworkArgs(
        name=name, project=project, region=region, network=network, ip_cidr_range=cidr, **extra
    )


def ingress_firewall_args(
    name: str,
    project: str,
    network: pulumi.Input[str],
    source_range: str,
    allows: list[gcp.compute.FirewallAllowArgs],
) -> gcp.compute.FirewallArgs:
    """An ingress rule of `network` admitting `allows` from `source_range`."""
    return gcp.compute.FirewallArgs(
        name=name,
        project=project,
        network=network,
        direction="INGRESS",
        source_ranges=[source_range],
        allows=allows,
    )


@dataclass(frozen=True)
class NetworksArgs:
    """Inputs of the Networks component."""

    project: str
    """Project of the VPCs."""
    region: str
    """Region of every subnet and of the Cloud Router."""
    zone: str
    """Zone of the RoCE network profile (the GPU nodes' zone)."""
    prefix: str
    """Name prefix (the cluster name)."""
    ranges: NetworkConfig
    """Address ranges, checked disjoint by the config."""
    compute_api: pulumi.Resource
    """The compute API; the VPCs wait for it."""
    keep_cluster_vpc: bool = False
    """Retain the cluster VPC on destroy (a kept Lustre instance stays reachable through it)."""
    rdma: bool = True
    """Whether the GPU machine has RDMA NICs (GpuMachine.rdma): only then the gVNIC and RDMA VPCs are made."""


class Networks(pulumi.ComponentResource):
    """The cluster VPC with Cloud NAT; for a GPU machine with RDMA NICs the gVNIC VPC and the RDMA VPC with its eight
    subnets too (a one-GPU machine has no GPU traffic between nodes for them to carry)."""

    cluster_vpc: gcp.compute.Network
    node_subnet: gcp.compute.Subnetwork
    router: gcp.compute.Router
    nat: gcp.compute.RouterNat
    gvnic_subnet: gcp.compute.Subnetwork | None
    rdma_subnets: list[gcp.compute.Subnetwork]
    cluster_vpc_id: pulumi.Output[str]
    """`projects/<p>/global/networks/<vpc>` of the cluster VPC (Lustre and its peering use this form)."""
    gpu_networks: GpuNetworks | None
    """The gVNIC and RDMA VPCs and subnets by name, for the GPU node pool and the GKE network objects; None without
    RDMA NICs."""

    def __init__(self, name: str, args: NetworksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:Networks", name, None, opts)
        names = network_names(args.prefix)
        child = fixed_name_options(parent=self)
        after_api = fixed_name_options(parent=self, depends_on=[args.compute_api])

        self.cluster_vpc = gcp.compute.Network(
            names.cluster_vpc,
            vpc_args(names.cluster_vpc, args.project, "GLOBAL"),
            opts=fixed_name_options(parent=self, depends_on=[args.compute_api], retain_on_delete=args.keep_cluster_vpc),
        )
        self.node_subnet = gcp.compute.Subnetwork(
            names.node_subnet,
            subnet_args(
                names.node_subnet,
                args.project,
                args.region,
                self.cluster_vpc.name,
                args.ranges.node_range,
                private_ip_google_access=True,
                secondary_ip_ranges=[
                    gcp.compute.SubnetworkSecondaryIpRangeArgs(
                        range_name=POD_RANGE_NAME, ip_cidr_range=args.ranges.pod_range
                    ),
                    gcp.compute.SubnetworkSecondaryIpRangeArgs(
                        range_name=SERVICE_RANGE_NAME, ip_cidr_range=args.ranges.service_range
                    ),
                ],
            ),
            opts=child,
        )
        self.router = gcp.compute.Router(
            names.router,
            gcp.compute.RouterArgs(
                name=names.router, project=args.project, region=args.region, network=self.cluster_vpc.name
            ),
            opts=child,
        )
        self.nat = gcp.compute.RouterNat(
            names.nat,
            gcp.compute.RouterNatArgs(
                name=names.nat,
                project=args.project,
                region=args.region,
                router=self.router.name,
                nat_ip_allocate_option="AUTO_ONLY",
                source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            ),
            opts=child,
        )

        self.cluster_vpc_id = self.cluster_vpc.name.apply(lambda vpc: network_id(args.project, vpc))
        self.gvnic_subnet = None
        self.rdma_subnets = []
        self.gpu_networks = None
        if args.rdma:
            self._gpu_fabric(args, names, child, after_api)
        self.register_outputs({})

    def _gpu_fabric(
        self, args: NetworksArgs, names: NetworkNames, child: pulumi.ResourceOptions, after_api: pulumi.ResourceOptions
    ) -> None:
        """The gVNIC VPC with its subnet and firewall, the RDMA VPC with its subnets, and their names."""
        gvnic_vpc = gcp.compute.Network(
            names.gvnic_vpc, vpc_args(names.gvnic_vpc, args.project, "GLOBAL"), opts=after_api
        )
        self.gvnic_subnet = gcp.compute.Subnetwork(
            names.gvnic_subnet,
            subnet_args(names.gvnic_subnet, args.project, args.region, gvnic_vpc.name, args.ranges.gvnic_range),
            opts=child,
        )
        gcp.compute.Firewall(
            names.gvnic_firewall,
            ingress_firewall_args(
                names.gvnic_firewall,
                args.project,
                gvnic_vpc.name,
                args.ranges.gvnic_range,
                [
                    gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["0-65535"]),
                    gcp.compute.FirewallAllowArgs(protocol="udp", ports=["0-65535"]),
                    gcp.compute.FirewallAllowArgs(protocol="icmp"),
                ],
            ),
            opts=child,
        )

        rdma_vpc = gcp.compute.Network(
            names.rdma_vpc,
            vpc_args(names.rdma_vpc, args.project, "REGIONAL", rdma_network_profile(args.project, args.zone)),
            opts=after_api,
        )
        self.rdma_subnets = [
            gcp.compute.Subnetwork(
                subnet_name,
                subnet_args(subnet_name, args.project, args.region, rdma_vpc.name, cidr),
                opts=child,
            )
            for subnet_name, cidr in zip(names.rdma_subnets, args.ranges.rdma_subnets(), strict=True)
        ]
        self.gpu_networks = GpuNetworks(
            gvnic_vpc=gvnic_vpc.name,
            gvnic_subnet=self.gvnic_subnet.name,
            rdma_vpc=rdma_vpc.name,
            rdma_subnets=tuple(subnet.name for subnet in self.rdma_subnets),
        )
