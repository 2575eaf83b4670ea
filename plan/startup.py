"""The plan's estimate of the time from `pulumi up` to the first training step and from a preemption to the next
step, from the figures of core/facts/startup.py (each with its source) along the recorded stack's dependency graph.

From `up`: every resource starts as soon as what it waits for exists (plan/graph.py critical_path); the RayCluster
is done when KubeRay reports it ready (core/facts/pods.py KUBERAY_READY_WAIT), which takes the GPU nodes' boot (when
the pool is not created with them), the image's first pull and Ray's join. After a preemption: the replacement
node's boot, a later pull of the image, Ray's join and the checkpoint load. The framework's setup to step 1 has no
published figure: it is named as not included, never guessed. Pure: a config and a recording in, figures out.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from core.config.model import StackConfig
from core.facts.gcp import ARTIFACT_REGISTRY_HOST_SUFFIX
from core.facts.startup import (
    ASSUMED_IMAGE_GB,
    CHECKPOINT_BYTES_PER_PARAMETER,
    DISK_CACHE_PULL_SECONDS,
    FIRST_PULL_STREAMS,
    FRAMEWORK_SETUP_SECONDS,
    GCS_CHECKPOINT_READ,
    GPU_NODE_BOOT_SECONDS,
    IMAGE_GB,
    LUSTRE_THROUGHPUT_SOURCE,
    RAY_JOIN_SECONDS,
    RESOURCE_CREATION_SECONDS,
    STREAMED_PULL_SECONDS,
    WHOLE_PULL_SECONDS_PER_GB,
    Figure,
)
from core.names import HEAD_NODE_POOL, PARK_GUARD, RESTORED_RUN, parse_image
from jobs.runs.goodput import duration
from jobs.spec.training import model_size_b
from plan.graph import critical_path, waits_for
from plan.monitor import Recorded

STARTUP_FILE = "first-step.json"
"""The file `python -m plan` writes the estimate to, beside plan.json."""

RAYCLUSTER_TYPE = "kubernetes:ray.io/v1:RayCluster"
"""Type token of the RayCluster, whose readiness the model builds from the node's steps."""

RAYCLUSTER_READY = "raycluster-ready"
"""kind_of's name for the RayCluster: its pods started and joined."""

NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
"""Type token of a GKE node pool."""

NETWORK_TYPES = ("gcp:compute/",)
"""Type prefixes created in about half a minute (networks, subnets, firewalls, routers, NAT, addresses)."""

NOT_INCLUDED = None
"""A step's seconds when no published figure exists: named, not added."""

KIND_NAMES = {
    "gcp:projects/service:Service": "APIs",
    "network": "network",
    "cluster": "cluster",
    "cpu-node-pool": "head's CPU pool",
    "gpu-node-pool": "GPU pool",
    "gcp:lustre/instance:Instance": "Lustre",
    "gcp:servicenetworking/connection:Connection": "private service access",
    "kubernetes:batch/v1:Job": "staging Job",
    RAYCLUSTER_READY: "RayCluster ready",
    "pulumi-python:dynamic:Resource": "readiness gate and submission",
    "other": "in-cluster objects",
}
"""How the summary names each kind of resource along the critical path."""


def kind_of(resource: Recorded) -> str:
    """The RESOURCE_CREATION_SECONDS key of a custom resource, or RAYCLUSTER_READY."""
    if resource.type == NODE_POOL_TYPE:
        return "cpu-node-pool" if resource.inputs.get("name") == HEAD_NODE_POOL else "gpu-node-pool"
    if resource.type == "gcp:container/cluster:Cluster":
        return "cluster"
    if resource.type == RAYCLUSTER_TYPE:
        return RAYCLUSTER_READY
    if resource.type.startswith(NETWORK_TYPES):
        return "network"
    if resource.type == "pulumi-python:dynamic:Resource" and resource.name == RESTORED_RUN:
        return RESTORED_RUN
    if resource.type == "pulumi-python:dynamic:Resource" and resource.name == PARK_GUARD:
        return "other"  # its create keeps its inputs and calls nothing (jobs/runs/park_guard.py)
    return resource.type if resource.type in RESOURCE_CREATION_SECONDS else "other"


@dataclass(frozen=True)
class Step:
    """One step on the way to a training step."""

    name: str
    """What happens."""
    seconds: float | None
    """How long it takes; None when no published figure exists (not included in the total)."""
    source: str
    """Where the figure comes from, or why there is none."""


@dataclass(frozen=True)
class PathToStep:
    """The steps from an event (`up`, a preemption) to the next training step."""

    steps: tuple[Step, ...]
    """The steps, one after another."""

    @property
    def seconds(self) -> float:
        """The steps' seconds added up, those without a figure left out."""
        return sum(step.seconds for step in self.steps if step.seconds is not None)

    def left_out(self) -> list[str]:
        """The steps without a figure."""
        return [step.name for step in self.steps if step.seconds is None]


