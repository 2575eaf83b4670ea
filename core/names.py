"""Names shared by the infrastructure graph, the workloads and the job layer.

The bucket grant of the infrastructure graph names the Kubernetes service account that the
workloads create; the dashboard command names the RayCluster's head service. Both sides read
these constants so the two can never disagree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.facts.gcp import (
    ARTIFACT_REGISTRY_HOST_SUFFIX,
    DOCKER_HUB_HOST,
    DOCKER_HUB_OFFICIAL_NAMESPACE,
    SERVICE_ACCOUNT_EMAIL,
    UPSTREAMS,
)
from core.facts.platform import RDMA_SUBNET_COUNT
from core.facts.pods import RAY_PORTS
from core.facts.privilege import CUSTOM_ROLE_ID_MAX, LUSTRE_FILESYSTEM_MAX, SERVICE_ACCOUNT_ID_MAX

NAMESPACE = "grpo"
"""Namespace of the RayCluster, its service account, the storage claim and the staging Job."""

RAY_SERVICE_ACCOUNT = "ray-grpo"
"""Kubernetes service account of the Ray pods, granted the bucket through workload identity."""

RAY_CLUSTER = "grpo"
"""Name of the KubeRay RayCluster."""

RAY_API_VERSION = "ray.io/v1"
"""KubeRay API version of the RayCluster."""

RAY_WORKER_GROUP = "gpu"
"""Name of the RayCluster's single (GPU) worker group."""

GUARDIAN_OWNED_FIELDS = ("replicas",)
"""The field of the GPU worker group the run guardian sets to scale the workers to zero (0) and back
(WORKER_REPLICAS) (incluster/scaling.py), and the one field a later `pulumi up` ignores (workloads/raycluster.py).
KubeRay keeps replicas held between minReplicas and maxReplicas (GetWorkerGroupDesiredReplicas,
ray-operator/controllers/ray/utils/util.go L389-407, v1.7.0); the stack renders minReplicas 0 and maxReplicas
gpu.nodes, so this one field decides. Here, without Pulumi, for the in-cluster guardian."""

WORKER_REPLICAS = 64
"""The GPU worker group's `replicas` whenever the workers are up, whatever gpu.nodes is: at least the largest
gpu.nodes the config allows, so KubeRay holds it to maxReplicas = gpu.nodes (GetWorkerGroupDesiredReplicas
L401-402, v1.7.0: replicas above maxReplicas gives maxReplicas; validation.go L134-136 refuses only minReplicas
above maxReplicas). Not a node count, so the value the engine keeps for the ignored field on a replacement
(processIgnoreChanges) fits any new gpu.nodes, smaller or larger (issue 19 item 5)."""

RAY_HEAD_SERVICE = f"{RAY_CLUSTER}-head-svc"
"""Service KubeRay creates for the head (`<raycluster>-head-svc`)."""

RAY_DASHBOARD_PORT = RAY_PORTS["dashboard"]
"""Ray dashboard and Jobs API port on the head."""

GUARDIAN_LABELS = {"app.kubernetes.io/name": "grpo-guardian"}
"""Pod labels of the run guardian (a future pod in NAMESPACE): the one pod of the namespace outside the
RayCluster that the head's dashboard port admits (workloads/policies.py)."""

GUARDIAN = "grpo-guardian"
"""Name of the run guardian's Deployment, Kubernetes service account, Role and RoleBinding in NAMESPACE."""

GUARDIAN_NODES_ROLE = "grpo-guardian-nodes"
"""Name of the guardian's ClusterRole and ClusterRoleBinding (the nodes are cluster-scoped)."""

GUARDIAN_SETTINGS_CONFIG_MAP = "grpo-guardian-settings"
"""ConfigMap of the guardian's settings JSON."""

GUARDIAN_CODE_CONFIG_MAP = "grpo-guardian-code"
"""ConfigMap of the guardian's code files."""

GUARDIAN_SETTINGS_DIR = "/etc/grpo-gke/guardian"
"""Where the guardian's settings ConfigMap is mounted (`settings.json` in it)."""

