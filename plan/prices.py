"""The stack's cost per hour by part, from the price catalog (core/prices.py, dated and sourced).

Pure: a config and a catalog in, cost lines out. A price the catalog lacks is named, never guessed.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.facts.capacity import RUNG_QUOTA
from core.facts.platform import BF16_BYTES_PER_PARAMETER, NODE_BOOT_DISK_GB, NODE_BOOT_DISK_TYPE
from core.facts.zones import region_of, zones_with
from core.prices import (
    CATALOG_NAME,
    GIB,
    IdleBill,
    PriceCatalog,
    boot_disk_hourly,
    cluster_fee_hourly,
    flex_start_bounds,
    gcs_gib_month,
    gpu_boot_disk_type,
    gpu_node_hourly,
    gpu_node_rate,
    head_hourly,
    idle_bill,
    listed,
    lustre_gib_month,
    nat_hourly,
    nat_vms,
    storage_hourly,
)
from jobs.runs.goodput import duration
from jobs.spec.training import model_size_b

COST_FILE = "cost.json"
"""The file `python -m plan` writes the cost estimate to, beside plan.json."""


@dataclass(frozen=True)
class CostLine:
    """What one part of the stack costs per hour, or why the catalog cannot say."""

    part: str
    """`gpu nodes`, `head`, `storage`, `gpu boot disks`, `head boot disk`, `cluster fee` or `cloud nat`."""
    what: str
    """What is priced, and at which list price."""
    hourly: float | None
    """$/h, or None when the catalog has no price for it."""


@dataclass(frozen=True)
class RungCost:
    """What the GPU nodes cost per hour on one rung of `gpu.capacity`, as a range (equal ends for a list price)."""

    rung: str
    """`reservation`, `flex-start`, `spot` or `on-demand`."""
    what: str
    """At which price, and which quota the rung draws on."""
    low: float | None
    """$/h of all `gpu.nodes` at the rung's lowest price, or None without a price."""
    high: float | None
    """$/h of all `gpu.nodes` at the rung's highest price, or None without a price."""


@dataclass(frozen=True)
class CostEstimate:
    """The stack's cost per hour by part and in total."""

    catalog_date: str
    """Date of the catalog the figures come from."""
    lines: tuple[CostLine, ...]
    """One line per part: GPU nodes, head, storage, the nodes' boot disks, the cluster fee, Cloud NAT."""
    idle: IdleBill
    """What bills on once the GPUs are at zero (core/prices.py idle_bill, as the run guardian's settings carry it)."""
    elsewhere: str | None = None
    """Where the catalog prices the same GPU node lower and the stack could move, or None."""
    rungs: tuple[RungCost, ...] = ()
    """With `gpu.capacity`: the GPU nodes' $/h on each rung, in the ladder's order; empty without a ladder."""
    parked_per_tib: float | None = None
    """A Lustre stack: $/h per TiB its parked bucket holds while parked (storage.parked), None without a price or
    for a bucket stack (nothing to park)."""
    kept_after_destroy: str | None = None
    """What keeps billing after `pulumi destroy` (a Lustre instance under storage.keepOnDestroy), or None."""

    @property
    def best_hourly(self) -> float | None:
        """$/h of the GPU nodes all on the cheapest rung (the autoscaler may mix rungs node by node: every mix
        lies between best and worst); None without a ladder or when a rung has no price."""
        return _bound(self.rungs, "low", min)

    @property
    def worst_hourly(self) -> float | None:
        """$/h of the GPU nodes all on the dearest rung; None without a ladder or when a rung has no price."""
        return _bound(self.rungs, "high", max)

    @property
    def total(self) -> float:
        """$/h of the parts the catalog prices."""
        return sum(line.hourly for line in self.lines if line.hourly is not None)

    @property
    def unpriced(self) -> tuple[str, ...]:
        """The parts without a price."""
        return tuple(line.part for line in self.lines if line.hourly is None)

    @property
    def idle_hourly(self) -> float:
        """$/h of the priced parts that bill on with the GPUs at zero (IdleBill.parts)."""
        return self.idle.hourly

    @property
    def idle_unpriced(self) -> tuple[str, ...]:
        """The parts that bill on with the GPUs at zero but have no price."""
        return self.idle.unpriced


