"""How long the stack takes from `pulumi up` to the first training step, and from a preemption to the next one:
each kind of resource's typical creation time, a GPU node's boot, the image pull (whole, streamed, or from a disk
cache on the node), Ray's join and the checkpoint load. Each figure carries its source and, where no published
figure was found, says so: such a figure is a stated assumption (`published=False`). The plan's model
(plan/startup.py) adds them up along the stack's dependency graph.

Sources, read 2026-12-02:
DOC-IS = GKE "Use Image streaming to pull container images" (docs.cloud.google.com/kubernetes-engine/docs/how-to/
image-streaming); DOC-SBD = GKE "Use secondary boot disks to preload data or container images" (same site,
how-to/data-container-image-preloading); DOC-ARP = Artifact Registry "Reduce latency with image prewarming"
(docs.cloud.google.com/artifact-registry/docs/prewarm-images); DOC-LUS-PERF = Managed Lustre "Performance tiers"
(docs.cloud.google.com/managed-lustre/docs/performance-tiers); BLOG-GA = Google Cloud blog, "Introducing GKE image
streaming for fast application startup and autoscaling" (William Denniss, 2021-11-03); BLOG-DH = William Denniss
(GKE group product manager), "Using Image Streaming with DockerHub" (wdenniss.com/using-image-streaming-with-
dockerhub); BLOG-UNION = Union.ai, "We cut container cold boot from minutes to seconds. Here's how." (union.ai blog).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Figure:
    """One duration (or rate) and where it comes from."""

    value: float
    """The figure, in the unit its name says."""
    source: str
    """Where it comes from, or why it is an assumption."""
    published: bool = True
    """False: no published figure was found and `value` is an assumption, stated in `source`."""


ESTIMATE = "engineering estimate, no published figure"

RESOURCE_CREATION_SECONDS: dict[str, Figure] = {
    "gpu-node-pool": Figure(
        35 * 60,
        "NVIDIA/aicr#2065: one GPU node pool took about 35 min (day-two-operations.md, Time to first step); its"
        " nodes boot inside it when the pool is created with them",
    ),
    "cluster": Figure(10 * 60, f"{ESTIMATE}; Cluster Toolkit: a deployment takes 10-20 minutes or more", False),
    "cpu-node-pool": Figure(4 * 60, ESTIMATE, False),
    "gcp:lustre/instance:Instance": Figure(20 * 60, ESTIMATE, False),
    "gcp:servicenetworking/connection:Connection": Figure(2 * 60, ESTIMATE, False),
    "gcp:projects/service:Service": Figure(60, ESTIMATE, False),
    "network": Figure(30, ESTIMATE, False),
    "kubernetes:batch/v1:Job": Figure(
        15 * 60, f"{ESTIMATE}: the model, data and verl download of the staging Job", False
    ),
    "pulumi-python:dynamic:Resource": Figure(60, f"{ESTIMATE}: the GPU readiness gate and the submission", False),
    "restored-run": Figure(
        5,
        f"{ESTIMATE}: the import of a parked run reads the parked bucket's marker; nothing is parked on a first up"
        " (an import after parking takes as long as its bytes at the instance's throughput)",
        False,
    ),
    "other": Figure(5, ESTIMATE, False),
}
"""Typical creation time per kind of resource (plan/startup.py kind_of). The RayCluster is not here: `pulumi up`
waits until KubeRay reports it ready (core/facts/pods.py KUBERAY_READY_WAIT), which the model builds from the GPU
node's boot, the image pull and Ray's join below."""

GPU_NODE_BOOT_SECONDS = Figure(
    5 * 60,
    "BLOG-UNION: 'Node provisioning: The cloud provider spins up a VM (1-5 minutes from zero)'; the upper end is"
    " taken for a GPU node, which also loads its driver at boot (no GKE figure for GPU nodes found)",
)
"""A new GPU node's boot until pods can start on it: an Autopilot, flex-start or capacity-ladder node made for the
pending Ray workers, and every node that replaces a preempted one."""

WHOLE_PULL_SECONDS_PER_GB = Figure(
    27.0,
    "BLOG-UNION: 'A standard Docker pull of a 10GB image on a fresh node takes 4-5 minutes' (4.5 min per 10 GB);"
    " BLOG-DH measured 3m50s for Google's deep learning image pulled whole (its size not given)",
)
"""Seconds per GB of image a node takes to pull an image whole (download and unpack) before its container starts."""

STREAMED_PULL_SECONDS = Figure(
    20.0,
    "BLOG-DH: Google's deep learning image through a remote Artifact Registry repository with image streaming: 'the"
    " container is created in just 20s, instead of 3m50s'; BLOG-GA: from ImagePulling to Running 'in a couple of"
    " seconds (regardless of container size)'. DOC-IS: a workload that reads many of the image's files at start"
    " reads them remotely and starts slower; no figure for that, not modelled",
)
"""Seconds from a streamed pull's start to the container's start, whatever the image's size (streaming's later
pulls: FIRST_PULL_STREAMS)."""

FIRST_PULL_STREAMS = False
"""Whether the first pull of an eligible image benefits from streaming: no. DOC-IS "Limitations": "You might not
notice the benefits of Image streaming during the first pull of an eligible image. However, after Image streaming
caches the image, future image pulls on any cluster benefit from Image streaming"; DOC-ARP: the streaming cache
"typically populates on the first pull from a client that has image streaming enabled". So the first pull is the
image version's first anywhere (the stack's first `up`, a new tag), not each node's first: a node that replaces a
preempted one streams. Through a remote repository that first pull also fetches the image from its upstream
(core/facts/gcp.py DOC-ARR: a remote repository caches each version on its first request)."""

DISK_CACHE_PULL_SECONDS = Figure(
    0.0,
    "DOC-SBD: 'Adding secondary boot disks to your node pools does not increase the node provisioning time. GKE"
    " provisions secondary boot disks from a disk image in parallel with the node provisioning process'; no"
    " published figure for starting a container from the preloaded image: assumed nothing beyond the node's boot",
    published=False,
)
"""Seconds a node with the image on its secondary boot disk (`gpu.imageCacheDisk`) takes to pull it: the image is
there before the first pull, so first and later pulls alike."""

ASSUMED_IMAGE_GB = Figure(
    20.0,
    "NOT FOUND: nvcr.io is not reachable from where this was written and no stored page gives the tag's compressed"
    " size (NGC's catalog page is not stored; a derived arm64 image built on v0.7.0 is about 45 GiB as SquashFS,"
    " Alvorecer721/Nemo-RL infra/slurm/cscs/README.md, uncompressed); assumed 20 GB ('tens of GB', issue 23). Check"
    " with `crane manifest IMAGE` (the sum of the layers' sizes) and correct it here",
    published=False,
)
"""Compressed size of a framework image without a published figure (nvcr.io/nvidia/nemo-rl:v0.7.0, or a user's
`workload.image`), in GB: what a whole pull downloads."""

VERL_IMAGE_GB = Figure(
    12.0,
    "YaoZengzeng/kthena examples/kthena-router/verl/README.md, 'Time budget': 'The one-time costs are the ~12GB"
    " image pull' of the demo's pod, whose image is verlai/verl:vllm024.dev2 (pod.yaml @d23f7b59); a user's note of"
    " the download, not a registry's figure (Docker Hub not reachable from where this was written)",
)
"""Compressed size of verl's pinned vLLM image, in GB: what a whole pull downloads."""

