"""The typed stack config: one pydantic model per section, the derived names and the helpers
the rules share. Keys follow Pulumi's `<namespace>:<key>` form; `gcp:project` and `gcp:region` are the
provider's own keys; every key under `grpo-gke:` must be known to `StackConfig`."""

from __future__ import annotations

import hashlib
import ipaddress
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from core import names
from core.facts.capacity import RUNGS, Rung
from core.facts.gcp import SECRET_VERSION_PATTERN, UPSTREAMS
from core.facts.imagecache import CACHE_MODE, DISK_IMAGE_NAME_PATTERN, DISK_IMAGE_PATH
from core.facts.platform import (
    CUDA_MAJOR_DRIVER_BRANCH,
    DEFAULT_IMAGES,
    GPU_MACHINES,
    HEAD_MIN_MEMORY_GIB,
    HEAD_MIN_VCPUS,
    LUSTRE_TIERS,
    MAX_GPUS_PER_NODE,
    NEMO_RL_RELEASES,
    RDMA_SUBNET_COUNT,
    SMALL_HEAD_MIN_MEMORY_GIB,
    SMALL_HEAD_MIN_VCPUS,
    VERL_VERSION,
    FrameworkImage,
    GkeVersion,
    GpuMachine,
)
from core.facts.pods import HEAD_REQUESTS, SMALL_HEAD_MAX_GPUS, SMALL_HEAD_REQUESTS
from core.facts.privilege import KMS_KEY_PATTERN

PROJECT_NAMESPACE = "grpo-gke"
"""The Pulumi project name, which is also the namespace of its config keys."""