@dataclass(frozen=True)
class StartupEstimate:
    """The stack's expected time to its first training step from `up` and after a preemption."""

    image: str
    """The image the pods pull."""
    image_gb: Figure
    """Its compressed size in GB."""
    streamed: bool
    """Whether GKE streams it (an Artifact Registry image on a node with image streaming)."""
    disk_cache: bool
    """Whether the GPU nodes carry it on a secondary boot disk."""
    chain: tuple[str, ...]
    """The kinds of resource along the critical path of `up`, first created first."""
    serial_seconds: float
    """The resources' creation times added up, one after another (beside the critical path)."""
    raycluster_ready: tuple[Step, ...]
    """What the RayCluster's readiness takes on `up`: the GPU nodes' boot (when not inside the pool's creation),
    the image's first pull, Ray's join."""
    from_up: PathToStep
    """From `pulumi up` to the first step."""
    after_preemption: PathToStep
    """From a preemption to the next attempt's first step."""


def streams_image(config: StackConfig) -> bool:
    """Whether GKE streams the pulled image: Standard pools with streaming on (`workload.imageSource: registry`), or
    Autopilot, which streams eligible images by itself, pulling from Artifact Registry (core/facts/gcp.py
    STREAMING_SOURCES, AUTOPILOT_STREAMS_BY_ITSELF)."""
    if config.streams_images_on_pools():
        return True
    host = parse_image(config.pulled_image()).host
    return config.cluster.mode == "autopilot" and host.endswith(ARTIFACT_REGISTRY_HOST_SUFFIX)


def image_size(config: StackConfig) -> Figure:
    """The compressed size of the workload image (IMAGE_GB), the stated assumption for an image not listed there."""
    return IMAGE_GB.get(config.workload.resolved_image().image, ASSUMED_IMAGE_GB)


def pull_step(size: Figure, streamed: bool, disk_cache: bool, first: bool) -> Step:
    """The image pull on a GPU node: from its disk cache, streamed (a later pull only), or whole."""
    if disk_cache:
        return Step(
            "image pull from the node's disk cache", DISK_CACHE_PULL_SECONDS.value, DISK_CACHE_PULL_SECONDS.source
        )
    if streamed and (not first or FIRST_PULL_STREAMS):
        return Step("image pull, streamed", STREAMED_PULL_SECONDS.value, STREAMED_PULL_SECONDS.source)
    why = ", a first pull is not streamed" if streamed else ""
    return Step(
        f"image pull, whole ({size.value:g} GB{why})",
        size.value * WHOLE_PULL_SECONDS_PER_GB.value,
        f"{size.value:g} GB x {WHOLE_PULL_SECONDS_PER_GB.value:g} s/GB: {WHOLE_PULL_SECONDS_PER_GB.source}; size: {size.source}",
    )


def nodes_boot_with_pool(resources: Iterable[Recorded]) -> bool:
    """Whether a GPU pool is created with its nodes (Standard, no ladder, not flex-start: infra/nodepools.py
    initial_node_count); else the nodes boot for the pending Ray workers, after the RayCluster is applied."""
    return any(
        kind_of(resource) == "gpu-node-pool" and (resource.inputs.get("initialNodeCount") or 0) > 0
        for resource in resources
    )


def setup_step(framework: str) -> Step:
    """The framework's setup to its first step: a figure where one is published, else not included."""
    figure = FRAMEWORK_SETUP_SECONDS.get(framework)
    if figure is None:
        return Step(f"{framework}'s setup to step 1", NOT_INCLUDED, "no published figure: not included")
    return Step(f"{framework}'s setup to step 1", figure.value, figure.source)


def checkpoint_step(config: StackConfig) -> Step:
    """The resumed attempt's read of the newest checkpoint: its bytes over the storage's read rate."""
    # A loaded config always has the size: validation refuses a model without one
    # (jobs/spec/validate.py model_size_problems).
    size_b = model_size_b(config.workload) or 0.0
    name = "checkpoint load"
    gigabytes = size_b * CHECKPOINT_BYTES_PER_PARAMETER.value
    if config.storage.type != "lustre" or config.storage.throughput is None or config.storage.capacity_gib is None:
        return Step(f"{name} ({gigabytes:g} GB)", NOT_INCLUDED, GCS_CHECKPOINT_READ)
    megabytes_per_s = config.storage.throughput * config.storage.capacity_gib / 1024
    return Step(
        f"{name} ({gigabytes:g} GB at {megabytes_per_s:.0f} MB/s)",
        gigabytes * 1000 / megabytes_per_s,
        f"{size_b:g}B parameters x {CHECKPOINT_BYTES_PER_PARAMETER.value:g} bytes"
        f" ({CHECKPOINT_BYTES_PER_PARAMETER.source}); read rate: {LUSTRE_THROUGHPUT_SOURCE}",
    )


