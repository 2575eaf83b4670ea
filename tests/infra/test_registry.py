"""`workload.imageSource: registry`: the remote repository per upstream, the nodes' reader grant, image
streaming on Standard, and the image path every pod pulls (the RayCluster, the staging Job, the guardian)."""

from __future__ import annotations

import pytest

from core.facts.gcp import ARTIFACT_REGISTRY_SERVICE, CONTAINER_FILESYSTEM_SERVICE
from core.facts.privilege import NODE_ROLE_ALLOW_LIST
from tests.conftest import combination_values, recorded_run
from tests.infra.conftest import depends_on
from tests.workloads.conftest import k8s_schema_errors, schema_errors

REPOSITORY = "gcp:artifactregistry/repository:Repository"
GRANT = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
SECRET_GRANT = "gcp:secretmanager/secretIamMember:SecretIamMember"
NGC_VERSION = "projects/my-keys-project/secrets/ngc-api-key/versions/2"
"""A secret version holding an NGC API key, in another project than the stack's."""
NEMO = {"framework": "nemo-rl", "dataset": "deepscaler", "model": "Qwen/Qwen2.5-1.5B"}
"""The NeMo-RL workload with its pinned image (nvcr.io)."""

VERL_PULLED = "us-central1-docker.pkg.dev/my-grpo-project/grpo-test-dockerhub/verlai/verl:vllm024.dev2"
NEMO_PULLED = "us-central1-docker.pkg.dev/my-grpo-project/grpo-test-nvcr/nvidia/nemo-rl:v0.7.0"


def _run(mode: str, source: str, workload: dict | None = None):
    workload = (workload or {}) | {"imageSource": source}
    return recorded_run(combination_values(mode, "b200", "gcs", workload=workload))


def pulled_images(recording) -> dict[str, set[str]]:
    """Image of every container the RayCluster, the staging Job and the guardian's Deployment run."""
    ray = recording.one("kubernetes:ray.io/v1:RayCluster").inputs["spec"]
    job = recording.one("kubernetes:batch/v1:Job").inputs["spec"]["template"]["spec"]
    [guardian] = [r for r in recording.resources if r.type == "kubernetes:apps/v1:Deployment" and "guardian" in r.name]
    pods = {
        "ray head": ray["headGroupSpec"]["template"]["spec"],
        "ray workers": ray["workerGroupSpecs"][0]["template"]["spec"],
        "staging": job,
        "guardian": guardian.inputs["spec"]["template"]["spec"],
    }
    return {name: {c["image"] for c in pod["containers"]} for name, pod in pods.items()}


