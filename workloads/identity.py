"""The namespace, the Ray pods' Kubernetes service account and, when set, the Hugging Face token Secret,
the W&B key's Secret and the Secret of `grpo-gke:secretEnv`. Secret values are secret Outputs end to end;
pods read them by `secretKeyRef`, so no value enters a manifest.

The names come from core.names, which the bucket grant of the infrastructure graph also reads
(workload identity principal `.../ns/<NAMESPACE>/sa/<RAY_SERVICE_ACCOUNT>`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1.Namespace import NamespaceInitArgs
from pulumi_kubernetes.core.v1.Secret import SecretInitArgs
from pulumi_kubernetes.core.v1.ServiceAccount import ServiceAccountInitArgs

from core import names
from core.resource_options import fixed_name_options

LABELS = {"app.kubernetes.io/part-of": "grpo-gke"}
"""Labels on every object the workloads create in their namespace."""


def render_namespace() -> NamespaceInitArgs:
    """The namespace of the RayCluster, its service account, storage claim and staging Job."""
    return NamespaceInitArgs(metadata=k8s.meta.v1.ObjectMetaArgs(name=names.NAMESPACE, labels=dict(LABELS)))


def render_service_account() -> ServiceAccountInitArgs:
    """The Ray pods' service account; the bucket grant names it directly (no annotation needed)."""
    return ServiceAccountInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=names.RAY_SERVICE_ACCOUNT, namespace=names.NAMESPACE, labels=dict(LABELS)
        )
    )


def render_token_secret(token: pulumi.Input[str]) -> SecretInitArgs:
    """The Hugging Face token Secret; `token` must be a secret Output so it never shows in clear."""
    return SecretInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.HF_TOKEN_SECRET, namespace=names.NAMESPACE, labels=dict(LABELS)),
        type="Opaque",
        string_data={names.HF_TOKEN_SECRET_KEY: token},
    )


def render_wandb_secret(key: pulumi.Input[str]) -> SecretInitArgs:
    """The Secret of `grpo-gke:wandbApiKey`; `key` must be a secret Output so it never shows in clear."""
    return SecretInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.WANDB_SECRET, namespace=names.NAMESPACE, labels=dict(LABELS)),
        type="Opaque",
        string_data={names.WANDB_SECRET_KEY: key},
    )


def render_secret_env_secret(values: Mapping[str, pulumi.Input[str]]) -> SecretInitArgs:
    """The Secret of `grpo-gke:secretEnv`, keyed by variable name; each value must be a secret Output."""
    return SecretInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=names.SECRET_ENV_SECRET, namespace=names.NAMESPACE, labels=dict(LABELS)
        ),
        type="Opaque",
        string_data=dict(sorted(values.items())),
    )


@dataclass(frozen=True)
class IdentityArgs:
    """Inputs of the Identity component."""

    token: pulumi.Output[str] | None
    """The Hugging Face token as a secret Output, or None for public models."""
    secret_env: Mapping[str, pulumi.Output[str]]
    """`grpo-gke:secretEnv` as secret Outputs by variable name (empty: no Secret)."""
    wandb_api_key: pulumi.Output[str] | None
    """`grpo-gke:wandbApiKey` as a secret Output, or None without W&B."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist first: the cluster."""


class Identity(pulumi.ComponentResource):
    """Namespace, service account and the optional token, W&B key and secretEnv Secrets."""

    namespace: k8s.core.v1.Namespace
    service_account: k8s.core.v1.ServiceAccount
    token_secret: k8s.core.v1.Secret | None
    wandb_secret: k8s.core.v1.Secret | None
    secret_env_secret: k8s.core.v1.Secret | None

    def __init__(self, name: str, args: IdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:Identity", name, None, opts)
        self.namespace = k8s.core.v1.Namespace(
            names.NAMESPACE,
            render_namespace(),
            opts=fixed_name_options(parent=self, provider=args.provider, depends_on=list(args.depends_on)),
        )
        in_namespace = fixed_name_options(parent=self, provider=args.provider, depends_on=[self.namespace])
        self.service_account = k8s.core.v1.ServiceAccount(
            names.RAY_SERVICE_ACCOUNT, render_service_account(), opts=in_namespace
        )
        self.token_secret = None
        if args.token is not None:
            self.token_secret = k8s.core.v1.Secret(
                names.HF_TOKEN_SECRET, render_token_secret(pulumi.Output.secret(args.token)), opts=in_namespace
            )
        self.wandb_secret = None
        if args.wandb_api_key is not None:
            self.wandb_secret = k8s.core.v1.Secret(
                names.WANDB_SECRET, render_wandb_secret(pulumi.Output.secret(args.wandb_api_key)), opts=in_namespace
            )
        self.secret_env_secret = None
        if args.secret_env:
            values = {name: pulumi.Output.secret(value) for name, value in args.secret_env.items()}
            self.secret_env_secret = k8s.core.v1.Secret(
                names.SECRET_ENV_SECRET, render_secret_env_secret(values), opts=in_namespace
            )
        self.register_outputs(
            {
                "namespace": names.NAMESPACE,
                "serviceAccount": names.RAY_SERVICE_ACCOUNT,
                "hasToken": args.token is not None,
                "hasWandbKey": args.wandb_api_key is not None,
                "secretEnvNames": sorted(args.secret_env),
            }
        )
