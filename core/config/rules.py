"""The cross-rules: each a `StackConfig -> list[Problem]` function tying several keys together, in one
registry (CONFIG_RULES), as Cluster Toolkit's validator registry is."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from core import names
from core.config.model import (
    PROJECT_NAMESPACE,
    RDMA_SPLIT_BITS,
    StackConfig,
    bucket_name_problem,
    driver_branch_for,
    pinned_below,
)
from core.config.problems import Problem
from core.facts.capacity import AUTOPILOT_LADDER_REFUSAL, COMPUTE_CLASS_FLOOR
from core.facts.gcp import UPSTREAMS
from core.facts.imagecache import AUTOPILOT_IMAGE_CACHE_REFUSAL, CROSS_PROJECT_REFUSAL, IMAGE_CACHE_FLOORS
from core.facts.job import GATED_MODEL_OWNERS, MODEL_CONTEXT_TOKENS
from core.facts.platform import (
    FLEX_START_FLOOR,
    LATEST_DRIVER_FLOORS,
    LUSTRE_CSI_FLOOR,
    LUSTRE_PEERING_PREFIX_MAX,
    LUSTRE_TIERS,
    MACHINE_CLASS_GIB_PER_VCPU,
    NEMO_RL_RELEASES,
    RAY_OPERATOR_FLOOR,
    RDMA_SUBNET_COUNT,
    SUBNET_MAX_PREFIX,
    SUBNET_RESERVED_ADDRESSES,
    SUPPORTED_PAIRS,
    GkeVersion,
)
from core.facts.privilege import KMS_KEY_PATTERN
from core.facts.zones import GPU_MACHINE_ZONES, GPU_ZONES_DATE, GPU_ZONES_SOURCE, region_of, zones_with
from core.names import is_artifact_registry_host, parse_image


def _version_floors(cfg: StackConfig) -> list[tuple[str, str]]:
    floors = [(RAY_OPERATOR_FLOOR, "the Ray operator add-on")]
    if cfg.gpu_machine.rdma_floor is not None:
        floors.append(
            (
                cfg.gpu_machine.rdma_floor[cfg.cluster.mode],
                f"GPUDirect RDMA on {cfg.gpu.type.upper()} ({cfg.cluster.mode})",
            )
        )
    if cfg.storage.type == "lustre":
        floors.append((LUSTRE_CSI_FLOOR, "the Managed Lustre CSI driver"))
    if cfg.gpu_machine.rdma_floor is None and cfg.gpu.capacity is not None:
        floors.append((COMPUTE_CLASS_FLOOR, "custom compute classes (gpu.capacity)"))
    if "flex-start" in cfg.gpu.ladder:
        floors.append((FLEX_START_FLOOR, "flex-start node pools"))
    if cfg.gpu.image_cache_disk is not None:
        floors.append((IMAGE_CACHE_FLOORS[cfg.cluster.mode], "secondary boot disks (gpu.imageCacheDisk)"))
    return floors


def _zone_problems(cfg: StackConfig) -> list[Problem]:
    """gcp:region must have a zone with one of the GPU machines, and the zone must lie in that region."""
    if not any(zones_with(machine, cfg.region) for machine in GPU_MACHINE_ZONES):
        regions = sorted({region_of(zone) for zones in GPU_MACHINE_ZONES.values() for zone in zones})
        return [
            Problem(
                "gcp:region",
                f"has no zone with a B200, H200 or L4 machine; regions that have one: {', '.join(regions)}"
                f" ({GPU_ZONES_SOURCE}, read {GPU_ZONES_DATE}), got {cfg.region!r}",
            )
        ]
    if not re.fullmatch(rf"{re.escape(cfg.region)}-[a-z]", cfg.zone):
        # The zone that offers the most GPU machines, then the first by name.
        in_region = [zone for machine in GPU_MACHINE_ZONES for zone in zones_with(machine, cfg.region)]
        example = min(in_region, key=lambda zone: (-in_region.count(zone), zone))
        return [
            Problem(
                f"{PROJECT_NAMESPACE}:zone",
                f"must be a zone of gcp:region {cfg.region} (such as {example}), got {cfg.zone!r}",
            )
        ]
    return []


def _gpu_zone_problems(cfg: StackConfig) -> list[Problem]:
    """The zone must offer the stack's GPU machine (core/facts/zones.py); the refusal names the zones that do."""
    machine = cfg.gpu_machine.machine_type
    if _zone_problems(cfg) or cfg.zone in zones_with(machine):
        return []
    what = f"{machine} ({cfg.gpu.type.upper()})"
    source = f"{GPU_ZONES_SOURCE}, read {GPU_ZONES_DATE}"
    in_region = zones_with(machine, cfg.region)
    if not in_region:
        regions = sorted({region_of(zone) for zone in zones_with(machine)})
        return [
            Problem(
                "gcp:region",
                f"has no zone with {what}; regions that have it: {', '.join(regions)} ({source}), got {cfg.region!r}",
            )
        ]
    return [
        Problem(
            f"{PROJECT_NAMESPACE}:zone",
            f"{cfg.zone} has no {what}; zones of {cfg.region} that have it: {', '.join(in_region)} ({source})",
        )
    ]


