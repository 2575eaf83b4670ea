"""The platform a stack config is checked against: GPU machines, GKE versions and floors, Lustre tiers,
the Ray head's floor, framework images and releases.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

import re
from dataclasses import dataclass

from core.facts.pods import NODE_DAEMON_HEADROOM, OBJECT_STORE_GIB, SHM_GIB

BF16_BYTES_PER_PARAMETER = 2
"""Model weights in bf16, as vLLM loads them for rollout: 2 bytes per parameter."""

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

NODE_BOOT_DISK_TYPE = "pd-balanced"
"""The boot disk type GKE gives a node whose pool names none, from 1.24 (GKE "Configuring a custom boot disk",
docs.cloud.google.com/kubernetes-engine/docs/how-to/custom-boot-disks: "By default, GKE uses balanced Persistent
Disks in version 1.24 or later"); the head's pool names none, a GPU pool its machine's GpuMachine.boot_disk_type."""

NODE_BOOT_DISK_GB = 100
"""Size of each node's boot disk: the pools set none, and a node pool's boot disk "Defaults to 100GB"
(pulumi-gcp 10.2.0 container NodePoolNodeConfigArgs disk_size_gb; GB here as in every Compute Engine disk size,
binary)."""

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
    def parse(cls, text: str) -> GkeVersion:
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


EIGHT_GPU_WORKER: dict[str, int] = {
    # core/facts/pods.py, each with its source: SHM_GIB, OBJECT_STORE_GIB inside it, NODE_DAEMON_HEADROOM
    "worker_shm_gib": SHM_GIB,
    "worker_object_store_gib": OBJECT_STORE_GIB,
    "daemon_headroom_cpu": NODE_DAEMON_HEADROOM["cpu"],
    "daemon_headroom_gib": NODE_DAEMON_HEADROOM["memory_gib"],
}
"""The worker's shared memory, object store and the node's DaemonSet headroom on an 8-GPU A4 or A3 Ultra node."""


@dataclass(frozen=True)
class GpuMachine:
    """What differs between the GPU node shapes: the 8-GPU B200 (A4) and H200 (A3 Ultra) machines with their RDMA
    NICs, and the one-GPU L4 (G2) machine of a first run."""

    machine_type: str
    """Compute Engine machine type of one GPU node."""
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
    nccl_tuner_config: str | None
    """gIB's NCCL tuner file for this GPU, inside GIB_POD_DIR; None on a machine without RDMA NICs (no gIB)."""
    rdma_floor: dict[str, str] | None
    """Lowest GKE version with GPUDirect RDMA, per cluster mode; None on a machine without RDMA NICs."""
    default_driver_from: str
    """GKE version from which the default GPU driver suits this GPU."""
    default_driver_branch: int
    """NVIDIA driver branch GKE's DEFAULT installs on this GPU from `default_driver_from`."""
    gpu_memory_gb: int
    """Memory of one GPU in GB."""
    gpus: int
    """GPUs of one node: what its pool attaches, Ray's GPU resource on its worker, one STRICT_PACK group of verl."""
    rdma_nics: int
    """RDMA NICs of the machine (one per GPU on A4 and A3 Ultra, none on G2). With none, the stack makes no RDMA VPC,
    no gVNIC VPC, no GKE Network objects, no gIB installer and no compact placement, and the RayCluster's workers
    get no extra interfaces: those parts only carry GPU-to-GPU traffic between nodes over RDMA."""
    worker_shm_gib: int
    """Size of the worker's /dev/shm memory emptyDir (NCCL's shared segments and Ray's object store)."""
    worker_object_store_gib: int
    """Ray object store on the worker, kept inside worker_shm_gib (Ray uses /dev/shm only when it holds the store)."""
    daemon_headroom_cpu: int
    """CPUs left on the node for DaemonSets and the GCS FUSE sidecar (an engineering margin)."""
    daemon_headroom_gib: int
    """Memory left on the node for DaemonSets and the GCS FUSE sidecar, GiB (an engineering margin)."""

    @property
    def rdma(self) -> bool:
        """Whether the machine has RDMA NICs: the RDMA network, gIB and compact placement are made only then."""
        return self.rdma_nics > 0

    @property
    def tensor_parallel_sizes(self) -> tuple[int, ...]:
        """vLLM tensor parallel sizes that fit one node: the divisors of `gpus`."""
        return tuple(size for size in range(1, self.gpus + 1) if self.gpus % size == 0)


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
        # A4 carries eight GPUs and eight RDMA NICs (CT machine_mappings.json)
        gpus=8,
        # DOC-AIH: GPUDirect RDMA on A4 needs 1.32.2-gke.1475000 (Autopilot GPUs alone: 1.32.2-gke.1422000)
        rdma_floor={"standard": "1.32.2-gke.1475000", "autopilot": "1.32.2-gke.1475000"},
        # DOC-AIH: R570 is the default driver from 1.32.1-gke.1729000
        default_driver_from="1.32.1-gke.1729000",
        default_driver_branch=570,
        rdma_nics=8,
        **EIGHT_GPU_WORKER,
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
        # A3 Ultra carries eight GPUs and eight RDMA NICs (CT machine_mappings.json)
        gpus=8,
        # DOC-AIH and the GKE Autopilot GPU doc: 1.31.4-gke.1183000 for both modes
        rdma_floor={"standard": "1.31.4-gke.1183000", "autopilot": "1.31.4-gke.1183000"},
        # DOC-AIH: R550 default from 1.31.5-gke.1169000; older 1.31 versions need LATEST
        default_driver_from="1.31.5-gke.1169000",
        default_driver_branch=550,
        rdma_nics=8,
        **EIGHT_GPU_WORKER,
    ),
    "l4": GpuMachine(
        # The smallest machine verl's quickstart names as enough for Qwen2.5-0.5B on GSM8K: "a GPU with at least
        # 24 GB HBM" (verl-project/verl docs/start/quickstart.rst L20 at v0.7.0, v0.7.1 bec9ef7 and v0.9.0 483b8a0,
        # the same line on main 1dda039; the v0.9.1 tag, requirements-verl.txt's pin, is not in the stored copy).
        # G2 is the one Compute Engine family with a single 24 GB GPU; g2-standard-4 has 16 GB of memory, too little
        # for the worker below, so g2-standard-8.
        machine_type="g2-standard-8",
        # GKE accelerator name of the L4, allowed on Autopilot as on Standard (GKE's Autopilot admission message
        # lists nvidia-l4 among the allowed GPU types, as quoted in pastebin.com/cVrwvR2j, 2025-05-13)
        accelerator="nvidia-l4",
        # SkyPilot catalog (prices.json's source) vms.csv @8427bbf: g2-standard-8,8.0,32.0 (vCPUs, MemoryGiB), and
        # its L4 row's GpuInfo SizeInMiB 24576; Compute Engine's GPU machine types page: G2, 1 L4, 24 GB GDDR6
        vcpus=8,
        memory_gib=32,
        boot_disk_type=None,
        # No local SSD is attached (G2 takes them as an option, billed apart): the worker's disk is the boot disk
        local_ssd_count=0,
        nccl_tuner_config=None,
        gpu_memory_gb=24,
        gpus=1,
        rdma_floor=None,
        # GKE "Run GPUs in Standard node pools", COS table (LATEST_DRIVER_FLOORS' source, as indexed 2026-10-09):
        # DEFAULT is R535 for most GPUs on every version in the table (1.26 to 1.33), and only A4 and A3 Ultra are
        # named apart; the L4's R535 is read from that, its own row not read here. Either way below R580, so the
        # pinned images' CUDA 13 takes LATEST, R580 from 1.31 (StackConfig.gpu_driver, core/config/rules.py)
        default_driver_from="1.26.0-gke.0",
        default_driver_branch=535,
        rdma_nics=0,
        # One GPU and 32 GiB: a worker of 16 GiB (workloads/sizing.py), of which /dev/shm 4 GiB holds a 3 GiB object
        # store; 2 CPUs and 4 GiB left for DaemonSets and the GCS FUSE sidecar. Qwen2.5-0.5B's weights are 1 GB in
        # bf16: a first run's batches are megabytes. Assumed enough, not yet measured on a G2 node.
        worker_shm_gib=4,
        worker_object_store_gib=3,
        daemon_headroom_cpu=2,
        daemon_headroom_gib=4,
    ),
}
"""Node shape of each `gpu.type`."""

