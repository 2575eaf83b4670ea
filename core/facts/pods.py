"""In-cluster workloads: gIB, the Ray pods' labels, ports and sizes, Cloud Storage FUSE, staging.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

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
`k8s-app: konnectivity-agent`). jobs/submit/access.py reaches the dashboard by this path."""

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

SMALL_HEAD_MAX_GPUS = 1
"""The most GPUs of a stack whose head is SMALL_HEAD_REQUESTS (a first run on one L4); above it HEAD_REQUESTS."""

SMALL_HEAD_REQUESTS = {"cpu": "4", "memory": "12Gi", "ephemeral-storage": "9Gi"}
"""The Ray head of a one-GPU stack. HEAD_REQUESTS' 12 CPUs and 32 GB come from KES's samples for 8-GPU nodes; what
the head runs for a first run of Qwen2.5-0.5B is Ray's GCS, dashboard and raylet, verl's TaskRunner (`@ray.remote
class TaskRunnerV1`, verl v0.9.0 verl/trainer/main_ppo.py L103: dataset, reward, the step's batches of 512 samples of at
most 1,536 tokens, megabytes) and half of verl's 8 agent loop workers, which verl places round-robin over every node
with CPUs (verl v0.9.0 verl/experimental/agent_loop/agent_loop.py L1201-1215; rollout.agent.num_workers 8 in
trainer/config/ppo_trainer.yaml L242): 4 CPUs, one each for the TaskRunner and Ray's own processes and two for the
workers' tokenising, and 12 GiB (about 1 GiB each for the TaskRunner's and the workers' processes with the tokenizer,
Ray's processes and the 8 GiB /dev/shm ceiling left unused). Assumed from those sources, not measured."""

GKE_MEMORY_RESERVATION: tuple[tuple[float, float], ...] = (
    # GKE "Plan node sizes" (cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes, memory and
    # CPU reservations): 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112,
    # 2% of the rest; plus GKE_EVICTION_MIB for eviction.
    (4, 0.25),
    (4, 0.20),
    (8, 0.10),
    (112, 0.06),
    (float("inf"), 0.02),
)
"""GKE's kubelet/system memory reservation as (GiB band, share) from the first GiB up."""

GKE_EVICTION_MIB = 100
"""GKE's hard eviction threshold on memory (same page)."""

GKE_CPU_RESERVATION: tuple[tuple[float, float], ...] = (
    # Same page: 6% of the first core, 1% of the next, 0.5% of the next 2, 0.25% of the rest.
    (1, 0.06),
    (1, 0.01),
    (2, 0.005),
    (float("inf"), 0.0025),
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

EPHEMERAL_SHARE_OF_BOOT_DISK = 0.3
"""Share of the boot disk (NODE_BOOT_DISK_GB) a worker requests on a machine without local SSDs: the disk also holds
the node's system and the pulled image (verl's about 12 GB compressed, core/facts/startup.py), and the kubelet keeps
10% for eviction (an engineering margin, not a published figure)."""

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
