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

BF16_BYTES_PER_PARAMETER = 2
"""Model weights in bf16, as vLLM loads them for rollout: 2 bytes per parameter."""

GPUS_PER_NODE = 8
"""Both A4 and A3 Ultra carry eight GPUs and eight RDMA NICs (CT machine_mappings.json)."""

TENSOR_PARALLEL_SIZES = tuple(size for size in range(1, GPUS_PER_NODE + 1) if GPUS_PER_NODE % size == 0)
"""vLLM tensor parallel sizes that fit one node: the divisors of GPUS_PER_NODE."""

VLLM_HEADROOM_PER_GPU_GB = 10
"""Memory each rollout GPU keeps free of weights inside vLLM's share, for what vLLM takes before the
KV cache. vLLM sizes the KV cache as `total memory x gpu_memory_utilization - peak`, where peak is
the weights plus the profile run's peak activations plus non-torch allocations such as NCCL
(vllm-project/vllm vllm/v1/worker/gpu_worker.py `determine_available_memory` @0012cf6), and refuses
to start when that is not positive ("No available memory for the cache blocks"). Measured on H100
with vLLM V1 (llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md, 1 to 70B models):
peak activations 4.8 to 7.4 GiB, non-torch 0.1 to 0.6 GiB, CUDA graphs at most 0.4 GiB, 8.3 GiB
(8.9 GB) at most together; 10 GB covers that with a little left for the first KV cache blocks.
Used only to derive a default rolloutTensorParallel; an explicit value is checked against the
weights alone."""

MICRO_BATCH_TOKENS_PER_GPU = 16384
"""Tokens one GPU takes per forward or backward pass: verl's own budget,
`ppo_max_token_len_per_gpu: 16384` in verl 0.9.1 trainer/config/actor/actor.yaml, the actor's
default in the composed ppo_trainer (the bound of its dynamic batching). A default
microBatchSizePerGpu holds at most this many tokens of full-length samples
(maxPromptLength + maxResponseLength)."""

RDMA_SUBNET_COUNT = 8
"""One RDMA subnet per GPU NIC (CT gpu-rdma-vpc `subnetworks_template.count: 8`)."""

SUBNET_MAX_PREFIX = 29
"""The smallest IPv4 subnet range Google Cloud accepts is a /29 (VPC docs, "Subnets": IPv4 ranges)."""

SUBNET_RESERVED_ADDRESSES = 4
"""Addresses Google Cloud keeps in every subnet's primary IPv4 range: network, default gateway,
second-to-last and broadcast (VPC docs, "Reserved IPv4 addresses in IPv4 subnets")."""

MAX_MTU = 8896
"""MTU of the gVNIC and RDMA VPCs (CT vpc and gpu-rdma-vpc defaults; RDMA profile default)."""


@dataclass(frozen=True)
class GkeVersion:
    """A full GKE version such as 1.32.2-gke.1475000, ordered numerically."""

    major: int
    """Kubernetes major version."""
    minor: int
    """Kubernetes minor version."""
    patch: int
    """Kubernetes patch version."""
    gke: int
    """GKE build number (the part after `-gke.`)."""

    PATTERN = re.compile(r"^(\d+)\.(\d+)\.(\d+)-gke\.(\d+)$")

    @classmethod
    def parse(cls, text: str) -> "GkeVersion":
        """Parse `1.32.2-gke.1475000`; raise ValueError on any other form."""
        match = cls.PATTERN.fullmatch(text)
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
    """Compute Engine machine type of one 8-GPU node."""
    accelerator: str
    """GKE accelerator name (`cloud.google.com/gke-accelerator`)."""
    vcpus: int
    """vCPUs of the machine."""
    memory_gib: int
    """Memory of the machine in GiB (Compute Engine's machine tables say "GB" and mean GiB)."""
    boot_disk_type: str | None
    """Boot disk type the machine needs, or None for GKE's default."""
    local_ssd_count: int
    """Local SSDs attached to the machine."""
    nccl_tuner_config: str
    """gIB's NCCL tuner file for this GPU, inside GIB_POD_DIR."""
    rdma_floor: dict[str, str]
    """Lowest GKE version with GPUDirect RDMA, per cluster mode."""
    default_driver_from: str
    """GKE version from which the default GPU driver suits this GPU."""
    default_driver_branch: int
    """NVIDIA driver branch GKE's DEFAULT installs on this GPU from `default_driver_from`."""
    gpu_memory_gb: int
    """Memory of one GPU in GB."""


GPU_MACHINES: dict[str, GpuMachine] = {
    "b200": GpuMachine(
        # CT examples/gke-a4/gke-a4.yaml; machine_mappings.json
        machine_type="a4-highgpu-8g",
        accelerator="nvidia-b200",
        # Compute Engine "Accelerator-optimized machine family" (docs.cloud.google.com/compute/docs/
        # accelerator-optimized-machines), A4: 224 vCPU, 3,968 GB. Those GB are binary, as in every machine
        # table: n1-standard-1's 3.75 GB is memoryMb 3840 in the API, g1-small's 1.7 GB is 1740 and
        # f1-micro's 0.6 GB is 614 (machineTypes.list response in gist.github.com/ckelner/6464580;
        # real-engine-semantics.md "Machine types").
        vcpus=224,
        memory_gib=3968,
        boot_disk_type=None,
        # CT gke-node-pool/disk_definitions.tf
        local_ssd_count=32,
        # KES runtime-env.yaml; DOC-VERL
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a4.txtpb",
        # Compute Engine "GPU machine types" (docs.cloud.google.com/compute/docs/gpus): A4, B200, 180 GB HBM3e per GPU
        gpu_memory_gb=180,
        # DOC-AIH: GPUDirect RDMA on A4 needs 1.32.2-gke.1475000 (Autopilot GPUs alone: 1.32.2-gke.1422000)
        rdma_floor={"standard": "1.32.2-gke.1475000", "autopilot": "1.32.2-gke.1475000"},
        # DOC-AIH: R570 is the default driver from 1.32.1-gke.1729000
        default_driver_from="1.32.1-gke.1729000",
        default_driver_branch=570,
    ),
    "h200": GpuMachine(
        # CT examples/gke-a3-ultragpu/gke-a3-ultragpu.yaml
        machine_type="a3-ultragpu-8g",
        accelerator="nvidia-h200-141gb",
        # Same page, A3 Ultra: 224 vCPU, 2,952 GB, binary as above (not the 2,749 GiB of a decimal reading)
        vcpus=224,
        memory_gib=2952,
        # DOC-AIH: A3 Ultra boot disks must be hyperdisk-balanced
        boot_disk_type="hyperdisk-balanced",
        local_ssd_count=32,
        # CT a3-ultragpu-8g nemo-framework Dockerfile; DOC-VERL
        nccl_tuner_config="/usr/local/gib/configs/tuner_config_a3u.txtpb",
        # Compute Engine "GPU machine types": A3 Ultra, H200, 141 GB HBM3e per GPU
        gpu_memory_gb=141,
        # DOC-AIH and the GKE Autopilot GPU doc: 1.31.4-gke.1183000 for both modes
        rdma_floor={"standard": "1.31.4-gke.1183000", "autopilot": "1.31.4-gke.1183000"},
        # DOC-AIH: R550 default from 1.31.5-gke.1169000; older 1.31 versions need LATEST
        default_driver_from="1.31.5-gke.1169000",
        default_driver_branch=550,
    ),
}
"""Node shape of each `gpu.type`."""

RAY_OPERATOR_FLOOR = "1.29.8-gke.1054000"
"""The GKE Ray operator add-on needs this version (gcp-infrastructure.md §1 row 8)."""

LUSTRE_CSI_FLOOR = "1.33.2-gke.1111000"
"""The Managed Lustre CSI driver needs this version (gcp-infrastructure.md §4, DOC-LUS)."""

LUSTRE_DEFAULT_PORT_FLOOR = "1.33.2-gke.4655000"
"""From this version nodes reach Lustre on tcp 988; below it the legacy port 6988 with
`gke_support_enabled` (gcp-infrastructure.md §4, CT managed-lustre/README.md)."""

