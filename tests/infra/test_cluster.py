"""The cluster: shared Args, Standard and Autopilot branches, add-ons per storage, version-driven choices."""

from __future__ import annotations

import pytest

from infra.cluster import addons_config, cluster_args, lustre_port, version_below, workload_pool
from tests.conftest import COMBINATIONS, MODES, combination_config
from tests.infra.conftest import depends_on

CLUSTER = "gcp:container/cluster:Cluster"


def test_version_below_compares_numerically_and_ignores_an_unpinned_version():
    assert version_below("1.33.2-gke.999", "1.33.2-gke.4655000")
    assert not version_below("1.33.10-gke.1", "1.33.2-gke.4655000")
    assert not version_below(None, "1.33.2-gke.4655000")


def test_lustre_port_is_988_from_the_floor_and_legacy_below_it():
    assert lustre_port(combination_config("standard", "b200", "lustre")) == (988, False)
    pinned_new = combination_config("standard", "b200", "lustre", cluster={"minVersion": "1.33.2-gke.4655000"})
    assert lustre_port(pinned_new) == (988, False)
    pinned_old = combination_config("standard", "b200", "lustre", cluster={"minVersion": "1.33.2-gke.1111000"})
    assert lustre_port(pinned_old) == (6988, True)


def test_workload_pool_is_the_projects_svc_id_goog():
    assert workload_pool("p-123456") == "p-123456.svc.id.goog"


def test_shared_args_are_built_once_and_branch_only_where_modes_differ():
    standard = cluster_args(combination_config("standard", "b200", "gcs"), "net", "sub", "nodes@p.iam")
    autopilot = cluster_args(combination_config("autopilot", "b200", "gcs"), "net", "sub", "nodes@p.iam")
    for key in ("name", "location", "network", "subnetwork", "networking_mode", "enable_multi_networking"):
        assert getattr(standard, key) == getattr(autopilot, key), key
    assert standard.enable_autopilot is None and autopilot.enable_autopilot is True
    assert standard.datapath_provider == "ADVANCED_DATAPATH" and autopilot.datapath_provider is None