MAX_GPUS_PER_NODE = max(machine.gpus for machine in GPU_MACHINES.values())
"""The most GPUs of any machine: the bound of rolloutTensorParallel before the stack's machine is known."""

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

DURABLE_BEFORE_CLOSE: dict[str, bool] = {
    # Cloud Storage FUSE with streaming writes (this stack's mount, pods.GCSFUSE_MOUNT_OPTIONS; the default from gcsfuse
    # v3.0): "the object will be finalized only when the file is closed ... Data is guaranteed to be on GCS only after
    # the file is closed" (GoogleCloudPlatform/gcsfuse docs/semantics.md, "Streaming Writes", stored commit 7b39292,
    # read 2026-12-07); the gcsfuse process is the pod's sidecar (pods.GCSFUSE_POD_ANNOTATION) and goes with the pod.
    "gcs": False,
    # Managed Lustre: POSIX ("With few exceptions, Lustre passes the full POSIX test suite", wiki.lustre.org
    # Understanding_Lustre_Internals, "Lustre Features", read 2026-12-07), with the node's kernel as the client (the
    # nodes reach the instance over LNet, LUSTRE_PORT): what a process has written is the instance's, through the node's
    # page cache, whether or not the file is ever closed; a lost node loses only what its kernel had not yet written back.
    "lustre": True,
}
"""Per `storage.type`: whether a file a pod holds open reaches the storage as it is written. Where it does not, a file
held open for a whole attempt (TensorBoard's event file: jobs/spec/training.py tensorboard_on) is lost with the pod
that writes it; the attempt's own log is closed in parts for that reason (incluster/attempt.py ROLL_SECONDS)."""


