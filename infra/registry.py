"""The Artifact Registry remote repositories the pods pull the workload image through
(`workload.imageSource: registry`): one per upstream registry, in the stack's region, each readable by the
nodes' service account, which also holds Service Usage Consumer on the stack's project, without which GKE does
not stream from them to a custom node account (core/facts/gcp.py STREAMING_CONSUMER_ROLE); with
`workload.ngcApiKeySecretVersion`, the nvcr.io one pulls with the user's NGC API
key, read from Secret Manager by Artifact Registry's service agent (granted on that secret only)."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from core import names
from core.config.model import StackConfig
from core.facts.gcp import (
    ARTIFACT_REGISTRY_READER_ROLE,
    ARTIFACT_REGISTRY_SERVICE,
    ARTIFACT_REGISTRY_SERVICE_AGENT,
    SECRET_ACCESSOR_ROLE,
    SECRET_VERSION_PATTERN,
    STREAMING_CONSUMER_ROLE,
    UPSTREAMS,
    Upstream,
)
from core.resource_options import fixed_name_options
from infra.apis import project_number

DOCKER_FORMAT = "DOCKER"
"""The repositories' format (pulumi-gcp 10.2.0 RepositoryArgs.format)."""

REMOTE_MODE = "REMOTE_REPOSITORY"
"""A proxy of an upstream that caches each version on its first pull (RepositoryArgs.mode)."""


def upstream_credentials(
    upstream: Upstream, password_secret_version: str
) -> gcp.artifactregistry.RepositoryRemoteRepositoryConfigUpstreamCredentialsArgs:
    """The upstream's username for an API key and the secret version holding the key: only the version's name
    goes into the program and its state, never the key."""
    assert upstream.api_key_username is not None, "the config rules refuse credentials for this upstream"
    return gcp.artifactregistry.RepositoryRemoteRepositoryConfigUpstreamCredentialsArgs(
        username_password_credentials=gcp.artifactregistry.RepositoryRemoteRepositoryConfigUpstreamCredentialsUsernamePasswordCredentialsArgs(
            username=upstream.api_key_username,
            password_secret_version=password_secret_version,
        )
    )


def remote_repository_config(
    upstream: Upstream, password_secret_version: str | None = None
) -> gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs:
    """The remote settings of a proxy of `upstream`: a preset Docker source, or a custom upstream's address; with
    `password_secret_version`, the credentials it pulls with.

    With credentials, Artifact Registry's check of the upstream at creation is off (`disable_upstream_validation`):
    its service agent exists only once the project's first repository does (DOC-ARSA, core/facts/gcp.py), so it is
    granted the secret after the repository is created, and a wrong key shows at the first pull instead."""
    credentials = {}
    if password_secret_version is not None:
        credentials = {
            "upstream_credentials": upstream_credentials(upstream, password_secret_version),
            "disable_upstream_validation": True,
        }
    if upstream.public_repository is not None:
        return gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs(
            description=f"proxy of {upstream.public_repository}",
            docker_repository=gcp.artifactregistry.RepositoryRemoteRepositoryConfigDockerRepositoryArgs(
                public_repository=upstream.public_repository
            ),
            **credentials,
        )
    return gcp.artifactregistry.RepositoryRemoteRepositoryConfigArgs(
        description=f"proxy of {upstream.uri}",
        common_repository=gcp.artifactregistry.RepositoryRemoteRepositoryConfigCommonRepositoryArgs(uri=upstream.uri),
        **credentials,
    )


def credentials_secret_version(config: StackConfig, host: str) -> str | None:
    """The secret version the remote repository of `host` pulls with: the NGC key's, for an upstream that takes an
    API key (nvcr.io); None for the others."""
    if UPSTREAMS[host].api_key_username is None:
        return None
    return config.workload.ngc_api_key_secret_version


def secret_of_version(version: str) -> str:
    """The secret a secret version belongs to: `projects/P/secrets/S/versions/N` -> `projects/P/secrets/S`."""
    match = re.fullmatch(SECRET_VERSION_PATTERN, version)
    assert match is not None, "the config refuses a malformed secret version"
    return f"projects/{match.group('project')}/secrets/{match.group('secret')}"


