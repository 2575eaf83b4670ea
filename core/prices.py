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

CATALOG_PATH = Path(__file__).parent / "facts" / "prices.json"
"""The shipped price catalog."""

CATALOG_NAME = "core/facts/prices.json"
"""The catalog's path in the repository, as the plan's summary names it."""


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