CUDA_MAJOR_DRIVER_BRANCH: dict[int, int] = {
    # NVIDIA CUDA Toolkit release notes (docs.nvidia.com/cuda/cuda-toolkit-release-notes, "CUDA Driver",
    # the minimum driver for CUDA minor version compatibility): every 12.x runs on >= 525.60.13, every 13.x
    # on >= 580 (13.0 GA names 580.65.06). Below its major's branch an image's CUDA runtime cannot start.
    12: 525,
    13: 580,
}
"""Lowest NVIDIA driver branch that runs any CUDA release of each major."""

LATEST_DRIVER_FLOORS: dict[int, str] = {
    # GKE "Run GPUs in Standard node pools" (docs.cloud.google.com/kubernetes-engine/docs/how-to/gpus,
    # "Install drivers automatically", COS table, as indexed on 2026-10-09, covering 1.26 to 1.33):
    # `LATEST` is R550 on 1.26 to 1.30 and R580 on 1.31, 1.32 and 1.33; later minors carry at least that
    # branch. The table is per minor, so x.y.0-gke.0 stands for the first build of a minor. (DEFAULT there
    # is R535 for most GPUs; A4 and A3 Ultra have their own DEFAULT, GpuMachine.default_driver_branch.)
    550: "1.26.0-gke.0",
    580: "1.31.0-gke.0",
}
"""Driver branch -> lowest GKE version whose `LATEST` GPU driver on COS carries it."""

GPU_DRIVER_NODE_LABEL = "cloud.google.com/gke-gpu-driver-version"
"""Node selector by which an Autopilot pod picks the GPU driver of its node, `default` (also when absent)
or `latest` (GKE docs, "Deploy GPU workloads in Autopilot", how-to/autopilot-gpus: "Select a GPU driver
version"; the same label is ComputeClass field priorities.gpu.driverVersion)."""

FLEX_START_FLOOR = "1.32.2-gke.1652000"
"""Flex-start node pools need this version (CT gke-node-pool preconditions, DOC-AIH)."""

LUSTRE_PORT = 988
"""LNet port of Managed Lustre for GKE nodes at or above LUSTRE_DEFAULT_PORT_FLOOR (gcp-infrastructure.md §1
row 15; CT managed-lustre/README.md)."""

LUSTRE_LEGACY_PORT = 6988
"""LNet port of instances with `gke_support_enabled`, for older nodes (same sources)."""


@dataclass(frozen=True)
class LustreTier:
    """Capacity rules of one Managed Lustre throughput tier (MB/s per TiB)."""

    min_gib: int
    """Smallest capacity of the tier in GiB."""
    step_gib: int
    """Capacity step of the tier in GiB."""


LUSTRE_TIERS: dict[int, LustreTier] = {
    # DOC-LUS create-instance / increase-capacity (gcp-infrastructure.md §4): in the lower band the
    # step equals the tier minimum. The tier is immutable after creation.
    1000: LustreTier(min_gib=9000, step_gib=9000),
    500: LustreTier(min_gib=18000, step_gib=18000),
    250: LustreTier(min_gib=36000, step_gib=36000),
    125: LustreTier(min_gib=72000, step_gib=72000),
}
"""Capacity rules of each Managed Lustre throughput tier (`storage.throughput`)."""

LUSTRE_PEERING_PREFIX_MAX = 22
"""Private service access range for Lustre: /22 (CT #5306 changed 24 to 22)."""

PSA_DELETION_POLICY = "REMOVE_PEERING"
"""`deletion_policy` of the Lustre private service access connection when it is not kept. Deleting a
connection fails with "Producer services ... are still using this connection" while a producer holds it,
even after the Lustre instance is gone (pulumi/pulumi-gcp#3354; hashicorp/terraform-provider-google#16275,
#19908). "ABANDON" leaves the VPC peering, which blocks the network's deletion; "REMOVE_PEERING" deletes
the connection and, when the API refuses, removes the peering so the network can go too. It is meant
for teardown once every instance behind the connection is deleted (pulumi-gcp 10.2.0
`servicenetworking.Connection`, "Deleting a connection"; GoogleCloudPlatform/magic-modules#18476)."""

HEAD_MIN_VCPUS = 16
"""The Ray head asks for 12 CPUs and 32 GB, so its node needs at least 16 vCPUs
(c2-standard-16; c2-standard-8 cannot hold it; KES ray-cluster-standard.yaml)."""

HEAD_MIN_MEMORY_GIB = 48
"""Memory the head's CPU node needs: the head's 32 GiB (HEAD_REQUESTS) and the staging Job's 8 GiB
(STAGING_REQUESTS) still fit in what GKE leaves allocatable on 48 GiB (GKE_MEMORY_RESERVATION keeps
about 4.6 GiB). c2-standard-16 has 64 GiB; a 16-vCPU highcpu type has 16 GiB and cannot hold the head."""

MACHINE_CLASS_GIB_PER_VCPU: dict[str, float] = {
    # Compute Engine predefined machine types: N1 has 0.9 (highcpu), 3.75 (standard) and 6.5 (highmem)
    # GB per vCPU, binary GB (n1-standard-1's 3.75 GB is memoryMb 3840, see GPU_MACHINES); later
    # families (E2, N2, N2D, C2, C3, ...) have at least as much in each class.
    "highcpu": 0.9,
    "standard": 3.75,
    "highmem": 6.5,
}
"""The least memory per vCPU of each predefined machine class, across families, in GiB."""


@dataclass(frozen=True)
class FrameworkImage:
    """A pinned default workload image and the facts that must match it."""

    image: str
    """Container image of the Ray head and workers."""
    ray_version: str
    """Ray version inside the image (the RayCluster's rayVersion)."""
    release: str
    """Framework release inside the image."""
    cuda_version: str | None = None
    """CUDA toolkit the image is built on (`12.8`), or None when unknown (a user image without
    `workload.cudaVersion`)."""
    library_path: tuple[str, ...] = ()
    """The image's own LD_LIBRARY_PATH entries, in order, which the worker keeps after the host driver."""
    own_nccl_dir: str | None = None
    """Directory of an NCCL the image installs on purpose, put before the host driver directory, where
    gIB's NCCL may lie."""


VERL_VERSION = "0.9.1"
"""The verl release the staging Job installs and the validation composes against (PyPI verl 0.9.1)."""