def artifact_registry_service_agent(project_number: str) -> str:
    """IAM member of Artifact Registry's service agent of the project with this number."""
    return ARTIFACT_REGISTRY_SERVICE_AGENT.format(number=project_number)


def repository_args(config: StackConfig, host: str) -> gcp.artifactregistry.RepositoryArgs:
    """The stack's remote Docker repository proxying registry `host`, in the stack's region."""
    return gcp.artifactregistry.RepositoryArgs(
        project=config.project,
        location=config.region,
        repository_id=names.remote_repository_id(config.cluster_name, host),
        format=DOCKER_FORMAT,
        mode=REMOTE_MODE,
        description=f"{host} through Artifact Registry for the grpo-gke cluster {config.cluster_name}",
        remote_repository_config=remote_repository_config(UPSTREAMS[host], credentials_secret_version(config, host)),
    )


@dataclass(frozen=True)
class ImageRepositoriesArgs:
    """Inputs of the ImageRepositories component."""

    config: StackConfig
    """The stack config."""
    node_service_account: pulumi.Input[str]
    """IAM member of the nodes' service account (`serviceAccount:<email>`), which pulls the images."""
    apis: dict[str, pulumi.Resource]
    """The project's Service resources by API name: the repositories wait for Artifact Registry's, the project
    number's lookup (for the service agent) for Cloud Resource Manager's."""


class ImageRepositories(pulumi.ComponentResource):
    """One remote repository per upstream of the workload image, and the nodes' reader grant on each."""

    repositories: list[gcp.artifactregistry.Repository]
    grants: list[gcp.artifactregistry.RepositoryIamMember]
    streaming_grant: gcp.projects.IAMMember
    secret_grants: list[gcp.secretmanager.SecretIamMember]

    def __init__(self, name: str, args: ImageRepositoriesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:ImageRepositories", name, None, opts)
        config = args.config
        self.repositories = []
        self.grants = []
        self.secret_grants = []
        for host in config.image_upstreams():
            repository_id = names.remote_repository_id(config.cluster_name, host)
            repository = gcp.artifactregistry.Repository(
                repository_id,
                repository_args(config, host),
                opts=fixed_name_options(parent=self, depends_on=[args.apis[ARTIFACT_REGISTRY_SERVICE]]),
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
            version = credentials_secret_version(config, host)
            if version is not None:
                self.secret_grants.append(self._secret_grant(repository_id, version, repository, args))
        # Non-authoritative: the project's other consumers are left as they are. A project's IAM policy is Cloud
        # Resource Manager's, so the grant waits for that API as the nodes' other project grant does
        # (infra/identity.py).
        self.streaming_grant = gcp.projects.IAMMember(
            f"{names.node_service_account_id(config.cluster_name)}-{STREAMING_CONSUMER_ROLE.removeprefix('roles/').replace('.', '-')}",
            gcp.projects.IAMMemberArgs(
                project=config.project, role=STREAMING_CONSUMER_ROLE, member=args.node_service_account
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.apis["cloudresourcemanager.googleapis.com"]]),
        )
        self.register_outputs({})

    def _secret_grant(
        self, repository_id: str, version: str, repository: pulumi.Resource, args: ImageRepositoriesArgs
    ) -> gcp.secretmanager.SecretIamMember:
        """Artifact Registry's service agent may read the secret holding the upstream's key, that secret only
        (DOC-ARA); after the repository, whose creation creates the agent in a project that had none (DOC-ARSA)."""
        number = project_number(args.config.project, args.apis, self)
        # Non-authoritative: the secret's other accessors are left as they are.
        return gcp.secretmanager.SecretIamMember(
            f"{repository_id}-upstream-key",
            gcp.secretmanager.SecretIamMemberArgs(
                secret_id=secret_of_version(version),
                role=SECRET_ACCESSOR_ROLE,
                member=number.apply(artifact_registry_service_agent),
            ),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[repository]),
        )

    @property
    def ready(self) -> list[pulumi.Resource]:
        """What a pod pulling through the repositories waits for: each repository, its reader grant, the nodes'
        Service Usage Consumer grant (streaming) and, with upstream credentials, the service agent's grant on their
        secret."""
        return [*self.repositories, *self.grants, self.streaming_grant, *self.secret_grants]
