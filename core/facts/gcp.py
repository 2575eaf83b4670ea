"""Facts of the Google Cloud graph: services, network profile, workload identity, node pool settings.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

from dataclasses import dataclass

BASE_SERVICES = (
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "iam.googleapis.com",
    "monitoring.googleapis.com",
    "storage.googleapis.com",
)
"""APIs every stack needs: GKE, VPCs, buckets, the project-number lookup
(gcp-infrastructure.md §1 row 1; CT validator `test_apis_enabled`; `projects.get` is a
Cloud Resource Manager call), the nodes' own service account (serviceAccounts.create is an IAM API call) and
the run's Cloud Monitoring dashboard (projects.dashboards is a Cloud Monitoring API call)."""

LUSTRE_SERVICES = ("lustre.googleapis.com", "servicenetworking.googleapis.com")
"""APIs the Managed Lustre path adds (gcp-infrastructure.md §1 row 1; DD scripts)."""

RDMA_NETWORK_PROFILE = "projects/{project}/global/networkProfiles/{zone}-vpc-roce"
"""The RoCE network profile is zonal (DOC-RDMA; CT gke-a4.yaml uses `$(vars.zone)-vpc-roce`);
the tutorial's `<region>-vpc-roce` is wrong (gcp-infrastructure.md §6 item 3)."""

WORKLOAD_POOL = "{project}.svc.id.goog"
"""The GKE workload identity pool of a project (DOC-FUSE; gcp-infrastructure.md §6 item 9)."""

WORKLOAD_PRINCIPAL = (
    "principal://iam.googleapis.com/projects/{number}/locations/global/workloadIdentityPools/"
    "{project}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
)
"""IAM principal of a Kubernetes service account under workload identity federation
(DOC-VERL; gcp-infrastructure.md §1 row 12)."""

GOOGLE_ACCOUNT_ANNOTATION = "iam.gke.io/gcp-service-account"
"""The Kubernetes service account annotation that links it to a Google service account: its pods get that account's
tokens from the GKE metadata server (GKE "Authenticate to Google Cloud APIs from GKE workloads",
kubernetes-engine/docs/how-to/workload-identity, "Alternative: link Kubernetes ServiceAccounts to IAM"; Google's page
was not readable here, its steps read 2026-12-02 in the copies at adaptive-enforcement-lab.com/secure/cloud-native/
workload-identity/service-account-binding and spring-gcp.saturnism.me/deployment/kubernetes/workload-identity)."""

SERVICE_ACCOUNT_EMAIL = "{account_id}@{project}.iam.gserviceaccount.com"
"""A user-managed service account's email, known before it exists (IAM "Create service accounts": the email is
derived from the account id and the project id), so a manifest can name it without waiting for it."""

WORKLOAD_IDENTITY_USER_ROLE = "roles/iam.workloadIdentityUser"
"""The role on a Google service account that lets a linked Kubernetes service account act as it (same sources as
GOOGLE_ACCOUNT_ANNOTATION)."""

WORKLOAD_KSA_MEMBER = "serviceAccount:{project}.svc.id.goog[{namespace}/{ksa}]"
"""The IAM member of a Kubernetes service account in a WORKLOAD_IDENTITY_USER_ROLE grant (same sources); the pool
exists once the cluster with workload identity does, so the grant waits for the cluster."""

PARK_PERMISSIONS = ("lustre.instances.exportData", "lustre.operations.get", "lustre.operations.list")
"""What the guardian's parking calls need on Managed Lustre: exportData (`POST {instance}:exportData`), the
Operation's reads, and the list of the operations that finds an export still running to pick it up
(incluster/lustre_transfer.py RestTransfers._start). Only roles/lustre.admin holds exportData among the predefined
roles, with delete and create too (cloud.google.com/iam/docs/roles-permissions/lustre, read 2026-12-01), so the
guardian gets a custom role of these alone."""

BUCKET_OBJECT_ROLE = "roles/storage.objectUser"
"""Role of the Ray pods on the bucket (DOC-VERL; gcp-infrastructure.md §1 row 12)."""

LUSTRE_SERVICE_AGENT = "service-{number}@gcp-sa-lustre.iam.gserviceaccount.com"
"""The Managed Lustre service agent, made when the project's first instance is created; it moves the data of
exportData and importData (managed-lustre/docs/transfer-data, "Permissions for the Managed Lustre service agent",
read 2026-12-02)."""

