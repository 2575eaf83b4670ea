"""Project services: the right set per storage, never disabled, and awaited only where needed."""

from __future__ import annotations

import pytest

from infra.apis import required_services, service_resource_name
from tests.conftest import COMBINATIONS, combination_config
from tests.infra.conftest import depends_on

SERVICE = "gcp:projects/service:Service"


def test_gcs_needs_the_base_services_only():
    assert required_services("gcs", "direct") == (
        "cloudresourcemanager.googleapis.com",
        "compute.googleapis.com",
        "container.googleapis.com",
        "iam.googleapis.com",
        "monitoring.googleapis.com",
        "storage.googleapis.com",
    )


def test_lustre_adds_lustre_and_service_networking():
    extra = set(required_services("lustre", "direct")) - set(required_services("gcs", "direct"))
    assert extra == {"lustre.googleapis.com", "servicenetworking.googleapis.com"}


def test_service_resource_name_is_the_short_api_name():
    assert service_resource_name("container.googleapis.com") == "container"
    assert service_resource_name("servicenetworking.googleapis.com") != "servicenetworking.googleapis.com"


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_services_are_enabled_and_never_disabled_on_destroy(infra_run, mode, gpu, storage):
    recording = infra_run(mode, gpu, storage)
    services = recording.by_type(SERVICE)
    # verl's Docker Hub image is streamed by default (issue 33 item 4): Artifact Registry's and Container File
    # System's APIs come with it
    assert sorted(s.inputs["service"] for s in services) == list(required_services(storage, "registry"))
    for service in services:
        assert service.inputs["disableOnDestroy"] is False
        assert service.inputs["disableDependentServices"] is False
        assert service.inputs["project"] == "my-grpo-project"


@pytest.mark.parametrize("storage", ["gcs", "lustre"])
def test_only_the_resources_that_call_an_api_wait_for_it(infra_run, storage):
    recording = infra_run("standard", "h200", storage)
    service_names = {s.name for s in recording.by_type(SERVICE)}
    waiting = {}
    for resource in recording.resources:
        for api in depends_on(recording, resource) & service_names:
            waiting.setdefault(api, set()).add(resource.type.rsplit(":", 1)[-1] + "/" + resource.name)
    expected = {
        "compute": {"Network/grpo-test-net", "Network/grpo-test-gvnic", "Network/grpo-test-rdma"},
        "container": {"Cluster/grpo-test"},
        "iam": {"Account/grpo-test-node-sa"},
        "monitoring": {"Dashboard/grpo-test-dashboard"},
        "cloudresourcemanager": {
            "IAMMember/grpo-test-node-sa-container-defaultNodeServiceAccount",
            # the nodes' image streaming grant (the image is streamed by default), a project IAM grant too
            "IAMMember/grpo-test-node-sa-serviceusage-serviceUsageConsumer",
        },
        "artifactregistry": {"Repository/grpo-test-dockerhub"},
    }
    if storage == "gcs":
        expected["storage"] = {"Bucket/my-grpo-project-grpo-test"}
        expected["cloudresourcemanager"] |= {
            "BucketIAMMember/my-grpo-project-grpo-test-ray-object-user",
            "BucketIAMMember/my-grpo-project-grpo-test-guardian-object-user",
        }
    else:
        expected["servicenetworking"] = {"Connection/grpo-test-lustre-peering"}
        expected["lustre"] = {"Instance/grpo-test-lustre"}
        # The bucket a Lustre stack parks its run in (storage.parked), and the Lustre service agent's grant on it.
        parked = combination_config("standard", "h200", "lustre").parked_bucket_name
        expected["storage"] = {f"Bucket/{parked}"}
        expected["cloudresourcemanager"] |= {f"BucketIAMMember/{parked}-lustre-agent"}
    assert waiting == expected
