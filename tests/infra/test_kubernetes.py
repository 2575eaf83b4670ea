"""The Kubernetes provider: built from the cluster's outputs, secret kubeconfig, after the node pools."""

from __future__ import annotations

import pytest
import yaml

from infra.kubernetes import gcloud_context_name, gke_kubeconfig
from tests.infra.conftest import COMBINATIONS, depends_on

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
def test_provider_is_secret_server_side_and_waits_for_the_nodes(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    provider = recording.one(PROVIDER, "gke")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert provider.inputs["enableServerSideApply"] == "true"
    expected = {"grpo-test", "grpo-test-nat"}
    if mode == "standard":
        expected |= {"grpo-test-gpu", "grpo-test-ray-head"}
    assert depends_on(recording, provider) == expected
    assert recording.outputs["kubeconfig"] == "[secret]"