@dataclass(frozen=True)
class LustreTier:
    """Capacity rules of one Managed Lustre throughput tier (MB/s per TiB)."""

    min_gib: int
    """Smallest capacity of the tier in GiB."""
    step_gib: int
    """Capacity step of the tier in GiB."""


LUSTRE_TIERS: dict[int, LustreTier] = {
    # DOC-LUS create-instance / increase-capacity (gcp-infrastructure.md §4): in the lower band the
    # step equals the tier minimum. The tier is immutable after creation. The minimums checked again on
    # 2026-12-01 against Managed Lustre's "Performance tiers" page (docs.cloud.google.com/managed-lustre/
    # docs/performance-tiers, stored copy) and "Increase capacity" (same table): unchanged.
    1000: LustreTier(min_gib=9000, step_gib=9000),
    500: LustreTier(min_gib=18000, step_gib=18000),
    250: LustreTier(min_gib=36000, step_gib=36000),
    125: LustreTier(min_gib=72000, step_gib=72000),
}
"""Capacity rules of each Managed Lustre throughput tier (`storage.throughput`)."""

LUSTRE_DYNAMIC_TIER = LustreTier(min_gib=472000, step_gib=472000)
"""Managed Lustre's Dynamic tier (25 MBps per TiB aggregate; "Performance tiers", read 2026-12-01): not
offered. `storage.throughput` cannot ask for it (only LUSTRE_TIERS' keys), although pulumi-gcp 10.2.0 has
`lustre.Instance`'s `dynamic_tier_options` (pulumi_gcp/lustre/instance.py L32): its smallest instance idles
at about five times the smallest 1000 MB/s/TiB one (core/facts/prices.json lustre_dynamic_gib_month) for a
run's few hundred GiB."""

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

SMALL_HEAD_MIN_VCPUS = 8
"""The vCPUs the head's CPU node needs in a one-GPU stack: the head's 4 CPUs (pods.SMALL_HEAD_REQUESTS) and the
staging Job's 1 (STAGING_REQUESTS) with GKE's system pods do not fit the 3.9 allocatable CPUs of a 4-vCPU machine;
the next predefined size is 8 (e2-standard-8 on-demand at $0.27/h in us-central1, below the spot L4 node's $0.34/h:
core/facts/prices.json)."""

SMALL_HEAD_MIN_MEMORY_GIB = 28
"""Memory the head's CPU node needs in a one-GPU stack: the head's 12 GiB and the staging Job's 8 GiB, GKE's
reservation (GKE_MEMORY_RESERVATION: about 3.5 GiB of 30) and about 1 GiB of system pods; a 16 GiB machine leaves only
13 GiB allocatable. 8-vCPU standard types have 30 (n1) or 32 GiB."""

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

OLDEST_IMAGE_PYTHON = (3, 12)
"""The oldest Python among the pinned framework images (DEFAULT_IMAGES), which runs the in-cluster package
(incluster/): verl's image is built `FROM nvidia/cuda:13.0.2-devel-ubuntu24.04` and installs into
/usr/local/lib/python3.12/dist-packages (verl-project/verl docker/Dockerfile.stable.vllm, 2cf5706); NeMo-RL
v0.7.0's runs /opt/nemo_rl_venv on Python 3.13 (NVIDIA-NeMo/RL docker/Dockerfile at v0.7.0). pyproject.toml's
ruff target for incluster/ is the same version."""