def _version_problems(cfg: StackConfig) -> list[Problem]:
    problems = []
    if cfg.cluster.min_version:
        version = GkeVersion.parse(cfg.cluster.min_version)
        for floor, reason in _version_floors(cfg):
            if version.key() < GkeVersion.parse(floor).key():
                problems.append(
                    Problem(
                        f"{PROJECT_NAMESPACE}:cluster.minVersion",
                        f"must be at least {floor} for {reason}, got {cfg.cluster.min_version}",
                    )
                )
    return problems


def _head_machine_problems(cfg: StackConfig) -> list[Problem]:
    """The head's CPU node must hold the head the stack's size asks for (StackConfig.head_requests, head_floor)."""
    value = cfg.cluster.head_machine_type
    match = re.fullmatch(r"[a-z][a-z0-9]*-(standard|highmem|highcpu)-(\d+)", value)
    if match is None:
        return []
    machine_class, vcpus = match.group(1), int(match.group(2))
    min_vcpus, min_gib = cfg.head_floor
    requests = cfg.head_requests
    key = f"{PROJECT_NAMESPACE}:cluster.headMachineType"
    if vcpus < min_vcpus:
        return [
            Problem(
                key, f"must have at least {min_vcpus} vCPUs (the Ray head asks for {requests['cpu']}), got {value!r}"
            )
        ]
    if vcpus * MACHINE_CLASS_GIB_PER_VCPU[machine_class] < min_gib:
        memory = requests["memory"].removesuffix("Gi")
        return [
            Problem(
                key,
                f"must have at least {min_gib} GiB of memory (the Ray head asks for {memory} GiB;"
                f" a {machine_class} type may have as little as {MACHINE_CLASS_GIB_PER_VCPU[machine_class]}"
                f" GiB per vCPU), got {value!r}",
            )
        ]
    return []