DEFAULT_IMAGES: dict[str, FrameworkImage] = {
    # jobs-and-frameworks.md B.3/B.6: no verl image carries verl; vllm024 matches verl 0.9.1's vllm
    # extra (vLLM 0.24.0, torch 2.11.0, Python 3.12).
    # Ray: NOT read from the image. verl-project/verl docker/Dockerfile.stable.vllm (2cf5706, 2026-07-28,
    # "Target: verlai/verl:vllm024.dev2") pins no Ray; Ray comes unpinned through vllm 0.24.0 and verl
    # v0.7.1's `ray[default]>=2.41.0`, so pip took the newest Ray on the build day, which the repository
    # does not record (B.2). 2.55.1 is a floor estimate: it was on PyPI by 2026-07-29 (NeMo-RL v0.7.0's
    # uv.lock pins it) and nothing in that Dockerfile caps Ray. What KubeRay derives from rayVersion
    # (HTTP health probes from 2.53.0, jobs-and-frameworks.md §4) is the same for any version >= 2.53.0.
    # Check: docker run --rm verlai/verl:vllm024.dev2 python3 -c 'import ray; print(ray.__version__)';
    # a different value goes in with workload.image (same tag) + workload.rayVersion.
    #
    # CUDA and libraries, from the same Dockerfile: `FROM nvidia/cuda:13.0.2-devel-ubuntu24.04`, torch from
    # the cu130 index, and `pip install --no-deps --upgrade "nvidia-nccl-cu13>=2.29.7,<3.0"` ("Override
    # NCCL to >= 2.29.7 for ncclCommSuspend / ncclCommResume", verl#6266), which lands in the Python 3.12
    # dist-packages (the Dockerfile's NVSHMEM path is /usr/local/lib/python3.12/dist-packages/nvidia/...).
    # The Dockerfile sets no LD_LIBRARY_PATH of its own (only an `export` inside one RUN), so the image
    # keeps nvidia/cuda's `/usr/local/nvidia/lib:/usr/local/nvidia/lib64` (NVIDIA container-images/cuda,
    # dist/<version>/ubuntu2404/base/Dockerfile).
    # NCCL order: on Autopilot the gIB installer runs `install --install-nccl`, which copies gIB's NCCL into
    # the host's nvidia/lib64 (gcp-infrastructure.md A.1). torch's cu130 wheel finds pip's NCCL through its
    # own run path, which the loader searches only after LD_LIBRARY_PATH, so with nvidia/lib64 first
    # gIB's older NCCL would be loaded instead (real-engine-semantics.md). The pip NCCL directory therefore
    # comes first: it holds only libnccl, so it shadows no driver library, and the host driver still comes
    # before every other entry. NCCL still finds gIB's net plugin further down the path. On Standard
    # (`install` only) nothing competes there, and the same order serves both modes.
    "verl": FrameworkImage(
        image="verlai/verl:vllm024.dev2",
        ray_version="2.55.1",
        release=VERL_VERSION,
        cuda_version="13.0",
        library_path=("/usr/local/nvidia/lib", "/usr/local/nvidia/lib64"),
        own_nccl_dir="/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib",
    ),
    # jobs-and-frameworks.md B.5: the v0.7.0 image is built with `uv sync --locked`, so its Ray is the
    # tag's uv.lock pin, 2.55.1 (pyproject only says >=2.55.1); NeMo-RL docs/cluster.md: rayVersion must
    # match the project's Ray version.
    #
    # CUDA and libraries: NVIDIA-NeMo/RL docker/Dockerfile at v0.7.0: `BASE_IMAGE=nvcr.io/nvidia/cuda-dl-base:
    # 26.03-cuda13.2-devel-ubuntu24.04`; it prepends the venv's cuDNN (`ENV LD_LIBRARY_PATH=/opt/nemo_rl_venv/
    # lib/python3.13/site-packages/nvidia/cudnn/lib:${LD_LIBRARY_PATH}`) and then the AWS EFA OFI plugin
    # directories (`/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib:${LD_LIBRARY_PATH}`). The base image's own
    # part is not in the repository: NGC images put the CUDA forward-compatibility libraries
    # (/usr/local/cuda/compat/lib) before nvidia/cuda's /usr/local/nvidia/lib{,64} (real-engine-semantics.md,
    # "GPU driver and the image's CUDA"). Not read from the image offline; check with
    # docker run --rm nvcr.io/nvidia/nemo-rl:v0.7.0 printenv LD_LIBRARY_PATH.
    "nemo-rl": FrameworkImage(
        image="nvcr.io/nvidia/nemo-rl:v0.7.0",
        ray_version="2.55.1",
        release="v0.7.0",
        cuda_version="13.2",
        library_path=(
            "/opt/amazon/ofi-nccl/lib",
            "/opt/amazon/efa/lib",
            "/opt/nemo_rl_venv/lib/python3.13/site-packages/nvidia/cudnn/lib",
            "/usr/local/cuda/compat/lib",
            "/usr/local/nvidia/lib",
            "/usr/local/nvidia/lib64",
        ),
    ),
}
"""The pinned workload image of each framework, used unless `workload.image` is set."""

NEMO_RL_RELEASES = ("v0.4.0", "v0.5.0", "v0.6.0", "v0.7.0")
"""NeMo-RL releases whose entry script and override keys the job layer knows (NRL tags)."""

SUPPORTED_PAIRS: dict[str, tuple[str, ...]] = {
    # The staging Job turns GSM8K into verl's parquet rows; NeMo-RL loads DeepScaler itself
    # from the Hub into HF_HOME on the shared storage (jobs-and-frameworks.md §1, §2).
    "verl": ("gsm8k",),
    "nemo-rl": ("deepscaler",),
}
"""The data sets each framework can train on (`workload.dataset`)."""

# ---------------------------------------------------------------- Google Cloud graph (infra issue 3)

BASE_SERVICES = (
    "cloudresourcemanager.googleapis.com",
    "compute.googleapis.com",
    "container.googleapis.com",
    "iam.googleapis.com",
    "storage.googleapis.com",
)
"""APIs every stack needs: GKE, VPCs, buckets, the project-number lookup
(gcp-infrastructure.md §1 row 1; CT validator `test_apis_enabled`; `projects.get` is a
Cloud Resource Manager call) and the nodes' own service account (serviceAccounts.create is an IAM API call)."""

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

# ---------------------------------------------------------------- least privilege (issue 11)

NODE_SERVICE_ACCOUNT_ROLES = ("roles/container.defaultNodeServiceAccount",)
"""Project roles of the nodes' service account, and nothing else: "At a minimum, these node service accounts
must have the Kubernetes Engine Default Node Service Account (roles/container.defaultNodeServiceAccount) role
on your project" (GKE docs, "Create an Autopilot cluster", "Set up IAM service accounts for GKE"; the hardening
guide's "Use least privilege IAM service accounts"; CIS GKE Benchmark v2.0.0 5.2.1: "the least privilege role
intended for GKE nodes", read 2026-12-01). The predefined role replaces the older hand-picked set (below); the
images the stack pulls are public (us-docker.pkg.dev/gce-ai-infra, nvcr.io, docker.io, gke.gcr.io), so no
Artifact Registry reader is granted: a private `workload.image` in Artifact Registry needs
roles/artifactregistry.reader added by hand. Workloads reach Google APIs through workload identity only."""

NODE_ROLE_ALLOW_LIST = frozenset(
    {
        "roles/container.defaultNodeServiceAccount",
        # The documented minimal set the predefined role bundles (CIS GKE Benchmark v1.x 6.2.1 / 5.2.1:
        # monitoring.viewer, monitoring.metricWriter, logging.logWriter; terraform-google-kubernetes-engine
        # v29 upgrade notes: plus stackdriver.resourceMetadata.writer) and image pulls (artifactregistry.reader).
        "roles/logging.logWriter",
        "roles/monitoring.metricWriter",
        "roles/monitoring.viewer",
        "roles/stackdriver.resourceMetadata.writer",
        "roles/autoscaling.metricsWriter",
        "roles/artifactregistry.reader",
    }
)
"""Every role GKE documents a node service account may need; the tests refuse a node role outside it."""

SHIELDED_SECURE_BOOT = True
"""Secure boot on both Standard pools. The NVIDIA driver GKE installs on COS GPU nodes
(`gpu_driver_installation_config`) is a signed module; only unsigned or custom kernel modules conflict with
secure boot (CT gke-node-pool `enable_secure_boot`, default true: "Keep enabled unless custom kernel modules need
to be loaded", the module CT's gke-a4 and gke-a3-ultragpu blueprints build their GPU pools with; GKE docs,
"Configure secure kernel module loading": GPU node images load the NVIDIA driver as an out-of-tree module). The
gIB NCCL plugin is a user-space library copied onto the host, and the RDMA NICs use the COS kernel's in-tree
driver, so neither loads a kernel module of its own."""

SHIELDED_INTEGRITY_MONITORING = True
"""Integrity monitoring on both Standard pools (GKE default for Shielded GKE Nodes; CT gke-node-pool sets it)."""

SERVICE_ACCOUNT_ID_MAX = 30
"""Longest service account id IAM accepts: 6 to 30 lowercase letters, digits and hyphens (IAM docs, "Create
service accounts"; pulumi-gcp 10.2.0 serviceaccount.Account `account_id`: "must be 6-30 characters long")."""

KMS_KEY_PATTERN = (
    r"projects/(?P<project>[a-z][a-z0-9-]{4,28}[a-z0-9])/locations/(?P<location>[a-z0-9-]+)"
    r"/keyRings/(?P<ring>[A-Za-z0-9_-]{1,63})/cryptoKeys/(?P<key>[A-Za-z0-9_-]{1,63})"
)
"""A Cloud KMS key's full resource name, as GKE's `databaseEncryption.keyName` takes it (GKE docs, "Encrypt
secrets at the application layer"; Cloud KMS resource names: key ring and key ids of letters, digits, _ and -,
at most 63)."""