LUSTRE_TRANSFER_ROLE = "roles/storage.objectUser"
"""The role the Lustre service agent needs on a bucket to transfer both ways (roles/storage.objectViewer only
imports; managed-lustre/docs/transfer-data, "Grant permissions", read 2026-12-02)."""

LUSTRE_API = "https://lustre.googleapis.com/v1"
"""Managed Lustre's REST endpoint: `POST {name}:exportData` and `:importData` answer a long-running Operation,
read with `GET {operation name}` (managed-lustre/docs/reference/rest/v1/projects.locations.instances/exportData,
importData; projects.locations.operations/get; read 2026-12-02)."""

STORAGE_API = "https://storage.googleapis.com/storage/v1"
"""Cloud Storage's JSON API: objects.list, objects.get with `alt=media`; uploads under
`https://storage.googleapis.com/upload/storage/v1` (cloud.google.com/storage/docs/json_api/v1/objects)."""

STORAGE_UPLOAD_API = "https://storage.googleapis.com/upload/storage/v1"
"""Cloud Storage's JSON API for uploads (`uploadType=media`; storage/docs/json_api/v1/objects/insert)."""

GPU_TAINT_KEY = "nvidia.com/gpu"
"""Taint of GPU nodes that the Ray workers tolerate (KES ray-cluster-*.yaml; K8 in
gcp-infrastructure.md §2)."""

NODE_IMAGE_TYPE = "COS_CONTAINERD"
"""GPUDirect RDMA needs Container-Optimized OS nodes (DOC-AIH-CUSTOM; §1 row 10)."""

CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
"""OAuth scope of the node VMs; access is then narrowed by IAM (GKE default for new pools)."""

GKE_AUTH_PLUGIN = "gke-gcloud-auth-plugin"
"""kubectl exec credential plugin for GKE (pulumi-python-sdk.md §3, "Provider from a GKE cluster")."""

GKE_AUTH_PLUGIN_API = "client.authentication.k8s.io/v1beta1"
"""ExecCredential API version of the plugin's user entry, as `gcloud container clusters get-credentials`
writes it (GKE docs, "Install kubectl and configure cluster access")."""

GCLOUD_TOKEN_LIFETIME_SECONDS = 3600.0
"""How long a Google access token from `gcloud auth print-access-token` lasts: "The default access token lifetime is
3600 seconds" (cloud.google.com/sdk/gcloud/reference/auth/print-access-token, --lifetime, read 2026-12-02)."""

GCLOUD_NOT_LOGGED_IN = ("You do not currently have an active account selected",)
"""What gcloud (and the auth plugin, which runs it) prints on stderr when no account is logged in,
in a multi-line message that the plugin ends with a lone `)` after the `gcloud auth login` advice
(kubernetes/kubernetes#23496, GoogleCloudPlatform/cloud-ops-sandbox#168, kubernetes/cloud-provider-gcp#554)."""

RESERVATION_AFFINITY_KEY = "compute.googleapis.com/reservation-name"
"""Label key naming a specific reservation in a node pool's reservation affinity (CT gke-node-pool
`reservation_resource_api_label`; GKE docs, "Consuming reserved zonal resources")."""

COMPACT_PLACEMENT = "COMPACT"
"""The GPU pool's placement_policy type when it has 2 or more nodes on on-demand or Spot capacity. Google's
AI Hypercomputer placement guide (ai-hypercomputer/docs/placement-policy-and-workload-policy, read
2026-12-01): capacity of one reservation (capacity blocks, calendar mode) is already densely colocated;
otherwise, to place A4 / A3 Ultra machines close together, apply a compact placement policy (best effort
without a max distance). CT's gke-a4 / gke-a3-ultragpu pools consume a reservation and set none
(examples/gke-a4/gke-a4.yaml `a4-pool`); its gke-node-pool module takes `placement_policy.type = COMPACT`
(variables.tf). Flex-start capacity is left to GKE (colocated on a best-effort basis, same guide).
Autopilot: GKE's compact placement for pods (how-to/compact-placement) covers A100, L4 and H100 only, so
neither B200 nor H200 pods get one there."""

COMPACT_PLACEMENT_MAX_NODES = 150
"""Most VMs one compact placement policy holds (Compute Engine define-instance-placement, restrictions of
compact policies; GKE Standard node pools apply one policy per pool); gpu.nodes (at most 64) stays below it."""