def _capacity_problems(cfg: StackConfig) -> list[Problem]:
    ns = PROJECT_NAMESPACE
    problems: list[Problem] = []

    def add(path: str, message: str) -> None:
        problems.append(Problem(f"{ns}:{path}", message))

    gpu = cfg.gpu
    if gpu.provisioning == "reservation" and not gpu.reservation:
        add("gpu.reservation", "is required when gpu.provisioning is 'reservation'")
    on_ladder = " or gpu.capacity has the rung 'reservation'" if gpu.capacity is not None else ""
    if "reservation" not in gpu.ladder and gpu.reservation:
        add(
            "gpu.reservation",
            f"is only allowed when gpu.provisioning is 'reservation'{on_ladder}, not {gpu.provisioning!r}",
        )
    if "reservation" not in gpu.ladder and cfg.pricing.reservation_hourly is not None:
        add(
            "pricing.reservationHourly",
            f"is only for gpu.provisioning 'reservation'{on_ladder}, not {gpu.provisioning!r}",
        )
    if cfg.cluster.mode == "autopilot" and "head_machine_type" in cfg.cluster.model_fields_set:
        add("cluster.headMachineType", "is only for cluster.mode 'standard' (Autopilot chooses the head's machine)")
    elif cfg.cluster.mode == "standard":
        problems.extend(_head_machine_problems(cfg))
    if cfg.cluster.mode == "autopilot" and gpu.provisioning in ("reservation", "flex-start"):
        # Kept (issue 22 item 3): no source read shows A4/A3 Ultra with RDMA on Autopilot under reservation
        # or flex-start (core/facts/capacity.py AUTOPILOT_LADDER_REFUSAL names the sources).
        add("gpu.provisioning", f"must be 'spot' or 'on-demand' on Autopilot, got {gpu.provisioning!r}")
    return problems + _ladder_problems(cfg)


def _ladder_problems(cfg: StackConfig) -> list[Problem]:
    """`gpu.capacity`: today's pool keeps its name as the rung of `gpu.provisioning`, so that rung is on the
    ladder; the reservation rung names its reservation; Standard only (AUTOPILOT_LADDER_REFUSAL)."""
    gpu = cfg.gpu
    if gpu.capacity is None:
        return []
    ns = PROJECT_NAMESPACE
    problems = []
    if cfg.cluster.mode == "autopilot":
        problems.append(Problem(f"{ns}:gpu.capacity", AUTOPILOT_LADDER_REFUSAL))
    if gpu.provisioning not in gpu.capacity:
        problems.append(
            Problem(
                f"{ns}:gpu.provisioning",
                f"must be one of gpu.capacity's rungs {gpu.capacity!r} (its pool keeps the name it has today),"
                f" got {gpu.provisioning!r}",
            )
        )
    if "reservation" in gpu.capacity and gpu.provisioning != "reservation" and not gpu.reservation:
        problems.append(Problem(f"{ns}:gpu.reservation", "is required when gpu.capacity has the rung 'reservation'"))
    return problems


def _image_cache_problems(cfg: StackConfig) -> list[Problem]:
    """`gpu.imageCacheDisk`: Standard only, with image streaming on the pools (`workload.imageSource: registry`,
    core/facts/imagecache.py IMAGE_CACHE_NEEDS_STREAMING), a disk image of gcp:project; its version floor is in
    _version_floors."""
    gpu = cfg.gpu
    if gpu.image_cache_disk is None:
        return []
    key = f"{PROJECT_NAMESPACE}:gpu.imageCacheDisk"
    if cfg.cluster.mode == "autopilot":
        return [Problem(key, AUTOPILOT_IMAGE_CACHE_REFUSAL)]
    problems = []
    if not cfg.streams_images_on_pools():
        problems.append(
            Problem(
                key,
                "needs image streaming on the GPU pools (GKE's secondary boot disks work only with it), which the"
                " stack turns on with workload.imageSource 'registry' (unset, the default for a Docker Hub or nvcr.io"
                " image); unset workload.imageSource or set it to 'registry', and build the disk image from the image"
                " path the pods then pull (docs/configuration.md, Images)",
            )
        )
    project = gpu.image_cache_disk_project(cfg.project)
    if project != cfg.project:
        name = gpu.image_cache_disk_name
        problems.append(Problem(key, CROSS_PROJECT_REFUSAL.format(project=cfg.project, name=name, other=project)))
    return problems


