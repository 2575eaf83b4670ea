"""The three VPCs: gVNIC, RDMA (zonal RoCE profile, eight side-by-side subnets) and the cluster's own."""

from __future__ import annotations

import ipaddress

import pytest

from core.config.model import NetworkConfig
from core.facts.platform import MAX_MTU
from core.names import network_names
from infra.network import cidr_address, network_id, rdma_network_profile
from tests.conftest import COMBINATIONS
from tests.infra.conftest import depends_on

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"


def test_the_rdma_profile_is_zonal():
    profile = rdma_network_profile("p-123456", "us-central1-b")
    assert profile == "projects/p-123456/global/networkProfiles/us-central1-b-vpc-roce"
    assert "us-central1-vpc-roce" not in profile


def test_rdma_subnets_are_named_like_cluster_toolkit():
    names = network_names("grpo-x")
    assert names.rdma_subnets == tuple(f"grpo-x-rdma-sub-{index}" for index in range(8))
    flat = [value for value in vars(names).values() if isinstance(value, str)] + list(names.rdma_subnets)
    assert len(flat) == len(set(flat)) == 16


def test_names_fit_the_63_character_limit_for_the_longest_cluster_name():
    names = network_names("a" * 40)
    for name in [*names.rdma_subnets, names.gvnic_firewall, names.cluster_vpc, names.node_subnet]:
        assert len(name) <= 63, name


def test_cidr_address_and_network_id():
    assert cidr_address("10.0.64.0/22") == ("10.0.64.0", 22)
    assert cidr_address("10.0.64.0/22") != ("10.0.64.0", 24)
    assert network_id("p-123456", "vpc") == "projects/p-123456/global/networks/vpc"


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_gvnic_vpc_subnet_and_internal_firewall(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    vpc = recording.one(NETWORK, "grpo-test-gvnic")
    assert vpc.inputs["mtu"] == MAX_MTU == 8896
    assert vpc.inputs["autoCreateSubnetworks"] is False
    assert "networkProfile" not in vpc.inputs
    subnet = recording.one(SUBNET, "grpo-test-gvnic-sub")
    assert subnet.inputs["network"] == "grpo-test-gvnic"
    assert (subnet.inputs["region"], subnet.inputs["ipCidrRange"]) == ("us-central1", NetworkConfig().gvnic_range)
    firewall = recording.one(FIREWALL, "grpo-test-gvnic-internal")
    assert firewall.inputs["network"] == "grpo-test-gvnic"
    assert firewall.inputs["sourceRanges"] == [NetworkConfig().gvnic_range]
    assert {allow["protocol"] for allow in firewall.inputs["allows"]} == {"tcp", "udp", "icmp"}


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_rdma_vpc_has_the_zonal_profile_and_eight_disjoint_subnets(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    vpc = recording.one(NETWORK, "grpo-test-rdma")
    assert vpc.inputs["networkProfile"] == "projects/my-grpo-project/global/networkProfiles/us-central1-b-vpc-roce"
    assert (vpc.inputs["mtu"], vpc.inputs["routingMode"]) == (8896, "REGIONAL")
    subnets = [s for s in recording.by_type(SUBNET) if s.inputs["network"] == "grpo-test-rdma"]
    assert sorted(s.name for s in subnets) == [f"grpo-test-rdma-sub-{index}" for index in range(8)]
    assert {s.inputs["region"] for s in subnets} == {"us-central1"}
    ranges = [ipaddress.IPv4Network(s.inputs["ipCidrRange"]) for s in subnets]
    assert all(not a.overlaps(b) for i, a in enumerate(ranges) for b in ranges[i + 1 :])
    assert sorted(map(str, ranges)) == sorted(NetworkConfig().rdma_subnets())


def test_the_eight_rdma_subnets_are_created_side_by_side(infra_run):
    recording = infra_run("standard", "b200", "gcs")
    for index in range(8):
        subnet = recording.one(SUBNET, f"grpo-test-rdma-sub-{index}")
        assert depends_on(recording, subnet) == {"grpo-test-rdma"}


def test_cluster_vpc_is_vpc_native_with_private_nodes_behind_cloud_nat(infra_run):
    recording = infra_run("standard", "h200", "gcs")
    subnet = recording.one(SUBNET, "grpo-test-nodes")
    ranges = NetworkConfig()
    assert subnet.inputs["network"] == "grpo-test-net"
    assert subnet.inputs["ipCidrRange"] == ranges.node_range
    assert subnet.inputs["privateIpGoogleAccess"] is True
    assert subnet.inputs["secondaryIpRanges"] == [
        {"ipCidrRange": ranges.pod_range, "rangeName": "pods"},
        {"ipCidrRange": ranges.service_range, "rangeName": "services"},
    ]
    router = recording.one("gcp:compute/router:Router", "grpo-test-router")
    assert (router.inputs["network"], router.inputs["region"]) == ("grpo-test-net", "us-central1")
    nat = recording.one("gcp:compute/routerNat:RouterNat", "grpo-test-nat")
    assert nat.inputs["router"] == "grpo-test-router"
    assert nat.inputs["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"
    cluster = recording.one("gcp:container/cluster:Cluster")
    assert cluster.inputs["privateClusterConfig"]["enablePrivateNodes"] is True


def test_configured_ranges_reach_the_subnets(infra_run):
    recording = infra_run(
        "standard", "b200", "gcs", network={"gvnicRange": "172.16.0.0/16", "rdmaRange": "172.17.0.0/16"}
    )
    assert recording.one(SUBNET, "grpo-test-gvnic-sub").inputs["ipCidrRange"] == "172.16.0.0/16"
    first = recording.one(SUBNET, "grpo-test-rdma-sub-0").inputs["ipCidrRange"]
    last = recording.one(SUBNET, "grpo-test-rdma-sub-7").inputs["ipCidrRange"]
    assert (first, last) == ("172.17.0.0/19", "172.17.224.0/19")