def _bound(rungs: tuple[RungCost, ...], end: str, pick: object) -> float | None:
    values = [getattr(rung, end) for rung in rungs]
    if not values or None in values:
        return None
    return pick(values)  # type: ignore[operator]


def no_price(what: str, prices: PriceCatalog) -> str:
    """The line for a price the catalog lacks."""
    return f"no price for {what} in the catalog (dated {prices.date})"


def first_rung(config: StackConfig) -> str:
    """The rung GKE tries first (gpu.capacity's first, or gpu.provisioning): the one the headline prices."""
    return config.gpu.ladder[0]


def _gpu_line(config: StackConfig, prices: PriceCatalog) -> CostLine:
    machine, zone, nodes = config.gpu_machine.machine_type, config.zone, config.gpu.nodes
    provisioning = first_rung(config)
    on_demand = gpu_node_hourly(prices, machine, zone, "on-demand")
    autopilot = (
        "; Autopilot bills GPU Pods by their node at Compute Engine rates plus a premium the catalog lacks"
        if config.cluster.mode == "autopilot"
        else ""
    )
    if provisioning == "flex-start":
        ceiling = f", {_dollars(on_demand)}/h a node on demand" if on_demand is not None else ""
        what = no_price(f"{machine} flex-start in {zone}", prices)
        discount = f"{prices.flex_start_discount_ceiling:.0%}"
        return CostLine("gpu nodes", f"{what}; flex-start bills up to {discount} below on-demand{ceiling}", None)
    if provisioning == "reservation" and config.pricing.reservation_hourly is not None:
        how = "reservation at pricing.reservationHourly"
    elif provisioning == "reservation":
        how = "reservation at the on-demand rate (set pricing.reservationHourly for yours)"
    else:
        how = provisioning
    rate = gpu_node_rate(config, prices, provisioning)
    if rate is None:
        return CostLine("gpu nodes", no_price(f"{machine} {provisioning} in {zone}", prices) + autopilot, None)
    first = ", the rung GKE tries first (the others below)" if config.gpu.capacity is not None else ""
    what = f"{nodes} x {machine} {how} in {zone} at {_dollars(rate)}/h a node{first}{autopilot}"
    return CostLine("gpu nodes", what, nodes * rate)


def _boot_disk_lines(config: StackConfig, prices: PriceCatalog) -> tuple[CostLine, ...]:
    """The GPU nodes' boot disks (they go with the nodes) and, on Standard, the head node's (it stays)."""
    region, nodes, size = config.region, config.gpu.nodes, NODE_BOOT_DISK_GB
    disk = gpu_boot_disk_type(config)
    rate = boot_disk_hourly(prices, disk, region)
    what = f"{nodes} x {size} GB {disk} in {region}"
    gpu = CostLine(
        "gpu boot disks",
        no_price(what, prices) if rate is None else f"{what} at ${prices.boot_disk_gib_month[disk][region]}/GiB-month",
        None if rate is None else nodes * rate,
    )
    if config.cluster.mode == "autopilot":
        return (gpu,)
    head_rate = boot_disk_hourly(prices, NODE_BOOT_DISK_TYPE, region)
    head_what = f"1 x {size} GB {NODE_BOOT_DISK_TYPE} in {region}"
    if head_rate is not None:
        head_what += f" at ${prices.boot_disk_gib_month[NODE_BOOT_DISK_TYPE][region]}/GiB-month"
    head = CostLine("head boot disk", head_what if head_rate is not None else no_price(head_what, prices), head_rate)
    return (gpu, head)


def _cluster_line(config: StackConfig, prices: PriceCatalog) -> CostLine:
    """GKE's cluster management fee; the free tier's credit named where it may apply (Autopilot)."""
    credit = f"${prices.cluster_free_monthly_credit:.2f}"
    if config.cluster.mode == "autopilot":
        what = (
            f"GKE's management fee for 1 Autopilot cluster; the free tier's {credit} monthly credit per billing account"
            " covers it where no other zonal or Autopilot cluster of the account uses the credit"
        )
    else:
        what = (
            f"GKE's management fee for 1 regional cluster (the free tier's {credit} a month covers zonal and Autopilot"
            " ones only)"
        )
    return CostLine("cluster fee", what, cluster_fee_hourly(prices))