def _storage_problems(cfg: StackConfig) -> list[Problem]:
    ns = PROJECT_NAMESPACE
    problems: list[Problem] = []

    def add(path: str, message: str) -> None:
        problems.append(Problem(f"{ns}:{path}", message))

    storage = cfg.storage
    if storage.type == "gcs":
        for key, value in (("capacityGib", storage.capacity_gib), ("throughput", storage.throughput)):
            if value is not None:
                add(f"storage.{key}", "is only for storage.type 'lustre'")
    else:
        if storage.bucket is not None:
            add("storage.bucket", "is only for storage.type 'gcs'")
        if storage.throughput is None:
            add("storage.throughput", f"is required for Lustre: one of {sorted(LUSTRE_TIERS)} MB/s per TiB")
        if storage.capacity_gib is None:
            add("storage.capacityGib", "is required for Lustre")
        elif storage.throughput is not None:
            tier = LUSTRE_TIERS[storage.throughput]
            if storage.capacity_gib < tier.min_gib:
                add(
                    "storage.capacityGib",
                    f"must be at least {tier.min_gib} at {storage.throughput} MB/s per TiB, got {storage.capacity_gib}",
                )
            elif storage.capacity_gib % tier.step_gib:
                add(
                    "storage.capacityGib",
                    f"must be a multiple of {tier.step_gib} at {storage.throughput} MB/s per TiB, got {storage.capacity_gib}",
                )
    if storage.parked and storage.type != "lustre":
        add(
            "storage.parked",
            "is only for storage.type 'lustre': a bucket bills only what it holds, so there is nothing to park",
        )
    elif storage.parked and storage.keep_on_destroy:
        # pulumi v3.259.0 pkg/resource/deploy/step.go L661: a resource dropped from the program is deleted unless
        # its *recorded* retainOnDelete says keep, so the up before parking must already have recorded false.
        add(
            "storage.parked",
            "needs storage.keepOnDestroy false, recorded by an earlier pulumi up: with it true Pulumi drops the"
            " Lustre instance from the state and leaves it billing; set keepOnDestroy false and run pulumi up"
            " (an in-place update), then set parked true",
        )
    if storage.park_when_idle and storage.type != "lustre":
        add(
            "storage.parkWhenIdle",
            "is only for storage.type 'lustre': a bucket bills only what it holds, so there is nothing to park",
        )
    elif storage.park_when_idle and not cfg.job.recover:
        add("storage.parkWhenIdle", "needs job.recover true: the run guardian parks the run; set one of them")
    elif storage.park_when_idle and cfg.job.idle_minutes == 0:
        add(
            "storage.parkWhenIdle",
            "needs job.idleMinutes above 0: the guardian parks the run after it scales the GPU workers to zero,"
            " which idleMinutes 0 never does",
        )
    if storage.type == "lustre":
        problem = bucket_name_problem(cfg.parked_bucket_name)
        if problem:
            add("cluster.name", f"the parked bucket's name derived from project and cluster is invalid ({problem})")
    if storage.type == "gcs" and storage.bucket is None:
        problem = bucket_name_problem(cfg.bucket_name)
        if problem:
            add("storage.bucket", f"the default name derived from project and stack is invalid ({problem}); set one")
    return problems


def cross_check(cfg: StackConfig, rules: Iterable[CrossRule]) -> list[Problem]:
    """The problems of every rule in `rules`; each problem names the key to change."""
    return [problem for rule in rules for problem in rule.check(cfg)]