# ---------------------------------------------------------------- images: the registries and image streaming
# Where the workload images come from and how GKE pulls them: the upstream registries an Artifact
# Registry remote repository can proxy, and image streaming. Sources are tagged as in core/facts/__init__.py.
#
# DOC-ARR = Artifact Registry "Create remote repositories" (docs.cloud.google.com/artifact-registry/docs/
# repositories/remote-repo, read 2026-12-01): a remote repository proxies Docker Hub among its preset sources
# and caches each version on its first request, serving the cached copy afterwards; user-defined (custom)
# upstreams for the supported formats. DOC-IS = GKE "Use Image streaming to pull container images"
# (docs.cloud.google.com/kubernetes-engine/docs/how-to/image-streaming, read 2026-12-01). DOC-ARG = Artifact
# Registry "Deploy to Google Kubernetes Engine" (cloud.google.com/artifact-registry/docs/integrate-gke, read
# 2026-12-01). PGCP = pulumi-gcp 10.2.0 pulumi_gcp/artifactregistry/_inputs.py (installed). DOC-ARA = Artifact
# Registry "Configure remote repository authentication to upstream sources" (docs.cloud.google.com/
# artifact-registry/docs/repositories/configure-remote-authentication, read 2026-12-02). DOC-ARSA = Artifact
# Registry "Artifact Registry Service Agent" (docs.cloud.google.com/artifact-registry/docs/ar-service-account,
# read 2026-12-02). DOC-NGC = NGC "API Keys" (org.ngc.nvidia.com/setup/api-keys, read 2026-12-02).

DOCKER_HUB_HOST = "docker.io"
"""The registry a Docker reference without a registry host names (Docker's reference grammar)."""

DOCKER_HUB_OFFICIAL_NAMESPACE = "library"
"""Docker Hub's namespace of a one-component name such as `ubuntu` (docker.io/library/ubuntu)."""


@dataclass(frozen=True)
class Upstream:
    """An upstream registry that a remote repository proxies, and how the repository names it."""

    key: str
    """Short name in the repository's id: `<cluster>-<key>`."""
    public_repository: str | None
    """A preset source (`docker_repository.public_repository`), or None for a custom upstream."""
    uri: str | None
    """The custom upstream's address (`common_repository.uri`), or None for a preset source."""
    api_key_username: str | None = None
    """The username that goes with an API key as the upstream's password, where the stack can hand the
    repository one (`upstream_credentials.username_password_credentials`); None: the stack takes no credentials."""


UPSTREAMS: dict[str, Upstream] = {
    # DOC-ARR: Docker Hub is a preset source; PGCP RepositoryRemoteRepositoryConfigDockerRepositoryArgs
    # public_repository ("DOCKER_HUB").
    DOCKER_HUB_HOST: Upstream(key="dockerhub", public_repository="DOCKER_HUB", uri=None),
    # DOC-ARR: any other registry is a user-defined upstream. PGCP: docker_repository.custom_repository is
    # "[Deprecated, please use commonRepository instead]"; RepositoryRemoteRepositoryConfigCommonRepositoryArgs.uri
    # takes "URI to the registry, e.g. https://registry-1.docker.io".
    # DOC-NGC: "For the username, enter '$oauthtoken' exactly as shown. It is a special authentication key for all
    # users" (docker login nvcr.io, Password: <Your Key>).
    "nvcr.io": Upstream(key="nvcr", public_repository=None, uri="https://nvcr.io", api_key_username="$oauthtoken"),
}
"""Registry host of an image -> the remote repository that proxies it (`workload.imageSource: registry`)."""

ARTIFACT_REGISTRY_HOST_SUFFIX = "-docker.pkg.dev"
"""Host of an Artifact Registry Docker repository: `<location>-docker.pkg.dev` (DOC-ARG `kubectl run
--image=LOCATION-docker.pkg.dev/PROJECT-ID/REPOSITORY/IMAGE`)."""

ARTIFACT_REGISTRY_READER_ROLE = "roles/artifactregistry.reader"
"""The role that lets the nodes' service account pull from a repository (DOC-ARG "Permissions")."""

CONTAINER_FILESYSTEM_SERVICE = "containerfilesystem.googleapis.com"
"""The Container File System API, which image streaming needs enabled (DOC-IS "Requirements")."""

ARTIFACT_REGISTRY_SERVICE = "artifactregistry.googleapis.com"
"""The Artifact Registry API, which creating a repository needs (DOC-ARR "Before you begin")."""