@pytest.mark.parametrize(
    ("workload", "host_key", "remote", "pulled"),
    [
        ({}, "dockerhub", {"description": "proxy of DOCKER_HUB", "dockerRepository": {"publicRepository": "DOCKER_HUB"}}, VERL_PULLED),
        (NEMO, "nvcr", {"description": "proxy of https://nvcr.io", "commonRepository": {"uri": "https://nvcr.io"}}, NEMO_PULLED),
    ],
)  # fmt: skip
@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_registry_creates_one_remote_repository_its_reader_grant_and_every_pod_pulls_through_it(
    mode, workload, host_key, remote, pulled
):
    recording = _run(mode, "registry", workload)
    [repository] = [r for r in recording.resources if r.type == REPOSITORY]
    assert repository.name == f"grpo-test-{host_key}"
    assert repository.inputs == {
        "project": "my-grpo-project",
        "location": "us-central1",
        "repositoryId": f"grpo-test-{host_key}",
        "format": "DOCKER",
        "mode": "REMOTE_REPOSITORY",
        "description": f"{'docker.io' if host_key == 'dockerhub' else 'nvcr.io'} through Artifact Registry for the"
        " grpo-gke cluster grpo-test",
        "remoteRepositoryConfig": remote,
    }
    assert "artifactregistry" in depends_on(recording, repository)
    [grant] = [r for r in recording.resources if r.type == GRANT]
    assert grant.inputs["role"] == "roles/artifactregistry.reader"
    assert grant.inputs["repository"] == repository.inputs["repositoryId"]
    assert (grant.inputs["project"], grant.inputs["location"]) == ("my-grpo-project", "us-central1")
    # The same member the nodes' project role goes to: the nodes' own service account.
    node_roles = {r.inputs["member"] for r in recording.resources if r.type == "gcp:projects/iAMMember:IAMMember"}
    assert node_roles == {grant.inputs["member"]} and grant.inputs["member"].startswith(
        "serviceAccount:grpo-test-node-sa@"
    )
    services = {r.inputs["service"] for r in recording.resources if r.type == "gcp:projects/service:Service"}
    assert {ARTIFACT_REGISTRY_SERVICE, CONTAINER_FILESYSTEM_SERVICE} <= services
    assert pulled_images(recording) == dict.fromkeys(("ray head", "ray workers", "staging", "guardian"), {pulled})
    # The pods wait for the repository and the grant: the RayCluster (and every in-cluster object) waits for them.
    ray = recording.one("kubernetes:ray.io/v1:RayCluster")
    assert {repository.name, grant.name} <= depends_on(recording, ray)


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_registry_grants_the_nodes_account_service_usage_consumer_on_the_project_for_streaming(mode):
    """GKE's image streaming page (read 2026-12-07, core/facts/gcp.py STREAMING_CONSUMER_ROLE): a node account that is
    not the default one needs Service Usage Consumer on the project hosting the images, here the stack's own, where
    its remote repositories are; with `direct` the stack grants no such role (its nodes hold GKE's node role only)."""
    recording = _run(mode, "registry")
    members = [r for r in recording.resources if r.type == "gcp:projects/iAMMember:IAMMember"]
    [streaming] = [r for r in members if r.inputs["role"] == "roles/serviceusage.serviceUsageConsumer"]
    assert streaming.inputs["project"] == "my-grpo-project"
    assert streaming.inputs["member"].startswith("serviceAccount:grpo-test-node-sa@")
    assert streaming.name == "grpo-test-node-sa-serviceusage-serviceUsageConsumer"
    assert streaming.inputs["role"] in NODE_ROLE_ALLOW_LIST
    assert streaming.name in depends_on(recording, recording.one("kubernetes:ray.io/v1:RayCluster"))
    direct = _run(mode, "direct")
    roles = {r.inputs["role"] for r in direct.resources if r.type == "gcp:projects/iAMMember:IAMMember"}
    assert roles == {"roles/container.defaultNodeServiceAccount"}


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_direct_creates_no_repository_and_pulls_the_image_as_named(mode):
    recording = _run(mode, "direct")
    assert not [r for r in recording.resources if r.type in (REPOSITORY, GRANT)]
    services = {r.inputs["service"] for r in recording.resources if r.type == "gcp:projects/service:Service"}
    assert not {ARTIFACT_REGISTRY_SERVICE, CONTAINER_FILESYSTEM_SERVICE} & services
    assert pulled_images(recording) == dict.fromkeys(
        ("ray head", "ray workers", "staging", "guardian"), {"verlai/verl:vllm024.dev2"}
    )
    pools = [r for r in recording.resources if r.type == "gcp:container/nodePool:NodePool"]
    assert all("gcfsConfig" not in pool.inputs["nodeConfig"] for pool in pools)
    assert "nodePoolDefaults" not in recording.one("gcp:container/cluster:Cluster").inputs


def test_registry_turns_image_streaming_on_for_the_standard_cluster_and_every_pool():
    recording = _run("standard", "registry")
    cluster = recording.one("gcp:container/cluster:Cluster")
    assert cluster.inputs["nodePoolDefaults"] == {"nodeConfigDefaults": {"gcfsConfig": {"enabled": True}}}
    pools = [r for r in recording.resources if r.type == "gcp:container/nodePool:NodePool"]
    assert {pool.inputs["name"] for pool in pools} == {"gpu", "ray-head"}
    assert all(pool.inputs["nodeConfig"]["gcfsConfig"] == {"enabled": True} for pool in pools)
    assert all(pool.inputs["nodeConfig"]["imageType"] == "COS_CONTAINERD" for pool in pools)