KMS_ENCRYPTER_ROLE = "roles/cloudkms.cryptoKeyEncrypterDecrypter"
"""The role the GKE service agent needs on the key to encrypt Secrets (GKE docs, "Encrypt secrets at the
application layer": "give the GKE service account access to the key")."""

GKE_SERVICE_AGENT = "serviceAccount:service-{number}@container-engine-robot.iam.gserviceaccount.com"
"""The GKE service agent of a project, by project number (GKE docs, "Encrypt secrets at the application
layer", "Grant permission to use the key")."""

LUSTRE_FILESYSTEM_MAX = 8
"""A Lustre filesystem name has at most 8 alphanumeric characters (DOC-LUS; CT managed-lustre)."""

GPU_POOL_MAX_SURGE = 0
"""Surge nodes a GPU pool upgrade may add. Surge nodes count against a specific reservation's capacity and
need scarce A4/A3 Ultra stock; with none to be had, an upgrade that may not take a node down fails, and GKE
retries it until it succeeds (GKE docs, how-to/node-upgrades-quota). So upgrades replace nodes in place (CT
gke-node-pool main.tf `upgrade_settings`: max_surge 0, max_unavailable 1)."""

GPU_POOL_MAX_UNAVAILABLE = 1
"""GPU nodes an upgrade may take down at once (CT gke-node-pool default; see GPU_POOL_MAX_SURGE)."""

FLEX_START_LOCATION_POLICY = "ANY"
"""Flex-start pools autoscale (location policy ANY) from 0 nodes, without a static node count,
auto-repair, spot or reservations (CT modules/compute/gke-node-pool/main.tf: autoscaling block and
the enable_flex_start preconditions; CT gke-consumption-options Option 4)."""

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


# ---------------------------------------------------------------- in-cluster workloads

GIB_INSTALLER_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
"""NCCL/gIB installer image pinned by both CEA installers (gpudirect-rdma/nccl-rdma-installer{,-autopilot}.yaml
@992db81; gcp-infrastructure.md A.1, A.2). v1.1.2 exists (DOC-GIB-RN, 2026-05-14) but CEA still pins v1.1.1."""

GIB_INSTALL_ARGS: dict[str, tuple[str, ...]] = {
    # CEA @992db81: Standard runs `install` since 2da1c92 (PR #606); Autopilot keeps `install --install-nccl`
    # (gcp-infrastructure.md A.1-A.3).
    "standard": ("install",),
    "autopilot": ("install", "--install-nccl"),
}
"""Arguments of `/scripts/container_entry.sh` in the installer per cluster mode."""

GIB_INSTALLER_NAMESPACE: dict[str, str] = {
    # CEA @992db81: kube-system on Standard; the Autopilot file creates and uses rdma-system (A.1, A.2).
    "standard": "kube-system",
    "autopilot": "rdma-system",
}
"""Namespace of the gIB installer DaemonSet per cluster mode."""

PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
"""The installer's long-running container, pinned by digest in both CEA installers (A.1)."""

GIB_HOST_DIR = "/home/kubernetes/bin/gib"
"""Where the installer copies the gIB tree on the node (CEA installers, A.1)."""

NVIDIA_HOST_DIR = "/home/kubernetes/bin/nvidia"
"""GPU driver libraries on GKE nodes; the installer also copies gIB's lib64 into its lib64 (A.1)."""

GIB_POD_DIR = "/usr/local/gib"
"""Where pods mount GIB_HOST_DIR (DOC-AIH-CUSTOM, A.7)."""

NVIDIA_POD_DIR = "/usr/local/nvidia"
"""Where pods mount NVIDIA_HOST_DIR (DOC-AIH-CUSTOM, A.7)."""

GIB_NCCL_ENV: dict[str, str] = {
    # CT examples/machine-learning/a3-ultragpu-8g/nemo-framework/Dockerfile @1535522 (gIB v1.1.0),
    # "Set the following to match what is in /usr/local/gib/scripts/set_nccl_env.sh" (A.5), without
    # its VM interface names. NCCL_NET=gIB is set explicitly as CT's GKE jobset examples do, so a
    # missing plugin fails loudly instead of falling back to TCP (A.5, A.8; user-pains §1 A.4).
    # The tuner file is per GPU: GpuMachine.nccl_tuner_config.
    "NCCL_NET": "gIB",
    "NCCL_CROSS_NIC": "0",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_P2P_NET_CHUNKSIZE": "131072",
    "NCCL_NVLS_CHUNKSIZE": "524288",
    "NCCL_IB_ADAPTIVE_ROUTING": "1",
    "NCCL_IB_QPS_PER_CONNECTION": "4",
    "NCCL_IB_TC": "52",
    "NCCL_IB_FIFO_TC": "84",
}
"""gIB's NCCL settings (the published mirror of set_nccl_env.sh), besides the per-GPU tuner path."""

GLOO_SOCKET_IFNAME = "eth0"
"""Gloo's one concrete interface in a multi-NIC GKE pod: the default network (user-pains §1 A.3)."""

# --- Who may reach the Ray pods (workloads/policies.py) ---------------------------------------------------
KUBERAY_CLUSTER_LABEL = "ray.io/cluster"
"""Label KubeRay puts on every pod of a RayCluster, valued with the RayCluster's name
(ray-project/kuberay ray-operator/controllers/ray/utils/constant.go RayClusterLabelKey, set in
common/pod.go for the head and every worker group, KubeRay v1.x)."""

KUBERAY_NODE_TYPE_LABEL = "ray.io/node-type"
"""KubeRay's pod label for the node type, `head` or `worker` (constant.go RayNodeTypeLabelKey,
rayv1.HeadNode / rayv1.WorkerNode; KubeRay's own head NetworkPolicy selects the head with it)."""

RAY_PORTS: dict[str, int] = {
    # docs.ray.io ray-core/configure.html "Ports configurations" and ray-core/internals/
    # port-service-discovery.html (Ray 2.5x, read 2026-12-01). Fixed defaults only: the node manager,
    # object manager, runtime env agent, metrics agent and metrics export ports are random unless set,
    # which is why the Ray pods admit each other on every port rather than on this list.
    "gcs-server": 6379,
    "dashboard": 8265,
    "client": 10001,
    "min-worker": 10002,
    "max-worker": 19999,
    "dashboard-agent-listen": 52365,
}
"""Ray's fixed default ports on every node (the worker range is min-worker .. max-worker)."""

KONNECTIVITY_AGENT_NAMESPACE = "kube-system"
"""Namespace of GKE's konnectivity agents (KONNECTIVITY_AGENT_LABELS)."""

KONNECTIVITY_AGENT_LABELS = {"k8s-app": "konnectivity-agent"}
"""Where the API server's traffic into the cluster comes from on GKE: the control plane reaches pods
(service proxy, webhooks, logs, exec) through the konnectivity agents, so it arrives with an agent
pod's source IP (tigera/operator#5212, 2026-08: "On AKS and GKE the API server reaches in-cluster
webhooks through konnectivity agent pods ... GKE uses `k8s-app`"; cilium/cilium#19439: GKE's
konnectivity agent carries "all control-plane to cluster connections"; the upstream agent DaemonSet
kubernetes.io examples/admin/konnectivity/konnectivity-agent.yaml runs in kube-system with
`k8s-app: konnectivity-agent`). jobs/access.py reaches the dashboard by this path."""

RDMA_INTERFACES_START = 2
"""eth0 is the pod network, eth1 gvnic-1, eth2..eth9 rdma-0..rdma-7 (DOC-AIH-CUSTOM, A.7; KES)."""

SHM_GIB = 256
"""Size of the workers' /dev/shm memory emptyDir: NCCL's shared segments and Ray's object store.
gpu-recipes uses 240-250Gi (A.6), KES 250Gi (K8); NVIDIA/nccl#525 for the 64 MB default."""

OBJECT_STORE_GIB = 200
"""Ray object store on each worker, kept inside SHM_GIB so Ray does not fall back to /tmp
(ray-project/ray#13619; Ray uses /dev/shm only when it can hold the whole store)."""