GUARDIAN_CODE_DIR = "/opt/grpo-gke"
"""Where the guardian's code ConfigMap is mounted: its PYTHONPATH."""

GPU_INSTANCE_GROUPS_CONFIG_MAP = "grpo-gpu-instance-groups"
"""ConfigMap in NAMESPACE (Standard only) naming each GPU pool's managed instance groups, each to its pool's rung, from
the pools' `instanceGroupUrls` (workloads/instance_groups.py): read at run time by the readiness gate, the guardian
and `status`, so that a pool's new groups reach them without rolling anything."""

GPU_INSTANCE_GROUPS_FILE = "groups.json"
"""The one key of GPU_INSTANCE_GROUPS_CONFIG_MAP: a JSON object, MIG name to rung."""

GPU_INSTANCE_GROUPS_DIR = "/etc/grpo-gke/instance-groups"
"""Where the guardian mounts GPU_INSTANCE_GROUPS_CONFIG_MAP (the whole ConfigMap, no subPath, so the kubelet brings
a changed one into the running pod)."""

HEAD_NODE_POOL = "ray-head"
"""Standard: the CPU node pool of the Ray head (node selector `cloud.google.com/gke-nodepool`)."""

HF_TOKEN_SECRET = "hf-token"
"""Secret holding the Hugging Face token, when one is configured."""

HF_TOKEN_SECRET_KEY = "token"
"""Key of the token inside HF_TOKEN_SECRET."""

WANDB_SECRET = "grpo-wandb"
"""Secret holding `grpo-gke:wandbApiKey`, when one is configured."""

WANDB_SECRET_KEY = "api-key"
"""Key of the W&B API key inside WANDB_SECRET."""

SECRET_ENV_SECRET = "grpo-secret-env"
"""Secret holding `grpo-gke:secretEnv`, one key per environment variable name, when any is configured."""

DATA_CLAIM = "grpo-data"
"""PersistentVolumeClaim (and PersistentVolume) of the shared storage."""

DATA_MOUNT = "/data"
"""Where every pod mounts the shared storage."""

GVNIC_NETWORK = "gvnic-1"
"""GKE Network object of the gVNIC VPC (CT k8s_network_names: gvnic- from 1)."""

RDMA_NETWORKS = tuple(f"rdma-{index}" for index in range(RDMA_SUBNET_COUNT))
"""GKE Network objects of the eight RDMA subnets (CT k8s_network_names: rdma- from 0)."""


NODE_SERVICE_ACCOUNT_SUFFIX = "-node-sa"
"""Suffix of the nodes' Google service account id (`<cluster>-node-sa`)."""


GPU_NODE_POOL = "gpu"
"""Name of the GPU node pool."""

GPU_COMPUTE_CLASS = "grpo-gpu-ladder"
"""Name of the ComputeClass whose priorities name the GPU pools of `gpu.capacity`, one per rung."""


def gpu_pool_name(provisioning: str, rung: str) -> str:
    """The GPU pool of one rung: today's name (`gpu`) for the rung of `gpu.provisioning`, `gpu-<rung>` for the others."""
    return GPU_NODE_POOL if rung == provisioning else f"{GPU_NODE_POOL}-{rung}"


@dataclass(frozen=True)
class NetworkNames:
    """Deterministic names of every network resource, derived from the cluster name."""

    cluster_vpc: str
    """The cluster's VPC."""
    node_subnet: str
    """The nodes' subnet."""
    router: str
    """Cloud Router of the NAT."""
    nat: str
    """Cloud NAT of the private nodes."""
    gvnic_vpc: str
    """The gVNIC VPC."""
    gvnic_subnet: str
    """The gVNIC subnet."""
    gvnic_firewall: str
    """Internal firewall rule of the gVNIC VPC."""
    rdma_vpc: str
    """The RDMA VPC."""
    rdma_subnets: tuple[str, ...]
    """The RDMA subnets, 0..7."""


