"""The Artifact Registry remote repositories the pods pull the workload image through
(`workload.imageSource: registry`): one per upstream registry, in the stack's region, each readable by the
nodes' service account."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core import names
from core.config.model import StackConfig
from core.facts.gcp import ARTIFACT_REGISTRY_READER_ROLE, UPSTREAMS, Upstream
from core.resource_options import fixed_name_options

DOCKER_FORMAT = "DOCKER"
"""The repositories' format (pulumi-gcp 10.2.0 RepositoryArgs.format)."""

REMOTE_MODE = "REMOTE_REPOSITORY"
"""A proxy of an upstream that caches each version on its first pull (RepositoryArgs.mode)."""


def remote_repository_config(upstream: Upstream) -> gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs:
    """The remote settings of a proxy of `upstream`: a preset Docker source, or a custom upstream's address."""
    if upstream.public_repository is not None:
        return gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs(
            description=f"proxy of {upstream.public_repository}",
            docker_repository=gcp.artifactregistry.RepositoryRemoteRepositoryConfigDockerRepositoryArgs(
                public_repository=upstream.public_repository
            ),
        )
    return gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs(
        description=f"proxy of {upstream.uri}",
        common_repository=gcp.artifactregistry.RepositoryRemoteRepositoryConfigCommonRepositoryArgs(uri=upstream.uri),
    )


def repository_args(config: StackConfig, host: str) -> gcp.artifactregistry.RepositoryArgs:
    """The stack's remote Docker repository proxying registry `host`, in the stack's region."""
    return gcp.artifactregistry.RepositoryArgs(
        project=config.project,
        location=config.region,
        repository_id=names.remote_repository_id(config.cluster_name, host),
        format=DOCKER_FORMAT,
        mode=REMOTE_MODE,
        description=f"{host} through Artifact Registry for the grpo-gke cluster {config.cluster_name}",
        remote_repository_config=remote_repository_config(UPSTREAMS[host]),
    )


@dataclass(frozen=True)
class ImageRepositoriesArgs:
    """Inputs of the ImageRepositories component."""

    config: StackConfig
    """The stack config."""
    node_service_account: pulumi.Input[str]
    """IAM member of the nodes' service account (`serviceAccount:<email>`), which pulls the images."""
    artifact_registry_api: pulumi.Resource
    """The Artifact Registry API's Service; the repositories wait for it."""


class ImageRepositories(pulumi.ComponentResource):
    """One remote repository per upstream of the workload image, and the nodes' reader grant on each."""

    repositories: list[gcp.artifactregistry.Repository]
    grants: list[gcp.artifactregistry.RepositoryIamMember]

    def __init__(self, name: str, args: ImageRepositoriesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:ImageRepositories", name, None, opts)
        config = args.config
        self.repositories = []
        self.grants = []
        for host in config.image_upstreams():
            repository_id = names.remote_repository_id(config.cluster_name, host)
            repository = gcp.artifactregistry.Repository(
                repository_id,
                repository_args(config, host),
                opts=fixed_name_options(parent=self, depends_on=[args.artifact_registry_api]),
            )
            # Non-authoritative: the repository's other readers are left as they are.
            grant = gcp.artifactregistry.RepositoryIamMember(
                f"{repository_id}-reader",
                gcp.artifactregistry.RepositoryIamMemberArgs(
                    project=config.project,
                    location=config.region,
                    repository=repository.name,
                    role=ARTIFACT_REGISTRY_READER_ROLE,
                    member=args.node_service_account,
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            self.repositories.append(repository)
            self.grants.append(grant)
        self.register_outputs({})

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a pod pulling through the repositories waits for: each repository and its reader grant."""
        return [*self.repositories, *self.grants]
