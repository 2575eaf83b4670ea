"""The one typed stack config: loaded from the stack's Pulumi config and cross-checked once,
before any resource exists.

Keys follow Pulumi's `<namespace>:<key>` form. `gcp:project` and `gcp:region` are the
provider's own keys; every key under `grpo-gke:` must be known to `StackConfig`.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from core.facts.platform import (
    CUDA_MAJOR_DRIVER_BRANCH,
    DEFAULT_IMAGES,
    FLEX_START_FLOOR,
    GPU_MACHINES,
    GPUS_PER_NODE,
    HEAD_MIN_MEMORY_GIB,
    HEAD_MIN_VCPUS,
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
    TENSOR_PARALLEL_SIZES,
    VERL_VERSION,
    FrameworkImage,
    GkeVersion,
    GpuMachine,
)
from core.facts.privilege import KMS_KEY_PATTERN
from core.stackfile import OPAQUE_SECRET

PROJECT_NAMESPACE = "grpo-gke"
"""The Pulumi project name, which is also the namespace of its config keys."""

RFC1918_BLOCKS = tuple(ipaddress.IPv4Network(block) for block in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
"""The private address blocks of RFC 1918, which every VPC range must lie in."""

RDMA_SPLIT_BITS = (RDMA_SUBNET_COUNT - 1).bit_length()
"""Prefix bits added to `network.rdmaRange` to split it into the RDMA subnets (3 for eight)."""


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

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )

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
        machine_class, vcpus = match.group(1), int(match.group(2))
        if vcpus < HEAD_MIN_VCPUS:
            raise ValueError(
                f"must have at least {HEAD_MIN_VCPUS} vCPUs (the Ray head asks for 12), got {value!r}"
            )
        if vcpus * MACHINE_CLASS_GIB_PER_VCPU[machine_class] < HEAD_MIN_MEMORY_GIB:
            raise ValueError(
                f"must have at least {HEAD_MIN_MEMORY_GIB} GiB of memory (the Ray head asks for 32 GiB;"
                f" a {machine_class} type may have as little as {MACHINE_CLASS_GIB_PER_VCPU[machine_class]}"
                f" GiB per vCPU), got {value!r}"
            )
        return value


class GpuConfig(_Section):
    """`grpo-gke:gpu`: the 8-GPU nodes."""

    type: Literal["b200", "h200"] = Field(
        description=f"B200 ({GPU_MACHINES['b200'].machine_type}) or H200 ({GPU_MACHINES['h200'].machine_type})."
    )
    nodes: int = Field(ge=1, le=64, description="Number of 8-GPU nodes, 1 to 64.")
    provisioning: Literal["spot", "on-demand", "reservation", "flex-start"] = Field(
        "spot", description="How GPU capacity is obtained."
    )
    reservation: str | None = Field(None, description="Reservation name; required with provisioning=reservation.")

    _reservation_form = matching(
        "reservation", r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?", "a reservation name (lowercase letters, digits, hyphens)"
    )


class StorageConfig(_Section):
    """`grpo-gke:storage`: the shared storage every pod mounts."""

    type: Literal["gcs", "lustre"] = Field(description="Cloud Storage through FUSE, or Managed Lustre.")
    bucket: str | None = Field(None, description="Bucket name (gcs); default derived from project and stack.")
    capacity_gib: int | None = Field(None, description="Lustre capacity in GiB (lustre).")
    throughput: int | None = Field(None, description="Lustre MB/s per TiB (lustre): 125, 250, 500 or 1000.")
    keep_on_destroy: bool = Field(True, description="Keep the bucket or Lustre instance on `pulumi destroy`.")

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
    image: str | None = Field(None, description="Workload image; default pinned per framework in core/facts/platform.py.")
    ray_version: str | None = Field(None, description="Ray version inside `image`; required with `image`.")
    nemo_rl_release: str | None = Field(None, description="NeMo-RL release inside `image` (nemo-rl with `image`).")
    model_size_b: float | None = Field(None, gt=0, description="Parameters in billions; default read from `model`.")
    extra_env: dict[str, str] = Field(default_factory=dict, description="Extra environment of the Ray pods.")
    cuda_version: str | None = Field(
        None, description="CUDA version `image` is built on, e.g. 12.8 (with `image`); unset: the LATEST driver."
    )

    _model_form = matching(
        "model", r"[A-Za-z0-9][\w.-]*/[\w.-]+", "a Hugging Face model id such as Qwen/Qwen2.5-7B-Instruct"
    )

    _ray_version_form = matching("ray_version", r"\d+\.\d+\.\d+", "a Ray version such as 2.55.1")

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
        le=GPUS_PER_NODE,
        description=f"vLLM tensor parallel size; divides {GPUS_PER_NODE}; default derived from model and GPU.",
    )
    learning_rate: float = Field(1e-6, gt=0, le=1e-3, description="Actor learning rate.")
    max_prompt_length: int = Field(512, ge=16, le=131072, description="Longest prompt in tokens.")
    max_response_length: int = Field(1024, ge=16, le=131072, description="Longest response in tokens.")
    mini_batch_size: int | None = Field(None, ge=1, description="Prompts per optimizer step; default promptsPerStep.")
    micro_batch_size_per_gpu: int | None = Field(
        None, ge=1, le=1024, description="Samples per GPU per forward pass; default derived from sample length and batch."
    )
    kl_loss_coef: float = Field(0.001, ge=0, le=10, description="Weight of the KL loss against the reference.")
    gpu_memory_utilization: float = Field(0.6, gt=0.05, le=0.95, description="vLLM share of GPU memory.")
    epochs: int = Field(1, ge=1, le=1000, description="Passes over the training data.")
    max_steps: int | None = Field(None, ge=1, description="Stop after this many steps (default: the epochs).")
    save_every: int = Field(10, ge=1, description="Checkpoint every N steps.")
    validate_every: int = Field(10, ge=1, description="Validate every N steps.")
    keep_checkpoints: int = Field(2, ge=1, le=100, description="Newest checkpoints kept on the shared storage.")

    @field_validator("rollout_tensor_parallel")
    @classmethod
    def _divides_node(cls, value: int | None) -> int | None:
        if value is not None and value not in TENSOR_PARALLEL_SIZES:
            *smaller, largest = TENSOR_PARALLEL_SIZES
            choices = f"{', '.join(map(str, smaller))} or {largest}"
            raise ValueError(f"must divide {GPUS_PER_NODE} ({choices}), got {value}")
        return value

    def effective_mini_batch(self) -> int:
        """Prompts per optimizer step."""
        return self.mini_batch_size or self.prompts_per_step


class JobConfig(_Section):
    """`grpo-gke:job`: the post-deploy submission."""

    submit: bool = Field(True, description="Submit the GRPO job as the last step of `pulumi up`.")
    ready_timeout_seconds: int = Field(1800, ge=10, le=86400, description="Wait this long for all GPU nodes.")


class PricingConfig(_Section):
    """`grpo-gke:pricing`: what the plan's cost estimate assumes beyond the catalog's list prices."""

    reservation_hourly: float | None = Field(
        None, gt=0, le=10000, description="Your $/h for one GPU node of the reservation; default the on-demand list price."
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
    hf_token: SecretStr | None = Field(None, description="Hugging Face token; a Pulumi secret.")
    secret_env: dict[str, SecretStr] = Field(
        default_factory=dict, description="Secret environment of the Ray pods (name -> value), through a Kubernetes Secret."
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

    @field_validator("secret_env")
    @classmethod
    def _secret_env(cls, value: dict[str, SecretStr]) -> dict[str, SecretStr]:
        check_env_names(value)
        for name, secret in value.items():
            if not secret.get_secret_value().strip():
                raise ValueError(f"{name} must not be empty; unset it with pulumi config rm --path 'grpo-gke:secretEnv.{name}'")
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
    def total_gpus(self) -> int:
        """GPUs across all worker nodes."""
        return self.gpu.nodes * GPUS_PER_NODE

    @property
    def cluster_name(self) -> str:
        """The cluster name: configured, or `grpo-<stack>`."""
        return self.cluster.name or sanitize_name(f"grpo-{self.stack}", 40)

    @property
    def bucket_name(self) -> str:
        """The bucket name (gcs): configured, or derived from project and stack."""
        return self.storage.bucket or sanitize_name(f"{self.project}-grpo-{self.stack}", 63)

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
        return f"must not contain dots (Cloud Storage creates a dotted name only after domain verification), got {name!r}"
    if not re.fullmatch(r"[a-z0-9][a-z0-9_-]*[a-z0-9]", name):
        return f"must use lowercase letters, digits, '-' and '_', starting and ending with a letter or digit, got {name!r}"
    if name.startswith("goog") or "google" in name:
        return f"must not start with 'goog' or contain 'google', got {name!r}"
    return None


# ---------------------------------------------------------------- errors


@dataclass(frozen=True)
class Problem:
    """One refused config value: its full key path and what was expected."""

    path: str
    """Full key, such as `grpo-gke:gpu.nodes`."""
    message: str
    """What is wrong and what was expected."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(Exception):
    """The stack config was refused; `problems` holds one line per problem."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = sorted(set(problems), key=lambda p: (p.path, p.message))
        super().__init__("\n".join(str(problem) for problem in self.problems))


SECRET_KEYS = ("hfToken", "secretEnv")
"""The only `grpo-gke:` keys that may hold secrets: their values reach the pods through Kubernetes Secrets."""

_TOP_LEVEL_PROVIDER_FIELDS = {"project": "gcp:project", "region": "gcp:region"}
_INTERNAL_FIELDS = {"stack"}


def key_path(loc: Iterable[Any]) -> str:
    """The user-facing key of a pydantic error location: `grpo-gke:gpu.nodes`."""
    parts = [str(part) for part in loc]
    if not parts:
        return f"{PROJECT_NAMESPACE}:"
    head, rest = parts[0], parts[1:]
    if head in _TOP_LEVEL_PROVIDER_FIELDS:
        return _TOP_LEVEL_PROVIDER_FIELDS[head]
    return f"{PROJECT_NAMESPACE}:{'.'.join([head, *rest])}"


def _allowed_keys(model: type[BaseModel]) -> list[str]:
    return sorted(field.alias or name for name, field in model.model_fields.items())


def _section_model(loc: tuple[Any, ...]) -> type[BaseModel]:
    model: type[BaseModel] = StackConfig
    for part in loc:
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        annotation = getattr(field, "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            break
    return model


def _describe(error: Mapping[str, Any]) -> str:
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "extra_forbidden":
        loc = tuple(error["loc"])
        allowed = [k for k in _allowed_keys(_section_model(loc[:-1])) if k not in _INTERNAL_FIELDS]
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        return f"unknown key{hint} (known: {', '.join(allowed)})"
    if kind == "missing":
        loc = tuple(error["loc"])
        if len(loc) == 1 and loc[0] in _TOP_LEVEL_PROVIDER_FIELDS:
            return f"is required (pulumi config set {_TOP_LEVEL_PROVIDER_FIELDS[loc[0]]} ...)"
        return "is required"
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}, got {value!r}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']}, got {value!r}"
    if kind == "greater_than":
        return f"must be greater than {ctx['gt']}, got {value!r}"
    if kind == "less_than":
        return f"must be less than {ctx['lt']}, got {value!r}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}, got {value!r}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number, got {value!r}"
    if kind in ("float_type", "float_parsing"):
        return f"must be a number, got {value!r}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {value!r}"
    if kind == "list_type":
        return f"must be a list, got {value!r}"
    if kind in ("string_type",):
        return f"must be a string, got {value!r}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be an object of keys, got {value!r}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return str(error["msg"])


def _pydantic_problems(error: ValidationError, secret_sections: Iterable[str] = ()) -> list[Problem]:
    hidden = {"hfToken", "secretEnv", *secret_sections}
    problems = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        if loc[:1] and loc[0] in hidden:
            # Secret values stay out of the message, also where a validator's own text quotes them ({value!r}).
            value = item.get("input")
            message = _describe({**item, "input": OPAQUE_SECRET})
            if isinstance(value, str) and value:
                message = message.replace(repr(value), repr(OPAQUE_SECRET))
        else:
            # A value error on a dict key (extraEnv) names the dict.
            message = _describe(item)
        problems.append(Problem(key_path(loc), message))
    return problems


# ---------------------------------------------------------------- cross checks


def _version_floors(cfg: StackConfig) -> list[tuple[str, str]]:
    floors = [(RAY_OPERATOR_FLOOR, "the Ray operator add-on")]
    floors.append(
        (cfg.gpu_machine.rdma_floor[cfg.cluster.mode], f"GPUDirect RDMA on {cfg.gpu.type.upper()} ({cfg.cluster.mode})")
    )
    if cfg.storage.type == "lustre":
        floors.append((LUSTRE_CSI_FLOOR, "the Managed Lustre CSI driver"))
    if cfg.gpu.provisioning == "flex-start":
        floors.append((FLEX_START_FLOOR, "flex-start node pools"))
    return floors


def _zone_problems(cfg: StackConfig) -> list[Problem]:
    if not re.fullmatch(rf"{re.escape(cfg.region)}-[a-z]", cfg.zone):
        return [
            Problem(
                f"{PROJECT_NAMESPACE}:zone",
                f"must be a zone of gcp:region {cfg.region} (such as {cfg.region}-b), got {cfg.zone!r}",
            )
        ]
    return []


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


def _capacity_problems(cfg: StackConfig) -> list[Problem]:
    ns = PROJECT_NAMESPACE
    problems: list[Problem] = []
    add = lambda path, message: problems.append(Problem(f"{ns}:{path}", message))  # noqa: E731

    gpu = cfg.gpu
    if gpu.provisioning == "reservation" and not gpu.reservation:
        add("gpu.reservation", "is required when gpu.provisioning is 'reservation'")
    if gpu.provisioning != "reservation" and gpu.reservation:
        add("gpu.reservation", f"is only allowed when gpu.provisioning is 'reservation', not {gpu.provisioning!r}")
    if gpu.provisioning != "reservation" and cfg.pricing.reservation_hourly is not None:
        add("pricing.reservationHourly", f"is only for gpu.provisioning 'reservation', not {gpu.provisioning!r}")
    if cfg.cluster.mode == "autopilot" and "head_machine_type" in cfg.cluster.model_fields_set:
        add("cluster.headMachineType", "is only for cluster.mode 'standard' (Autopilot chooses the head's machine)")
    if cfg.cluster.mode == "autopilot" and gpu.provisioning in ("reservation", "flex-start"):
        add("gpu.provisioning", f"must be 'spot' or 'on-demand' on Autopilot, got {gpu.provisioning!r}")
    return problems


def _storage_problems(cfg: StackConfig) -> list[Problem]:
    ns = PROJECT_NAMESPACE
    problems: list[Problem] = []
    add = lambda path, message: problems.append(Problem(f"{ns}:{path}", message))  # noqa: E731

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
    if storage.type == "gcs" and storage.bucket is None:
        problem = bucket_name_problem(cfg.bucket_name)
        if problem:
            add("storage.bucket", f"the default name derived from project and stack is invalid ({problem}); set one")
    return problems


def cross_check(cfg: StackConfig) -> list[Problem]:
    """Every rule that ties several keys together; each problem names the key to change."""
    return [problem for rule in CROSS_RULES for problem in rule(cfg)]


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


def _workload_problems(cfg: StackConfig) -> list[Problem]:
    ns = PROJECT_NAMESPACE
    problems = []
    workload = cfg.workload
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
    for name in sorted(set(workload.extra_env) & set(cfg.secret_env)):
        problems.append(
            Problem(
                f"{ns}:workload.extraEnv",
                f"{name} is also in grpo-gke:secretEnv; keep it only there:"
                f" pulumi config rm --path '{ns}:workload.extraEnv.{name}'",
            )
        )
    return problems


def _driver_problems(cfg: StackConfig) -> list[Problem]:
    """The image's CUDA must run on the driver the stack chooses (StackConfig.gpu_driver)."""
    image = cfg.workload.resolved_image()
    needed = driver_branch_for(image.cuda_version)
    if needed is None or cfg.gpu_driver == "DEFAULT":
        return []
    # Every branch of CUDA_MAJOR_DRIVER_BRANCH has a LATEST floor (tests/infra/test_config.py).
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