def _network_problems(cfg: StackConfig) -> list[Problem]:
    ns = PROJECT_NAMESPACE
    problems = []
    ranges = {
        "nodeRange": cfg.network.node_range,
        "podRange": cfg.network.pod_range,
        "serviceRange": cfg.network.service_range,
        "gvnicRange": cfg.network.gvnic_range,
        "rdmaRange": cfg.network.rdma_range,
    }
    if cfg.storage.type == "lustre":
        ranges["lustreRange"] = cfg.network.lustre_range
    parsed = {key: ipaddress.IPv4Network(value) for key, value in ranges.items()}
    keys = list(parsed)
    for index, first in enumerate(keys):
        for second in keys[index + 1 :]:
            if parsed[first].overlaps(parsed[second]):
                problems.append(
                    Problem(
                        f"{ns}:network.{second}",
                        f"must not overlap network.{first} ({ranges[first]}), got {ranges[second]}",
                    )
                )
    largest_rdma_prefix = SUBNET_MAX_PREFIX - RDMA_SPLIT_BITS
    if parsed["rdmaRange"].prefixlen > largest_rdma_prefix:
        problems.append(
            Problem(
                f"{ns}:network.rdmaRange",
                f"must be /{largest_rdma_prefix} or larger to hold {RDMA_SUBNET_COUNT} subnets"
                f" of at least /{SUBNET_MAX_PREFIX}, got {ranges['rdmaRange']}",
            )
        )
    elif _node_addresses(parsed["rdmaRange"].prefixlen + RDMA_SPLIT_BITS) < cfg.gpu.nodes:
        problems.append(_too_small("rdmaRange", ranges, "each RDMA subnet", RDMA_SPLIT_BITS, cfg.gpu.nodes))
    if _node_addresses(parsed["gvnicRange"].prefixlen) < cfg.gpu.nodes:
        problems.append(_too_small("gvnicRange", ranges, "the gVNIC subnet", 0, cfg.gpu.nodes))
    if cfg.storage.type == "lustre" and parsed["lustreRange"].prefixlen > LUSTRE_PEERING_PREFIX_MAX:
        problems.append(
            Problem(
                f"{ns}:network.lustreRange",
                f"must be /{LUSTRE_PEERING_PREFIX_MAX} or larger, got {ranges['lustreRange']}",
            )
        )
    return problems


def _node_addresses(prefix_length: int) -> int:
    """Node addresses a subnet of this prefix length holds (Google Cloud keeps four)."""
    return 2 ** (32 - prefix_length) - SUBNET_RESERVED_ADDRESSES


def _too_small(key: str, ranges: Mapping[str, str], what: str, split_bits: int, nodes: int) -> Problem:
    """`network.<key>` is too small for one address per GPU node in `what`."""
    largest_prefix = 32 - (nodes + SUBNET_RESERVED_ADDRESSES - 1).bit_length() - split_bits
    return Problem(
        f"{PROJECT_NAMESPACE}:network.{key}",
        f"must be /{largest_prefix} or larger: {what} needs an address for each of the gpu.nodes={nodes}"
        f" GPU nodes, got {ranges[key]}",
    )


def _ngc_key_problems(cfg: StackConfig) -> list[Problem]:
    """workload.ngcApiKeySecretVersion is the credentials of the nvcr.io remote repository: it needs an nvcr.io
    image pulled through one."""
    key = f"{PROJECT_NAMESPACE}:workload.ngcApiKeySecretVersion"
    host = parse_image(cfg.workload.resolved_image().image).host
    upstream = UPSTREAMS.get(host)
    if upstream is None or upstream.api_key_username is None:
        return [
            Problem(
                key,
                f"is the credentials of the stack's nvcr.io remote repository, but workload.image comes from {host}:"
                " remove this key, or name an nvcr.io image",
            )
        ]
    if cfg.workload.resolved_image_source() != "registry":
        return [
            Problem(
                key,
                "is the credentials of the stack's nvcr.io remote repository, which workload.imageSource 'direct'"
                " goes without (the nodes pull from nvcr.io themselves, anonymously): unset workload.imageSource"
                " (an nvcr.io image's default is 'registry'), or remove this key",
            )
        ]
    return []