RFC1918_BLOCKS = tuple(ipaddress.IPv4Network(block) for block in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
"""The private address blocks of RFC 1918, which every VPC range must lie in."""

RDMA_SPLIT_BITS = (RDMA_SUBNET_COUNT - 1).bit_length()
"""Prefix bits added to `network.rdmaRange` to split it into the RDMA subnets (3 for eight)."""

DISK_IMAGE_FORM = re.compile(
    rf"(?:(?:projects/(?P<project>[a-z][a-z0-9-]{{4,28}}[a-z0-9])/)?global/images/)?(?P<name>{DISK_IMAGE_NAME_PATTERN})"
)
"""`gpu.imageCacheDisk`: a disk image name, `global/images/<name>` or `projects/<project>/global/images/<name>`."""


def matching(field: str, pattern: str, expected: str) -> Any:
    """A declarative field validator: the field (None passes) must match `pattern` whole, else
    "must be <expected>, got <value>"."""
    compiled = re.compile(pattern)

    def check(value: str | None) -> str | None:
        if value is not None and not compiled.fullmatch(value):
            raise ValueError(f"must be {expected}, got {value!r}")
        return value

    return field_validator(field)(staticmethod(check))


class _Section(BaseModel):
    """Base of every config section: camelCase keys, unknown keys refused, immutable."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)

    @field_validator("*", mode="before")
    @classmethod
    def _no_boolean_numbers(cls, value: Any, info: ValidationInfo) -> Any:
        """Refuse true/false for a number (pydantic would read `nodes: true` as 1 node), and anything
        but true/false for a boolean (pydantic would read `keepOnDestroy: "yes"` or `1` as true)."""
        kinds = set(get_args(cls.model_fields[info.field_name].annotation)) or {
            cls.model_fields[info.field_name].annotation
        }
        if bool in kinds and not isinstance(value, bool) and value not in ("true", "false"):
            raise ValueError(f"must be true or false, got {value!r}")
        if isinstance(value, bool):
            if int in kinds:
                raise ValueError(f"must be a whole number, got {value!r}")
            if float in kinds:
                raise ValueError(f"must be a number, got {value!r}")
        return value


class ClusterConfig(_Section):
    """`grpo-gke:cluster`: the GKE cluster."""

    mode: Literal["standard", "autopilot"] = Field("standard", description="Standard node pools or Autopilot.")
    name: str | None = Field(None, description="Cluster name; default `grpo-<stack>`.")
    release_channel: Literal["RAPID", "REGULAR", "STABLE", "EXTENDED"] | None = Field(
        "REGULAR", description="GKE release channel (CT uses REGULAR)."
    )
    min_version: str | None = Field(None, description="Lowest GKE version, e.g. 1.32.2-gke.1475000.")
    deletion_protection: bool = Field(False, description="Refuse cluster deletion; off so `pulumi destroy` works.")
    head_machine_type: str = Field("c2-standard-16", description="Machine type of the Ray head's CPU pool (Standard).")
    authorized_networks: list[str] = Field(
        default_factory=list, description="CIDRs that may reach the control plane's public IP endpoint; empty: any."
    )
    dns_endpoint: bool = Field(
        False, description="Reach the control plane through its IAM-authenticated DNS endpoint; closes the public IP."
    )
    secrets_kms_key: str | None = Field(
        None, description="Cloud KMS key (projects/P/locations/L/keyRings/R/cryptoKeys/K) encrypting Secrets."
    )

    _name_form = matching(
        "name",
        r"[a-z]([-a-z0-9]{0,38}[a-z0-9])?",
        "1 to 40 lowercase letters, digits or hyphens, starting with a letter and not ending with a hyphen",
    )

    _kms_key_form = matching(
        "secrets_kms_key", KMS_KEY_PATTERN, "a key's full resource name projects/P/locations/L/keyRings/R/cryptoKeys/K"
    )

    @field_validator("authorized_networks")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError:
                cidr_form = False
            else:
                cidr_form = "/" in cidr
            if not cidr_form:
                raise ValueError(f"each entry must be an IPv4 CIDR range such as 203.0.113.0/24, got {cidr!r}")
        return value

    @field_validator("min_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        if value is not None:
            GkeVersion.parse(value)
        return value

    @field_validator("head_machine_type")
    @classmethod
    def _head_machine(cls, value: str) -> str:
        match = re.fullmatch(r"[a-z][a-z0-9]*-(standard|highmem|highcpu)-(\d+)", value)
        if not match:
            raise ValueError(f"must be a machine type such as c2-standard-16, got {value!r}")
        return value


class GpuConfig(_Section):
    """`grpo-gke:gpu`: the GPU nodes."""

    type: Literal["b200", "h200", "l4"] = Field(
        description=f"B200 ({GPU_MACHINES['b200'].machine_type}, 8 GPUs), H200 ({GPU_MACHINES['h200'].machine_type},"
        f" 8 GPUs) or L4 ({GPU_MACHINES['l4'].machine_type}, 1 GPU, no RDMA network: a first run)."
    )
    nodes: int = Field(ge=1, le=64, description="Number of GPU nodes, 1 to 64.")
    provisioning: Literal["spot", "on-demand", "reservation", "flex-start"] = Field(
        "spot", description="How GPU capacity is obtained."
    )
    reservation: str | None = Field(None, description="Reservation name; required with provisioning=reservation.")
    capacity: list[Rung] | None = Field(
        None,
        description="Ladder of capacity to try in order (reservation, flex-start, spot, on-demand); default the one"
        " gpu.provisioning.",
    )

    image_cache_disk: str | None = Field(
        None,
        description="Disk image built with GKE's disk image builder, attached to every GPU node as a container"
        " image cache: its name, or projects/<gcp:project>/global/images/<name> (Standard, with"
        " workload.imageSource registry).",
    )

    _reservation_form = matching(
        "reservation", r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", "a reservation name (lowercase letters, digits, hyphens)"
    )

    @field_validator("image_cache_disk")
    @classmethod
    def _disk_image(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if "mode=" in value or "," in value:
            raise ValueError(
                f"takes the disk image alone: the stack always attaches it with mode {CACHE_MODE} (a container"
                f" image cache; GKE's other mode, MODE_UNSPECIFIED, preloads data), got {value!r}"
            )
        if not DISK_IMAGE_FORM.fullmatch(value):
            raise ValueError(
                "must be a disk image name such as verl-cache (lowercase letters, digits, hyphens, at most 63),"
                f" global/images/<name> or projects/<project>/global/images/<name>, got {value!r}"
            )
        return value

    @field_validator("capacity")
    @classmethod
    def _rungs_once(cls, value: list[Rung] | None) -> list[Rung] | None:
        if value == []:
            raise ValueError(f"must list at least one of {', '.join(RUNGS)}, or be unset for gpu.provisioning alone")
        for rung in RUNGS:
            if value is not None and value.count(rung) > 1:
                raise ValueError(f"lists {rung!r} {value.count(rung)} times; list each rung once, got {value!r}")
        return value

    @property
    def image_cache_disk_name(self) -> str | None:
        """The name of `image_cache_disk`'s disk image, without its project."""
        if self.image_cache_disk is None:
            return None
        return DISK_IMAGE_FORM.fullmatch(self.image_cache_disk).group("name")

    def image_cache_disk_project(self, default: str) -> str | None:
        """The project of `image_cache_disk`'s disk image: the one it names, or `default` (gcp:project)."""
        if self.image_cache_disk is None:
            return None
        return DISK_IMAGE_FORM.fullmatch(self.image_cache_disk).group("project") or default

    @property
    def ladder(self) -> tuple[Rung, ...]:
        """The rungs in the order GKE tries them: `capacity`, or the single `provisioning`."""
        return tuple(self.capacity) if self.capacity is not None else (self.provisioning,)


class StorageConfig(_Section):
    """`grpo-gke:storage`: the shared storage every pod mounts."""

    type: Literal["gcs", "lustre"] = Field(description="Cloud Storage through FUSE, or Managed Lustre.")
    bucket: str | None = Field(None, description="Bucket name (gcs); default derived from project and stack.")
    capacity_gib: int | None = Field(None, description="Lustre capacity in GiB (lustre).")
    throughput: int | None = Field(None, description="Lustre MB/s per TiB (lustre): 125, 250, 500 or 1000.")
    keep_on_destroy: bool = Field(True, description="Keep the bucket or Lustre instance on `pulumi destroy`.")
    parked: bool = Field(
        False,
        description="Lustre parked: the instance and what mounts it deleted, the run kept in the parked bucket"
        " (run `python -m jobs park` first); false again recreates them and imports the run back.",
    )
    park_when_idle: bool = Field(
        False,
        description="Lustre: once the guardian has scaled the GPU workers to zero, it parks the run in the parked"
        " bucket as `python -m jobs park` does, as a Google service account that may export from the instance;"
        " then storage.parked true and pulumi up stop the instance's bill.",
    )

    @field_validator("throughput")
    @classmethod
    def _tier(cls, value: int | None) -> int | None:
        if value is not None and value not in LUSTRE_TIERS:
            tiers = sorted(LUSTRE_TIERS)
            raise ValueError(f"must be one of {', '.join(map(str, tiers[:-1]))} or {tiers[-1]}, got {value!r}")
        return value

    @field_validator("bucket")
    @classmethod
    def _bucket_name(cls, value: str | None) -> str | None:
        if value is not None:
            problem = bucket_name_problem(value)
            if problem:
                raise ValueError(problem)
        return value


class NetworkConfig(_Section):
    """`grpo-gke:network`: address ranges of the three VPCs; they must not overlap."""

    node_range: str = Field("192.168.0.0/18", description="Cluster VPC subnet of the nodes (CT net-0).")
    pod_range: str = Field("10.4.0.0/14", description="Secondary range of the pods (CT).")
    service_range: str = Field("10.0.32.0/20", description="Secondary range of the services (CT).")
    gvnic_range: str = Field("192.168.64.0/18", description="Subnet of the gVNIC VPC (CT net-1).")
    rdma_range: str = Field("192.168.128.0/18", description="Range split into the eight RDMA subnets (CT).")
    lustre_range: str = Field("10.0.64.0/22", description="Private service access range for Lustre (/22).")

    @field_validator("*")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            network = ipaddress.IPv4Network(value)
        except ValueError:
            network = None
        if network is None or "/" not in value:
            raise ValueError(f"must be an IPv4 CIDR range such as 10.0.0.0/20, got {value!r}")
        if not any(network.subnet_of(block) for block in RFC1918_BLOCKS):
            raise ValueError(f"must be a private (RFC 1918) range, got {value!r}")
        return value

    def rdma_subnets(self) -> list[str]:
        """The eight equal RDMA subnets carved from `rdma_range`, in order."""
        network = ipaddress.IPv4Network(self.rdma_range)
        return [str(subnet) for subnet in network.subnets(prefixlen_diff=RDMA_SPLIT_BITS)]


class WorkloadConfig(_Section):
    """`grpo-gke:workload`: what trains, on what data, in which image."""

    framework: Literal["verl", "nemo-rl"] = Field(description="The GRPO trainer.")
    model: str = Field(description="Hugging Face model id, e.g. Qwen/Qwen2.5-32B-Instruct.")
    dataset: Literal["gsm8k", "deepscaler"] = Field(description="Training data set.")
    image: str | None = Field(
        None, description="Workload image; default pinned per framework in core/facts/platform.py."
    )
    ray_version: str | None = Field(None, description="Ray version inside `image`; required with `image`.")
    nemo_rl_release: str | None = Field(None, description="NeMo-RL release inside `image` (nemo-rl with `image`).")
    model_size_b: float | None = Field(None, gt=0, description="Parameters in billions; default read from `model`.")
    extra_env: dict[str, str] = Field(default_factory=dict, description="Extra environment of the Ray pods.")
    cuda_version: str | None = Field(
        None, description="CUDA version `image` is built on, e.g. 12.8 (with `image`); unset: the LATEST driver."
    )
    image_source: Literal["direct", "registry"] | None = Field(
        None,
        description="Where the pods pull `image` from: `direct` from its own registry; `registry` through an"
        " Artifact Registry remote repository of the stack in its region, streamed (core/facts/gcp.py); unset:"
        " `registry` for an image of a registry such a repository proxies (Docker Hub, nvcr.io), else `direct`.",
    )
    ngc_api_key_secret_version: str | None = Field(
        None,
        description="Secret Manager secret version (projects/P/secrets/S/versions/N) holding your NGC API key, which"
        " the nvcr.io remote repository pulls with (`workload.imageSource: registry`); only its name is read here.",
    )
    memory_check: bool = Field(
        True,
        description="Refuse a run whose training or rollout would not fit in GPU memory (jobs/spec/memory.py);"
        " false: I know, plan it anyway.",
    )

    _model_form = matching(
        "model", r"[A-Za-z0-9][\w.-]*/[\w.-]+", "a Hugging Face model id such as Qwen/Qwen2.5-7B-Instruct"
    )

    _ray_version_form = matching("ray_version", r"\d+\.\d+\.\d+", "a Ray version such as 2.55.1")

    @field_validator("ngc_api_key_secret_version")
    @classmethod
    def _secret_version(cls, value: str | None) -> str | None:
        """A secret version's resource name; the message never repeats the value, which may be the key itself."""
        if value is None or re.fullmatch(SECRET_VERSION_PATTERN, value):
            return value
        if "/" not in value:
            raise ValueError(
                "looks like the key itself, not a resource name (the value is not shown): keep the key out of the"
                " stack config; store it in Secret Manager and set this to the version's resource name"
                " projects/P/secrets/S/versions/N (docs/configuration.md, Images)"
            )
        raise ValueError(
            "must be a Secret Manager secret version's resource name projects/P/secrets/S/versions/N, N a version"
            " number (the value is not shown)"
        )

    @field_validator("nemo_rl_release")
    @classmethod
    def _release(cls, value: str | None) -> str | None:
        if value is not None and value not in NEMO_RL_RELEASES:
            raise ValueError(f"must be one of {', '.join(NEMO_RL_RELEASES)}, got {value!r}")
        return value

    @field_validator("extra_env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        check_env_names(value)
        return value

    @field_validator("cuda_version")
    @classmethod
    def _cuda(cls, value: str | None) -> str | None:
        if value is None:
            return value
        majors = " or ".join(map(str, sorted(CUDA_MAJOR_DRIVER_BRANCH)))
        if not re.fullmatch(r"\d+\.\d+", value):
            raise ValueError(f"must be a CUDA version such as 12.8, got {value!r}")
        if cuda_major(value) not in CUDA_MAJOR_DRIVER_BRANCH:
            raise ValueError(f"must be a CUDA {majors} version (the driver branches known here), got {value!r}")
        return value

    def resolved_image_source(self) -> Literal["direct", "registry"]:
        """Where the pods pull from: the configured source, or unset `registry` where the image's registry is one
        the stack's remote repositories proxy (core/facts/gcp.py UPSTREAMS) and `direct` for any other (an image
        already in Artifact Registry, which GKE streams as it is, or another registry)."""
        if self.image_source is not None:
            return self.image_source
        return "registry" if names.parse_image(self.resolved_image().image).host in UPSTREAMS else "direct"

    def resolved_image(self) -> FrameworkImage:
        """The image, its Ray version, framework release and CUDA: the configured ones or the pinned default."""
        default = DEFAULT_IMAGES[self.framework]
        if self.image is None:
            return default
        release = self.nemo_rl_release if self.framework == "nemo-rl" else VERL_VERSION
        return FrameworkImage(
            image=self.image, ray_version=self.ray_version or "", release=release or "", cuda_version=self.cuda_version
        )


class GrpoConfig(_Section):
    """`grpo-gke:grpo`: the GRPO knobs users tune, mapped onto each framework's own keys."""

    prompts_per_step: int = Field(256, ge=1, le=65536, description="Prompts per training step.")
    generations_per_prompt: int = Field(8, ge=2, le=256, description="Responses per prompt (the GRPO group).")
    rollout_tensor_parallel: int | None = Field(
        None,
        ge=1,
        le=MAX_GPUS_PER_NODE,
        description=f"vLLM tensor parallel size; divides {MAX_GPUS_PER_NODE}; default derived from model and GPU.",
    )
    learning_rate: float = Field(1e-6, gt=0, le=1e-3, description="Actor learning rate.")
    max_prompt_length: int = Field(512, ge=16, le=131072, description="Longest prompt in tokens.")
    max_response_length: int = Field(1024, ge=16, le=131072, description="Longest response in tokens.")
    mini_batch_size: int | None = Field(None, ge=1, description="Prompts per optimizer step; default promptsPerStep.")
    micro_batch_size_per_gpu: int | None = Field(
        None,
        ge=1,
        le=1024,
        description="Samples per GPU per forward pass; default derived from sample length and batch.",
    )
    kl_loss_coef: float = Field(0.001, ge=0, le=10, description="Weight of the KL loss against the reference.")
    gpu_memory_utilization: float = Field(0.6, gt=0.05, le=0.95, description="vLLM share of GPU memory.")
    cpu_offload: bool = Field(
        False,
        description="Keep the actor's weights and optimizer state in CPU memory where the framework can"
        " (verl between phases; NeMo-RL through training): slower, fits larger models.",
    )
    epochs: int = Field(1, ge=1, le=1000, description="Passes over the training data.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many steps (default: the epochs).")
    save_every: int = Field(10, ge=1, description="Checkpoint every N steps.")
    validate_every: int = Field(10, ge=1, description="Validate every N steps.")
    keep_checkpoints: int = Field(2, ge=1, le=100, description="Newest checkpoints kept on the shared storage.")

    @field_validator("rollout_tensor_parallel")
    @classmethod
    def _divides_node(cls, value: int | None) -> int | None:
        sizes = tuple(size for size in range(1, MAX_GPUS_PER_NODE + 1) if MAX_GPUS_PER_NODE % size == 0)
        if value is not None and value not in sizes:
            *smaller, largest = sizes
            choices = f"{', '.join(map(str, smaller))} or {largest}"
            raise ValueError(f"must divide {MAX_GPUS_PER_NODE} ({choices}), got {value}")
        return value

    def effective_mini_batch(self) -> int:
        """Prompts per optimizer step."""
        return self.mini_batch_size or self.prompts_per_step


class JobConfig(_Section):
    """`grpo-gke:job`: the post-deploy submission."""

    submit: bool = Field(True, description="Submit the GRPO job as the last step of `pulumi up`.")
    ready_timeout_seconds: int = Field(1800, ge=10, le=86400, description="Wait this long for all GPU nodes.")
    run_generation: int = Field(
        0, ge=0, description="Part of the run id: raising it starts a new run of the same spec (submit --fresh does)."
    )
    recover: bool = Field(
        True,
        description="Deploy the run guardian: it resubmits an attempt that lost its GPU nodes (false: resubmit by hand).",
    )
    max_recoveries: int = Field(
        20,
        ge=0,
        le=1000,
        description="Most attempts the guardian submits after lost GPU nodes, per run, before it gives up.",
    )
    idle_minutes: int = Field(
        15,
        ge=0,
        le=10080,
        description="Minutes after the run ends before the guardian scales the GPU workers to zero; 0 never.",
    )
    preflight: Literal["full", "gpu", "off"] | None = Field(
        None,
        description="Check before the first attempt on a fresh RayCluster: full (GPUs and fabric), gpu, or off;"
        " default full on 2 or more GPU nodes, gpu on one.",
    )
    cordon_bad_nodes: bool = Field(
        False, description="Cordon the nodes a failed preflight names, so that no new pod is scheduled there."
    )
    max_cost: float | None = Field(
        None,
        gt=0,
        le=10_000_000,
        description="US dollars the run's GPU nodes may cost across its attempts, at the catalog's list prices; the"
        " guardian stops after the last checkpoint within it (default: no limit).",
    )
    max_gpu_hours: float | None = Field(
        None,
        gt=0,
        le=10_000_000,
        description="GPU hours (GPUs x hours) the run's attempts may use; the guardian stops after the last"
        " checkpoint within it (default: no limit).",
    )


class PricingConfig(_Section):
    """`grpo-gke:pricing`: what the plan's cost estimate assumes beyond the catalog's list prices."""

    reservation_hourly: float | None = Field(
        None,
        gt=0,
        le=10000,
        description="Your $/h for one GPU node of the reservation; default the on-demand list price.",
    )


class TrackingConfig(_Section):
    """`grpo-gke:tracking`: where Weights & Biases files the run (on with `grpo-gke:wandbApiKey`)."""

    wandb_project: str = Field("grpo-gke", description="W&B project of the run (verl's trainer.project_name too).")
    wandb_entity: str | None = Field(None, description="W&B entity (user or team); default the key's own.")

    _project_form = matching(
        "wandb_project", r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", "1 to 128 letters, digits, '.', '_' or '-'"
    )

    _entity_form = matching(
        "wandb_entity", r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}", "1 to 128 letters, digits, '.', '_' or '-'"
    )


class StackConfig(_Section):
    """The whole stack config, validated before a single resource is registered."""

    stack: str = Field(description="Pulumi stack name.")
    project: str = Field(description="`gcp:project`: the Google Cloud project id.")
    region: str = Field(description="`gcp:region`: region of the cluster, subnets and bucket.")
    zone: str = Field(description="Zone of the GPU nodes, the RDMA network profile and Lustre.")
    cluster: ClusterConfig = Field(default_factory=ClusterConfig, description="`grpo-gke:cluster`: the GKE cluster.")
    gpu: GpuConfig = Field(description="`grpo-gke:gpu`: the 8-GPU nodes.")
    storage: StorageConfig = Field(description="`grpo-gke:storage`: the shared storage.")
    network: NetworkConfig = Field(default_factory=NetworkConfig, description="`grpo-gke:network`: VPC ranges.")
    workload: WorkloadConfig = Field(description="`grpo-gke:workload`: framework, model, data, image.")
    grpo: GrpoConfig = Field(default_factory=GrpoConfig, description="`grpo-gke:grpo`: the GRPO knobs.")
    job: JobConfig = Field(default_factory=JobConfig, description="`grpo-gke:job`: the post-deploy submission.")
    pricing: PricingConfig = Field(default_factory=PricingConfig, description="`grpo-gke:pricing`: the cost estimate.")
    tracking: TrackingConfig = Field(default_factory=TrackingConfig, description="`grpo-gke:tracking`: W&B project.")
    hf_token: SecretStr | None = Field(None, description="Hugging Face token; a Pulumi secret.")
    wandb_api_key: SecretStr | None = Field(
        None, description="Weights & Biases API key; a Pulumi secret that turns W&B on for the run."
    )
    secret_env: dict[str, SecretStr] = Field(
        default_factory=dict,
        description="Secret environment of the Ray pods (name -> value), through a Kubernetes Secret.",
    )

    _project_form = matching(
        "project", r"[a-z][a-z0-9-]{4,28}[a-z0-9]", "a project id (6 to 30 lowercase letters, digits, hyphens)"
    )

    _region_form = matching("region", r"[a-z]+-[a-z]+\d+", "a region such as us-central1")

    @field_validator("hf_token")
    @classmethod
    def _token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("must not be empty; unset it for public models (pulumi config rm grpo-gke:hfToken)")
        return value

    @field_validator("wandb_api_key")
    @classmethod
    def _wandb_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().strip():
            raise ValueError("must not be empty; unset it to turn W&B off (pulumi config rm grpo-gke:wandbApiKey)")
        return value

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        check_env_names(value)
        for name, secret in value.items():
            if not secret.get_secret_value().strip():
                raise ValueError(
                    f"{name} must not be empty; unset it with pulumi config rm --path 'grpo-gke:secretEnv.{name}'"
                )
        return value

    @property
    def gpu_driver(self) -> Literal["DEFAULT", "LATEST"]:
        """GKE's GPU driver for the workers: DEFAULT where its branch runs the image's CUDA on every version
        the stack may get, otherwise LATEST (also for an image whose CUDA is not stated)."""
        needed = driver_branch_for(self.workload.resolved_image().cuda_version)
        machine = self.gpu_machine
        if (
            needed is not None
            and needed <= machine.default_driver_branch
            and not pinned_below(self.cluster.min_version, machine.default_driver_from)
        ):
            return "DEFAULT"
        return "LATEST"

    @property
    def head_requests(self) -> dict[str, str]:
        """The Ray head's container requests: SMALL_HEAD_REQUESTS for a stack of at most SMALL_HEAD_MAX_GPUS GPUs,
        else HEAD_REQUESTS."""
        return dict(SMALL_HEAD_REQUESTS if self.total_gpus <= SMALL_HEAD_MAX_GPUS else HEAD_REQUESTS)

    @property
    def head_floor(self) -> tuple[int, int]:
        """The least vCPUs and GiB of memory of the head's CPU node (Standard), for the head of `head_requests`."""
        if self.total_gpus <= SMALL_HEAD_MAX_GPUS:
            return SMALL_HEAD_MIN_VCPUS, SMALL_HEAD_MIN_MEMORY_GIB
        return HEAD_MIN_VCPUS, HEAD_MIN_MEMORY_GIB

    @property
    def total_gpus(self) -> int:
        """GPUs across all worker nodes."""
        return self.gpu.nodes * self.gpus_per_node

    @property
    def gpus_per_node(self) -> int:
        """GPUs of one GPU node: a fact of the machine (GpuMachine.gpus)."""
        return self.gpu_machine.gpus

    @property
    def cluster_name(self) -> str:
        """The cluster name: configured, or `grpo-<stack>`."""
        return self.cluster.name or sanitize_name(f"grpo-{self.stack}", 40)

    def pulled_image(self) -> str:
        """The image reference the pods pull: the workload image, or its path through the stack's remote
        repository with `workload.imageSource: registry` (core/names.py registry_image)."""
        image = self.workload.resolved_image().image
        if self.workload.resolved_image_source() == "direct":
            return image
        return names.registry_image(image, self.region, self.project, self.cluster_name)

    def streams_images_on_pools(self) -> bool:
        """Whether the stack turns image streaming on itself: Standard with `workload.imageSource: registry`
        (Autopilot streams eligible images by itself: core/facts/gcp.py AUTOPILOT_STREAMS_BY_ITSELF)."""
        return self.cluster.mode == "standard" and self.workload.resolved_image_source() == "registry"

    def image_cache_disk_image(self) -> str | None:
        """The GPU pools' cache disk image, fully qualified (core/facts/imagecache.py DISK_IMAGE_PATH), or None."""
        name = self.gpu.image_cache_disk_name
        if name is None:
            return None
        return DISK_IMAGE_PATH.format(project=self.gpu.image_cache_disk_project(self.project), name=name)

    def image_upstreams(self) -> tuple[str, ...]:
        """Registry hosts the stack's remote repositories proxy: none with `direct`, else the image's host."""
        if self.workload.resolved_image_source() == "direct":
            return ()
        return (names.parse_image(self.workload.resolved_image().image).host,)

    @property
    def bucket_name(self) -> str:
        """The bucket name (gcs): configured, or derived from project and stack."""
        return self.storage.bucket or sanitize_name(f"{self.project}-grpo-{self.stack}", 63)

    @property
    def parked_bucket_name(self) -> str:
        """The bucket a Lustre stack parks its run in: `<cluster>-parked-<8 hex of the project id's SHA-256>` (bucket
        names are global; the project id itself may hold words a bucket name must not, such as `google`)."""
        digest = hashlib.sha256(self.project.encode()).hexdigest()[:8]
        return sanitize_name(f"{self.cluster_name}-parked-{digest}", 63)

    @property
    def gpu_machine(self) -> GpuMachine:
        """Facts of the configured GPU machine."""
        return GPU_MACHINES[self.gpu.type]


# ---------------------------------------------------------------- helpers


def check_env_names(env: Mapping[str, Any]) -> None:
    """Raise ValueError unless every key is an environment variable name other than the token's."""
    for name in env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(
                f"keys must be environment variable names (letters, digits and _, not starting with a digit),"
                f" got {name!r}"
            )
        if name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"):
            raise ValueError(f"must not set {name}: it comes from grpo-gke:hfToken, which keeps it secret")


def cuda_major(cuda_version: str) -> int:
    """The major of a CUDA version such as 12.8."""
    return int(cuda_version.split(".", 1)[0])


def driver_branch_for(cuda_version: str | None) -> int | None:
    """The lowest driver branch that runs this CUDA version, or None when the version is not known."""
    if cuda_version is None:
        return None
    return CUDA_MAJOR_DRIVER_BRANCH[cuda_major(cuda_version)]


def pinned_below(min_version: str | None, floor: str) -> bool:
    """True when a pinned minimum GKE version is older than `floor` (no pin: the channel's, far above)."""
    if min_version is None:
        return False
    return GkeVersion.parse(min_version).key() < GkeVersion.parse(floor).key()


# ---------------------------------------------------------------- naming helpers


def sanitize_name(text: str, limit: int) -> str:
    """Lowercase `text` into a DNS-style name of at most `limit` characters."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return name[:limit].rstrip("-")


def bucket_name_problem(name: str) -> str | None:
    """Why `name` is not a valid Cloud Storage bucket name, or None."""
    if not 3 <= len(name) <= 63:
        return f"must be 3 to 63 characters, got {len(name)} ({name!r})"
    if "." in name:
        # Cloud Storage naming rules: a dotted name is a domain name, created only after domain verification.
        return (
            f"must not contain dots (Cloud Storage creates a dotted name only after domain verification), got {name!r}"
        )
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*[a-z0-9]", name):
        return (
            f"must use lowercase letters, digits, '-' and '_', starting and ending with a letter or digit, got {name!r}"
        )
    if name.startswith("goog") or "google" in name:
        return f"must not start with 'goog' or contain 'google', got {name!r}"
    return None
