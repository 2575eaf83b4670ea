"""The namespace, the Ray pods' Kubernetes service account and, when set, the Hugging Face token Secret
and the Secret of `grpo-gke:secretEnv`. Secret values are secret Outputs end to end; pods read them by
`secretKeyRef`, so no value enters a manifest.

The names come from core.names, which the bucket grant of the infrastructure graph also reads
(workload identity principal `.../ns/<NAMESPACE>/sa/<RAY_SERVICE_ACCOUNT>`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1.Namespace import NamespaceInitArgs
from pulumi_kubernetes.core.v1.Secret import SecretInitArgs
from pulumi_kubernetes.core.v1.ServiceAccount import ServiceAccountInitArgs

from core import names
from core.config.model import StackConfig

LABELS = {"app.kubernetes.io/part-of": "grpo-gke"}
"""Labels on every object the workloads create in their namespace."""


def container_security_context() -> dict[str, Any]:
    """The securityContext of every container the stack runs (Ray head, GPU workers, staging): not
    privileged, no privilege escalation, every capability dropped, the runtime's default seccomp profile.

    The GPU workers get no capability back. Google's GPUDirect RDMA pod spec (DOC-AIH-CUSTOM) and the KES
    verl RayCluster run the worker unprivileged, and neither adds a capability (gcp-infrastructure.md
    A.6/A.7): gIB works with the GPUs from the device plugin, the RDMA NICs GKE attaches and the hostPath
    libraries, and IPC_LOCK (memory registration beyond RLIMIT_MEMLOCK) is not in the runtime's default
    set those pods run with, so they do not rely on it. Not yet proven on a GKE RDMA node with the rest
    of the default set dropped too (NET_RAW, SETUID, ...): the first real run's NCCL log settles it.

    The containers run as the images' user, root: verl's docker/Dockerfile.stable.vllm sets no USER on
    nvidia/cuda, NeMo-RL's docker/Dockerfile.ngc_pytorch sets `USER root` ("more convenient for users"),
    and NeMo-RL builds its worker venvs under /opt at run time. Every pod writes the same shared tree
    (model, HF_HOME, verl, checkpoints); a new Lustre file system's root directory belongs to root (not
    checked against Managed Lustre's docs). Root without CAP_DAC_OVERRIDE or CAP_CHOWN writes only what
    root owns, which is all of that tree.
    """
    return {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "privileged": False,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def security_context_args() -> k8s.core.v1.SecurityContextArgs:
    """container_security_context() as typed Args (core objects: the staging Job, the run guardian)."""
    context = container_security_context()
    return k8s.core.v1.SecurityContextArgs(
        allow_privilege_escalation=context["allowPrivilegeEscalation"],
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=context["capabilities"]["drop"]),
        privileged=context["privileged"],
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type=context["seccompProfile"]["type"]),
    )


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


def render_secret_env_secret(values: Mapping[str, pulumi.Input[str]]) -> SecretInitArgs:
    """The Secret of `grpo-gke:secretEnv`, keyed by variable name; each value must be a secret Output."""
    return SecretInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.SECRET_ENV_SECRET, namespace=names.NAMESPACE, labels=dict(LABELS)),
        type="Opaque",
        string_data=dict(sorted(values.items())),
    )


@dataclass(frozen=True)
class SecretEnv:
    """One environment variable a pod reads from a Secret at run time."""

    name: str
    """The variable's name."""
    secret: str
    """Name of the Secret."""
    key: str
    """Key inside the Secret."""

    def as_dict(self) -> dict[str, Any]:
        """The container `env` entry as plain data (custom resources such as the RayCluster)."""
        return {"name": self.name, "valueFrom": {"secretKeyRef": {"key": self.key, "name": self.secret}}}

    def as_args(self) -> k8s.core.v1.EnvVarArgs:
        """The container `env` entry as typed args (core objects such as the staging Job)."""
        return k8s.core.v1.EnvVarArgs(
            name=self.name,
            value_from=k8s.core.v1.EnvVarSourceArgs(
                secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=self.secret, key=self.key)
            ),
        )


def secret_env(config: StackConfig, *, with_secret_env: bool = True) -> list[SecretEnv]:
    """The pods' secret environment: HF_TOKEN when set, then (unless `with_secret_env` is False)
    every `grpo-gke:secretEnv` name, in name order. The one source for the RayCluster and staging Job."""
    entries = []
    if config.hf_token is not None:
        entries.append(SecretEnv("HF_TOKEN", names.HF_TOKEN_SECRET, names.HF_TOKEN_SECRET_KEY))
    if with_secret_env:
        entries += [SecretEnv(name, names.SECRET_ENV_SECRET, name) for name in sorted(config.secret_env)]
    return entries


@dataclass(frozen=True)
class IdentityArgs:
    """Inputs of the Identity component."""

    token: pulumi.Output[str] | None
    """The Hugging Face token as a secret Output, or None for public models."""
    secret_env: Mapping[str, pulumi.Output[str]]
    """`grpo-gke:secretEnv` as secret Outputs by variable name (empty: no Secret)."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist first: the cluster."""


class Identity(pulumi.ComponentResource):
    """Namespace, service account and the optional token and secretEnv Secrets."""

    namespace: k8s.core.v1.Namespace
    service_account: k8s.core.v1.ServiceAccount
    token_secret: k8s.core.v1.Secret | None
    secret_env_secret: k8s.core.v1.Secret | None

    def __init__(self, name: str, args: IdentityArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:Identity", name, None, opts)
        self.namespace = k8s.core.v1.Namespace(
            names.NAMESPACE,
            render_namespace(),
            opts=names.fixed_name_options(parent=self, provider=args.provider, depends_on=list(args.depends_on)),
        )
        in_namespace = names.fixed_name_options(parent=self, provider=args.provider, depends_on=[self.namespace])
        self.service_account = k8s.core.v1.ServiceAccount(
            names.RAY_SERVICE_ACCOUNT, render_service_account(), opts=in_namespace
        )
        self.token_secret = None
        if args.token is not None:
            self.token_secret = k8s.core.v1.Secret(
                names.HF_TOKEN_SECRET, render_token_secret(pulumi.Output.secret(args.token)), opts=in_namespace
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
                "secretEnvNames": sorted(args.secret_env),
            }
        )