def _workload_problems(cfg: StackConfig) -> list[Problem]:
    ns = PROJECT_NAMESPACE
    problems = []
    workload = cfg.workload
    context = next((fact for prefix, fact in MODEL_CONTEXT_TOKENS.items() if workload.model.startswith(prefix)), None)
    sample = cfg.grpo.max_prompt_length + cfg.grpo.max_response_length
    if context is not None and sample > context[0]:
        problems.append(
            Problem(
                f"{ns}:grpo.maxResponseLength",
                f"maxPromptLength + maxResponseLength ({cfg.grpo.max_prompt_length} + {cfg.grpo.max_response_length} ="
                f" {sample} tokens) is more than the {context[0]} tokens of {workload.model}'s context ({context[1]});"
                " shorten them",
            )
        )
    supported = SUPPORTED_PAIRS[workload.framework]
    if workload.dataset not in supported:
        problems.append(
            Problem(
                f"{ns}:workload.dataset",
                f"workload.framework {workload.framework!r} with dataset {workload.dataset!r} has no staging"
                f" or job mapping; use one of {', '.join(repr(d) for d in supported)}",
            )
        )
    if workload.image is not None and workload.ray_version is None:
        problems.append(
            Problem(f"{ns}:workload.rayVersion", "is required with workload.image: the Ray version inside that image")
        )
    if workload.image is None and workload.ray_version is not None:
        problems.append(
            Problem(f"{ns}:workload.rayVersion", "is only allowed with workload.image (the default image's is known)")
        )
    if workload.framework == "nemo-rl" and workload.image is not None and workload.nemo_rl_release is None:
        problems.append(
            Problem(
                f"{ns}:workload.nemoRlRelease",
                f"is required with workload.image for nemo-rl: one of {', '.join(NEMO_RL_RELEASES)}",
            )
        )
    if workload.nemo_rl_release is not None and (workload.framework != "nemo-rl" or workload.image is None):
        problems.append(
            Problem(f"{ns}:workload.nemoRlRelease", "is only allowed with framework 'nemo-rl' and workload.image")
        )
    if workload.image is None and workload.cuda_version is not None:
        problems.append(
            Problem(f"{ns}:workload.cudaVersion", "is only allowed with workload.image (the default image's is known)")
        )
    if workload.image_source == "registry":
        host = parse_image(workload.resolved_image().image).host
        if is_artifact_registry_host(host):
            problems.append(
                Problem(
                    f"{ns}:workload.imageSource",
                    f"workload.image is already in Artifact Registry ({host}), which GKE streams from directly;"
                    " set workload.imageSource to 'direct'",
                )
            )
        elif host not in UPSTREAMS:
            problems.append(
                Problem(
                    f"{ns}:workload.imageSource",
                    f"'registry' proxies {', '.join(sorted(UPSTREAMS))} only; workload.image comes from {host}:"
                    " set workload.imageSource to 'direct', or push the image to Artifact Registry and name it there",
                )
            )
    if workload.ngc_api_key_secret_version is not None:
        problems.extend(_ngc_key_problems(cfg))
    for name in sorted(set(workload.extra_env) & set(cfg.secret_env)):
        problems.append(
            Problem(
                f"{ns}:workload.extraEnv",
                f"{name} is also in grpo-gke:secretEnv; keep it only there:"
                f" pulumi config rm --path '{ns}:workload.extraEnv.{name}'",
            )
        )
    return problems


def _tracking_problems(cfg: StackConfig) -> list[Problem]:
    """With `wandbApiKey` the pods get WANDB_API_KEY from its Secret; a second WANDB_API_KEY would fight it."""
    ns = PROJECT_NAMESPACE
    if cfg.wandb_api_key is None:
        return []
    return [
        Problem(
            f"{ns}:{section}",
            f"WANDB_API_KEY comes from {ns}:wandbApiKey; remove it here: pulumi config rm --path '{ns}:{section}.WANDB_API_KEY'",
        )
        for section, env in (("secretEnv", cfg.secret_env), ("workload.extraEnv", cfg.workload.extra_env))
        if "WANDB_API_KEY" in env
    ]


