"""Facts of the Google Cloud graph: services, network profile, workload identity, node pool settings.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

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

BUCKET_OBJECT_ROLE = "roles/storage.objectUser"
"""Role of the Ray pods on the bucket (DOC-VERL; gcp-infrastructure.md §1 row 12)."""

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