HEAD_REQUESTS = {"cpu": "12", "memory": "32Gi", "ephemeral-storage": "9Gi"}
"""The Ray head asks for 12 CPUs, 32 GB and 9Gi of local disk (KES ray-cluster-{standard,auto}.yaml;
HEAD_MIN_VCPUS). The disk request matters on Autopilot, which otherwise gives a container 1 GiB and
enforces it as the limit, so the head's Ray logs and spilled objects in /tmp would get it evicted
(GKE docs, "Resource requests in Autopilot": default requests)."""

GKE_MEMORY_RESERVATION: tuple[tuple[float, float], ...] = (
    # GKE "Plan node sizes" (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes, memory and
    # CPU reservations): 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112,
    # 2% of the rest; plus GKE_EVICTION_MIB for eviction.
    (4, 0.25), (4, 0.20), (8, 0.10), (112, 0.06), (float("inf"), 0.02),
)
"""GKE's kubelet/system memory reservation as (GiB band, share) from the first GiB up."""

GKE_EVICTION_MIB = 100
"""GKE's hard eviction threshold on memory (same page)."""

GKE_CPU_RESERVATION: tuple[tuple[float, float], ...] = (
    # Same page: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% of the rest.
    (1, 0.06), (1, 0.01), (2, 0.005), (float("inf"), 0.0025),
)
"""GKE's kubelet/system CPU reservation as (core band, share) from the first core up."""

NODE_MEMORY_MARGIN = 0.02
"""Share of the nominal memory assumed lost to firmware and the kernel before the kubelet counts
capacity (an engineering margin, not a published figure)."""

NODE_DAEMON_HEADROOM = {"cpu": 8, "memory_gib": 64}
"""Left on each GPU node for DaemonSets (networking, logging, metadata server, device plugin,
gIB installer) and the GCS FUSE sidecar (an engineering margin, not a published figure)."""

EPHEMERAL_SHARE_OF_LOCAL_SSD = 0.5
"""Share of the node's local SSD (ephemeral storage, LOCAL_SSD_GIB each) a worker requests,
leaving the kubelet's 10% eviction threshold and image storage untouched."""

LOCAL_SSD_GIB = 375
"""Size of one local SSD on A4 and A3 Ultra (CT gke-node-pool/disk_definitions.tf; 32 per node)."""

GCSFUSE_MOUNT_OPTIONS: tuple[str, ...] = (
    # KES ai-ml/verl-on-gke/gcsfuse-storage.yaml @616b442 (gcp-infrastructure.md K5), in its order: unbounded
    # stat and type caches whose entries expire at once (ttl 0, so a file another pod overwrites, such as
    # verl's checkpoint tracker, is never read stale), unlimited file cache with parallel downloads,
    # kernel read-ahead, streaming writes.
    "implicit-dirs",
    "metadata-cache:negative-ttl-secs:0",
    "metadata-cache:ttl-secs:0",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "metadata-cache:type-cache-max-size-mb:-1",
    "file-cache:max-size-mb:-1",
    "file-cache:cache-file-for-range-read:true",
    "file-cache:enable-parallel-downloads:true",
    "read_ahead_kb=1024",
    "write:enable-streaming-writes:true",
    "write:global-max-blocks:200000",
)
"""Tuned gcsfuse mount options of the tutorial's static PV."""

GCSFUSE_VOLUME_ATTRIBUTES = {"skipCSIBucketAccessCheck": "true", "gcsfuseMetadataPrefetchOnMount": "true"}
"""Volume attributes of the tutorial's static PV (KES gcsfuse-storage.yaml, K5)."""

GCSFUSE_POD_ANNOTATION = "gke-gcsfuse/volumes"
"""Pod annotation that makes GKE inject the GCS FUSE sidecar (DOC-FUSE, K5). When every node runs
Kubernetes >= 1.29 (all floors here are higher), the webhook injects it as a native sidecar, an init
container, so the Ray container stays `containers[0]`, the one that receives the RDMA devices (A.7;
GoogleCloudPlatform/gcs-fuse-csi-driver pkg/webhook/injection.go `supportsNativeSidecar`,
`injectSidecarContainer` @5fcdc04)."""

KUBERAY_READY_WAIT = "jsonpath={.status.state}=ready"
"""`pulumi.com/waitFor` of the RayCluster: KubeRay sets status.state to `ready` once every pod runs
and is ready (ray-operator/apis/ray/v1/raycluster_types.go `ClusterState Ready = "ready"`; the field is
in the v1.7 schema). Chosen over the `RayClusterProvisioned` condition, which older operators lack."""

STAGING_DEADLINE_SECONDS = 4 * 3600
"""Upper bound of the staging Job (activeDeadlineSeconds): a 72B model is ~145 GB to download."""

STAGING_BACKOFF_LIMIT = 2
"""Retries of the staging Job's pod before the Job, and so `pulumi up`, fails."""

VERL_TRANSFORMERS = "5.5.3"
"""transformers installed (--no-deps) beside verl on the shared storage: the vllm024 image has 5.3.0,
below verl 0.9.1's `transformers>=5.5.3,!=5.6.0,<5.11`; verl's v0.9.0 CI runs this exact
`pip install --no-deps transformers==5.5.3` on the same image family (jobs-and-frameworks.md B.3)."""


HUB_DATASETS: dict[str, tuple[str, ...]] = {
    # NeMo-RL's DeepScaler data loads these from the Hub into HF_HOME: training and AIME-2024 validation
    # (jobs-and-frameworks.md §2 "Data (v0.4)"); the staging Job caches them on the shared storage.
    "deepscaler": ("HuggingFaceH4/aime_2024", "agentica-org/DeepScaleR-Preview-Dataset"),
}
"""Hub data set repositories the trainer reads by id, cached into the shared HF_HOME by staging."""

STAGING_REQUESTS = {"cpu": "1", "memory": "8Gi", "ephemeral-storage": "20Gi"}
"""The staging Job's container: network-bound downloads, small enough to share the head's CPU node."""

GCSFUSE_SIDECAR_ANNOTATIONS: dict[str, dict[str, str]] = {
    # GKE Cloud Storage FUSE CSI docs, "Configure resources for the sidecar container": the file cache
    # lives in the sidecar's ephemeral storage, whose default limit is small (5Gi). gcs-fuse-csi-driver
    # pkg/webhook/config.go @5fcdc04: a "0" limit is left off the container (no limit), and a request
    # left unset follows its limit. Autopilot refuses "0" (GKE docs; not re-verified offline), so it
    # gets explicit limits, which NODE_DAEMON_HEADROOM and EPHEMERAL_SHARE_OF_LOCAL_SSD leave room for.
    "standard": {
        "gke-gcsfuse/cpu-limit": "0",
        "gke-gcsfuse/ephemeral-storage-limit": "0",
        "gke-gcsfuse/memory-limit": "0",
    },
    "autopilot": {
        "gke-gcsfuse/cpu-limit": "4",
        "gke-gcsfuse/ephemeral-storage-limit": "1Ti",
        "gke-gcsfuse/memory-limit": "16Gi",
    },
}
"""Sidecar resource annotations of GCS FUSE pods (on Autopilot only the GPU workers'), whose file
cache holds the model's files and whose writes may be staged on local disk."""


# ---------------------------------------------------------------- job layer

RAY_JOB_START_TIMEOUT_SECONDS = 900
"""Ray keeps a job that cannot be placed PENDING this long, and stop_job does not clear it
(`RAY_JOB_START_TIMEOUT_SECONDS` default; jobs-and-frameworks.md §3, observed on Ray 2.60)."""

VERL_ENTRY_MODULE = "verl.trainer.main_ppo"
"""verl's PPO/GRPO trainer, a Hydra app over `trainer/config/ppo_trainer.yaml` (verl 0.9.1, §1)."""

VERL_CONFIG_NAME = "ppo_trainer"
"""The Hydra config `main_ppo` composes (`@hydra.main(config_name="ppo_trainer")`, verl 0.9.1)."""

NEMO_RL_WORKDIR = "/opt/nemo-rl"
"""Source tree (examples/, configs) in every nvcr.io/nvidia/nemo-rl image, v0.4.0 to main (B.5)."""


