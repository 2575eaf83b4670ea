"""Every platform fact the stack relies on, in one place, each with its source.

Sources are tagged as in ../shared/reference/gcp-infrastructure.md and jobs-and-frameworks.md:
CT = GoogleCloudPlatform/cluster-toolkit @1047080, CEA = container-engine-accelerators @992db81,
KES = kubernetes-engine-samples @2b50365, DOC-AIH = the AI Hypercomputer GKE docs,
DOC-LUS = the Managed Lustre docs, NRL = NVIDIA-NeMo/RL tags, VERL = verl-project/verl.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

GpuType = Literal["b200", "h200"]
ClusterMode = Literal["standard", "autopilot"]
Framework = Literal["verl", "nemo-rl"]
Dataset = Literal["gsm8k", "deepscaler"]

GPUS_PER_NODE = 8
"""Both A4 and A3 Ultra carry eight GPUs and eight RDMA NICs (CT machine_mappings.json)."""

RDMA_SUBNET_COUNT = 8
"""One RDMA subnet per GPU NIC (CT gpu-rdma-vpc `subnetworks_template.count: 8`)."""

MAX_MTU = 8896
"""MTU of the gVNIC and RDMA VPCs (CT vpc and gpu-rdma-vpc defaults; RDMA profile default)."""


@dataclass(frozen=True)
class GkeVersion:
    """A full GKE version such as 1.32.2-gke.1475000, ordered numerically."""

    major: int
    minor: int
    patch: int
    gke: int

    PATTERN = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")

    @classmethod
    def parse(cls, text: str) -> "GkeVersion":
        """Parse `1.32.2-gke.1475000`; raise ValueError on any other form."""
        match = cls.PATTERN.match(text)
        if not match:
            raise ValueError(f"must be a full GKE version such as 1.32.2-gke.1475000, got {text!r}")
        return cls(*(int(part) for part in match.groups()))

    def key(self) -> tuple[int, int, int, int]:
        """The version as a sortable tuple."""
        return (self.major, self.minor, self.patch, self.gke)

    def __str__(self) -> str:
        return f"{self.major}.{self.minor}.{self.patch}-gke.{self.gke}"


@dataclass(frozen=True)
class GpuMachine:
    """What differs between the B200 (A4) and H200 (A3 Ultra) node shapes."""

    machine_type: str
    accelerator: str
    vcpus: int
    memory_gib: int
    boot_disk_type: str | None
    local_ssd_count: int
    nccl_tuner_config: str
    rdma_floor: dict[str, str]
    default_driver_from: str


GPU_MACHINES: dict[str, GpuMachine] = {
    "b200": GpuMachine(
        # CT examples/gke-a4/gke-a4.yaml; machine_mappings.json
        machine_type="a4-highgpu-8g",
        accelerator="nvidia-b200",
        # Compute Engine A4 spec: 224 vCPU, 3,968 GB (gcp-infrastructure.md §3, not independently verified)
        vcpus=224,
        memory_gib=3968,
        boot_disk_type=None,
        # CT gke-node-pool/disk_definitions.tf
        local_ssd_count=32,
        # KES runtime-env.yaml; DOC-VERL
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a4.txtpb",
        # DOC-AIH: GPUDirect RDMA on A4 needs 1.32.2-gke.1475000 (Autopilot GPUs alone: 1.32.2-gke.1422000)
        rdma_floor={"standard": "1.32.2-gke.1475000", "autopilot": "1.32.2-gke.1475000"},
        # DOC-AIH: R570 is the default driver from 1.32.1-gke.1729000
        default_driver_from="1.32.1-gke.1729000",
    ),
    "h200": GpuMachine(
        # CT examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml
        machine_type="a3-ultragpu-8g",
        accelerator="nvidia-h200-141gb",
        # 224 vCPU, 2,952 GB = about 2,749 GiB (gcp-infrastructure.md §3 and §6 item 22)
        vcpus=224,
        memory_gib=2749,
        # DOC-AIH: A3 Ultra boot disks must be hyperdisk-balanced
        boot_disk_type="hyperdisk-balanced",
        local_ssd_count=32,
        # CT a3-ultragpu-8g nemo-framework Dockerfile; DOC-VERL
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a3u.txtpb",
        # DOC-AIH and the GKE Autopilot GPU doc: 1.31.4-gke.1183000 for both modes
        rdma_floor={"standard": "1.31.4-gke.1183000", "autopilot": "1.31.4-gke.1183000"},
        # DOC-AIH: R550 default from 1.31.5-gke.1169000; older 1.31 versions need LATEST
        default_driver_from="1.31.5-gke.1169000",
    ),
}

RAY_OPERATOR_FLOOR = "1.29.8-gke.1054000"
"""The GKE Ray operator add-on needs this version (gcp-infrastructure.md §1 row 8)."""

LUSTRE_CSI_FLOOR = "1.33.2-gke.1111000"
"""The Managed Lustre CSI driver needs this version (gcp-infrastructure.md §4, DOC-LUS)."""

LUSTRE_DEFAULT_PORT_FLOOR = "1.33.2-gke.4655000"
"""From this version nodes reach Lustre on tcp 988; below it the legacy port 6988 with
`gke_support_enabled` (gcp-infrastructure.md §4, CT managed-lustre/README.md)."""

FLEX_START_FLOOR = "1.32.2-gke.1652000"
"""Flex-start node pools need this version (CT gke-node-pool preconditions, DOC-AIH)."""

LUSTRE_PORT = 988
LUSTRE_LEGACY_PORT = 6988


@dataclass(frozen=True)
class LustreTier:
    """Capacity rules of one Managed Lustre throughput tier (MB/s per TiB)."""

    min_gib: int
    step_gib: int


LUSTRE_TIERS: dict[int, LustreTier] = {
    # DOC-LUS create-instance / increase-capacity (gcp-infrastructure.md §4): in the lower band the
    # step equals the tier minimum. The tier is immutable after creation.
    1000: LustreTier(min_gib=9000, step_gib=9000),
    500: LustreTier(min_gib=18000, step_gib=18000),
    250: LustreTier(min_gib=36000, step_gib=36000),
    125: LustreTier(min_gib=72000, step_gib=72000),
}

LUSTRE_PEERING_PREFIX_MAX = 22
"""Private service access range for Lustre: /22 (CT #5306 changed 24 to 22)."""

HEAD_MIN_VCPUS = 16
"""The Ray head asks for 12 CPUs and 32 GB, so its node needs at least 16 vCPUs
(c2-standard-16; c2-standard-8 cannot hold it; KES ray-cluster-standard.yaml)."""


@dataclass(frozen=True)
class FrameworkImage:
    """A pinned default workload image and the facts that must match it."""

    image: str
    ray_version: str
    release: str


VERL_VERSION = "0.9.1"
"""The verl release the staging Job installs and the validation composes against (PyPI verl 0.9.1)."""

DEFAULT_IMAGES: dict[str, FrameworkImage] = {
    # jobs-and-frameworks.md B.3/B.6: no verl image carries verl; vllm024 matches verl 0.9.1's vllm
    # extra (vLLM 0.24.0, torch 2.11.0, Python 3.12). The Ray version inside is set in workloads.
    "verl": FrameworkImage(image="verlai/verl:vllm024.dev2", ray_version="2.49.2", release=VERL_VERSION),
    # jobs-and-frameworks.md B.5: the v0.7.0 image's Ray is its uv.lock pin, 2.55.1.
    "nemo-rl": FrameworkImage(image="nvcr.io/nvidia/nemo-rl:v0.7.0", ray_version="2.55.1", release="v0.7.0"),
}

NEMO_RL_RELEASES = ("v0.4.0", "v0.5.0", "v0.6.0", "v0.7.0")
"""NeMo-RL releases whose entry script and override keys the job layer knows (NRL tags)."""

SUPPORTED_PAIRS: dict[str, tuple[str, ...]] = {
    # The staging Job turns GSM8K into verl's parquet rows; NeMo-RL loads DeepScaler itself
    # from the Hub into HF_HOME on the shared storage (jobs-and-frameworks.md §1, §2).
    "verl": ("gsm8k",),
    "nemo-rl": ("deepscaler",),
}

# ---------------------------------------------------------------- Google Cloud graph (infra issue 3)

BASE_SERVICES = (
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "storage.googleapis.com",
)
"""APIs every stack needs: GKE, VPCs, buckets, and the project-number lookup
(gcp-infrastructure.md §1 row 1; CT validator `test_apis_enabled`; `projects.get` is a
Cloud Resource Manager call)."""

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

LUSTRE_FILESYSTEM_MAX = 8
"""A Lustre filesystem name has at most 8 alphanumeric characters (DOC-LUS; CT managed-lustre)."""

FLEX_START_LOCATION_POLICY = "ANY"
"""Flex-start pools autoscale (location policy ANY) from 0 nodes, without a static node count,
auto-repair, spot or reservations (CT modules/compute/gke-node-pool/main.tf: autoscaling block and
the enable_flex_start preconditions; CT gke-consumption-options Option 4)."""
