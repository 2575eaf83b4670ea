"""The infrastructure graph as a whole: one component per concern, children parented, stack outputs."""

from __future__ import annotations

import pytest

from infra import names
from tests.infra.conftest import COMBINATIONS

COMPONENTS = {"Apis", "Networks", "Cluster", "NodePools", "Storage", "KubernetesAccess"}


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
    assert outputs["dashboardCommand"] == names.dashboard_port_forward_command(
        "grpo-test", "us-central1", "my-grpo-project"
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
