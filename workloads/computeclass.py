"""The GPU ComputeClass of a capacity ladder (`gpu.capacity`, Standard): its priorities name one GPU pool per
rung in the ladder's order, so that GKE's cluster autoscaler tries the rungs in that order. Pure renderer,
thin component. Facts and sources: core/facts/capacity.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from core import names
from core.config.model import StackConfig
from core.facts.capacity import (
    COMPUTE_CLASS_API_VERSION,
    COMPUTE_CLASS_KIND,
    NEVER_MIGRATE,
    NO_AUTO_CREATION,
    WHEN_UNSATISFIABLE,
)
from core.resource_options import fixed_name_options


def render_compute_class(config: StackConfig) -> dict[str, Any]:
    """The whole ComputeClass: one `nodepools` priority per rung (a nodepools entry holds nothing else,
    core/facts/capacity.py NODEPOOLS_PRIORITY_ALONE), no auto-created pools, no migration of running pods."""
    pools = [names.gpu_pool_name(config.gpu.provisioning, rung) for rung in config.gpu.ladder]
    return {
        "apiVersion": COMPUTE_CLASS_API_VERSION,
        "kind": COMPUTE_CLASS_KIND,
        "metadata": {"name": names.GPU_COMPUTE_CLASS},
        "spec": {
            "priorities": [{"nodepools": [pool]} for pool in pools],
            "nodePoolAutoCreation": {"enabled": NO_AUTO_CREATION},
            "activeMigration": {"optimizeRulePriority": NEVER_MIGRATE},
            "whenUnsatisfiable": WHEN_UNSATISFIABLE,
        },
    }


@dataclass(frozen=True)
class GpuComputeClassArgs:
    """Inputs of the GpuComputeClass component."""

    config: StackConfig
    """The stack config (with `gpu.capacity`)."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """The cluster and the GPU pools the class names."""


class GpuComputeClass(pulumi.ComponentResource):
    """The cluster-scoped ComputeClass the GPU workers select; a changed ladder updates it in place."""

    compute_class: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: GpuComputeClassArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:GpuComputeClass", name, None, opts)
        manifest = render_compute_class(args.config)
        self.compute_class = k8s.apiextensions.CustomResource(
            names.GPU_COMPUTE_CLASS,
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=k8s.meta.v1.ObjectMetaArgs(**manifest["metadata"]),
            spec=manifest["spec"],
            opts=fixed_name_options(parent=self, provider=args.provider, depends_on=list(args.depends_on)),
        )
        self.register_outputs({"name": names.GPU_COMPUTE_CLASS})