def _nat_line(config: StackConfig, prices: PriceCatalog) -> CostLine:
    """The Cloud NAT gateway for the head's node and the GPU nodes, its address, and its per-GiB price beside it."""
    vms = nat_vms(config, config.gpu.nodes)
    nat = prices.nat
    what = (
        f"1 gateway for {vms} nodes at ${nat['per_vm_hour']}/h a node and 1 address at ${nat['per_ip_hour']}/h;"
        f" plus ${nat['per_gib_processed']} per GiB it carries (downloads from outside Google Cloud, such as the Hub's)"
    )
    return CostLine("cloud nat", what, nat_hourly(prices, vms))


def _head_line(config: StackConfig, prices: PriceCatalog) -> CostLine:
    if config.cluster.mode == "autopilot":
        requests = config.head_requests
        what = no_price(f"Autopilot's general-purpose Pods in {config.region}", prices)
        return CostLine("head", f"{what} (the head asks for {requests['cpu']} CPUs, {requests['memory']})", None)
    machine = config.cluster.head_machine_type
    rate = head_hourly(config, prices)
    if rate is None:
        return CostLine("head", no_price(f"{machine} in {config.region}", prices), None)
    return CostLine("head", f"1 x {machine} on-demand in {config.region}", rate)


def parked_per_tib(config: StackConfig, prices: PriceCatalog) -> float | None:
    """$/h per TiB a Lustre stack's parked bucket holds (Cloud Storage Standard in its region: the bucket sets no class,
    infra/storage.py); None for a bucket stack or without a price."""
    rate = gcs_gib_month(prices, config.region)
    if config.storage.type != "lustre" or rate is None:
        return None
    return 1024 * rate / prices.hours_per_month


def _storage_line(config: StackConfig, prices: PriceCatalog) -> CostLine:
    hours, region = prices.hours_per_month, config.region
    storage = config.storage
    if storage.parked:
        per_tib = parked_per_tib(config, prices)
        if per_tib is None:
            return CostLine(
                "storage", no_price(f"the parked bucket (Cloud Storage Standard in {region})", prices), None
            )
        what = (
            f"parked: no Lustre instance; the parked bucket bills what it holds, {_dollars(per_tib)}/h per TiB"
            f" (Cloud Storage Standard in {region} at ${gcs_gib_month(prices, region)}/GiB-month over {hours} h)"
        )
        return CostLine("storage", what, 0.0)
    if storage.type == "lustre":
        tier = f"Managed Lustre at {storage.throughput} MB/s/TiB in {region}"
        rate = lustre_gib_month(prices, storage.throughput, region)
        if rate is None:
            return CostLine("storage", no_price(tier, prices), None)
        what = f"{storage.capacity_gib} GiB of {tier} at ${rate}/GiB-month over {hours} h"
        return CostLine("storage", what, storage_hourly(config, prices, None))
    rate = gcs_gib_month(prices, region)
    if rate is None:
        return CostLine("storage", no_price(f"Cloud Storage Standard in {region}", prices), None)
    size_b = model_size_b(config.workload)
    if size_b is None:
        what = f"Cloud Storage Standard in {region} at ${rate}/GiB-month: the model's size is unknown"
        what += " (set workload.modelSizeB)"
        return CostLine("storage", what, None)
    gib = size_b * 1e9 * BF16_BYTES_PER_PARAMETER / GIB
    what = (
        f"{gib:.1f} GiB (the model in bf16) on Cloud Storage Standard in {region} at ${rate}/GiB-month over {hours} h;"
        f" checkpoints add {_dollars(100 * rate / hours)}/h per 100 GiB"
    )
    return CostLine("storage", what, storage_hourly(config, prices, size_b))