@dataclass(frozen=True)
class NemoRlRelease:
    """How one NeMo-RL release is launched and which override keys it has (NRL tags)."""

    entry_script: str
    """GRPO entry script, relative to NEMO_RL_WORKDIR."""
    dataset_layout: Literal["flat", "split"]
    """`flat`: `data.dataset_name`; `split`: `data.train.dataset_name` plus `data.validation`."""
    recipes_carry_converter_type: bool
    """The example recipes still carry `policy.megatron_cfg.converter_type` (removed in #2640)."""


NEMO_RL_RELEASE_FACTS: dict[str, NemoRlRelease] = {
    # run_grpo_math.py and a flat data.dataset_name up to v0.5.0 (v0.5.0 also ships run_grpo.py,
    # but its recipes keep the flat key); run_grpo.py and data.train/data.validation from v0.6.0
    # (commit 4b48248 "unify entrypoint"). converter_type is in every recipe up to v0.6.0 and gone
    # in v0.7.0 (ecf7259 "Remove unused converter type (#2640)"). Read from the tags' examples/.
    "v0.4.0": NemoRlRelease("examples/run_grpo_math.py", "flat", True),
    "v0.5.0": NemoRlRelease("examples/run_grpo_math.py", "flat", True),
    "v0.6.0": NemoRlRelease("examples/run_grpo.py", "split", True),
    "v0.7.0": NemoRlRelease("examples/run_grpo.py", "split", False),
}
"""Launch facts of each release in NEMO_RL_RELEASES."""


@dataclass(frozen=True)
class NemoRlRecipe:
    """One NeMo-RL example GRPO recipe (`--config`) and where its knobs live."""

    config: str
    """Recipe path relative to NEMO_RL_WORKDIR."""
    max_size_b: float
    """Largest model, in billions of parameters, this recipe is chosen for."""
    backend: Literal["dtensor", "megatron"]
    """Training backend the recipe enables."""
    learning_rate_key: str
    """Where the recipe keeps the learning rate."""
    model_parallel_gpus: int
    """GPUs one model replica spans (Megatron TP x PP; 1 for DTensor recipes)."""
    rollout_tensor_parallel: int
    """The recipe's `policy.generation.vllm_cfg.tensor_parallel_size`."""
    train_micro_batch_size: int
    """The recipe's `policy.train_micro_batch_size`."""


NEMO_RL_RECIPES: tuple[NemoRlRecipe, ...] = (
    # examples/configs/grpo_math_{1B,8B,70B_megatron}.yaml exist unchanged in name at v0.4.0 to
    # v0.7.0. 1B and 8B are DTensor recipes with `policy.optimizer.kwargs.lr`; the 70B recipe
    # sets `policy.optimizer: null` and keeps its learning rate under megatron_cfg, with TP4 x PP4.
    # `policy.generation.vllm_cfg.tensor_parallel_size` and `policy.train_micro_batch_size`: 1B 1 and 4,
    # 8B 1 and 1, 70B 8 and 1, the same at the v0.4.0, v0.5.0, v0.6.0 and v0.7.0 tags (read from the
    # tags' examples/configs on 2026-12-01; 1B and 70B also in ../shared/nemo-rl v0.4.0 and main).
    NemoRlRecipe("examples/configs/grpo_math_1B.yaml", 3, "dtensor", "policy.optimizer.kwargs.lr", 1, 1, 4),
    NemoRlRecipe("examples/configs/grpo_math_8B.yaml", 14, "dtensor", "policy.optimizer.kwargs.lr", 1, 1, 1),
    NemoRlRecipe(
        "examples/configs/grpo_math_70B_megatron.yaml", 1000, "megatron", "policy.megatron_cfg.optimizer.lr", 16, 8, 1
    ),
)
"""Recipes in order of size; a model uses the first whose max_size_b it does not exceed."""

HF_ARCHITECTURES: dict[str, str] = {
    # `architectures[0]` of each family's Hugging Face config.json (Qwen2.5 models are Qwen2).
    "Qwen/Qwen2": "Qwen2ForCausalLM",
    "Qwen/Qwen3": "Qwen3ForCausalLM",
    "meta-llama/Llama-3": "LlamaForCausalLM",
    "meta-llama/Meta-Llama-3": "LlamaForCausalLM",
}
"""Model id prefix -> architecture, the value of NeMo-RL's `converter_type` (recipes up to v0.6.0)."""

NEMO_RL_DEEPSCALER = ("DeepScaler", "AIME2024", 16)
"""NeMo-RL's DeepScaler train set and its validation: AIME 2024 repeated 16 times (v0.7.0
examples/configs/distillation_math.yaml; the codelab's dataset)."""


# ---------------------------------------------------------------- preflight GPU health (issue 14)


@dataclass(frozen=True)
class GpuHealthReference:
    """What one healthy GPU of a type reaches in the preflight's measurements, beside its datasheet figures."""

    smi_name: str
    """The GPU's name as nvidia-smi and CUDA report it."""
    datasheet_bf16_tflops: float
    """Vendor datasheet dense bf16 Tensor Core rate in TFLOP/s (half the with-sparsity figure)."""
    datasheet_hbm_tbps: float
    """Vendor datasheet HBM bandwidth in TB/s."""
    bf16_matmul_tflops: float
    """8192^3 bf16 matmul rate a healthy GPU reaches (jobs/preflight/measure.py's method), TFLOP/s."""
    copy_tbps: float
    """Device-to-device copy bandwidth a healthy GPU reaches, read plus write, TB/s (same method)."""


H200_DATASHEET_BF16_TFLOPS = 989.0
"""NVIDIA H200 Tensor Core GPU datasheet (SXM): BF16 Tensor Core 1,979 TFLOPS with sparsity, so about 989
dense; the same rate as the H100 SXM (../shared/reference/day-two-operations.md "Fabric and GPU health";
the device tool's H200.md)."""

H200_DATASHEET_HBM_TBPS = 4.8
"""NVIDIA H200 datasheet: 141 GB HBM3e at 4.8 TB/s (same sources)."""

H200_MEASURED_BF16_TFLOPS = 698.0
"""8192^3 bf16 matmul on a real H200 (SXM, 'NVIDIA H200', driver 580.159.04 / CUDA 13.0, torch 2.11.0+cu130),
measured 2026-12-01 with jobs/preflight/measure.py (random normal data, CUDA events, median of 10 timings of 10
products after 3 warm-ups): the median of six measure_node() runs on two such machines, 667-730 TFLOP/s
(benchmarks/results/preflight-h200/). The GPU runs at its 700 W cap (`SW Power Cap`, SM clock down to 1,350-1,560
MHz under load), so the figure depends on the data: uniform [0, 1) data gave 765 (run2-probe.json), as in the
lab's earlier 769-803 (day-two-operations.md)."""

H200_MEASURED_COPY_TBPS = 4.26
"""Device-to-device copy of a 4 GiB buffer on those H200s, bytes read plus written, median of the same six runs,
4.256-4.273 TB/s (benchmarks/results/preflight-h200/; the lab's earlier 4.24-4.28, day-two-operations.md)."""

B200_DATASHEET_BF16_TFLOPS = 2250.0
"""NVIDIA HGX B200 (1,000 W): BF16 Tensor Core 4.5 PFLOPS with sparsity per GPU, so 2.25 PFLOP/s dense
(NVIDIA HGX platform datasheet; day-two-operations.md; glennklockwood.com/garden/processors/B200)."""

B200_DATASHEET_HBM_TBPS = 8.0
"""NVIDIA HGX B200: HBM3e at 8 TB/s per GPU (same sources; pytorch/ao#4002 reads a 7,680-bit bus at 3,996 MHz
off a real B200, 7.67 TB/s)."""

