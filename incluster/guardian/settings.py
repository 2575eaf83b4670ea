"""What the guardian follows: its Settings, read from the JSON jobs/guardian/settings.py `guardian_settings` writes,
and GuardError, the one-line refusal of bad settings or input."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from incluster.runs import run_dir_of


class GuardError(Exception):
    """Bad settings or input; the message is one line naming the file or key and what to do."""


@dataclass(frozen=True)
class IdleRate:
    """What bills on once the GPUs are at zero, as `pulumi up` priced it (jobs/guardian/settings.py
    idle_bill_setting: the figure of cost.json's `idleHourly`); the guardian records it when it scales to zero."""

    hourly: float
    """$/h of the priced parts."""
    parts: tuple[str, ...]
    """The parts that stay (the head, the storage)."""
    unpriced: tuple[str, ...]
    """The parts among them without a price."""
    catalog_date: str
    """The date of the price catalog the figure comes from."""

    def details(self) -> dict[str, Any]:
        """The `scaled-to-zero` record entry's details (incluster/record.py EVENTS)."""
        return {
            "idleHourly": self.hourly,
            "idleParts": list(self.parts),
            "idleUnpriced": list(self.unpriced),
            "catalogDate": self.catalog_date,
        }


@dataclass(frozen=True)
class ParkTarget:
    """What the guardian parks once the GPU workers are at zero (storage.parkWhenIdle; jobs/guardian/settings.py
    park_setting writes it)."""

    instance: str
    """The Lustre instance as the API names it (`projects/<p>/locations/<zone>/instances/<id>`)."""
    bucket: str
    """The parked bucket."""
    run_path: str
    """The run's directory on the instance (`/checkpoints/<run>`)."""
    exports_path: str
    """The run's exports directory on the instance; its parent, the exports root, is parked whole when it exists."""
    deadline_seconds: float
    """How long it waits for each transfer."""


@dataclass(frozen=True)
class GpuPrices:
    """What a budgeted run's GPU nodes cost, as `pulumi up` priced them (jobs/guardian/settings.py gpu_prices_setting)."""

    node_hourly: dict[str, float | None]
    """$/h of one GPU node on each rung (None: no price)."""
    stack_rungs: dict[str, int]
    """The stack's GPU nodes per rung, for an attempt whose rungs the record lacks."""
    gpus_per_node: int
    """GPUs of one of the stack's GPU nodes (its machine's, core/facts/platform.py GPU_MACHINES)."""
    catalog_date: str
    """The date of the price catalog."""


@dataclass(frozen=True)
class Settings:
    """What the guardian follows (jobs/guardian/settings.py `guardian_settings` writes it as JSON)."""

    stack: str
    """The stack's name."""
    run: str
    """The run's id."""
    submission: dict[str, Any]
    """The attempt-1 submit_job kwargs of the run (its schedule in the metadata)."""
    gpu_nodes: int
    """gpu.nodes: the full GPU Ray nodes (all of a machine's GPUs each) every attempt needs."""
    max_recoveries: int
    """job.maxRecoveries."""
    idle_minutes: float
    """job.idleMinutes (0: never scale to zero)."""
    ready_timeout_seconds: float
    """job.readyTimeoutSeconds: one readiness gate's longest wait."""
    framework: str
    """verl or nemo-rl: whose checkpoint layout."""
    world_size: int
    """Ranks of the run: every GPU of every GPU node (jobs/guardian/settings.py worldSize)."""
    idle_rate: IdleRate
    """What bills on once the GPUs are at zero (the settings' `idleBill`)."""
    park: ParkTarget | None = None
    """What it parks after the scale to zero (the settings' `park`); None: it does not park."""
    gpu_prices: GpuPrices | None = None
    """What the attempts' GPU nodes cost (the settings' `gpuPrices`), for the run's budget; None: no budget."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)
    """Every key of the settings, for the hooks (namespace, RayCluster and worker group names, ...)."""

    @property
    def gpus_per_node(self) -> int:
        """GPUs of each GPU node (the machine's): the world size spread over the nodes."""
        return self.world_size // self.gpu_nodes

    @property
    def run_dir(self) -> Path:
        """The run's directory (the submission's GRPO_RUN_DIR)."""
        return Path(run_dir_of(self.submission))


SETTINGS_KEYS = {
    "stack": str,
    "run": str,
    "submission": dict,
    "gpuNodes": int,
    "maxRecoveries": int,
    "idleMinutes": (int, float),
    "readyTimeoutSeconds": (int, float),
    "framework": str,
    "worldSize": int,
    "idleBill": dict,
}
"""The settings keys the guardian itself reads, with their JSON types."""


def settings_from(values: dict[str, Any], source: str) -> Settings:
    """Settings from the JSON object `values` read from `source`; GuardError names a missing or mistyped key."""
    for key, kind in SETTINGS_KEYS.items():
        if key not in values:
            raise GuardError(f"{source}: the key {key!r} is missing; write the file with guardian_settings(config)")
        if not isinstance(values[key], kind) or isinstance(values[key], bool):
            raise GuardError(f"{source}: {key!r} must be {getattr(kind, '__name__', 'a number')}, got {values[key]!r}")
    try:
        run_dir_of(values["submission"])
    except (KeyError, TypeError):
        raise GuardError(f"{source}: 'submission' has no runtime_env.env_vars.GRPO_RUN_DIR") from None
    return Settings(
        stack=values["stack"],
        run=values["run"],
        submission=values["submission"],
        gpu_nodes=values["gpuNodes"],
        max_recoveries=values["maxRecoveries"],
        idle_minutes=float(values["idleMinutes"]),
        ready_timeout_seconds=float(values["readyTimeoutSeconds"]),
        framework=values["framework"],
        world_size=values["worldSize"],
        idle_rate=idle_rate_from(values["idleBill"], source),
        park=park_from(values.get("park"), source),
        gpu_prices=gpu_prices_from(values, source),
        raw=dict(values),
    )


def gpu_prices_from(values: dict[str, Any], source: str) -> GpuPrices | None:
    """The GpuPrices of the settings' `gpuPrices` object, which a submission with a budget (job metadata `maxCost`,
    `maxGpuHours`) needs; None for a run without a budget. GuardError names a missing or mistyped field."""
    metadata = values["submission"].get("metadata") or {}
    budgeted = any(metadata.get(key) for key in ("maxCost", "maxGpuHours"))
    prices = values.get("gpuPrices")
    if prices is None and not budgeted:
        return None
    if not isinstance(prices, dict):
        raise GuardError(f"{source}: the run has a budget and 'gpuPrices' is {prices!r}; write the file with"
                         " guardian_settings(config)")  # fmt: skip
    hourly, rungs, date = prices.get("nodeHourly"), prices.get("stackRungs"), prices.get("catalogDate")
    if not isinstance(hourly, dict) or not all(
        rate is None or (isinstance(rate, (int, float)) and not isinstance(rate, bool) and rate >= 0)
        for rate in hourly.values()
    ):
        raise GuardError(f"{source}: 'gpuPrices.nodeHourly' must map each rung to $/h or null, got {hourly!r}")
    if not isinstance(rungs, dict) or not all(type(count) is int and count > 0 for count in rungs.values()):
        raise GuardError(f"{source}: 'gpuPrices.stackRungs' must map a rung to its GPU nodes, got {rungs!r}")
    if not isinstance(date, str):
        raise GuardError(f"{source}: 'gpuPrices.catalogDate' must be the price catalog's date, got {date!r}")
    gpus = prices.get("gpusPerNode")
    if type(gpus) is not int or gpus <= 0:
        raise GuardError(f"{source}: 'gpuPrices.gpusPerNode' must be the GPUs of one GPU node, got {gpus!r}")
    hourly = {rung: None if rate is None else float(rate) for rung, rate in hourly.items()}
    return GpuPrices(hourly, dict(rungs), gpus, date)


PARK_KEYS = {"instance": str, "bucket": str, "runPath": str, "exportsPath": str, "deadlineSeconds": (int, float)}
"""The keys of the settings' `park` object, with their JSON types."""


def park_from(park: Any, source: str) -> ParkTarget | None:
    """The ParkTarget of the settings' `park` object (null or absent: None); GuardError names a missing or mistyped
    field."""
    if park is None:
        return None
    if not isinstance(park, dict):
        raise GuardError(f"{source}: 'park' must be an object or null, got {park!r}")
    for key, kind in PARK_KEYS.items():
        value = park.get(key)
        if not isinstance(value, kind) or isinstance(value, bool) or not value:
            raise GuardError(f"{source}: 'park.{key}' must be {getattr(kind, '__name__', 'a number')}, got {value!r}")
    return ParkTarget(
        instance=park["instance"],
        bucket=park["bucket"],
        run_path=park["runPath"],
        exports_path=park["exportsPath"],
        deadline_seconds=float(park["deadlineSeconds"]),
    )


def idle_rate_from(bill: dict[str, Any], source: str) -> IdleRate:
    """The IdleRate of the settings' `idleBill` object; GuardError names a missing or mistyped field."""
    hourly, date = bill.get("hourly"), bill.get("catalogDate")
    parts, unpriced = bill.get("parts"), bill.get("unpriced")
    if not isinstance(hourly, (int, float)) or isinstance(hourly, bool) or hourly < 0:
        raise GuardError(f"{source}: 'idleBill.hourly' must be a number of 0 or more, got {hourly!r}")
    for key, value in (("parts", parts), ("unpriced", unpriced)):
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise GuardError(f"{source}: 'idleBill.{key}' must be a list of part names, got {value!r}")
    if not isinstance(date, str):
        raise GuardError(f"{source}: 'idleBill.catalogDate' must be the price catalog's date, got {date!r}")
    return IdleRate(float(hourly), tuple(parts), tuple(unpriced), date)


def read_settings(path: str) -> Settings:
    """The settings JSON at `path`; GuardError in one line when it cannot be read."""
    try:
        values = json.loads(Path(path).read_text())
    except OSError as error:
        raise GuardError(f"cannot read the guardian settings {path}: {error.strerror or error}") from None
    except ValueError as error:
        raise GuardError(f"the guardian settings {path} are not JSON: {error}") from None
    if not isinstance(values, dict):
        raise GuardError(f"the guardian settings {path} must hold a JSON object")
    return settings_from(values, path)
