"""What the workloads hand to the job layer."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class WorkloadOutputs:
    """Handles on the in-cluster objects a GRPO job runs on."""

    ray_cluster: k8s.apiextensions.CustomResource
    """The KubeRay RayCluster; ready (all pods up) once Pulumi has created it."""
    staging_job: k8s.batch.v1.Job
    """The staging Job; complete (model and data on the shared storage) once Pulumi has created it."""
    data_claim: k8s.core.v1.PersistentVolumeClaim
    """The shared storage's claim, mounted at core.names.DATA_MOUNT in every pod."""
    token_secret: k8s.core.v1.Secret | None
    """The Hugging Face token Secret, or None when grpo-gke:hfToken is unset."""