def grpo_problems(cfg: StackConfig) -> list[Problem]:
    """The batch-divisibility rules of `grpo-gke:grpo` (derived defaults are chosen to keep them)."""
    ns = PROJECT_NAMESPACE
    problems = []
    grpo = cfg.grpo
    gpus = cfg.total_gpus
    samples = grpo.prompts_per_step * grpo.generations_per_prompt
    mini = grpo.effective_mini_batch()

    def add(key: str, message: str) -> None:
        problems.append(Problem(f"{ns}:grpo.{key}", message))

    if mini > grpo.prompts_per_step:
        add("miniBatchSize", f"must be at most grpo.promptsPerStep ({grpo.prompts_per_step}), got {mini}")
    elif grpo.prompts_per_step % mini:
        add("miniBatchSize", f"must divide grpo.promptsPerStep ({grpo.prompts_per_step}), got {mini}")

    if cfg.workload.framework == "verl":
        # verl validate_config: the real batch (prompts x n) divides across all GPUs, and each
        # GPU's share of a mini-batch is a whole number of micro-batches (jobs-and-frameworks.md §1).
        if samples % gpus:
            add(
                "promptsPerStep",
                f"promptsPerStep x generationsPerPrompt ({grpo.prompts_per_step} x {grpo.generations_per_prompt}"
                f" = {samples}) must be divisible by the {gpus} GPUs of gpu.nodes={cfg.gpu.nodes}",
            )
        elif (mini * grpo.generations_per_prompt) % gpus:
            add(
                "miniBatchSize",
                f"miniBatchSize x generationsPerPrompt ({mini * grpo.generations_per_prompt}) must be divisible"
                f" by the {gpus} GPUs",
            )
        elif (mini * grpo.generations_per_prompt // gpus) % grpo.micro_batch_size_per_gpu:
            add(
                "microBatchSizePerGpu",
                f"must divide each GPU's share of a mini-batch ({mini * grpo.generations_per_prompt // gpus}),"
                f" got {grpo.micro_batch_size_per_gpu}",
            )
    else:
        # NeMo-RL: train_global_batch_size = prompts x generations must split into whole
        # micro-batches on every data-parallel rank (nemo_rl/algorithms/grpo.py setup checks).
        if samples % (gpus * grpo.micro_batch_size_per_gpu):
            add(
                "promptsPerStep",
                f"promptsPerStep x generationsPerPrompt ({samples}) must be divisible by the {gpus} GPUs"
                f" x microBatchSizePerGpu ({grpo.micro_batch_size_per_gpu})",
            )
    return problems


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


def control_plane_warnings(cfg: StackConfig) -> list[str]:
    """A warning when neither authorized networks nor the DNS endpoint closes the control plane's public IP."""
    if cfg.cluster.authorized_networks or cfg.cluster.dns_endpoint:
        return []
    ns = PROJECT_NAMESPACE
    return [
        f"{ns}:cluster.authorizedNetworks is empty and {ns}:cluster.dnsEndpoint is false: the control plane's public"
        f" endpoint accepts connections from any address (each request still needs Google credentials); set"
        f" {ns}:cluster.authorizedNetworks to the CIDRs of the machines that run pulumi and the job CLI, or"
        f" {ns}:cluster.dnsEndpoint to true"
    ]


CROSS_RULES = (
    _zone_problems,
    _kms_problems,
    _version_problems,
    _capacity_problems,
    _storage_problems,
    _network_problems,
    _workload_problems,
    _driver_problems,
    grpo_problems,
)
"""The rules that tie several keys together; each reads only the keys it checks."""


# ---------------------------------------------------------------- loading


@dataclass(frozen=True)
class DerivedValue:
    """A default the config derived from the model, the GPU and the node count, and why."""

    key: str
    """Dotted key under `grpo-gke:`, such as `grpo.rolloutTensorParallel`."""
    value: int
    """The value the config holds for it."""
    reason: str
    """What it was derived from, for the plan summary."""

    def __str__(self) -> str:
        return f"{self.key}={self.value} ({self.reason})"


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config and the warnings to show the user."""

    config: StackConfig
    """The validated config, derived defaults filled in."""
    warnings: tuple[str, ...]
    """Lines to show the user (e.g. a plaintext token)."""
    derived: tuple[DerivedValue, ...] = ()
    """The defaults derived into `config`, in key order."""


def _opaque_leaves(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of the values that the offline stack reader stands in for with OPAQUE_SECRET."""
    if isinstance(value, dict):
        return [leaf for key, item in sorted(value.items()) for leaf in _opaque_leaves(item, (*path, str(key)))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in _opaque_leaves(item, (*path, str(index)))]
    return [path] if value == OPAQUE_SECRET else []


def _misplaced_secrets(full_key: str, value: Any) -> list[Problem]:
    """A secret under a key other than hfToken and secretEnv would land in clear in the manifests and the
    state; each problem says how to move it. Offline the secret leaves are known; under the engine only
    the key is (the whole key is secret once one leaf is)."""
    ns = PROJECT_NAMESPACE
    why = f"is a secret, but only {ns}:hfToken and {ns}:secretEnv keep secrets out of the manifests and the state"
    problems = []
    for leaf in _opaque_leaves(value) or [()]:
        path = ".".join((full_key, *leaf))
        if full_key == f"{ns}:workload" and len(leaf) == 2 and leaf[0] == "extraEnv":
            move = (
                f"pulumi config rm --path '{path}', then"
                f" pulumi config set --secret --path '{ns}:secretEnv.{leaf[1]}' <value>"
            )
        elif leaf:
            move = f"pulumi config set --path '{path}' <value> (in plaintext)"
        elif not isinstance(value, (dict, list)):
            move = f"pulumi config set {full_key} <value> (in plaintext)"
        else:
            move = (
                f"for an environment variable, pulumi config rm --path '{full_key}.extraEnv.<NAME>', then"
                f" pulumi config set --secret --path '{ns}:secretEnv.<NAME>' <value>; set any other field of"
                f" {full_key} in plaintext"
            )
        problems.append(Problem(path, f"{why}: {move}"))
    return problems


def _decode(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _without_invalid(model: type[BaseModel], data: Mapping[str, Any], invalid: set[tuple[Any, ...]]) -> BaseModel:
    """`model` built from `data` without the fields at the `invalid` locations: reading one of them
    raises AttributeError, so a rule that needs a refused key cannot run on a stand-in value."""
    values: dict[str, Any] = {}
    left_out = set()
    for name, field in model.model_fields.items():
        alias = field.alias or name
        inner = {loc[1:] for loc in invalid if loc[:1] == (alias,) and len(loc) > 1}
        if (alias,) in invalid:
            left_out.add(name)
        elif alias not in data:
            continue
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            values[name] = _without_invalid(field.annotation, data[alias], inner)
        elif inner:
            left_out.add(name)
        else:
            values[name] = TypeAdapter(field.annotation).validate_python(data[alias])
    partial = model.model_construct(**values)
    for name in left_out:
        partial.__dict__.pop(name, None)
    return partial


def _cross_check_what_validated(data: Mapping[str, Any], error: ValidationError, derive: Derivation) -> list[Problem]:
    """The cross rules whose keys all validated, run on the config without the refused keys."""
    partial = _without_invalid(StackConfig, data, {tuple(item["loc"]) for item in error.errors()})
    rules = CROSS_RULES
    try:
        partial, _ = derive(partial)
    except AttributeError:
        # Derivation read a refused key: the batch rules would judge underived (None) sizes, so they wait.
        rules = tuple(rule for rule in CROSS_RULES if rule is not grpo_problems)
    problems = []
    for rule in rules:
        try:
            problems.extend(rule(partial))
        except AttributeError:
            continue  # the rule reads a key refused above
    return problems


Derivation = Callable[[StackConfig], tuple[StackConfig, tuple[DerivedValue, ...]]]
"""Fills the defaults derived from other keys, returning the config and what it derived (jobs.defaults)."""


def parse_config(
    values: Mapping[str, Any], secret_keys: Iterable[str], stack: str, derive: Derivation
) -> LoadedConfig:
    """Validate Pulumi config values (`ns:key` -> raw string as the engine passes them).

    Raises ConfigError with one problem per refused key.
    """
    secret_keys = set(secret_keys)
    secret_sections: set[str] = set()
    problems: list[Problem] = []
    warnings: list[str] = []
    data: dict[str, Any] = {"stack": stack}
    structured = {"cluster", "gpu", "storage", "network", "workload", "grpo", "job", "pricing"}

    if "gcp:project" in values:
        data["project"] = values["gcp:project"]
    if "gcp:region" in values:
        data["region"] = values["gcp:region"]

    prefix = f"{PROJECT_NAMESPACE}:"
    known = {field.alias or name for name, field in StackConfig.model_fields.items()}
    known -= _INTERNAL_FIELDS | set(_TOP_LEVEL_PROVIDER_FIELDS)
    for full_key in sorted(values):
        if not full_key.startswith(prefix):
            continue
        key = full_key[len(prefix) :]
        section, dotted, _ = key.partition(".")
        if dotted and section in (*structured, "secretEnv"):
            # `pulumi config set` without --path stores a flat key literally named `gpu.nodes`.
            secret = "--secret " if section == "secretEnv" else ""
            problems.append(
                Problem(
                    full_key,
                    f"is a flat key, not a field of {prefix}{section}: pulumi config rm {full_key}, then"
                    f" pulumi config set {secret}--path {full_key} <value>",
                )
            )
            continue
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f"; did you mean '{prefix}{close[0]}'?" if close else ""
            problems.append(Problem(full_key, f"unknown key{hint} (known: {', '.join(sorted(known))})"))
            continue
        raw = values[full_key]
        if key not in SECRET_KEYS and full_key in secret_keys:
            secret_sections.add(key)
            problems.extend(_misplaced_secrets(full_key, _decode(raw) if key in structured else raw))
        if key == "secretEnv":
            data["secretEnv"] = _decode(raw)
            if full_key not in secret_keys:
                warnings.append(
                    f"{full_key} is set in plaintext; store each value as a secret:"
                    f" pulumi config set --secret --path '{full_key}.<NAME>' <value>"
                )
            continue
        if key == "hfToken":
            data["hfToken"] = raw
            if full_key not in secret_keys:
                warnings.append(
                    f"{full_key} is set in plaintext; store it as a secret:"
                    f" pulumi config set --secret {full_key} <token>"
                )
            continue
        data[key] = _decode(raw) if key in structured else raw

    try:
        config = StackConfig.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as error:
        problems.extend(_pydantic_problems(error, secret_sections))
        if not secret_sections:
            problems.extend(_cross_check_what_validated(data, error, derive))
        raise ConfigError(problems) from None
    if secret_sections:
        # The cross-key messages quote values; none of a misplaced secret may be shown.
        raise ConfigError(problems)
    # Derived once, here, so that every reader (program, plan, job CLI) sees the same values and the
    # cross checks hold them to the rules an explicit value meets. The job layer supplies `derive`
    # (jobs/load.py): the derivation needs its recipes and capacity formula, and core never imports jobs.
    config, derived = derive(config)
    problems.extend(cross_check(config))
    if problems:
        raise ConfigError(problems)
    warnings.extend(control_plane_warnings(config))
    return LoadedConfig(config=config, warnings=tuple(warnings), derived=derived)


def pulumi_values() -> tuple[dict[str, Any], set[str], str]:
    """The running Pulumi program's config values, its secret keys and the stack's name (engine or mocks)."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    values = dict(runtime_config.get_config_env())
    values.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    secret_keys |= {key for key in values if runtime_config.is_config_secret(key)}
    return values, secret_keys, pulumi.get_stack()
