"""The pieces every pod of the stack shares (Ray head, GPU workers, staging Job), one place for each, as the
KubeRay chart's common block is for its head and workers.

Each piece is a pure function returning plain data in the Kubernetes API's form (camelCase keys): the
RayCluster, a custom kind, takes it as it is. The typed objects (the staging Job) build their Args from the
same data through the small adapters at the end, which read exactly the fields the pieces have, so the two
renderings cannot drift apart.
"""

from __future__ import annotations

from typing import Any

import pulumi_kubernetes as k8s

from core import names
from core.config.model import StackConfig
from workloads import paths

DATA_VOLUME = "data"
"""Name of the shared storage's volume in every pod."""


def data_volume() -> dict[str, Any]:
    """The pod volume of the shared storage's claim."""
    return {"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": names.DATA_CLAIM}}


def data_mount() -> dict[str, Any]:
    """The shared storage mounted at core.names.DATA_MOUNT."""
    return {"mountPath": names.DATA_MOUNT, "name": DATA_VOLUME}


def hf_home_env() -> dict[str, Any]:
    """HF_HOME on the shared storage, so every pod reads the Hugging Face cache the staging Job filled."""
    return {"name": "HF_HOME", "value": paths.hf_home()}


def secret_env(config: StackConfig, *, with_secret_env: bool = True) -> list[dict[str, Any]]:
    """The pods' secret environment, each variable read from its Secret by `secretKeyRef`: HF_TOKEN when set,
    then (unless `with_secret_env` is False, the staging Job) WANDB_API_KEY when `grpo-gke:wandbApiKey` is set
    and every `grpo-gke:secretEnv` name, in name order."""
    hf = [] if config.hf_token is None else [_secret_ref("HF_TOKEN", names.HF_TOKEN_SECRET, names.HF_TOKEN_SECRET_KEY)]
    if not with_secret_env:
        return hf
    named = [_secret_ref(name, names.SECRET_ENV_SECRET, name) for name in sorted(config.secret_env)]
    return hf + wandb_key_env(config) + named


def _secret_ref(name: str, secret: str, key: str) -> dict[str, Any]:
    """Env variable `name` read from key `key` of Secret `secret`."""
    return {"name": name, "valueFrom": {"secretKeyRef": {"key": key, "name": secret}}}


def wandb_key_env(config: StackConfig) -> list[dict[str, Any]]:
    """WANDB_API_KEY read from the W&B key's Secret by `secretKeyRef` when `grpo-gke:wandbApiKey` is set (the trainer's
    pods and the guardian's, which writes the projected end into the W&B run summary), else nothing."""
    if config.wandb_api_key is None:
        return []
    return [_secret_ref("WANDB_API_KEY", names.WANDB_SECRET, names.WANDB_SECRET_KEY)]


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


def claim_volume_args(volume: dict[str, Any]) -> k8s.core.v1.VolumeArgs:
    """A claim's volume piece (`data_volume`) as typed Args."""
    return k8s.core.v1.VolumeArgs(
        name=volume["name"],
        persistent_volume_claim=k8s.core.v1.PersistentVolumeClaimVolumeSourceArgs(
            claim_name=volume["persistentVolumeClaim"]["claimName"]
        ),
    )


def volume_mount_args(mount: dict[str, Any]) -> k8s.core.v1.VolumeMountArgs:
    """A mount piece (`data_mount`) as typed Args."""
    return k8s.core.v1.VolumeMountArgs(name=mount["name"], mount_path=mount["mountPath"])


def env_var_args(entry: dict[str, Any]) -> k8s.core.v1.EnvVarArgs:
    """An env piece, a plain value (`hf_home_env`) or a Secret's key (`secret_env`), as typed Args."""
    if "valueFrom" not in entry:
        return k8s.core.v1.EnvVarArgs(name=entry["name"], value=entry["value"])
    ref = entry["valueFrom"]["secretKeyRef"]
    return k8s.core.v1.EnvVarArgs(
        name=entry["name"],
        value_from=k8s.core.v1.EnvVarSourceArgs(
            secret_key_ref=k8s.core.v1.SecretKeySelectorArgs(name=ref["name"], key=ref["key"])
        ),
    )


def security_context_args(context: dict[str, Any]) -> k8s.core.v1.SecurityContextArgs:
    """The securityContext piece (`container_security_context`) as typed Args."""
    return k8s.core.v1.SecurityContextArgs(
        allow_privilege_escalation=context["allowPrivilegeEscalation"],
        capabilities=k8s.core.v1.CapabilitiesArgs(drop=context["capabilities"]["drop"]),
        privileged=context["privileged"],
        seccomp_profile=k8s.core.v1.SeccompProfileArgs(type=context["seccompProfile"]["type"]),
    )