GPU_HEALTH_REFERENCES: dict[str, GpuHealthReference] = {
    "h200": GpuHealthReference(
        smi_name="NVIDIA H200",
        datasheet_bf16_tflops=H200_DATASHEET_BF16_TFLOPS,
        datasheet_hbm_tbps=H200_DATASHEET_HBM_TBPS,
        bf16_matmul_tflops=H200_MEASURED_BF16_TFLOPS,
        copy_tbps=H200_MEASURED_COPY_TBPS,
    ),
    # Not yet measured on a B200: its datasheet figures scaled by the share of them the H200 reaches in the
    # same measurement. Replace with a B200 measurement when one is made.
    "b200": GpuHealthReference(
        smi_name="NVIDIA B200",
        datasheet_bf16_tflops=B200_DATASHEET_BF16_TFLOPS,
        datasheet_hbm_tbps=B200_DATASHEET_HBM_TBPS,
        bf16_matmul_tflops=float(
            round(B200_DATASHEET_BF16_TFLOPS * H200_MEASURED_BF16_TFLOPS / H200_DATASHEET_BF16_TFLOPS)
        ),
        copy_tbps=round(B200_DATASHEET_HBM_TBPS * H200_MEASURED_COPY_TBPS / H200_DATASHEET_HBM_TBPS, 2),
    ),
}
"""Preflight reference of each `gpu.type`."""

PREFLIGHT_MIN_SHARE = 0.8
"""A GPU whose measured figure is below this share of its reference fails its node (issue 14)."""

PREFLIGHT_FAILING_CLOCK_EVENTS = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
"""Clock-event reasons that mean the hardware is slowing the GPU (overheating, power brake); nvidia-smi
`--help-query-gpu` "clocks_event_reasons.hw_*" (driver 580.159.04: "reducing the core clocks by a factor of 2 or more")."""

PREFLIGHT_NORMAL_CLOCK_EVENTS = ("sw_power_cap",)
"""Clock-event reasons a healthy GPU shows right after full load, left out of the findings: every healthy H200
measured here read `SW Power Cap` after the matmul (benchmarks/results/preflight-h200/), the driver holding it at
its power limit. Any other reason not in PREFLIGHT_FAILING_CLOCK_EVENTS is noted."""

PREFLIGHT_HARDWARE_XIDS = (46, 48, 63, 64, 79)
"""XID codes that take a GPU out of a run: 46 GPU stopped processing and 48 double-bit ECC error (NVIDIA
Health Validation, checks/xid: CRITICAL, drain), 63/64 a page retired or row remapped / its failure, which a
GPU reset must activate (NVIDIA Dynamic Page Retirement, "Visibility"; Xid catalog), 79 GPU fallen off the bus
(NVIDIA GPU Operational Events release notes; Xid catalog). Other XIDs, often an application's fault (13, 31,
43), are only noted."""
KUBERNETES_APPLY_ORDER = (
    # Helm v3 pkg/release/util/kind_sorter.go InstallOrder (read 2026-12-01); Helm applies kinds it does
    # not list (custom resources) after all of these.
    "PriorityClass", "Namespace", "NetworkPolicy", "ResourceQuota", "LimitRange", "PodSecurityPolicy",
    "PodDisruptionBudget", "ServiceAccount", "Secret", "SecretList", "ConfigMap", "StorageClass",
    "PersistentVolume", "PersistentVolumeClaim", "CustomResourceDefinition", "ClusterRole", "ClusterRoleList",
    "ClusterRoleBinding", "ClusterRoleBindingList", "Role", "RoleList", "RoleBinding", "RoleBindingList",
    "Service", "DaemonSet", "Pod", "ReplicationController", "ReplicaSet", "Deployment", "HorizontalPodAutoscaler",
    "StatefulSet", "Job", "CronJob", "IngressClass", "Ingress", "APIService",
)  # fmt: skip
"""Kubernetes kinds in the order they are applied: namespaces and what pods need before workloads;
custom resources (GKE networks, the RayCluster) come after every listed kind."""
# ForceNew inputs of every resource type the stack registers, as wire-form (camelCase) input paths
# without list indices: a change at or below a path replaces the resource; a path not listed updates
# in place. Google Cloud types: the `ForceNew: true` fields of the Terraform Google provider's schemas
# under google/services/ (hashicorp/terraform-provider-google @e03b762, 2026-08-21; pulumi-gcp
# bridges them): container/resource_container_cluster.go, container/resource_container_node_pool.go
# and container/node_config.go (node_config itself is ForceNew only as a whole block, so machine type,
# disk type, image type, taints, gVNIC and workload metadata update in place), compute/
# resource_compute_{network,subnetwork,firewall,router,router_nat,global_address}.go,
# lustre/resource_lustre_instance.go, servicenetworking/resource_service_networking_connection.go,
# storage/resource_storage_bucket.go, storage/iam_storage_bucket.go with tpgiamresource/
# resource_iam_member.go, resourcemanager/resource_google_project_service.go. Kubernetes types: the
# `forceNew` table of pulumi/pulumi-kubernetes provider/pkg/provider/diff.go (@94977969, v4.32.0+27,
# 2026-07-01), whose metadata.name and metadata.namespace replace every object; a custom resource
# (RayCluster, the GKE network objects) has only those, plus the replaceOnChanges the program records.
KUBERNETES_IDENTITY_INPUTS = ("metadata.name", "metadata.namespace")
"""Inputs whose change replaces any Kubernetes object (pulumi-kubernetes diff.go metadataForceNewProperties)."""