STREAMING_SOURCES = "standard or remote repositories in Artifact Registry, or public registries on Docker Hub"
"""Images GKE streams. DOC-IS "Requirements" as its zh-cn copy (docs.cloud.google.com/kubernetes-engine/docs/how-to/
image-streaming?hl=zh-cn) reads on 2026-12-07: "您的容器映像必须存储在 Artifact Registry 中的标准制品库或远程制品库中,
或者存储在 Docker Hub 上的公共注册表中" (translated: your images must be stored in standard or remote repositories in
Artifact Registry, or in public registries on Docker Hub; the English page's sentence itself was not read that day,
and the page read on 2026-12-01 named Artifact Registry alone). So an image pulled from nvcr.io directly is pulled
whole; a public Docker Hub image may stream pulled directly too, which this stack does not rely on (it turns
streaming on for the pools only with `workload.imageSource: registry`, the default for Docker Hub and nvcr.io images:
core/config/model.py resolved_image_source). The zh-cn copy read again on 2026-12-07 for issue 33 item 4 says the
same, and adds that with private nodes the subnet needs Private Google Access (the stack's node subnet has it,
infra/network.py)."""

STREAMING_CONSUMER_ROLE = "roles/serviceusage.serviceUsageConsumer"
"""The role a custom node service account needs for image streaming, on the project of the images: DOC-IS
"Requirements" as its zh-cn copy reads on 2026-12-07: "如果集群中的 GKE 节点不使用默认服务账号,您必须确保自定义服务账号在
托管容器映像的项目中具有 Service Usage Consumer (roles/serviceusage.serviceUsageConsumer) IAM 角色" (translated: if the
cluster's nodes do not use the default service account, the custom account must hold Service Usage Consumer on the
project that hosts the images; the English sentence itself not read). The claim that a custom node account needs it
is so confirmed. The stack's nodes run as its own account (infra/identity.py) and its remote repositories are in
the stack's project, so it grants this role there with `workload.imageSource: registry` (infra/registry.py; read
again on 2026-12-07 for issue 33 item 4, unchanged). What
GKE does without it is not said on the page (assumed: an ordinary whole pull, as for the images the page's
"Limitations" call ineligible, of which its zh-cn copy says "GKE 下载这些映像,但不流式传输数据", GKE downloads them
without streaming)."""

STREAMING_NODE_IMAGE = "COS_CONTAINERD"
"""The node image image streaming needs (DOC-IS "Requirements": Container-Optimized OS with containerd;
"Autopilot nodes always use this node image")."""

AUTOPILOT_STREAMS_BY_ITSELF = True
"""Autopilot clusters use image streaming for eligible images by themselves (DOC-IS: "Autopilot clusters
automatically use Image streaming to pull eligible images. The instructions on this page about enabling and
disabling image streaming apply to Standard clusters", read again 2026-12-07; an earlier text of the page: "New
Autopilot clusters that run GKE version 1.25.5-gke.1000 and later automatically use Image streaming to pull
eligible images"); Standard enables it per cluster or pool with the
GCFS setting (PGCP container ClusterNodePoolDefaultsNodeConfigDefaultsGcfsConfigArgs: "enable image
streaming across all the node pools within the cluster"; NodePoolNodeConfigGcfsConfigArgs per pool)."""

SECRET_VERSION_PATTERN = (
    r"projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9]|[0-9]{1,20})/secrets/(?P<secret>[A-Za-z0-9_-]{1,255})"
    r"/versions/(?P<version>[1-9][0-9]{0,19})"
)
"""A Secret Manager secret version's resource name, as a remote repository's `password_secret_version` takes it
(PGCP RepositoryRemoteRepositoryConfigUpstreamCredentialsUsernamePasswordCredentialsArgs: "Must be in the format of
`projects/{project}/secrets/{secret}/versions/{version}`"; the project by id or number; Secret Manager's secret
ids are letters, digits, _ and -, at most 255, and its versions are numbered from 1). The `latest` alias is not
taken: neither DOC-ARA nor PGCP says Artifact Registry resolves it."""

SECRET_ACCESSOR_ROLE = "roles/secretmanager.secretAccessor"
"""The role Artifact Registry's service agent needs on the secret holding an upstream's password (DOC-ARA "Grant
the Artifact Registry service account access to your secret": the Secret Manager Secret Accessor role)."""

ARTIFACT_REGISTRY_SERVICE_AGENT = "serviceAccount:service-{number}@gcp-sa-artifactregistry.iam.gserviceaccount.com"
"""Artifact Registry's service agent of the project with this number, which reads an upstream's password (DOC-ARA,
DOC-ARSA: "service-PROJECT-NUMBER@gcp-sa-artifactregistry.iam.gserviceaccount.com", the number of the project
where Artifact Registry is running). DOC-ARSA: Artifact Registry creates it "when you create the first Artifact
Registry repository in a Google Cloud project"."""
