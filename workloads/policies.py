"""NetworkPolicies of the stack's namespace: nothing gets in unless it is the RayCluster's own, the run
guardian or the API server's service proxy.

A Ray job is arbitrary code, so whoever reaches the head's GCS (6379), client (10001) or dashboard /
Jobs API (8265) runs commands with the workers' GPUs, data and credentials. GKE enforces
networking.k8s.io/v1 NetworkPolicy with Dataplane V2 (Standard: the cluster's ADVANCED_DATAPATH;
Autopilot: always on), so three policies close the namespace:

- default deny: no pod of the namespace admits ingress that another policy does not allow (the staging
  Job needs none: it only downloads);
- the RayCluster's pods (`ray.io/cluster`) admit each other on every port: besides the head's fixed
  ports Ray listens on random ones (node manager, object manager, runtime env agent, metrics, worker
  range; RAY_PORTS), and Gloo (eth0) and NCCL's bootstrap sockets run over the pod network too;
- the head's dashboard port admits the run guardian (names.GUARDIAN_LABELS) and the konnectivity agents
  through which GKE's control plane reaches pods (the API server's service proxy, jobs/submit/access.py).

What they do not cover: egress (pods reach the Hugging Face Hub, PyPI, Cloud Storage and the metadata
server freely); traffic from the node itself (Kubernetes always admits it, e.g. kubelet probes);
hostNetwork pods (the gIB installer); and NCCL's data path, which runs over the gVNIC and RDMA
interfaces (eth1 .. eth9) that GKE attaches outside the pod network, where only the VPCs' firewalls apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.networking.v1.NetworkPolicy import NetworkPolicyInitArgs

from core import names
from core.facts.pods import (
    KONNECTIVITY_AGENT_LABELS,
    KONNECTIVITY_AGENT_NAMESPACE,
    KUBERAY_CLUSTER_LABEL,
    KUBERAY_NODE_TYPE_LABEL,
)
from core.resource_options import fixed_name_options
from workloads.identity import LABELS

DEFAULT_DENY = "default-deny-ingress"
"""Policy selecting every pod of the namespace, with no ingress rule."""
RAY_INTERNAL = "ray-cluster-internal"
"""Policy letting the RayCluster's pods reach each other on every port."""
HEAD_DASHBOARD = "ray-head-dashboard"
"""Policy opening the head's dashboard port to the run guardian and the API server's service proxy."""

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
"""Label the API server sets on every namespace to its name (Kubernetes >= 1.22)."""


def ray_pod_labels() -> dict[str, str]:
    """Labels KubeRay puts on every pod of the stack's RayCluster."""
    return {KUBERAY_CLUSTER_LABEL: names.RAY_CLUSTER}


def ray_head_labels() -> dict[str, str]:
    """Labels KubeRay puts on the stack's head pod."""
    return {**ray_pod_labels(), KUBERAY_NODE_TYPE_LABEL: "head"}


def _metadata(name: str) -> k8s.meta.v1.ObjectMetaArgs:
    return k8s.meta.v1.ObjectMetaArgs(name=name, namespace=names.NAMESPACE, labels=dict(LABELS))


def render_default_deny() -> NetworkPolicyInitArgs:
    """Every pod of the namespace refuses ingress that no other policy admits."""
    return NetworkPolicyInitArgs(
        metadata=_metadata(DEFAULT_DENY),
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(), policy_types=["Ingress"]
        ),
    )


def render_ray_internal() -> NetworkPolicyInitArgs:
    """The RayCluster's pods admit each other (same namespace) on every port."""
    ray_pods = k8s.meta.v1.LabelSelectorArgs(match_labels=ray_pod_labels())
    return NetworkPolicyInitArgs(
        metadata=_metadata(RAY_INTERNAL),
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=ray_pods,
            policy_types=["Ingress"],
            ingress=[
                k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=[k8s.networking.v1.NetworkPolicyPeerArgs(pod_selector=ray_pods)]
                )
            ],
        ),
    )


def render_head_dashboard() -> NetworkPolicyInitArgs:
    """The head's dashboard port admits the run guardian and GKE's konnectivity agents (service proxy)."""
    guardian = k8s.networking.v1.NetworkPolicyPeerArgs(
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(names.GUARDIAN_LABELS))
    )
    service_proxy = k8s.networking.v1.NetworkPolicyPeerArgs(
        namespace_selector=k8s.meta.v1.LabelSelectorArgs(
            match_labels={NAMESPACE_NAME_LABEL: KONNECTIVITY_AGENT_NAMESPACE}
        ),
        pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(KONNECTIVITY_AGENT_LABELS)),
    )
    return NetworkPolicyInitArgs(
        metadata=_metadata(HEAD_DASHBOARD),
        spec=k8s.networking.v1.NetworkPolicySpecArgs(
            pod_selector=k8s.meta.v1.LabelSelectorArgs(match_labels=ray_head_labels()),
            policy_types=["Ingress"],
            ingress=[
                k8s.networking.v1.NetworkPolicyIngressRuleArgs(
                    from_=[guardian, service_proxy],
                    ports=[k8s.networking.v1.NetworkPolicyPortArgs(port=names.RAY_DASHBOARD_PORT, protocol="TCP")],
                )
            ],
        ),
    )


def render_policies() -> list[NetworkPolicyInitArgs]:
    """The namespace's three NetworkPolicies: default deny, Ray internal, head dashboard."""
    return [render_default_deny(), render_ray_internal(), render_head_dashboard()]


@dataclass(frozen=True)
class NetworkPoliciesArgs:
    """Inputs of the NetworkPolicies component."""

    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    namespace: pulumi.Resource
    """The namespace the policies close."""


class NetworkPolicies(pulumi.ComponentResource):
    """The namespace's NetworkPolicies; the RayCluster and the staging Job wait for them."""

    policies: list[k8s.networking.v1.NetworkPolicy]

    def __init__(self, name: str, args: NetworkPoliciesArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:NetworkPolicies", name, None, opts)
        self.policies = [
            k8s.networking.v1.NetworkPolicy(
                policy.metadata.name,
                policy,
                opts=fixed_name_options(parent=self, provider=args.provider, depends_on=[args.namespace]),
            )
            for policy in render_policies()
        ]
        self.register_outputs({"policies": [policy.metadata.name for policy in render_policies()]})