FORCE_NEW_INPUTS: dict[str, tuple[str, ...]] = {
    "gcp:container/cluster:Cluster": (
        "datapathProvider",
        "defaultMaxPodsPerNode",
        "description",
        "enableAutopilot",
        "enableKubernetesAlpha",
        "enableTpu",
        "initialNodeCount",
        "ipAllocationPolicy.clusterIpv4CidrBlock",
        "ipAllocationPolicy.clusterSecondaryRangeName",
        "ipAllocationPolicy.servicesIpv4CidrBlock",
        "ipAllocationPolicy.servicesSecondaryRangeName",
        "location",
        "name",
        "network",
        "networkingMode",
        "privateClusterConfig.masterIpv4CidrBlock",
        "project",
        "subnetwork",
    ),
    "gcp:container/nodePool:NodePool": (
        "cluster",
        "initialNodeCount",
        "location",
        "maxPodsPerNode",
        "name",
        "networkConfig.additionalNodeNetworkConfigs",
        "networkConfig.additionalPodNetworkConfigs",
        "networkConfig.createPodRange",
        "networkConfig.podIpv4CidrBlock",
        "networkConfig.podRange",
        "nodeConfig.bootDiskKmsKey",
        "nodeConfig.ephemeralStorageLocalSsdConfig",
        "nodeConfig.flexStart",
        "nodeConfig.guestAccelerators",
        "nodeConfig.localSsdCount",
        "nodeConfig.maxRunDuration",
        "nodeConfig.metadata",
        "nodeConfig.minCpuPlatform",
        "nodeConfig.oauthScopes",
        "nodeConfig.preemptible",
        "nodeConfig.reservationAffinity",
        "nodeConfig.serviceAccount",
        "nodeConfig.shieldedInstanceConfig",
        "nodeConfig.spot",
        "placementPolicy",
        "project",
        "queuedProvisioning",
    ),
    "gcp:compute/network:Network": (
        "autoCreateSubnetworks",
        "description",
        "internalIpv6Range",
        "name",
        "networkProfile",
        "project",
    ),
    "gcp:compute/subnetwork:Subnetwork": ("description", "name", "network", "project", "region"),
    "gcp:compute/firewall:Firewall": ("direction", "name", "project"),
    "gcp:compute/router:Router": ("name", "network", "project", "region"),
    "gcp:compute/routerNat:RouterNat": ("initialNatIps", "name", "project", "region", "router", "type"),
    "gcp:compute/globalAddress:GlobalAddress": (
        "address",
        "addressType",
        "description",
        "ipVersion",
        "name",
        "network",
        "prefixLength",
        "project",
        "purpose",
    ),
    "gcp:lustre/instance:Instance": (
        "filesystem",
        "instanceId",
        "kmsKey",
        "location",
        "network",
        "perUnitStorageThroughput",
        "project",
    ),
    "gcp:servicenetworking/connection:Connection": ("network", "service"),
    "gcp:storage/bucket:Bucket": ("hierarchicalNamespace", "location", "name", "project"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("bucket", "condition", "member", "role"),
    "gcp:projects/service:Service": ("project", "service"),
    # resourcemanager/resource_google_service_account.go: account_id and project are ForceNew (display name and
    # description update in place); tpgiamresource/resource_iam_member.go: every field of an IAM member is ForceNew
    # (project IAM and KMS crypto key IAM members alike).
    "gcp:serviceaccount/account:Account": ("accountId", "project"),
    "gcp:projects/iAMMember:IAMMember": ("condition", "member", "project", "role"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": ("condition", "cryptoKeyId", "member", "role"),
    "kubernetes:apps/v1:DaemonSet": KUBERNETES_IDENTITY_INPUTS + ("spec.selector",),
    "kubernetes:batch/v1:Job": KUBERNETES_IDENTITY_INPUTS
    + ("spec.completions", "spec.parallelism", "spec.selector", "spec.template"),
    "kubernetes:core/v1:ConfigMap": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:core/v1:Namespace": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:core/v1:PersistentVolume": KUBERNETES_IDENTITY_INPUTS + ("spec.csi",),
    "kubernetes:core/v1:PersistentVolumeClaim": KUBERNETES_IDENTITY_INPUTS
    + ("spec.accessModes", "spec.selector", "spec.storageClassName", "spec.volumeName"),
    "kubernetes:core/v1:Secret": KUBERNETES_IDENTITY_INPUTS + ("type",),
    "kubernetes:core/v1:ServiceAccount": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:networking.gke.io/v1:Network": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": KUBERNETES_IDENTITY_INPUTS,
    "kubernetes:ray.io/v1:RayCluster": KUBERNETES_IDENTITY_INPUTS,
}
"""Resource type -> the input paths whose change replaces the resource (sources above)."""

FORCE_NEW_UNLESS_WIDENED: dict[str, tuple[str, ...]] = {"gcp:compute/subnetwork:Subnetwork": ("ipCidrRange",)}
"""CIDR inputs that update in place when the new range contains the old and replace otherwise
(resource_compute_subnetwork.go: `customdiff.ForceNewIfChange("ip_cidr_range", IsShrinkageIpCidr)`)."""

KUBERNETES_PROVIDER_IDENTITY = "clusterIdentifier"
"""The Kubernetes provider input that, when set and unchanged, keeps the provider (and so every object
it manages) through a changed kubeconfig; a changed value replaces it (pulumi-kubernetes provider.go
DiffConfig, @94977969). Without it, a kubeconfig that is unknown or points elsewhere replaces it."""


# ---------------------------------------------------------------- preflight fabric (issue 14)

FABRIC_FLOOR_BUSBW_GBPS = 100.0
"""Least average bus bandwidth (GB/s, 10^9 bytes) of the fabric preflight's all_gather sweep: Cluster Toolkit's
daily gate on A4 and A3 Ultra (GoogleCloudPlatform/cluster-toolkit @f84bd01,
tools/cloud-build/daily-tests/ansible_playbooks/test-validation/test-gke-a4.yml and test-gke-a3-ultra.yml, "Ensure
average bus bandwidth is >= 100 GB/s" over nccl-tests' `# Avg bus bandwidth` of a 2-node run). Applied unchanged to
any node count and to all_reduce: bus bandwidth "reflects how optimally the hardware is used ... independently of the
number of ranks used" (NVIDIA/nccl-tests doc/PERFORMANCE.md), and the pair search measures exactly the gate's
2-node shape. For scale, Google's 2 x A4 all_gather reaches 376 GB/s bus bandwidth at 8 GiB (DOC-NCCL-VM,
docs.cloud.google.com/ai-hypercomputer/docs/nccl/test-vms, updated 2026-04-06), and dstack's 2 x A4 all_reduce
averaged 165.8 GB/s over 8 B-8 GiB (../shared/reference/day-two-operations.md "Fabric and GPU health")."""

FABRIC_SWEEP_MIN_BYTES = 1 << 10
"""Smallest message of the sweep, 1 KiB: the gate's `all_gather_perf -b 1K -e 8G -f 2`
(cluster-toolkit @c9ec026 examples/gke-a4/nccl-jobset-example.yaml; examples/gke-a3-ultragpu likewise)."""

FABRIC_SWEEP_MAX_BYTES = 8 << 30
"""Largest message of the sweep, 8 GiB (same command); sizes double from the smallest (`-f 2`)."""

FABRIC_WARMUPS = 5
"""Untimed collectives per message size before timing: the gate's `-w 5` (same command)."""

FABRIC_ITERATIONS = 100
"""Timed collectives per message size: the gate's `--iters 100` (same command)."""

FABRIC_EXPECTED_NETWORK = GIB_NCCL_ENV["NCCL_NET"]
"""The network NCCL must name at init ("NCCL INFO Using network gIB", DOC-NCCL-VM "Enable NCCL/gIB"; the line is
NCCL's `INFO(NCCL_INIT, "Using network %s", ...)` in src/init.cc); `Socket` there means NCCL fell back to TCP."""



# ---------------------------------------------------------------- deploying identity (issue 13 item 6)

IAM_ROLES_DOC = "cloud.google.com/iam/docs/roles-permissions/<service> (Google's role and permission index)"
"""Where each role below is defined: one page per service (container, compute, iam, resourcemanager,
storage, lustre, servicenetworking, serviceusage, cloudkms); read 2026-12-01."""

DEPLOYER_ROLES: dict[str, tuple[tuple[str, ...], str]] = {
    "gcp:projects/service:Service": (("roles/serviceusage.serviceUsageAdmin",), "serviceusage.services.enable"),
    "gcp:compute/network:Network": (("roles/compute.networkAdmin",), "compute.networks.create"),
    "gcp:compute/subnetwork:Subnetwork": (("roles/compute.networkAdmin",), "compute.subnetworks.create"),
    "gcp:compute/router:Router": (("roles/compute.networkAdmin",), "compute.routers.create"),
    "gcp:compute/routerNat:RouterNat": (("roles/compute.networkAdmin",), "compute.routers.update"),
    "gcp:compute/globalAddress:GlobalAddress": (("roles/compute.networkAdmin",), "compute.globalAddresses.create"),
    # Compute Network Admin manages networking resources "except for firewall rules and SSL certificates".
    "gcp:compute/firewall:Firewall": (("roles/compute.securityAdmin",), "compute.firewalls.create"),
    "gcp:servicenetworking/connection:Connection": (
        ("roles/servicenetworking.networksAdmin",),
        "servicenetworking.services.addPeering",
    ),
    "gcp:serviceaccount/account:Account": (("roles/iam.serviceAccountAdmin",), "iam.serviceAccounts.create"),
    "gcp:projects/iAMMember:IAMMember": (
        ("roles/resourcemanager.projectIamAdmin",),
        "resourcemanager.projects.setIamPolicy",
    ),
    # Nodes run as <cluster>-node-sa: creating them needs actAs on that account as well.
    "gcp:container/cluster:Cluster": (
        ("roles/container.admin", "roles/iam.serviceAccountUser"),
        "container.clusters.create, iam.serviceAccounts.actAs",
    ),
    "gcp:container/nodePool:NodePool": (
        ("roles/container.admin", "roles/iam.serviceAccountUser"),
        "container.clusters.update, iam.serviceAccounts.actAs",
    ),
    "gcp:storage/bucket:Bucket": (("roles/storage.admin",), "storage.buckets.create"),
    "gcp:storage/bucketIAMMember:BucketIAMMember": (("roles/storage.admin",), "storage.buckets.setIamPolicy"),
    "gcp:lustre/instance:Instance": (("roles/lustre.admin",), "lustre.instances.create"),
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": (("roles/cloudkms.admin",), "cloudkms.cryptoKeys.setIamPolicy"),
    # Every in-cluster object (namespace, service account, Secrets, DaemonSet, Job, NetworkPolicies, PV/PVC,
    # the GKE network objects and the RayCluster) goes through the Kubernetes API with the deployer's identity.
    "kubernetes:": (("roles/container.admin",), "container.<kind>.create in the cluster"),
    # The post-deploy step reaches the Ray head through the API server's service proxy.
    "pulumi-python:dynamic:Resource": (("roles/container.admin",), "container.services.proxy"),
}
"""The predefined roles that let the identity running `pulumi up` create each resource type the stack
registers, and the permissions it uses from them (IAM_ROLES_DOC; Managed Lustre's from
cloud.google.com/iam/docs/roles-permissions/lustre). A key ending in ':' covers a whole package."""
