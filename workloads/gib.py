"""The NCCL gIB (GPUDirect RDMA) installer DaemonSet, as typed objects with a pinned image.

A field-for-field rendering of CEA `gpudirect-rdma/nccl-rdma-installer.yaml` (Standard) and
`nccl-rdma-installer-autopilot.yaml` (Autopilot) at 992db81 (gcp-infrastructure.md A.1, A.2), so a
deploy never fetches whatever `master` holds that day.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apps.v1.DaemonSet import DaemonSetInitArgs
from pulumi_kubernetes.core.v1.Namespace import NamespaceInitArgs

from core.facts.platform import GPU_MACHINES
from core.facts.pods import (
    GIB_HOST_DIR,
    GIB_INSTALL_ARGS,
    GIB_INSTALLER_IMAGE,
    GIB_INSTALLER_NAMESPACE,
    NVIDIA_HOST_DIR,
    PAUSE_IMAGE,
)
from core.resource_options import fixed_name_options

NAME = "nccl-rdma-installer"
"""DaemonSet name and `k8s-app` label (CEA)."""

_LIBRARY_MOUNT = "/usr/local/home/kubernetes/bin/nvidia/lib64"
_GIB_MOUNT = "/usr/local/home/kubernetes/bin/gib"


def installer_script(mode: str) -> str:
    """The init container's shell script: install, then copy gIB onto the node. Byte for byte CEA's
    `args` entry, a YAML `|` block, so it ends with a newline: Autopilot refuses privileged hostPath
    pods that do not match an allowlisted workload (user-pains §1 E.18), so nothing is reworded."""
    lines = [
        "set -ex",
        f"/scripts/container_entry.sh {' '.join(GIB_INSTALL_ARGS[mode])}",
        f"cp -r /var/lib/gib/lib64/. {_LIBRARY_MOUNT}",
        f"cp -r /var/lib/gib/. {_GIB_MOUNT}",
        'echo "installation finishes"',
    ]
    return "".join(f"{line}\n" for line in lines)


def render_namespace(mode: str) -> NamespaceInitArgs | None:
    """Autopilot's installer namespace (`rdma-system`); None on Standard (kube-system exists)."""
    if mode != "autopilot":
        return None
    namespace = GIB_INSTALLER_NAMESPACE[mode]
    return NamespaceInitArgs(metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace, labels={"name": namespace}))


def render_daemonset(mode: str) -> DaemonSetInitArgs:
    """The installer DaemonSet of one cluster mode, on the nodes of the GPUs whose machines have RDMA NICs."""
    labels = {"k8s-app": NAME}
    accelerators = sorted(machine.accelerator for machine in GPU_MACHINES.values() if machine.rdma)
    affinity = k8s.core.v1.AffinityArgs(
        node_affinity=k8s.core.v1.NodeAffinityArgs(
            required_during_scheduling_ignored_during_execution=k8s.core.v1.NodeSelectorArgs(
                node_selector_terms=[
                    k8s.core.v1.NodeSelectorTermArgs(
                        match_expressions=[
                            k8s.core.v1.NodeSelectorRequirementArgs(
                                key="cloud.google.com/gke-accelerator", operator="In", values=accelerators
                            )
                        ]
                    )
                ]
            )
        )
    )
    installer = k8s.core.v1.ContainerArgs(
        name=NAME,
        image=GIB_INSTALLER_IMAGE,
        resources=k8s.core.v1.ResourceRequirementsArgs(requests={"cpu": "150m"}),
        security_context=k8s.core.v1.SecurityContextArgs(privileged=True),
        volume_mounts=[
            k8s.core.v1.VolumeMountArgs(name="library-dir-host", mount_path=_LIBRARY_MOUNT),
            k8s.core.v1.VolumeMountArgs(name="gib", mount_path=_GIB_MOUNT),
        ],
        command=["/bin/sh", "-c"],
        args=[installer_script(mode)],
    )
    pod = k8s.core.v1.PodSpecArgs(
        priority_class_name="system-node-critical" if mode == "standard" else None,
        affinity=affinity,
        tolerations=[k8s.core.v1.TolerationArgs(operator="Exists")],
        host_network=True,
        host_pid=True,
        volumes=[
            k8s.core.v1.VolumeArgs(
                name="library-dir-host",
                host_path=k8s.core.v1.HostPathVolumeSourceArgs(
                    path=f"{NVIDIA_HOST_DIR}/lib64", type="DirectoryOrCreate"
                ),
            ),
            k8s.core.v1.VolumeArgs(name="gib", host_path=k8s.core.v1.HostPathVolumeSourceArgs(path=GIB_HOST_DIR)),
        ],
        init_containers=[installer],
        containers=[k8s.core.v1.ContainerArgs(name="pause", image=PAUSE_IMAGE)],
    )
    return DaemonSetInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=GIB_INSTALLER_NAMESPACE[mode], labels=dict(labels)),
        spec=k8s.apps.v1.DaemonSetSpecArgs(
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(labels)),
            update_strategy=k8s.apps.v1.DaemonSetUpdateStrategyArgs(type="RollingUpdate"),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels={"name": NAME, **labels}),
                spec=pod,
            ),
        ),
    )


@dataclass(frozen=True)
class GibInstallerArgs:
    """Inputs of the GibInstaller component."""

    mode: str
    """Cluster mode: `standard` or `autopilot`."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """What must exist first: the cluster."""


class GibInstaller(pulumi.ComponentResource):
    """The gIB installer DaemonSet (and, on Autopilot, its namespace)."""

    namespace: k8s.core.v1.Namespace | None
    daemonset: k8s.apps.v1.DaemonSet

    def __init__(self, name: str, args: GibInstallerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:GibInstaller", name, None, opts)
        depends_on = list(args.depends_on)
        namespace_args = render_namespace(args.mode)
        self.namespace = None
        if namespace_args is not None:
            self.namespace = k8s.core.v1.Namespace(
                GIB_INSTALLER_NAMESPACE[args.mode],
                namespace_args,
                opts=fixed_name_options(parent=self, provider=args.provider, depends_on=depends_on),
            )
            depends_on = [self.namespace]
        self.daemonset = k8s.apps.v1.DaemonSet(
            NAME,
            render_daemonset(args.mode),
            opts=fixed_name_options(parent=self, provider=args.provider, depends_on=depends_on),
        )
        self.register_outputs({"namespace": GIB_INSTALLER_NAMESPACE[args.mode]})