def _driver_problems(cfg: StackConfig) -> list[Problem]:
    """The image's CUDA must run on the driver the stack chooses (StackConfig.gpu_driver)."""
    image = cfg.workload.resolved_image()
    needed = driver_branch_for(image.cuda_version)
    if needed is None or cfg.gpu_driver == "DEFAULT":
        return []
    # Every branch of CUDA_MAJOR_DRIVER_BRANCH has a LATEST floor (tests/core/test_config.py).
    branch = min(known for known in LATEST_DRIVER_FLOORS if known >= needed)
    floor = LATEST_DRIVER_FLOORS[branch]
    source = "workload.cudaVersion" if cfg.workload.image else f"the pinned {cfg.workload.framework} image"
    if pinned_below(cfg.cluster.min_version, floor):
        return [
            Problem(
                f"{PROJECT_NAMESPACE}:cluster.minVersion",
                f"must be at least {floor} for GKE's LATEST GPU driver R{branch}: CUDA {image.cuda_version}"
                f" ({source}) needs R{needed}, and the {cfg.gpu.type.upper()} DEFAULT driver is"
                f" R{cfg.gpu_machine.default_driver_branch}, got {cfg.cluster.min_version}",
            )
        ]
    return []


def _kms_problems(cfg: StackConfig) -> list[Problem]:
    key = cfg.cluster.secrets_kms_key
    if key is None:
        return []
    location = re.fullmatch(KMS_KEY_PATTERN, key).group("location")
    if location != cfg.region:
        # GKE docs, "Encrypt secrets at the application layer": the key lies in the cluster's location.
        return [
            Problem(
                f"{PROJECT_NAMESPACE}:cluster.secretsKmsKey",
                f"must be a key in the cluster's region gcp:region {cfg.region} (locations/{cfg.region}),"
                f" got one in {location!r}",
            )
        ]
    return []


def _preflight_problems(cfg: StackConfig) -> list[Problem]:
    problems = []
    if cfg.job.preflight == "full" and cfg.gpu.nodes < 2:
        problems.append(
            Problem(
                f"{PROJECT_NAMESPACE}:job.preflight",
                "full tests the fabric between GPU nodes and needs gpu.nodes of 2 or more; use gpu on one node, got 'full'",
            )
        )
    elif cfg.job.preflight == "full" and not cfg.gpu_machine.rdma:
        problems.append(
            Problem(
                f"{PROJECT_NAMESPACE}:job.preflight",
                f"full tests the RDMA fabric (gIB) between GPU nodes, and {cfg.gpu_machine.machine_type} has no RDMA"
                " NICs; use gpu, got 'full'",
            )
        )
    if cfg.job.cordon_bad_nodes and cfg.job.preflight == "off":
        problems.append(
            Problem(
                f"{PROJECT_NAMESPACE}:job.cordonBadNodes",
                "cordons the nodes a preflight names, and job.preflight is off; set job.preflight to gpu or full,"
                " or cordonBadNodes to false",
            )
        )
    return problems


def _budget_problems(cfg: StackConfig) -> list[Problem]:
    """job.maxCost and job.maxGpuHours are kept by the run guardian, which stops a verl attempt itself after a save
    (incluster/budget.py): they need job.recover true and the verl framework."""
    problems = []
    for key, value in (("maxCost", cfg.job.max_cost), ("maxGpuHours", cfg.job.max_gpu_hours)):
        if value is None:
            continue
        if not cfg.job.recover:
            why = "needs job.recover true: the run guardian keeps the budget; set job.recover true or unset the key"
            problems.append(Problem(f"{PROJECT_NAMESPACE}:job.{key}", why))
        elif cfg.workload.framework != "verl":
            why = (
                "is kept for verl runs only: the guardian stops a verl attempt right after a save, and NeMo-RL's"
                " saves are not read yet; unset the key"
            )
            problems.append(Problem(f"{PROJECT_NAMESPACE}:job.{key}", why))
    return problems


def any_address_ranges(cidrs: list[str]) -> list[str]:
    """The authorized networks that admit every IPv4 address (a /0 range such as 0.0.0.0/0)."""
    return [cidr for cidr in cidrs if ipaddress.IPv4Network(cidr, strict=False).prefixlen == 0]


