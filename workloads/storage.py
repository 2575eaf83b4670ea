"""The shared storage as a static PersistentVolume and the claim bound to it by name.

gcs: `gcsfuse.csi.storage.gke.io`, handle = bucket, the tutorial's tuned mount options (K5).
lustre: `lustre.csi.storage.gke.io`, handle `<project>/<zone>/<instance>`, `ip` and `filesystem` (K6).
Both `Retain`: deleting the claim never touches the data (the drivers do not delete buckets or instances).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1.PersistentVolume import PersistentVolumeInitArgs
from pulumi_kubernetes.core.v1.PersistentVolumeClaim import PersistentVolumeClaimInitArgs

from core import names
from core.config.model import StackConfig
from core.facts.pods import (
    GCSFUSE_MOUNT_OPTIONS,
    GCSFUSE_POD_ANNOTATION,
    GCSFUSE_SIDECAR_ANNOTATIONS,
    GCSFUSE_VOLUME_ATTRIBUTES,
)
from core.resource_options import fixed_name_options
from infra.outputs import GcsStorage, LustreStorage, StorageHandOff
from workloads.identity import LABELS

GCS_NOMINAL_CAPACITY = "64Ti"
"""Capacity written on the bucket's PV; Cloud Storage has no size, Kubernetes needs one."""

CLAIM_REQUEST = "1Gi"
"""What the claim asks for: it binds to its volume by name, and any request up to the volume's capacity
binds. Kept fixed because the API server refuses to resize a claim that no StorageClass provisioned,
so a claim tracking the Lustre capacity would fail `up` once the instance grows."""

ACCESS_MODES = ["ReadWriteMany"]
"""Every Ray pod and the staging Job mount the same volume."""


def capacity(storage: StorageHandOff) -> str:
    """Capacity of the PV: the Lustre size, or a nominal size for a bucket."""
    if isinstance(storage, LustreStorage):
        return f"{storage.capacity_gib}Gi"
    return GCS_NOMINAL_CAPACITY


def lustre_ip(mount_point: str) -> str:
    """The address part of a Lustre mount point `<ip>@tcp:/<fs>`."""
    return mount_point.split("@", 1)[0]


def _map(value: pulumi.Input[str], function: Callable[[str], str]) -> pulumi.Input[str]:
    """`function` of a plain value now, or of an Output once it resolves."""
    return function(value) if isinstance(value, str) else pulumi.Output.from_input(value).apply(function)


def _csi(config: StackConfig, storage: StorageHandOff) -> k8s.core.v1.CSIPersistentVolumeSourceArgs:
    if isinstance(storage, GcsStorage):
        return k8s.core.v1.CSIPersistentVolumeSourceArgs(
            driver="gcsfuse.csi.storage.gke.io",
            volume_handle=storage.bucket_name,
            volume_attributes=dict(GCSFUSE_VOLUME_ATTRIBUTES),
        )
    return k8s.core.v1.CSIPersistentVolumeSourceArgs(
        driver="lustre.csi.storage.gke.io",
        volume_handle=_map(storage.instance_id, lambda instance: f"{config.project}/{config.zone}/{instance}"),
        volume_attributes={"filesystem": storage.filesystem, "ip": _map(storage.mount_point, lustre_ip)},
    )


def render_volume(config: StackConfig, storage: StorageHandOff) -> PersistentVolumeInitArgs:
    """The static PersistentVolume, reserved for the claim by `claimRef`."""
    return PersistentVolumeInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.DATA_CLAIM, labels=dict(LABELS)),
        spec=k8s.core.v1.PersistentVolumeSpecArgs(
            access_modes=list(ACCESS_MODES),
            capacity={"storage": capacity(storage)},
            claim_ref=k8s.core.v1.ObjectReferenceArgs(namespace=names.NAMESPACE, name=names.DATA_CLAIM),
            csi=_csi(config, storage),
            mount_options=list(GCSFUSE_MOUNT_OPTIONS) if isinstance(storage, GcsStorage) else None,
            persistent_volume_reclaim_policy="Retain",
            storage_class_name="",
        ),
    )


def render_claim() -> PersistentVolumeClaimInitArgs:
    """The claim bound to the PersistentVolume by name (no StorageClass, no dynamic provisioning)."""
    return PersistentVolumeClaimInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=names.DATA_CLAIM, namespace=names.NAMESPACE, labels=dict(LABELS)),
        spec=k8s.core.v1.PersistentVolumeClaimSpecArgs(
            access_modes=list(ACCESS_MODES),
            resources=k8s.core.v1.VolumeResourceRequirementsArgs(requests={"storage": CLAIM_REQUEST}),
            storage_class_name="",
            volume_name=names.DATA_CLAIM,
        ),
    )


def pod_annotations(config: StackConfig, gpu_node: bool = False) -> dict[str, str]:
    """Annotations a pod mounting the storage needs (gcs): GKE injects the GCS FUSE sidecar, whose
    resource limits are lifted on Standard and, on Autopilot, raised on the GPU nodes' local SSDs
    (Autopilot's CPU capacity and a GPU machine without local SSDs, the L4's, keep the defaults)."""
    if config.storage.type != "gcs":
        return {}
    annotations = {GCSFUSE_POD_ANNOTATION: "true"}
    if config.cluster.mode == "standard" or (gpu_node and config.gpu_machine.local_ssd_count):
        annotations.update(GCSFUSE_SIDECAR_ANNOTATIONS[config.cluster.mode])
    return dict(sorted(annotations.items()))


@dataclass(frozen=True)
class SharedStorageArgs:
    """Inputs of the SharedStorage component."""

    config: StackConfig
    """The stack config."""
    storage: StorageHandOff
    """The bucket or Lustre instance, as the infrastructure created it."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    namespace: pulumi.Resource
    """The namespace of the claim."""
    depends_on: Sequence[pulumi.Resource]
    """What the volume waits for: the bucket grant or the Lustre instance."""


class SharedStorage(pulumi.ComponentResource):
    """The PersistentVolume and its claim."""

    volume: k8s.core.v1.PersistentVolume
    claim: k8s.core.v1.PersistentVolumeClaim

    def __init__(self, name: str, args: SharedStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:SharedStorage", name, None, opts)
        self.volume = k8s.core.v1.PersistentVolume(
            f"{names.DATA_CLAIM}-volume",
            render_volume(args.config, args.storage),
            opts=fixed_name_options(parent=self, provider=args.provider, depends_on=list(args.depends_on)),
        )
        self.claim = k8s.core.v1.PersistentVolumeClaim(
            names.DATA_CLAIM,
            render_claim(),
            opts=fixed_name_options(parent=self, provider=args.provider, depends_on=[self.volume, args.namespace]),
        )
        self.register_outputs({"claim": names.DATA_CLAIM, "type": args.config.storage.type})