def cheaper_elsewhere(config: StackConfig, prices: PriceCatalog) -> str | None:
    """The zone where the catalog prices the stack's GPU node lowest under its provisioning, when lower than
    here and the stack can move there; None otherwise.

    The rung is the one GKE tries first (first_rung). What a move is possible for: spot and on-demand nodes (a
    reservation's capacity lies in its own zone; a
    flex-start node has no list price). The RDMA network profile is zonal but named after `zone`
    (core/facts/gcp.py RDMA_NETWORK_PROFILE), so it moves with it. Managed Lustre is zonal too: a move means a
    new, empty instance in the new zone, so only zones whose region the catalog prices the stack's Lustre tier
    in are offered, and the line says so. Only zones that offer the machine count (core/facts/zones.py).
    """
    machine, zone, provisioning = config.gpu_machine.machine_type, config.zone, first_rung(config)
    if provisioning not in ("spot", "on-demand"):
        return None
    here = gpu_node_hourly(prices, machine, zone, provisioning)
    lustre = config.storage.type == "lustre"

    def movable(candidate: str) -> bool:
        return not lustre or region_of(candidate) in prices.lustre_gib_month.get(str(config.storage.throughput), {})

    priced = [
        (rate, candidate)
        for candidate in zones_with(machine)
        if movable(candidate) and (rate := gpu_node_hourly(prices, machine, candidate, provisioning)) is not None
    ]
    if here is None or not priced or min(priced)[0] >= here:
        return None
    rate, best = min(priced)
    region = region_of(best)
    move = f"grpo-gke:zone {best}" if region == config.region else f"gcp:region {region} and grpo-gke:zone {best}"
    note = "; Managed Lustre is zonal: a new, empty instance there" if lustre else ""
    return (
        f"{config.gpu.type.upper()} {provisioning} {_dollars(rate)}/h a node in {best} against {_dollars(here)}/h"
        f" in {zone}: set {move}{note}"
    )


def _rung_cost(config: StackConfig, prices: PriceCatalog, rung: str) -> RungCost:
    nodes, machine, zone = config.gpu.nodes, config.gpu_machine.machine_type, config.zone
    quota = f"draws on {RUNG_QUOTA[rung]}"
    if rung == "flex-start":
        bounds = flex_start_bounds(config, prices)
        if bounds is None:
            return RungCost(rung, f"{no_price(f'{machine} on-demand in {zone}', prices)}; {quota}", None, None)
        low, high = bounds
        what = (
            f"{nodes} x {machine} flex-start: {_dollars(low)} to {_dollars(high)}/h a node (up to"
            f" {prices.flex_start_discount_ceiling:.0%} below on-demand); {quota}"
        )
        return RungCost(rung, what, nodes * low, nodes * high)
    rate = gpu_node_rate(config, prices, rung)
    if rate is None:
        return RungCost(rung, f"{no_price(f'{machine} {rung} in {zone}', prices)}; {quota}", None, None)
    how = rung
    if rung == "reservation":
        how = "reservation at " + (
            "pricing.reservationHourly" if config.pricing.reservation_hourly is not None else "the on-demand rate"
        )
    return RungCost(
        rung, f"{nodes} x {machine} {how} at {_dollars(rate)}/h a node; {quota}", nodes * rate, nodes * rate
    )


def estimate(config: StackConfig, prices: PriceCatalog) -> CostEstimate:
    """The stack's cost per hour by part (GPU nodes, head, storage, boot disks, cluster fee, Cloud NAT) at the catalog's
    list prices, where the same GPU node is cheaper, with `gpu.capacity` the GPU nodes' cost on each rung, and what
    bills on after `pulumi destroy`."""
    lines = (
        _gpu_line(config, prices),
        _head_line(config, prices),
        _storage_line(config, prices),
        *_boot_disk_lines(config, prices),
        _cluster_line(config, prices),
        _nat_line(config, prices),
    )
    rungs = tuple(_rung_cost(config, prices, rung) for rung in config.gpu.capacity or ())
    idle = idle_bill(config, prices, model_size_b(config.workload))
    return CostEstimate(
        catalog_date=prices.date,
        lines=lines,
        idle=idle,
        elsewhere=cheaper_elsewhere(config, prices),
        rungs=rungs,
        parked_per_tib=parked_per_tib(config, prices),
        kept_after_destroy=kept_after_destroy(config, prices),
    )