def control_plane_warnings(cfg: StackConfig) -> list[str]:
    """A warning when neither authorized networks nor the DNS endpoint closes the control plane's public IP, or when
    an authorized network is a /0 range, which admits any address to that IP."""
    ns = PROJECT_NAMESPACE
    open_ranges = any_address_ranges(cfg.cluster.authorized_networks)
    if open_ranges:
        return [
            f"{ns}:cluster.authorizedNetworks holds {', '.join(open_ranges)}: the control plane's public IP endpoint"
            f" accepts connections from any address (each request still needs Google credentials); list only the"
            f" CIDRs of the machines that run pulumi and the job CLI"
        ]
    if cfg.cluster.authorized_networks or cfg.cluster.dns_endpoint:
        return []
    return [
        f"{ns}:cluster.authorizedNetworks is empty and {ns}:cluster.dnsEndpoint is false: the control plane's public"
        f" endpoint accepts connections from any address (each request still needs Google credentials); set"
        f" {ns}:cluster.authorizedNetworks to the CIDRs of the machines that run pulumi and the job CLI, or"
        f" {ns}:cluster.dnsEndpoint to true"
    ]


def gated_model_warnings(cfg: StackConfig) -> list[str]:
    """A warning when the model is of a Hub owner whose models are gated (core/facts/job.py GATED_MODEL_OWNERS) and
    no hfToken is set: the staging Job would learn it from the Hub's 401 minutes into `pulumi up`."""
    model = cfg.workload.model
    gated = next((why for owner, why in GATED_MODEL_OWNERS.items() if model.startswith(owner)), None)
    if gated is None or cfg.hf_token is not None:
        return []
    ns = PROJECT_NAMESPACE
    return [
        f"{ns}:hfToken is not set and {model} needs it: {gated}; without it the staging Job fails minutes into"
        f" pulumi up. Request access on the model's page, then: pulumi config set --secret {ns}:hfToken hf_..."
    ]


def storage_warnings(cfg: StackConfig) -> list[str]:
    """A warning when a Lustre instance holding the run is deleted on `pulumi destroy` (storage.keepOnDestroy false,
    which parking needs and nothing sets back): say what then guards the run and what to set after an unpark."""
    storage = cfg.storage
    if storage.type != "lustre" or storage.keep_on_destroy or storage.parked:
        return []
    ns = PROJECT_NAMESPACE
    return [
        f"{ns}:storage.keepOnDestroy is false: pulumi destroy, or an edit that replaces the Lustre instance (such as"
        f" {ns}:storage.throughput or capacityGib), deletes the instance and the run on it; the park guard refuses"
        f" that until gs://{cfg.parked_bucket_name}/{names.PARK_MARKER} says the run is parked (python -m jobs park);"
        f" once the run is back on the instance (storage.parked false), set {ns}:storage.keepOnDestroy true again"
    ]


@dataclass(frozen=True)
class CrossRule:
    """A rule tying several keys together, and whether it reads a default the job layer derives."""

    check: Callable[[StackConfig], list[Problem]]
    """The rule: the config in, one problem per refused key out."""
    reads_derived: bool = False
    """True when the rule reads a derived default (jobs.spec.defaults): it waits while derivation cannot run."""


CONFIG_RULES = tuple(
    CrossRule(rule)
    for rule in (
        _zone_problems,
        _gpu_zone_problems,
        _kms_problems,
        _version_problems,
        _capacity_problems,
        _image_cache_problems,
        _storage_problems,
        _network_problems,
        _workload_problems,
        _tracking_problems,
        _driver_problems,
        _preflight_problems,
        _budget_problems,
    )
)
"""The config's cross-rules; each reads only the keys it checks. The job layer adds its own (jobs/spec/validate.py
JOB_RULES) when it loads a stack (jobs/spec/load.py)."""
