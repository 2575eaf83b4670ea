"""The infrastructure graph as a whole: one component per concern, children parented, stack outputs."""

from __future__ import annotations

import pytest

from tests.conftest import COMBINATIONS

COMPONENTS = {
    "Apis", "Networks", "ClusterIdentity", "Cluster", "NodePools", "Storage", "KubernetesAccess", "RunDashboard",
    "ImageRepositories",
}  # fmt: skip


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_one_component_per_concern_owns_every_cloud_resource(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    components = {r.type.rsplit(":", 1)[-1]: r for r in recording.resources if r.type.startswith("grpo-gke:infra:")}
    expected = COMPONENTS - ({"NodePools"} if mode == "autopilot" else set())
    assert set(components) == expected
    component_urns = {component.urn for component in components.values()}
    for resource in recording.resources:
        if resource.type.startswith(("gcp:", "pulumi:providers:kubernetes")):
            assert resource.parent in component_urns, resource.urn


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_stack_outputs(infra_run, mode, gpu, storage):
    outputs = infra_run(mode, gpu, storage).outputs
    assert outputs["clusterName"] == "grpo-test"
    assert outputs["clusterLocation"] == "us-central1"
    assert outputs["kubeconfig"] == "[secret]"
    assert outputs["dashboardCommand"] == (
        "gcloud container clusters get-credentials grpo-test --location us-central1 --project my-grpo-project"
        " && kubectl -n grpo port-forward svc/grpo-head-svc 8265:8265"
    )
    assert outputs["monitoringDashboardUrl"] == (
        "https://console.cloud.google.com/monitoring/dashboards/builder/grpo-test-dashboard-id?project=my-grpo-project"
    )
    if storage == "gcs":
        assert outputs["bucket"] == "gs://my-grpo-project-grpo-test"
        assert "lustreMountPoint" not in outputs
    else:
        assert outputs["lustreMountPoint"].endswith("@tcp:/grpotest")
        assert "bucket" not in outputs


def test_resource_names_follow_the_cluster_name(infra_run):
    recording = infra_run("standard", "b200", "lustre", cluster={"name": "rl-a"})
    cloud = [r for r in recording.resources if r.type.startswith("gcp:") and "projects/service" not in r.type]
    assert cloud
    for resource in cloud:
        assert resource.name.startswith("rl-a-") or resource.name == "rl-a", resource.name


RDMA_SUBNETS = [f"grpo-test-rdma-sub-{index}" for index in range(8)]
NETWORK_EDGES = {
    ("Service", "compute"): set(),
    ("Service", "container"): set(),
    ("Service", "storage"): set(),
    ("Service", "cloudresourcemanager"): set(),
    ("Service", "iam"): set(),
    ("Service", "monitoring"): set(),
    ("Dashboard", "grpo-test-dashboard"): {"monitoring"},
    ("Account", "grpo-test-node-sa"): {"iam"},
    ("IAMMember", "grpo-test-node-sa-container-defaultNodeServiceAccount"): {
        "cloudresourcemanager",
        "grpo-test-node-sa",
    },
    ("Network", "grpo-test-net"): {"compute"},
    ("Network", "grpo-test-gvnic"): {"compute"},
    ("Network", "grpo-test-rdma"): {"compute"},
    ("Subnetwork", "grpo-test-nodes"): {"grpo-test-net"},
    ("Subnetwork", "grpo-test-gvnic-sub"): {"grpo-test-gvnic"},
    **{("Subnetwork", subnet): {"grpo-test-rdma"} for subnet in RDMA_SUBNETS},
    ("Firewall", "grpo-test-gvnic-internal"): {"grpo-test-gvnic"},
    ("Router", "grpo-test-router"): {"grpo-test-net"},
    ("RouterNat", "grpo-test-nat"): {"grpo-test-router"},
    ("Cluster", "grpo-test"): {
        "container",
        "grpo-test-net",
        "grpo-test-nodes",
        "grpo-test-node-sa",
        "grpo-test-node-sa-container-defaultNodeServiceAccount",
    },
}
"""Edges every combination shares: networks after compute, subnets after their VPC only."""

REGISTRY_EDGES = {
    ("Service", "artifactregistry"): set(),
    ("Service", "containerfilesystem"): set(),
    ("Repository", "grpo-test-dockerhub"): {"artifactregistry"},
    ("RepositoryIamMember", "grpo-test-dockerhub-reader"): {"grpo-test-dockerhub", "grpo-test-node-sa"},
    # a project IAM grant, as the nodes' other: after Cloud Resource Manager's API
    ("IAMMember", "grpo-test-node-sa-serviceusage-serviceUsageConsumer"): {"cloudresourcemanager", "grpo-test-node-sa"},
}
"""Edges of the image's remote repository (verl's Docker Hub image, streamed by default: issue 33 item 4), its
reader grant and the nodes' Service Usage Consumer grant that image streaming asks of a custom node account."""


def edges_of(recording) -> dict[tuple[str, str], set[str]]:
    """(type name, logical name) -> logical names it waits for, for the cloud resources and the provider."""
    return {
        (resource.type.rsplit(":", 1)[-1], resource.name): {recording.by_urn(urn).name for urn in resource.depends_on}
        for resource in recording.resources
        if resource.custom and resource.type.startswith(("gcp:", "pulumi:providers:kubernetes"))
    }


def test_every_edge_has_a_reason_standard_gcs(infra_run):
    expected = (
        NETWORK_EDGES
        | REGISTRY_EDGES
        | {
            ("NodePool", "grpo-test-ray-head"): {"grpo-test", "grpo-test-node-sa"},
            ("NodePool", "grpo-test-gpu"): {
                "grpo-test",
                "grpo-test-node-sa",
                "grpo-test-gvnic",
                "grpo-test-gvnic-sub",
                "grpo-test-rdma",
            }
            | set(RDMA_SUBNETS),
            ("Bucket", "my-grpo-project-grpo-test"): {"storage"},
            ("BucketIAMMember", "my-grpo-project-grpo-test-ray-object-user"): {
                "cloudresourcemanager",
                "grpo-test",
                "my-grpo-project-grpo-test",
            },
            ("BucketIAMMember", "my-grpo-project-grpo-test-guardian-object-user"): {
                "cloudresourcemanager",
                "grpo-test",
                "my-grpo-project-grpo-test",
            },
            # Not the GPU pool: only the RayCluster waits for it, so staging starts beside its creation.
            ("kubernetes", "gke"): {"grpo-test", "grpo-test-nat", "grpo-test-ray-head"},
        }
    )
    assert edges_of(infra_run("standard", "b200", "gcs")) == expected


def test_every_edge_has_a_reason_autopilot_lustre(infra_run):
    expected = (
        NETWORK_EDGES
        | REGISTRY_EDGES
        | {
            ("Service", "lustre"): set(),
            ("Service", "servicenetworking"): set(),
            ("GlobalAddress", "grpo-test-lustre-psa"): {"grpo-test-net"},
            ("Connection", "grpo-test-lustre-peering"): {"grpo-test-lustre-psa", "grpo-test-net", "servicenetworking"},
            ("Firewall", "grpo-test-lustre-lnet"): {"grpo-test-net"},
            ("Instance", "grpo-test-lustre"): {"grpo-test-lustre-peering", "grpo-test-net", "lustre"},
            # The parked bucket; the Lustre agent's grant waits for the instance, whose creation makes the agent.
            ("Bucket", "grpo-test-parked-7b5ca2ad"): {"storage"},
            ("BucketIAMMember", "grpo-test-parked-7b5ca2ad-lustre-agent"): {
                "cloudresourcemanager",
                "grpo-test-lustre",
                "grpo-test-parked-7b5ca2ad",
            },
            ("kubernetes", "gke"): {"grpo-test", "grpo-test-nat"},
            # Autopilot's own GPU nodes attach to these subnets: destroy must remove the cluster first.
            ("Cluster", "grpo-test"): NETWORK_EDGES[("Cluster", "grpo-test")] | {"grpo-test-gvnic-sub", *RDMA_SUBNETS},
        }
    )
    assert edges_of(infra_run("autopilot", "h200", "lustre")) == expected