def kept_after_destroy(config: StackConfig, prices: PriceCatalog) -> str | None:
    """A Lustre stack under storage.keepOnDestroy (its default): the instance outlives `pulumi destroy` and bills on,
    at its capacity's price a month; None for a bucket stack, a parked one (no instance) or keepOnDestroy false."""
    storage = config.storage
    if storage.type != "lustre" or storage.parked or not storage.keep_on_destroy:
        return None
    hourly = storage_hourly(config, prices, None)
    price = "at a price the catalog lacks" if hourly is None else f"{_dollars(hourly * prices.hours_per_month)} a month"
    return (
        f"storage.keepOnDestroy is true: the Lustre instance outlives pulumi destroy and keeps billing, {price},"
        " until you park it (storage.parked) or delete it"
    )


def ladder_lines(cost: CostEstimate) -> list[str]:
    """The summary's ladder block (empty without `gpu.capacity`): $/h of the GPU nodes per rung in the order
    GKE tries them, and the best and worst case of any mix of rungs."""
    if not cost.rungs:
        return []
    lines = ["  gpu nodes per rung of gpu.capacity, in the order GKE tries them:"]
    for rung in cost.rungs:
        shown = ""
        if rung.low is not None and rung.high is not None:
            shown = (
                f"{_dollars(rung.low)}/h for "
                if rung.low == rung.high
                else f"{_dollars(rung.low)} to {_dollars(rung.high)}/h for "
            )
        lines.append(f"    {rung.rung}: {shown}{rung.what}")
    if cost.best_hourly is None or cost.worst_hourly is None:
        unpriced = ", ".join(rung.rung for rung in cost.rungs if rung.low is None)
        lines.append(f"    best and worst case: unknown ({unpriced}: no price)")
    else:
        lines.append(
            f"    best case {_dollars(cost.best_hourly)}/h, worst case {_dollars(cost.worst_hourly)}/h for the GPU nodes"
            " (any mix of rungs lies between)"
        )
    return lines


def _dollars(value: float) -> str:
    """`$1,234.56`; below a cent, two significant digits (`$0.000026`)."""
    places = 2 if value >= 0.01 or value == 0 else 1 - math.floor(math.log10(value))
    return f"${value:,.{places}f}"


def summary_lines(cost: CostEstimate) -> list[str]:
    """The plan summary's cost block: one line per part and the total."""
    lines = [f"cost per hour (list prices of {cost.catalog_date}, {CATALOG_NAME}):"]
    for line in cost.lines:
        shown = f"{_dollars(line.hourly)}/h for " if line.hourly is not None else ""
        lines.append(f"  {line.part}: {shown}{line.what}")
    if "gpu nodes" in cost.unpriced:
        # The GPUs are nearly all of the bill: a sum without them is no total at all.
        priced = ", ".join(line.part for line in cost.lines if line.hourly is not None)
        lines.append(
            f"  total: UNKNOWN: the catalog has no price for the gpu nodes"
            f" (the {priced} alone: {_dollars(cost.total)}/h, not the total)"
        )
    elif cost.unpriced:
        lines.append(
            f"  total: at least {_dollars(cost.total)}/h (without the {' and '.join(cost.unpriced)}: no price)"
        )
    else:
        lines.append(f"  total: {_dollars(cost.total)}/h")
    lines.append(idle_line(cost))
    if cost.elsewhere:
        lines.append(f"  cheaper elsewhere: {cost.elsewhere}")
    if cost.kept_after_destroy:
        lines.append(f"  after destroy: {cost.kept_after_destroy}")
    return lines + ladder_lines(cost)


def idle_line(cost: CostEstimate) -> str:
    """The summary's idle line: $/h once the GPUs are at zero, of the parts that stay (IdleBill.parts)."""
    stays = listed(cost.idle.parts)
    if cost.idle_unpriced:
        missing = listed(cost.idle_unpriced)
        return f"  idle, GPUs at zero: at least {_dollars(cost.idle_hourly)}/h for the {stays} (without the {missing}: no price)"
    return f"  idle, GPUs at zero: {_dollars(cost.idle_hourly)}/h for the {stays}"


