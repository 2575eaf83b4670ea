"""The image reference the pods pull: Docker's reading of a reference, and its path through the stack's
remote repository (core/names.py)."""

from __future__ import annotations

import pytest

from core import names


@pytest.mark.parametrize(
    ("image", "host", "path", "suffix"),
    [
        ("verlai/verl:vllm024.dev2", "docker.io", "verlai/verl", ":vllm024.dev2"),
        ("nvcr.io/nvidia/nemo-rl:v0.7.0", "nvcr.io", "nvidia/nemo-rl", ":v0.7.0"),
        ("ubuntu", "docker.io", "library/ubuntu", ""),
        ("docker.io/library/ubuntu:24.04", "docker.io", "library/ubuntu", ":24.04"),
        ("localhost:5000/team/verl:1", "localhost:5000", "team/verl", ":1"),
        ("example.com:443/verl@sha256:abc", "example.com:443", "verl", "@sha256:abc"),
        ("team/verl", "docker.io", "team/verl", ""),
    ],
)
def test_parse_image_splits_host_path_and_tag_as_docker_does(image, host, path, suffix):
    assert names.parse_image(image) == names.ImageReference(host=host, path=path, suffix=suffix)


def test_registry_image_is_the_remote_repositorys_path_of_the_same_image():
    assert (
        names.registry_image("verlai/verl:vllm024.dev2", "us-central1", "my-proj", "grpo-dev")
        == "us-central1-docker.pkg.dev/my-proj/grpo-dev-dockerhub/verlai/verl:vllm024.dev2"
    )
    assert (
        names.registry_image("nvcr.io/nvidia/nemo-rl:v0.7.0", "europe-west4", "my-proj", "rl-a")
        == "europe-west4-docker.pkg.dev/my-proj/rl-a-nvcr/nvidia/nemo-rl:v0.7.0"
    )
    assert (
        names.registry_image("ubuntu@sha256:abc", "us-east5", "p-123456", "c")
        == "us-east5-docker.pkg.dev/p-123456/c-dockerhub/library/ubuntu@sha256:abc"
    )


def test_artifact_registry_hosts_are_recognised():
    assert names.is_artifact_registry_host("us-central1-docker.pkg.dev")
    assert not names.is_artifact_registry_host("nvcr.io")
    assert not names.is_artifact_registry_host("docker.io")
