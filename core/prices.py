"""The price catalog (core/facts/prices.json, dated and sourced) and its lookups.

Pure: the catalog in, list prices out; a price the catalog lacks is None, never guessed. The plan's
cost lines (plan/prices.py) and the job CLI's dollars (`python -m jobs status`) read the same figures.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from core.config.model import StackConfig
from core.facts.imagecache import IMAGE_CACHE_DISK_GB
from core.facts.platform import BF16_BYTES_PER_PARAMETER, NODE_BOOT_DISK_GB, NODE_BOOT_DISK_TYPE

CATALOG_PATH = Path(__file__).parent / "facts" / "prices.json"
"""The shipped price catalog."""

CATALOG_NAME = "core/facts/prices.json"
"""The catalog's path in the repository, as the plan's summary names it."""

GIB = 2**30
"""Bytes in a GiB."""

IDLE_PARTS = ("head", "storage", "head boot disk", "cluster fee", "cloud nat")
"""The parts that bill on once the run guardian has scaled the GPU workers to zero: the GPU pools autoscale to
no nodes (infra/nodepools.py total_min_node_count=0), while the head's CPU pool keeps its node and that node's boot
disk (infra/nodepools.py node_count=HEAD_NODE_COUNT; the guardian runs there too, jobs/guardian/objects.py), the
bucket or the Lustre instance keeps its capacity, the cluster its management fee and the Cloud NAT gateway its
hourly price for the head's node and its one address. On Autopilot there is no head node and so no head boot
disk (Autopilot bills the head Pod's requests)."""

HEAD_NODES = 1
"""Nodes of the head's CPU pool (infra/nodepools.py HEAD_NODE_COUNT, which core may not import)."""

NAT_ADDRESSES = 1
"""External addresses the Cloud NAT gateway holds for the stack's few nodes: assumed one (AUTO_ONLY allocates as the
nodes' port reservations need, and the NAT pricing page prices each address it uses; no stored page was read for
how many ports one address serves)."""

IMAGE_CACHE_PART = "image cache"
"""The idle part `gpu.imageCacheDisk` adds: its disk image bills as image storage for as long as it exists, GPUs at
zero or not (each GPU node's own disk made from it goes with the node)."""


@dataclass(frozen=True)
class PriceCatalog:
    """List prices by machine, place and provisioning, as core/facts/prices.json holds them."""

    date: str
    """The day the catalog's figures were read (YYYY-MM-DD)."""
    hours_per_month: int
    """Hours a GiB-month is spread over."""
    flex_start_discount_ceiling: float
    """The most flex-start bills below on-demand, as a share."""
    gpu_nodes: dict[str, dict[str, dict[str, float]]]
    """$/h of one 8-GPU node: machine type -> zone -> provisioning (`on-demand`, `spot`)."""
    cpu_machines: dict[str, dict[str, float]]
    """On-demand $/h of a CPU machine: machine type -> region."""
    lustre_gib_month: dict[str, dict[str, float]]
    """$ per GiB-month of Managed Lustre: throughput tier (MB/s per TiB, as text) -> region."""
    lustre_dynamic_gib_month: dict[str, float]
    """$ per GiB-month of Managed Lustre's Dynamic tier by region (listed, not offered: LUSTRE_DYNAMIC_TIER)."""
    gcs_gib_month: dict[str, dict[str, float]]
    """$ per GiB-month of Cloud Storage: storage class (`STANDARD`, `NEARLINE`, `COLDLINE`, `ARCHIVE`) -> region."""
    artifact_registry_gb_month: float
    """$ per GB-month of Artifact Registry storage above the free amount, in any location."""
    artifact_registry_free_gb: float
    """GB of Artifact Registry storage free per billing account."""
    image_storage_gib_month: dict[str, float]
    """$ per GiB-month of a Compute Engine disk image (SKU "Storage Image", multi-regional), by the regions it covers."""
    cluster_fee_hourly: float
    """GKE's cluster management fee, $ per cluster-hour, in any mode."""
    cluster_free_monthly_credit: float
    """GKE's free tier credit per billing account and month, for zonal and Autopilot clusters only."""
    nat: dict[str, float]
    """Cloud NAT's prices: `per_vm_hour`, `vm_cap`, `capped_hourly`, `per_ip_hour`, `per_gib_processed`."""
    boot_disk_gib_month: dict[str, dict[str, float]]
    """$ per GiB-month of a node's boot disk: disk type -> region."""


def read_catalog(document: dict[str, Any]) -> PriceCatalog:
    """The catalog of a parsed prices.json."""
    return PriceCatalog(
        date=document["catalog_date"],
        hours_per_month=document["hours_per_month"]["value"],
        flex_start_discount_ceiling=document["flex_start_discount_ceiling"]["value"],
        gpu_nodes=document["gpu_nodes"]["prices"],
        cpu_machines=document["cpu_machines"]["prices"],
        lustre_gib_month=document["lustre_gib_month"]["prices"],
        lustre_dynamic_gib_month=document["lustre_dynamic_gib_month"]["prices"],
        gcs_gib_month=document["gcs_gib_month"]["prices"],
        artifact_registry_gb_month=document["artifact_registry_gb_month"]["value"],
        artifact_registry_free_gb=document["artifact_registry_gb_month"]["free_gb"],
        image_storage_gib_month=document["image_storage_gib_month"]["prices"],
        cluster_fee_hourly=document["gke_cluster_fee"]["value"],
        cluster_free_monthly_credit=document["gke_cluster_fee"]["free_tier_monthly_credit"],
        nat={key: value for key, value in document["cloud_nat"].items() if key != "source"},
        boot_disk_gib_month=document["boot_disk_gib_month"]["prices"],
    )


@cache
def catalog() -> PriceCatalog:
    """The shipped catalog, core/facts/prices.json."""
    return read_catalog(json.loads(CATALOG_PATH.read_text()))


def gpu_node_hourly(prices: PriceCatalog, machine_type: str, zone: str, provisioning: str) -> float | None:
    """$/h of one node of `machine_type` in `zone` under `provisioning` (`on-demand` or `spot`), or None."""
    return prices.gpu_nodes.get(machine_type, {}).get(zone, {}).get(provisioning)


def gpu_node_rate(config: StackConfig, prices: PriceCatalog, rung: str | None = None) -> float | None:
    """$/h of one of the stack's GPU nodes on `rung` (default gpu.provisioning): a reservation at
    `pricing.reservationHourly`, else at the on-demand rate; spot and on-demand at their list price; None for
    flex-start or a price the catalog lacks."""
    machine, zone, provisioning = config.gpu_machine.machine_type, config.zone, rung or config.gpu.provisioning
    if provisioning == "flex-start":
        return None
    if provisioning == "reservation":
        if config.pricing.reservation_hourly is not None:
            return config.pricing.reservation_hourly
        return gpu_node_hourly(prices, machine, zone, "on-demand")
    return gpu_node_hourly(prices, machine, zone, provisioning)


def gpu_hourly(config: StackConfig, prices: PriceCatalog) -> float | None:
    """$/h of all the stack's GPU nodes, or None when the catalog cannot price them."""
    rate = gpu_node_rate(config, prices)
    return None if rate is None else config.gpu.nodes * rate


def gpu_node_ceiling(config: StackConfig, prices: PriceCatalog, rung: str) -> float | None:
    """$/h of one of the stack's GPU nodes on `rung` at most: its rate (gpu_node_rate), for flex-start, which has no
    list price, the on-demand rate it bills at most (flex_start_bounds); None where the catalog has no price."""
    if rung == "flex-start":
        bounds = flex_start_bounds(config, prices)
        return None if bounds is None else bounds[1]
    return gpu_node_rate(config, prices, rung)


def flex_start_bounds(config: StackConfig, prices: PriceCatalog) -> tuple[float, float] | None:
    """($/h low, $/h high) of one flex-start node: at most the on-demand rate, at least the catalog's discount
    ceiling below it (`flex_start_discount_ceiling`); None where on-demand has no price."""
    on_demand = gpu_node_hourly(prices, config.gpu_machine.machine_type, config.zone, "on-demand")
    if on_demand is None:
        return None
    return on_demand * (1 - prices.flex_start_discount_ceiling), on_demand


def lustre_gib_month(prices: PriceCatalog, throughput: int, region: str) -> float | None:
    """$ per GiB-month of Managed Lustre at `throughput` MB/s per TiB in `region`, or None."""
    return prices.lustre_gib_month.get(str(throughput), {}).get(region)


def gcs_gib_month(prices: PriceCatalog, region: str, storage_class: str = "STANDARD") -> float | None:
    """$ per GiB-month of Cloud Storage of `storage_class` in `region`, or None."""
    return prices.gcs_gib_month.get(storage_class, {}).get(region)


def artifact_registry_monthly(prices: PriceCatalog, stored_gb: float) -> float:
    """$ a month for `stored_gb` GB in Artifact Registry, the billing account's free amount taken off."""
    return max(0.0, stored_gb - prices.artifact_registry_free_gb) * prices.artifact_registry_gb_month


def head_hourly(config: StackConfig, prices: PriceCatalog) -> float | None:
    """$/h of the head's node (`cluster.headMachineType` on demand in the region); None on Autopilot (a
    general-purpose Pod, whose rates the catalog lacks) or for a machine or region the catalog lacks."""
    if config.cluster.mode == "autopilot":
        return None
    return prices.cpu_machines.get(config.cluster.head_machine_type, {}).get(config.region)


def storage_hourly(config: StackConfig, prices: PriceCatalog, model_size_b: float | None) -> float | None:
    """$/h of the stack's storage: a Lustre instance's whole capacity at its tier's price; a bucket's Standard
    storage of the model's bf16 weights (`model_size_b` billion parameters); each per GiB-month over the catalog's
    hours a month; a parked Lustre stack (storage.parked) has no instance: 0 beside what its parked bucket holds,
    which the plan cannot know. None where the catalog lacks the price or the model's size is unknown."""
    storage, region = config.storage, config.region
    if storage.type == "lustre" and storage.parked:
        return 0.0
    if storage.type == "lustre":
        rate = lustre_gib_month(prices, storage.throughput, region)
        return None if rate is None else storage.capacity_gib * rate / prices.hours_per_month
    rate = gcs_gib_month(prices, region)
    if rate is None or model_size_b is None:
        return None
    return model_size_b * 1e9 * BF16_BYTES_PER_PARAMETER / GIB * rate / prices.hours_per_month


def cluster_fee_hourly(prices: PriceCatalog) -> float:
    """$/h of the stack's one cluster's management fee: the same in every mode. The free tier's monthly credit is not
    taken off: it never covers a regional Standard cluster (the stack's), and an Autopilot cluster's only where no
    other cluster of the billing account uses it, which the plan cannot know."""
    return prices.cluster_fee_hourly


def nat_hourly(prices: PriceCatalog, vms: int) -> float:
    """$/h of the Cloud NAT gateway serving `vms` nodes: per VM up to the cap, the capped rate above it, plus its
    addresses (NAT_ADDRESSES); the GiB it carries bill on top, per GiB (`nat["per_gib_processed"]`)."""
    nat = prices.nat
    gateway = nat["capped_hourly"] if vms > nat["vm_cap"] else vms * nat["per_vm_hour"]
    return gateway + NAT_ADDRESSES * nat["per_ip_hour"]


def nat_vms(config: StackConfig, gpu_nodes: int) -> int:
    """Nodes that use the gateway: the head's (on Autopilot the node Autopilot gives the head Pod) and `gpu_nodes` GPU
    nodes."""
    return HEAD_NODES + gpu_nodes


def gpu_boot_disk_type(config: StackConfig) -> str:
    """The boot disk type of the stack's GPU nodes: the machine's own (A3 Ultra's Hyperdisk Balanced) or GKE's
    default."""
    return config.gpu_machine.boot_disk_type or NODE_BOOT_DISK_TYPE


def boot_disk_hourly(prices: PriceCatalog, disk_type: str, region: str) -> float | None:
    """$/h of one node's boot disk (NODE_BOOT_DISK_GB of `disk_type` in `region`), or None without a price."""
    rate = prices.boot_disk_gib_month.get(disk_type, {}).get(region)
    return None if rate is None else NODE_BOOT_DISK_GB * rate / prices.hours_per_month


def listed(parts: tuple[str, ...] | list[str]) -> str:
    """`parts` as a sentence lists them: `head`, `head and storage`, `head, storage and image cache`."""
    return " and ".join(parts) if len(parts) < 3 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def image_cache_hourly(config: StackConfig, prices: PriceCatalog) -> float | None:
    """$/h of keeping `gpu.imageCacheDisk`'s disk image, at IMAGE_CACHE_DISK_GB and the image storage rate of the
    stack's region over the catalog's hours a month; None where the catalog has no rate for the region."""
    rate = prices.image_storage_gib_month.get(config.region)
    return None if rate is None else IMAGE_CACHE_DISK_GB * rate / prices.hours_per_month


@dataclass(frozen=True)
class IdleBill:
    """What bills on once the GPUs are at zero: the priced parts' $/h and the parts the catalog cannot price."""

    hourly: float
    """$/h of the parts that have a price."""
    unpriced: tuple[str, ...]
    """The parts without a price (their $/h is not in `hourly`)."""
    parts: tuple[str, ...] = IDLE_PARTS
    """Every part that bills on: IDLE_PARTS, and IMAGE_CACHE_PART with `gpu.imageCacheDisk`."""


def idle_bill(config: StackConfig, prices: PriceCatalog, model_size_b: float | None) -> IdleBill:
    """The idle bill of the stack: head_hourly, storage_hourly, the head's boot disk, the cluster fee and the Cloud NAT
    gateway for the head's node (IDLE_PARTS) and, with `gpu.imageCacheDisk`, image_cache_hourly. cost.json's `idleHourly` and the run guardian's settings (`idleBill`, recorded when it scales
    the GPUs to zero) both come from here."""
    rates = {"head": head_hourly(config, prices), "storage": storage_hourly(config, prices, model_size_b)}
    if config.cluster.mode != "autopilot":
        rates["head boot disk"] = boot_disk_hourly(prices, NODE_BOOT_DISK_TYPE, config.region)
    rates["cluster fee"] = cluster_fee_hourly(prices)
    rates["cloud nat"] = nat_hourly(prices, nat_vms(config, 0))
    if config.gpu.image_cache_disk is not None:
        rates[IMAGE_CACHE_PART] = image_cache_hourly(config, prices)
    return IdleBill(
        hourly=sum(rate for rate in rates.values() if rate is not None),
        unpriced=tuple(part for part, rate in rates.items() if rate is None),
        parts=tuple(rates),
    )