def render_cost_json(cost: CostEstimate) -> str:
    """cost.json: the cost per hour by part and in total (null when the GPU nodes have no price), the idle cost
    per hour once the GPUs are at zero, with the catalog's date; sorted, deterministic."""
    document = {
        "catalogDate": cost.catalog_date,
        "currency": "USD",
        "parts": [
            {"part": line.part, "what": line.what, "hourly": None if line.hourly is None else round(line.hourly, 8)}
            for line in cost.lines
        ],
        # No total without the GPUs (the summary says UNKNOWN); the priced parts stay in `parts`.
        "totalHourly": None if "gpu nodes" in cost.unpriced else round(cost.total, 8),
        "unpriced": list(cost.unpriced),
        # Once the guardian has scaled the GPUs to zero: the parts that stay, their priced sum, those without a price.
        "idleHourly": round(cost.idle_hourly, 8),
        "idleParts": list(cost.idle.parts),
        "idleUnpriced": list(cost.idle_unpriced),
    }
    if cost.kept_after_destroy is not None:
        # A Lustre stack under storage.keepOnDestroy: what bills on after pulumi destroy.
        document["afterDestroy"] = cost.kept_after_destroy
    if cost.parked_per_tib is not None:
        # A Lustre stack: what its parked bucket bills per TiB it holds, once parked (docs/up-and-destroy.md).
        document["parkedHourlyPerTib"] = round(cost.parked_per_tib, 8)
    if cost.rungs:
        document["ladder"] = {
            "rungs": [
                {
                    "rung": rung.rung,
                    "what": rung.what,
                    "lowHourly": _rounded(rung.low),
                    "highHourly": _rounded(rung.high),
                }
                for rung in cost.rungs
            ],
            "bestHourly": _rounded(cost.best_hourly),
            "worstHourly": _rounded(cost.worst_hourly),
        }
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 8)


def budget_lines(config: StackConfig, cost: CostEstimate) -> list[str]:
    """The run's budget (job.maxCost, job.maxGpuHours) as hours of the stack: dollars over its $/h (`total`, every part
    priced; the guardian counts the GPU nodes' share only, incluster/budget.py), GPU hours over its GPUs; none
    without a budget."""
    parts = []
    if config.job.max_cost is not None:
        if "gpu nodes" in cost.unpriced or cost.total <= 0:
            parts.append(f"job.maxCost {_dollars(config.job.max_cost)} (the stack has no $/h to turn it into hours)")
        else:
            hours = duration(config.job.max_cost / cost.total * 3600)
            parts.append(
                f"job.maxCost {_dollars(config.job.max_cost)} = {hours} of the stack at {_dollars(cost.total)}/h"
            )
    if config.job.max_gpu_hours is not None:
        seconds = config.job.max_gpu_hours / config.total_gpus * 3600
        gpus = f"{config.total_gpus} GPU" + ("" if config.total_gpus == 1 else "s")
        line = f"job.maxGpuHours {config.job.max_gpu_hours:g} = {duration(seconds)} of its {gpus}"
        if "gpu nodes" not in cost.unpriced and cost.total > 0:
            line += f", about {_dollars(cost.total * seconds / 3600)} of the stack at {_dollars(cost.total)}/h"
        parts.append(line)
    return [f"budget: {'; '.join(parts)}"] if parts else []


def budget_refusal(config: StackConfig, cost: CostEstimate, first_step_seconds: float) -> str | None:
    """One line naming the key when the run's budget cannot buy the time from `up` to the first step the plan models
    (`first_step_seconds`, first-step.json) at the stack's $/h or with its GPUs; None when it can or there is none."""
    wanted = duration(first_step_seconds)
    if config.job.max_cost is not None and "gpu nodes" not in cost.unpriced:
        needed = cost.total * first_step_seconds / 3600
        if config.job.max_cost < needed:
            return (
                f"{PROJECT_NAMESPACE}:job.maxCost: {_dollars(config.job.max_cost)} cannot buy the ~{wanted} to the first"
                f" step the plan models ({_dollars(needed)} at {_dollars(cost.total)}/h); raise it or unset it"
            )
    if config.job.max_gpu_hours is not None:
        needed = config.total_gpus * first_step_seconds / 3600
        if config.job.max_gpu_hours < needed:
            return (
                f"{PROJECT_NAMESPACE}:job.maxGpuHours: {config.job.max_gpu_hours:g} cannot buy the ~{wanted} to the"
                f" first step the plan models ({needed:.2f} GPU hours on {config.total_gpus} GPUs); raise it or unset it"
            )
    return None
