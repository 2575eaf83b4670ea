"""Access to the cluster for the in-cluster objects: a Kubernetes provider built from the cluster's
outputs, authenticating through gke-gcloud-auth-plugin."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import yaml

from core.facts.gcp import GKE_AUTH_PLUGIN, GKE_AUTH_PLUGIN_API
from core.names import gcloud_context_name


def cluster_identifier(project: str, location: str, cluster: str) -> str:
    """The Kubernetes provider's identity: the cluster's resource path, free of its endpoint and CA."""
    return f"projects/{project}/locations/{location}/clusters/{cluster}"


def gke_kubeconfig(name: str, endpoint: str, ca_cert: str | None) -> str:
    """A kubeconfig for cluster `name` whose user runs gke-gcloud-auth-plugin (no stored credential).

    `ca_cert` None: the DNS endpoint, whose certificate the system's roots verify, as
    `gcloud container clusters get-credentials --dns-endpoint` writes it."""
    server: dict[str, str] = {"server": f"https://{endpoint}"}
    if ca_cert is not None:
        server["certificate-authority-data"] = ca_cert
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": server}],
        "users": [
            {
                "name": name,
                "user": {
                    "exec": {
                        "apiVersion": GKE_AUTH_PLUGIN_API,
                        "command": GKE_AUTH_PLUGIN,
                        "installHint": f"Install {GKE_AUTH_PLUGIN}: gcloud components install {GKE_AUTH_PLUGIN}",
                        "provideClusterInfo": True,
                    }
                },
            }
        ],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "current-context": name,
    }
    return yaml.safe_dump(document, sort_keys=True)


@dataclass(frozen=True)
class KubernetesAccessArgs:
    """Inputs of the KubernetesAccess component."""

    project: str
    """Project of the cluster (part of the kubeconfig context name)."""
    cluster: gcp.container.Cluster
    """The cluster to reach."""
    ready: Sequence[pulumi.Resource]
    """What the provider waits for: the cluster, its NAT and, on Standard, the head pool (not the GPU pool)."""
    dns_endpoint: bool = False
    """Reach the API server through the cluster's DNS endpoint instead of its IP endpoint."""


class KubernetesAccess(pulumi.ComponentResource):
    """The kubeconfig (secret) and the Kubernetes provider of the cluster."""

    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: KubernetesAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:KubernetesAccess", name, None, opts)
        cluster = args.cluster
        context = pulumi.Output.all(cluster.location, cluster.name).apply(
            lambda parts: gcloud_context_name(args.project, *parts)
        )
        if args.dns_endpoint:
            server = cluster.control_plane_endpoints_config.apply(lambda config: config.dns_endpoint_config.endpoint)
            authority: pulumi.Input[str | None] = None
        else:
            server, authority = cluster.endpoint, cluster.master_auth.cluster_ca_certificate
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(context, server, authority).apply(lambda parts: gke_kubeconfig(*parts))
        )
        # Without an identifier the provider replaces itself, and every object and the running job with
        # it, whenever the kubeconfig's server or CA changes (a credential or IP rotation); with one, only
        # a change of the identifier does (pulumi-kubernetes provider.go DiffConfig). Taken from the
        # cluster's outputs, it is unknown while the cluster is being replaced, so that replacement still
        # replaces the provider and the objects that lived in the old cluster.
        identity = pulumi.Output.all(cluster.project, cluster.location, cluster.name).apply(
            lambda parts: cluster_identifier(*parts)
        )
        self.provider = k8s.Provider(
            name,
            k8s.ProviderArgs(kubeconfig=self.kubeconfig, cluster_identifier=identity, enable_server_side_apply=True),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(args.ready)),
        )
        self.register_outputs({})