IMAGE_GB: dict[str, Figure] = {
    "verlai/verl:vllm024.dev2": VERL_IMAGE_GB,
    "nvcr.io/nvidia/nemo-rl:v0.7.0": ASSUMED_IMAGE_GB,
}
"""Compressed size of each pinned framework image (core/facts/platform.py DEFAULT_IMAGES), in GB."""

RAY_JOIN_SECONDS = Figure(
    10.0,
    "no published figure for a Ray worker pod on GKE; this project's measurement of a local `ray start` head, about"
    " 10 s (docs/development.md, 2026-12-02), taken for the worker's start and join",
    published=False,
)
"""Seconds from a Ray pod's container start to its node joining the cluster (the pod ready)."""

FRAMEWORK_SETUP_SECONDS: dict[str, Figure | None] = {
    "verl": None,
    "nemo-rl": None,
}
"""Seconds from a submitted attempt to its first step (model load, the rollout engine's start, the first rollout and
update), per framework: None, no published figure found for either (Google's NeMo-RL codelab gives 45-60 min of
setup for the whole tutorial, cluster included, day-two-operations.md). Not included in the estimates, which say so."""

CHECKPOINT_BYTES_PER_PARAMETER = Figure(
    12.0,
    "verl v0.9.1 verl/utils/checkpoint/fsdp_checkpoint_manager.py L72: a resume loads 'model', 'optimizer' and"
    " 'extra'; fp32 weights (4 bytes) and AdamW's two fp32 moments (8) (core/facts/memory.py TRAINING_STATES, the"
    " same 4 + 8 for NeMo-RL's policies)",
)
"""Bytes per parameter a resumed attempt reads from the newest checkpoint."""

LUSTRE_THROUGHPUT_SOURCE = (
    "DOC-LUS-PERF: an instance's throughput is its tier's MB/s per TiB times its capacity in TiB"
    " (core/facts/platform.py LUSTRE_TIERS)"
)
"""Where the checkpoint load's read rate on Managed Lustre comes from."""

GCS_CHECKPOINT_READ = (
    "no published read rate of Cloud Storage FUSE for a checkpoint's shards found: the checkpoint load is not included"
)
"""Why the estimate leaves out the checkpoint load on Cloud Storage."""