def network_names(prefix: str) -> NetworkNames:
    """Names of the network resources of cluster `prefix` (RDMA subnets `<vpc>-sub-N`, as CT names them)."""
    rdma_vpc = f"{prefix}-rdma"
    return NetworkNames(
        cluster_vpc=f"{prefix}-net",
        node_subnet=f"{prefix}-nodes",
        router=f"{prefix}-router",
        nat=f"{prefix}-nat",
        gvnic_vpc=f"{prefix}-gvnic",
        gvnic_subnet=f"{prefix}-gvnic-sub",
        gvnic_firewall=f"{prefix}-gvnic-internal",
        rdma_vpc=rdma_vpc,
        rdma_subnets=tuple(f"{rdma_vpc}-sub-{index}" for index in range(RDMA_SUBNET_COUNT)),
    )


@dataclass(frozen=True)
class LustreNames:
    """Deterministic names of the Lustre path's resources."""

    instance_id: str
    """Managed Lustre instance id."""
    filesystem: str
    """Lustre filesystem name (at most 8 alphanumerics)."""
    peering_range: str
    """Private service access range."""
    firewall: str
    """Firewall rule letting nodes reach Lustre."""


def lustre_names(prefix: str) -> LustreNames:
    """Names derived from the cluster name; the filesystem is its first 8 alphanumeric characters."""
    return LustreNames(
        instance_id=f"{prefix}-lustre",
        filesystem=re.sub(r"[^a-z0-9]", "", prefix.lower())[:LUSTRE_FILESYSTEM_MAX],
        peering_range=f"{prefix}-lustre-psa",
        firewall=f"{prefix}-lustre-lnet",
    )


RESTORED_RUN = "restored-run"
"""The dynamic resource that imports a parked run back into a recreated Managed Lustre instance (jobs/stack.py)."""

PARK_GUARD = "park-guard"
"""The dynamic resource the Managed Lustre instance's deletion waits on: it refuses while the run is not parked
(jobs/runs/park_guard.py)."""

PARK_PREFIX = "parked/data/"
"""Where parked runs lie in the stack's parked bucket: each park has its own prefix under it, and `/<path>` on Lustre is
`parked/data/<park id>/<path>/` (incluster/park.py)."""

PARK_MARKER = "parked/marker.json"
"""The parked bucket's marker object: `parking`, `parked`, `stale` or `restored`, what was exported into which prefix,
when, at which step (incluster/park.py)."""


def gcloud_context_name(project: str, location: str, cluster: str) -> str:
    """The name `gcloud container clusters get-credentials` gives a cluster's kubeconfig entries."""
    return f"gke_{project}_{location}_{cluster}"


def node_service_account_id(cluster: str) -> str:
    """Account id of the nodes' service account: the cluster name, cut to fit, then `-node-sa`."""
    stem = cluster[: SERVICE_ACCOUNT_ID_MAX - len(NODE_SERVICE_ACCOUNT_SUFFIX)].rstrip("-")
    return f"{stem}{NODE_SERVICE_ACCOUNT_SUFFIX}"


GUARDIAN_ACCOUNT_SUFFIX = "-guardian"
"""Suffix of the Google service account the run guardian acts as to park the run (storage.parkWhenIdle)."""


def guardian_account_id(cluster: str) -> str:
    """Account id of the guardian's Google service account: the cluster name, cut to fit, then `-guardian`."""
    stem = cluster[: SERVICE_ACCOUNT_ID_MAX - len(GUARDIAN_ACCOUNT_SUFFIX)].rstrip("-")
    return f"{stem}{GUARDIAN_ACCOUNT_SUFFIX}"


def service_account_email(account_id: str, project: str) -> str:
    """The email of the user-managed service account `account_id` of `project` (node_service_account_id,
    guardian_account_id)."""
    return SERVICE_ACCOUNT_EMAIL.format(account_id=account_id, project=project)


GUARDIAN_GRANTS = {"park": "-park", "bucket": "-parked-bucket", "link": "-workload-identity"}
"""Suffixes, after the guardian's account id, of its grants' logical names: the park role on the project, the parked
bucket's objects, its Kubernetes service account's link."""

PARK_ROLE_SUFFIX = "-park-role"
"""Suffix of the park role's logical name (`<cluster>-park-role`; its role id is park_role_id)."""

