"""The GPU pools' managed instance groups, each to its pool's rung, as a ConfigMap in the namespace (Standard only:
on Autopilot GKE makes the GPU nodes, in no pool of ours). The cluster autoscaler's events name a pool by its MIG,
whose name GKE shortens for long cluster and pool names (incluster/capacity_events.py), so the readiness gate, the
guardian and `status` look the MIG up here instead of reading the rung from its name.

The map comes from the pools' `instanceGroupUrls` (infra/nodepools.py), known only once a pool exists: it is kept
out of everything whose change rolls or replaces something else. The guardian mounts the whole ConfigMap (no
subPath) and re-reads the file each time it asks which rung is tried, so a pool's new groups reach the running pod
without a roll: "When a ConfigMap currently consumed in a volume is updated, projected keys are eventually updated
as well. The kubelet checks whether the mounted ConfigMap is fresh on every periodic sync", within the kubelet's
sync period plus its ConfigMap cache's TTL, and "A container using a ConfigMap as a subPath volume mount will not
receive ConfigMap updates" (kubernetes.io/docs/concepts/configuration/configmap/, "Mounted ConfigMaps are updated
automatically", as kubernetes/website commit e50dba3 and janus-idp/operator#125 quote it, read 2026-12-07).
Pure renderer, thin component."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.core.v1.ConfigMap import ConfigMapInitArgs

from core import names
from core.resource_options import fixed_name_options
from workloads.identity import LABELS


def groups_text(groups: Mapping[str, str]) -> str:
    """The ConfigMap's one file: MIG name to rung, sorted, one trailing newline (the same groups, the same bytes)."""
    return json.dumps(dict(sorted(groups.items())), indent=2) + "\n"


def render_instance_groups(text: pulumi.Input[str]) -> ConfigMapInitArgs:
    """The ConfigMap names.GPU_INSTANCE_GROUPS_CONFIG_MAP holding `text` (groups_text) as its one file."""
    return ConfigMapInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=names.GPU_INSTANCE_GROUPS_CONFIG_MAP, namespace=names.NAMESPACE, labels=dict(LABELS)
        ),
        data={names.GPU_INSTANCE_GROUPS_FILE: text},
    )


@dataclass(frozen=True)
class InstanceGroupsArgs:
    """Inputs of the InstanceGroups component."""

    groups: pulumi.Input[Mapping[str, str]]
    """The GPU pools' MIGs by name, each to its rung (infra/outputs.py InfraOutputs.gpu_instance_groups)."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """The namespace."""


class InstanceGroups(pulumi.ComponentResource):
    """The ConfigMap of the GPU pools' MIGs; a replaced, added or removed pool updates it in place."""

    config_map: k8s.core.v1.ConfigMap

    def __init__(self, name: str, args: InstanceGroupsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:InstanceGroups", name, None, opts)
        text = pulumi.Output.from_input(args.groups).apply(groups_text)
        self.config_map = k8s.core.v1.ConfigMap(
            names.GPU_INSTANCE_GROUPS_CONFIG_MAP,
            render_instance_groups(text),
            opts=fixed_name_options(parent=self, provider=args.provider, depends_on=list(args.depends_on)),
        )
        self.register_outputs({})
