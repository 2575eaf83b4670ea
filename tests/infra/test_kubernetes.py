"""The Kubernetes provider: built from the cluster's outputs, secret kubeconfig, after the node pools."""

from __future__ import annotations

import pytest
import yaml
from google.protobuf import json_format

from core.names import gcloud_context_name
from infra.kubernetes import cluster_identifier, gke_kubeconfig
from plan import mocks
from plan.harness import run_values
from plan.monitor import SECRET_SIG, SIG_KEY, RecordingMonitor
from tests.conftest import COMBINATIONS, combination_values
from tests.infra.conftest import depends_on

PROVIDER = "pulumi:providers:kubernetes"


def test_kubeconfig_authenticates_through_the_gke_plugin_without_a_stored_credential():
    document = yaml.safe_load(gke_kubeconfig("c1", "192.0.2.1", "Q0E="))
    assert document["current-context"] == "c1"
    cluster = document["clusters"][0]["cluster"]
    assert cluster == {"server": "https://192.0.2.1", "certificate-authority-data": "Q0E="}
    user = document["users"][0]["user"]
    assert set(user) == {"exec"}, "no token or password in the kubeconfig"
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert user["exec"]["provideClusterInfo"] is True
    assert user["exec"]["apiVersion"] == "client.authentication.k8s.io/v1beta1"


def test_context_is_named_like_gcloud_get_credentials():
    assert gcloud_context_name("p-123456", "us-central1", "grpo-dev") == "gke_p-123456_us-central1_grpo-dev"
    document = yaml.safe_load(gke_kubeconfig(gcloud_context_name("p", "r", "c"), "e", "ca"))
    assert document["contexts"] == [{"name": "gke_p_r_c", "context": {"cluster": "gke_p_r_c", "user": "gke_p_r_c"}}]


def test_kubeconfig_is_deterministic():
    assert gke_kubeconfig("c", "e", "ca") == gke_kubeconfig("c", "e", "ca")
    assert gke_kubeconfig("c", "e", "ca") != gke_kubeconfig("c", "e2", "ca")


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_provider_is_secret_server_side_and_waits_for_the_head_pool_not_the_gpu_pool(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    provider = recording.one(PROVIDER, "gke")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert provider.inputs["enableServerSideApply"] == "true"
    expected = {"grpo-test", "grpo-test-nat"}
    if mode == "standard":
        # Only the RayCluster waits for the GPU pool, so the staging Job starts beside its creation.
        expected |= {"grpo-test-ray-head"}
    assert depends_on(recording, provider) == expected
    assert recording.outputs["kubeconfig"] == "[secret]"


def provider_registration(endpoint: str, ca_certificate: str) -> dict:
    """The Kubernetes provider's RegisterResource as the engine receives it, for a cluster whose endpoint
    and CA are these: the kubeconfig in clear, the identifier and each input's property dependencies."""
    seen: dict = {}
    register = RecordingMonitor.RegisterResource

    def recording_provider(self, request):
        response = register(self, request)
        if request.type == PROVIDER:
            inputs = json_format.MessageToDict(request.object)
            kubeconfig = inputs["kubeconfig"]
            assert kubeconfig[SIG_KEY] == SECRET_SIG
            seen["kubeconfig"] = kubeconfig["value"]
            seen["clusterIdentifier"] = inputs["clusterIdentifier"]
            seen["dependencies"] = {key: sorted(deps.urns) for key, deps in request.propertyDependencies.items()}
        return response

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(mocks, "FAKE_ENDPOINT", endpoint)
        patch.setattr(mocks, "FAKE_CA_CERTIFICATE", ca_certificate)
        patch.setattr(RecordingMonitor, "RegisterResource", recording_provider)
        run_values(combination_values("standard", "h200", "gcs"))
    return seen


def test_a_credential_or_ip_rotation_keeps_the_provider_and_its_objects():
    """A new endpoint and CA change the kubeconfig, not the identifier: the engine updates the provider in
    place instead of replacing it with every Kubernetes object and the running job."""
    before = provider_registration("192.0.2.10", "Q0EtYmVmb3JlCg==")
    after = provider_registration("198.51.100.7", "Q0EtYWZ0ZXIK")
    assert "https://192.0.2.10" in before["kubeconfig"] and "Q0EtYmVmb3JlCg==" in before["kubeconfig"]
    assert "https://198.51.100.7" in after["kubeconfig"] and "Q0EtYWZ0ZXIK" in after["kubeconfig"]
    assert (
        before["clusterIdentifier"]
        == after["clusterIdentifier"]
        == ("projects/my-grpo-project/locations/us-central1/clusters/grpo-test")
    )


def test_the_identifier_follows_the_cluster_so_a_replaced_cluster_replaces_the_provider():
    """The identifier depends on the cluster resource: while the cluster is replaced (same name) the engine
    sees it unknown and replaces the provider, so the objects are recreated in the new cluster."""
    registration = provider_registration(mocks.FAKE_ENDPOINT, mocks.FAKE_CA_CERTIFICATE)
    (cluster_urn,) = registration["dependencies"]["clusterIdentifier"]
    assert cluster_urn.endswith("gcp:container/cluster:Cluster::grpo-test")


def test_cluster_identifier_is_the_clusters_resource_path():
    assert cluster_identifier("p", "us-central1", "c") == "projects/p/locations/us-central1/clusters/c"


def test_the_dns_endpoint_kubeconfig_names_the_dns_server_and_no_ca():
    cluster = yaml.safe_load(gke_kubeconfig("c1", "gke-abc.us-central1.gke.goog", None))["clusters"][0]["cluster"]
    assert cluster == {"server": "https://gke-abc.us-central1.gke.goog"}


def test_with_the_dns_endpoint_the_provider_reaches_the_cluster_through_it():
    seen: dict = {}
    register = RecordingMonitor.RegisterResource

    def recording_provider(self, request):
        response = register(self, request)
        if request.type == PROVIDER:
            seen["kubeconfig"] = json_format.MessageToDict(request.object)["kubeconfig"]["value"]
        return response

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RecordingMonitor, "RegisterResource", recording_provider)
        run_values(combination_values("autopilot", "b200", "gcs", cluster={"dnsEndpoint": True}))
    cluster = yaml.safe_load(seen["kubeconfig"])["clusters"][0]["cluster"]
    assert cluster == {"server": f"https://{mocks.FAKE_DNS_ENDPOINT}"}