PARK_ROLE_PREFIX = "grpoGkePark"
"""Prefix of the custom role id that lets the guardian export from the stack's Lustre instance."""


def park_role_id(cluster: str, instance_uid: str) -> str:
    """Id of the guardian's park role: `grpoGkePark_<cluster>_<the instance uid's first 12 hex>`, the cluster's
    other characters as `_`, cut to fit. Bound to one instance: a deleted custom role's id cannot be reused for up to
    37 days (pulumi-gcp 10.2.0 projects/iam_custom_role.py L343-348), so a new instance after a destroy or an unpark
    gets a new role rather than the old id."""
    uid = re.sub(r"[^0-9a-f]", "", instance_uid.lower())[:12]
    stem = re.sub(r"[^A-Za-z0-9]", "_", cluster)[: CUSTOM_ROLE_ID_MAX - len(PARK_ROLE_PREFIX) - len(uid) - 2]
    return f"{PARK_ROLE_PREFIX}_{stem}_{uid}"


def get_credentials_command(cluster: str, location: str, project: str, dns_endpoint: bool = False) -> str:
    """The command that writes the cluster's context into the kubeconfig (`gke_<project>_<location>_<cluster>`),
    through the DNS-based control-plane endpoint if asked."""
    endpoint = " --dns-endpoint" if dns_endpoint else ""
    return f"gcloud container clusters get-credentials {cluster} --location {location} --project {project}{endpoint}"


def dashboard_port_forward_command(cluster: str, location: str, project: str, dns_endpoint: bool = False) -> str:
    """The one-line command that forwards the Ray dashboard to localhost:8265 (through the DNS endpoint if asked)."""
    return (
        f"{get_credentials_command(cluster, location, project, dns_endpoint)}"
        f" && kubectl -n {NAMESPACE} port-forward svc/{RAY_HEAD_SERVICE} {RAY_DASHBOARD_PORT}:{RAY_DASHBOARD_PORT}"
    )


@dataclass(frozen=True)
class ImageReference:
    """A Docker image reference split into its registry host and the path and tag (or digest) below it."""

    host: str
    """Registry host: `docker.io` where the reference names none."""
    path: str
    """Repository path below the host, e.g. `verlai/verl` (`library/<name>` for a Docker Hub official image)."""
    suffix: str
    """`:<tag>` or `@<digest>`, as written (empty where the reference has neither)."""


def parse_image(image: str) -> ImageReference:
    """Split `image` as Docker does: a first component with a dot, a colon or `localhost` is the registry host."""
    first, _, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, remainder = first, rest
    else:
        host, remainder = DOCKER_HUB_HOST, image
    digest_at = remainder.find("@")
    if digest_at >= 0:
        path, suffix = remainder[:digest_at], remainder[digest_at:]
    else:
        last_slash = remainder.rfind("/")
        tag_at = remainder.find(":", last_slash + 1)
        path, suffix = (remainder, "") if tag_at < 0 else (remainder[:tag_at], remainder[tag_at:])
    if host == DOCKER_HUB_HOST and "/" not in path:
        path = f"{DOCKER_HUB_OFFICIAL_NAMESPACE}/{path}"
    return ImageReference(host=host, path=path, suffix=suffix)


def is_artifact_registry_host(host: str) -> bool:
    """Whether `host` is an Artifact Registry Docker host, `<location>-docker.pkg.dev`."""
    return host.endswith(ARTIFACT_REGISTRY_HOST_SUFFIX)


def remote_repository_id(cluster: str, upstream_host: str) -> str:
    """Id of the stack's Artifact Registry remote repository proxying `upstream_host`: `<cluster>-<key>`."""
    return f"{cluster}-{UPSTREAMS[upstream_host].key}"


def registry_image(image: str, region: str, project: str, cluster: str) -> str:
    """`image` as pulled through the stack's remote repository: `<region>-docker.pkg.dev/<project>/<repo>/<path><tag>`."""
    reference = parse_image(image)
    repository = remote_repository_id(cluster, reference.host)
    return f"{region}{ARTIFACT_REGISTRY_HOST_SUFFIX}/{project}/{repository}/{reference.path}{reference.suffix}"