def estimate_startup(
    config: StackConfig,
    resources: Iterable[Recorded],
    streamed: bool | None = None,
    disk_cache: bool | None = None,
) -> StartupEstimate:
    """The stack's expected time to its first step from `up` and after a preemption. `streamed`: None for what the
    stack does (streams_image), or forced on or off; `disk_cache`: the GPU nodes carry the image on a secondary boot
    disk, None for what the stack does (`gpu.imageCacheDisk` set), or forced on or off."""
    resources = list(resources)
    streamed = streams_image(config) if streamed is None else streamed
    disk_cache = config.gpu.image_cache_disk is not None if disk_cache is None else disk_cache
    size = image_size(config)
    boot = Step("GPU node boot", GPU_NODE_BOOT_SECONDS.value, GPU_NODE_BOOT_SECONDS.source)
    join = Step("Ray join", RAY_JOIN_SECONDS.value, RAY_JOIN_SECONDS.source)
    first_pull = pull_step(size, streamed, disk_cache, first=True)
    ready = ([] if nodes_boot_with_pool(resources) else [boot]) + [first_pull, join]
    seconds = {}
    for resource in resources:
        if resource.custom:
            kind = kind_of(resource)
            seconds[resource.urn] = (
                sum(step.seconds or 0.0 for step in ready)
                if kind == RAYCLUSTER_READY
                else RESOURCE_CREATION_SECONDS[kind].value
            )
    path = critical_path(seconds, waits_for(resources))
    by_urn = {resource.urn: resource for resource in resources}
    chain = tuple(kind_of(by_urn[urn]) for urn in path.chain if urn in by_urn and by_urn[urn].custom)
    to_submission = Step(
        "critical path to the job's submission",
        path.seconds,
        f"{chain_text(chain)}: each kind's figure and source in core/facts/startup.py RESOURCE_CREATION_SECONDS;"
        " the RayCluster's readiness step by step in rayClusterReady",
    )
    setup = setup_step(config.workload.framework)
    return StartupEstimate(
        image=config.pulled_image(),
        image_gb=size,
        streamed=streamed,
        disk_cache=disk_cache,
        chain=chain,
        serial_seconds=path.serial_seconds,
        raycluster_ready=tuple(ready),
        from_up=PathToStep((to_submission, setup)),
        after_preemption=PathToStep(
            (boot, pull_step(size, streamed, disk_cache, first=False), join, checkpoint_step(config), setup)
        ),
    )


def how_pulled(estimate: StartupEstimate) -> str:
    """How the GPU nodes get the image, for the summary."""
    if estimate.disk_cache:
        return "from the node's disk cache"
    return "streamed after its first pull" if estimate.streamed else "pulled whole on every new node"


def chain_text(chain: Iterable[str]) -> str:
    """The critical path's kinds by their names, a run of the same kind named once."""
    names: list[str] = []
    for kind in chain:
        name = KIND_NAMES.get(kind, kind)
        if not names or names[-1] != name:
            names.append(name)
    return " -> ".join(names)


def steps_text(steps: Iterable[Step]) -> str:
    """`name 5m 00s, name 20s` of the steps with a figure."""
    return ", ".join(f"{step.name} {duration(step.seconds)}" for step in steps if step.seconds is not None)


def startup_lines(estimate: StartupEstimate) -> list[str]:
    """The plan summary's lines: from `up` and after a preemption, what is left out, how the image is pulled."""

    def left_out(path: PathToStep) -> str:
        missing = path.left_out()
        return f"; {' and '.join(missing)} not included (no figure)" if missing else ""

    up, preempted = estimate.from_up, estimate.after_preemption
    beside = "" if RAYCLUSTER_READY in estimate.chain else " (beside the critical path)"
    size = f"{estimate.image_gb.value:g} GB" + ("" if estimate.image_gb.published else ", size assumed")
    return [
        f"first step: ~{duration(up.seconds)} from `up` ({STARTUP_FILE}){left_out(up)}",
        f"  along {chain_text(estimate.chain)}",
        f"  RayCluster ready{beside}: {steps_text(estimate.raycluster_ready)}",
        f"after a preemption: ~{duration(preempted.seconds)} to the next step{left_out(preempted)}",
        f"  {steps_text(preempted.steps)}",
        f"image {estimate.image} ({size}): {how_pulled(estimate)}",
    ]


def _steps_json(path: PathToStep) -> dict:
    return {
        "seconds": round(path.seconds, 1),
        "notIncluded": path.left_out(),
        "steps": [
            {
                "name": step.name,
                "seconds": None if step.seconds is None else round(step.seconds, 1),
                "source": step.source,
            }
            for step in path.steps
        ],
    }


def render_startup_json(estimate: StartupEstimate) -> str:
    """first-step.json: both paths step by step with each figure's source, the image and how it is pulled."""
    document = {
        "image": {
            "reference": estimate.image,
            "sizeGb": estimate.image_gb.value,
            "sizePublished": estimate.image_gb.published,
            "sizeSource": estimate.image_gb.source,
            "streamed": estimate.streamed,
            "diskCache": estimate.disk_cache,
        },
        "criticalPath": list(estimate.chain),
        "rayClusterReady": [
            {"name": step.name, "seconds": round(step.seconds or 0.0, 1), "source": step.source}
            for step in estimate.raycluster_ready
        ],
        "fromUp": _steps_json(estimate.from_up),
        "afterPreemption": _steps_json(estimate.after_preemption),
    }
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