def test_addons_follow_mode_and_storage():
    gcs_standard = addons_config(combination_config("standard", "h200", "gcs"))
    assert gcs_standard.gcs_fuse_csi_driver_config.enabled is True
    assert gcs_standard.lustre_csi_driver_config is None
    gcs_autopilot = addons_config(combination_config("autopilot", "h200", "gcs"))
    assert gcs_autopilot.gcs_fuse_csi_driver_config is None, "Autopilot has GCS FUSE on by default"
    lustre = addons_config(combination_config("autopilot", "h200", "lustre"))
    assert lustre.lustre_csi_driver_config.enabled is True
    assert lustre.gcs_fuse_csi_driver_config is None


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_cluster_inputs_for_every_combination(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    cluster = recording.one(CLUSTER)
    inputs = cluster.inputs
    assert (inputs["name"], inputs["location"], inputs["project"]) == ("grpo-test", "us-central1", "my-grpo-project")
    assert (inputs["network"], inputs["subnetwork"]) == ("grpo-test-net", "grpo-test-nodes")
    assert inputs["networkingMode"] == "VPC_NATIVE"
    assert inputs["ipAllocationPolicy"] == {
        "clusterSecondaryRangeName": "pods",
        "servicesSecondaryRangeName": "services",
    }
    assert inputs["enableMultiNetworking"] is True
    assert inputs["privateClusterConfig"] == {"enablePrivateEndpoint": False, "enablePrivateNodes": True}
    assert inputs["releaseChannel"] == {"channel": "REGULAR"}
    assert inputs["deletionProtection"] is False
    assert "minMasterVersion" not in inputs
    # GKE's system metrics and managed DCGM metrics through Managed Service for Prometheus, in both modes
    assert inputs["monitoringConfig"] == {
        "enableComponents": ["SYSTEM_COMPONENTS", "DCGM"],
        "managedPrometheus": {"enabled": True},
    }
    addons = inputs["addonsConfig"]
    assert addons["rayOperatorConfigs"] == [{"enabled": True}]
    if storage == "lustre":
        assert addons["lustreCsiDriverConfig"] == {"enabled": True, "enableLegacyLustrePort": False}
    else:
        assert "lustreCsiDriverConfig" not in addons
    if mode == "standard":
        assert inputs["datapathProvider"] == "ADVANCED_DATAPATH"
        assert inputs["workloadIdentityConfig"] == {"workloadPool": "my-grpo-project.svc.id.goog"}
        assert (inputs["removeDefaultNodePool"], inputs["initialNodeCount"]) == (True, 1)
        assert "enableAutopilot" not in inputs
        assert ("gcsFuseCsiDriverConfig" in addons) == (storage == "gcs")
    else:
        assert inputs["enableAutopilot"] is True
        for key in ("datapathProvider", "workloadIdentityConfig", "removeDefaultNodePool", "initialNodeCount"):
            assert key not in inputs, key
        assert "gcsFuseCsiDriverConfig" not in addons
    assert cluster.protect is False and cluster.retain_on_delete is False


@pytest.mark.parametrize("mode", MODES)
def test_deletion_protection_and_min_version_come_from_their_keys(infra_run, mode):
    recording = infra_run(
        mode, "b200", "lustre", cluster={"deletionProtection": True, "minVersion": "1.33.2-gke.2000000"}
    )
    inputs = recording.one(CLUSTER).inputs
    assert inputs["deletionProtection"] is True
    assert inputs["minMasterVersion"] == "1.33.2-gke.2000000"
    assert inputs["addonsConfig"]["lustreCsiDriverConfig"]["enableLegacyLustrePort"] is True


@pytest.mark.parametrize("mode", MODES)
def test_cluster_waits_for_its_network_the_container_api_and_on_autopilot_its_nodes_networks(infra_run, mode):
    recording = infra_run(mode, "b200", "gcs")
    # The nodes' service account and its role: a node without them cannot write logs or be created at all.
    expected = {"container", "grpo-test-net", "grpo-test-nodes", "grpo-test-node-sa"}
    expected |= {"grpo-test-node-sa-container-defaultNodeServiceAccount"}
    if mode == "autopilot":
        # Autopilot creates the GPU nodes on these subnets itself; on Standard the GPU pool waits for them.
        expected |= {"grpo-test-gvnic-sub", *(f"grpo-test-rdma-sub-{index}" for index in range(8))}
    assert depends_on(recording, recording.one(CLUSTER)) == expected


@pytest.mark.parametrize("mode", MODES)
def test_without_authorized_networks_or_dns_endpoint_the_public_endpoint_is_unrestricted(infra_run, mode):
    inputs = infra_run(mode, "b200", "gcs").one(CLUSTER).inputs
    assert "masterAuthorizedNetworksConfig" not in inputs
    assert "controlPlaneEndpointsConfig" not in inputs


@pytest.mark.parametrize("mode", MODES)
def test_authorized_networks_restrict_the_public_endpoint(infra_run, mode):
    recording = infra_run(mode, "h200", "lustre", cluster={"authorizedNetworks": ["203.0.113.0/24", "198.51.100.7/32"]})
    inputs = recording.one(CLUSTER).inputs
    assert inputs["masterAuthorizedNetworksConfig"] == {
        "cidrBlocks": [
            {"cidrBlock": "203.0.113.0/24", "displayName": "grpo-gke-authorized-0"},
            {"cidrBlock": "198.51.100.7/32", "displayName": "grpo-gke-authorized-1"},
        ],
        "gcpPublicCidrsAccessEnabled": False,
    }
    assert "controlPlaneEndpointsConfig" not in inputs
    assert recording.warnings == []


@pytest.mark.parametrize("mode", MODES)
def test_the_dns_endpoint_admits_external_traffic_and_closes_the_public_ip(infra_run, mode):
    recording = infra_run(mode, "b200", "gcs", cluster={"dnsEndpoint": True})
    inputs = recording.one(CLUSTER).inputs
    assert inputs["controlPlaneEndpointsConfig"] == {"dnsEndpointConfig": {"allowExternalTraffic": True}}
    assert inputs["masterAuthorizedNetworksConfig"] == {"cidrBlocks": [], "gcpPublicCidrsAccessEnabled": False}
    assert recording.warnings == []


def test_the_open_control_plane_warns_in_the_program(infra_run):
    warnings = infra_run("standard", "b200", "gcs").warnings
    assert len(warnings) == 1 and warnings[0].startswith("grpo-gke:cluster.authorizedNetworks is empty")


def test_standard_nodes_are_shielded_with_secure_boot_and_integrity_monitoring(infra_run):
    recording = infra_run("standard", "b200", "lustre")
    cluster = recording.one(CLUSTER).inputs
    assert cluster["enableShieldedNodes"] is True
    shielded = {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert cluster["nodeConfig"]["shieldedInstanceConfig"] == shielded
    for pool in recording.by_type("gcp:container/nodePool:NodePool"):
        assert pool.inputs["nodeConfig"]["shieldedInstanceConfig"] == shielded, pool.name


def test_autopilot_leaves_shielding_to_autopilot(infra_run):
    inputs = infra_run("autopilot", "h200", "gcs").one(CLUSTER).inputs
    assert "enableShieldedNodes" not in inputs, "Autopilot enforces Shielded GKE Nodes; the field conflicts with it"