def test_autopilot_streams_by_itself_the_stack_sets_no_gcfs():
    cluster = _run("autopilot", "registry").one("gcp:container/cluster:Cluster")
    assert "nodePoolDefaults" not in cluster.inputs and cluster.inputs["enableAutopilot"] is True


@pytest.mark.parametrize(("mode", "workload"), [("standard", {}), ("autopilot", NEMO)])
def test_the_pods_with_the_registry_image_pass_kuberays_and_kubernetes_schemas(mode, workload):
    """The RayCluster against KubeRay v1.7's strict schema; the staging Job and the guardian's Deployment
    against Kubernetes 1.33's (both skip without ../shared)."""
    recording = _run(mode, "registry", workload)
    ray = recording.one("kubernetes:ray.io/v1:RayCluster").inputs
    assert schema_errors({"apiVersion": "ray.io/v1", "kind": "RayCluster", **ray}) == []
    assert k8s_schema_errors(recording.one("kubernetes:batch/v1:Job").inputs) == []
    [guardian] = [r for r in recording.resources if r.type == "kubernetes:apps/v1:Deployment" and "guardian" in r.name]
    assert k8s_schema_errors(guardian.inputs) == []


# --- workload.ngcApiKeySecretVersion: the nvcr.io repository pulls with the user's NGC key ----------


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_the_ngc_key_makes_the_nvcr_repository_pull_with_it_and_grants_artifact_registrys_agent_that_secret(mode):
    """pulumi-gcp 10.2.0's names (RepositoryRemoteRepositoryConfigUpstreamCredentials...Args, SecretIamMemberArgs,
    as the typed Args record them): username `$oauthtoken` (NGC's username for an API key) and the secret version's
    name, never the key; the service agent service-<number>@gcp-sa-artifactregistry granted the accessor role on
    that one secret, after the repository (whose creation creates the agent) and before any pod pulls."""
    recording = _run(mode, "registry", NEMO | {"ngcApiKeySecretVersion": NGC_VERSION})
    [repository] = [r for r in recording.resources if r.type == REPOSITORY]
    assert repository.inputs["remoteRepositoryConfig"] == {
        "description": "proxy of https://nvcr.io",
        "commonRepository": {"uri": "https://nvcr.io"},
        "upstreamCredentials": {
            "usernamePasswordCredentials": {"username": "$oauthtoken", "passwordSecretVersion": NGC_VERSION}
        },
        "disableUpstreamValidation": True,
    }
    [secret_grant] = [r for r in recording.resources if r.type == SECRET_GRANT]
    assert secret_grant.name == "grpo-test-nvcr-upstream-key"
    assert secret_grant.inputs == {
        "secretId": "projects/my-keys-project/secrets/ngc-api-key",
        "role": "roles/secretmanager.secretAccessor",
        "member": "serviceAccount:service-123456789012@gcp-sa-artifactregistry.iam.gserviceaccount.com",
    }
    assert repository.name in depends_on(recording, secret_grant)
    ray = recording.one("kubernetes:ray.io/v1:RayCluster")
    assert secret_grant.name in depends_on(recording, ray)
    assert pulled_images(recording) == dict.fromkeys(("ray head", "ray workers", "staging", "guardian"), {NEMO_PULLED})
    # Nothing in the program's resources holds more than the secret version's name.
    everything = repr([r.inputs for r in recording.resources])
    assert everything.count(NGC_VERSION) == 1


@pytest.mark.parametrize(("mode", "workload"), [("standard", {}), ("autopilot", NEMO)])
def test_without_the_ngc_key_no_repository_has_credentials_and_no_secret_is_granted(mode, workload):
    recording = _run(mode, "registry", workload)
    [repository] = [r for r in recording.resources if r.type == REPOSITORY]
    remote = repository.inputs["remoteRepositoryConfig"]
    assert "upstreamCredentials" not in remote and "disableUpstreamValidation" not in remote
    assert not [r for r in recording.resources if r.type == SECRET_GRANT]
