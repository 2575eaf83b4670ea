"""The price catalog and the plan's cost per hour: the lookup, the arithmetic of every shipped stack
(expected figures worked out by hand from the catalog's rows), the lines for a price the catalog lacks,
cost.json, and `python -m plan` of every shipped stack printing its cost."""

from __future__ import annotations

import json

import pytest

from core.config.load import ConfigError
from core.facts.platform import GPU_MACHINES, LUSTRE_DYNAMIC_TIER, LUSTRE_TIERS
from core.prices import (
    CATALOG_PATH,
    artifact_registry_monthly,
    boot_disk_hourly,
    catalog,
    gcs_gib_month,
    gpu_hourly,
    gpu_node_ceiling,
    gpu_node_hourly,
    gpu_node_rate,
    lustre_gib_month,
    nat_hourly,
    read_catalog,
)
from plan.prices import budget_lines, estimate, idle_line, render_cost_json, summary_lines
from tests.conftest import REPO_ROOT, SHIPPED_STACKS, config_of
from tests.core.test_config import OPEN_CONTROL_PLANE

DATE = "2026-12-01"
"""The shipped catalog's date."""

H200_SPOT_US_CENTRAL1_B = 3.56978 + 37.2472
"""vms.csv: the a3-ultragpu-8g row's SpotPrice plus the H200 x 8 row's, us-central1-b."""
B200_SPOT_US_CENTRAL1_B = 0.0 + 32.6064
"""vms.csv: the a4-highgpu-8g row ($0) plus the B200 x 8 row's SpotPrice, us-central1-b."""
B200_ON_DEMAND_US_CENTRAL1_B = 0.0 + 90.216
"""vms.csv: the same rows' Price."""
C2_STANDARD_16_US_CENTRAL1 = 0.83523
"""vms.csv: c2-standard-16's Price in us-central1."""
L4_SPOT_US_CENTRAL1_B = 0.11747 + 0.2231
"""vms.csv: the g2-standard-8 row's SpotPrice plus the L4 x 1 row's, us-central1-b."""
L4_ON_DEMAND_US_CENTRAL1_B = 0.29358 + 0.56004
"""vms.csv: the same rows' Price."""
E2_STANDARD_8_US_CENTRAL1 = 0.26805
"""vms.csv: e2-standard-8's Price in us-central1 (the first-run stack's head)."""
GCS_US_CENTRAL1_HOURLY_PER_GIB = 0.020 / 730
"""Cloud Storage Standard in us-central1, $0.020 per GiB-month, over 730 hours."""
LUSTRE_1000_US_CENTRAL1 = 0.60
"""Managed Lustre Capacity 1000-Perf Iowa, $ per GiB-month (the benchmark note's billing-export rates)."""
CLUSTER_FEE = 0.10
"""GKE pricing: the cluster management fee, $0.10 per cluster per hour, any mode."""
BOOT_DISK_US_CENTRAL1 = 100 * 0.10 / 730
"""One node's 100 GB pd-balanced boot disk in us-central1: $0.10 per GiB-month (Google's pricing calculator, Iowa)
over 730 h."""


def nat(vms):
    """Cloud NAT pricing: $0.0014 an hour per VM using the gateway (up to 32) plus $0.005 an hour for its address."""
    return vms * 0.0014 + 0.005


IDLE_EXTRAS = BOOT_DISK_US_CENTRAL1 + CLUSTER_FEE + nat(1)
"""What a Standard stack's idle bill adds to the head and the storage: the head's boot disk, the cluster fee and the
gateway for the head's node."""
IDLE_PARTS_SHOWN = "head, storage, head boot disk, cluster fee and cloud nat"
"""The idle line's parts of a Standard stack."""


def test_the_catalog_is_dated_and_every_section_names_its_source():
    document = json.loads(CATALOG_PATH.read_text())
    assert document["catalog_date"] == DATE
    sections = [value for value in document.values() if isinstance(value, dict)]
    assert len(sections) == 12
    assert all(section["source"].strip() for section in sections)


def test_the_cluster_fee_nat_and_boot_disks_are_priced_as_their_pages_say():
    """Issue 34 item 2: GKE pricing ($0.10 per cluster-hour; $74.40 of free tier credit a month, zonal and Autopilot
    clusters only), Cloud NAT pricing ($0.0014 per VM-hour up to 32 VMs, $0.044 above; $0.045 per GiB; $0.005 per
    address-hour), pd-balanced in Iowa ($0.10 per GiB-month); Hyperdisk Balanced has no price read."""
    prices = catalog()
    assert (prices.cluster_fee_hourly, prices.cluster_free_monthly_credit) == (0.10, 74.40)
    assert prices.cluster_free_monthly_credit == pytest.approx(0.10 * 744), "one cluster's 31-day month"
    assert prices.nat == {
        "per_vm_hour": 0.0014, "vm_cap": 32, "capped_hourly": 0.044, "per_ip_hour": 0.005, "per_gib_processed": 0.045
    }  # fmt: skip
    assert prices.boot_disk_gib_month == {"pd-balanced": {"us-central1": 0.10}}
    assert nat_hourly(prices, 2) == pytest.approx(nat(2))
    assert nat_hourly(prices, 33) == pytest.approx(0.044 + 0.005), "capped above 32 VMs"
    assert boot_disk_hourly(prices, "pd-balanced", "us-central1") == pytest.approx(BOOT_DISK_US_CENTRAL1)
    assert boot_disk_hourly(prices, "hyperdisk-balanced", "us-central1") is None
    assert boot_disk_hourly(prices, "pd-balanced", "us-east4") is None


def test_the_catalog_prices_both_gpu_machines():
    assert {machine.machine_type for machine in GPU_MACHINES.values()} == set(catalog().gpu_nodes)


LUSTRE_IOWA = {125: 0.145, 250: 0.21, 500: 0.34, 1000: 0.60}
"""$ per GiB-month of each tier in us-central1: the benchmark note's 'Managed Lustre Capacity N-Perf Iowa' rates
(verified 2026-06-05 against a billing export); 125 also terradart PR #395, SKU 517C-E77D-C11A."""


def test_the_catalog_prices_every_lustre_tier_the_config_offers_in_us_central1_only():
    assert set(catalog().lustre_gib_month) == {str(tier) for tier in LUSTRE_TIERS}
    for tier, rate in LUSTRE_IOWA.items():
        assert lustre_gib_month(catalog(), tier, "us-central1") == rate
        # No source read gives another region: none is guessed.
        assert lustre_gib_month(catalog(), tier, "us-east4") is None


def test_the_smallest_1000_tier_instance_costs_what_the_issue_says():
    """Issue 23: 9,000 GiB at $0.60 a GiB-month is about $7.40 an hour, $5,400 a month."""
    smallest = LUSTRE_TIERS[1000].min_gib
    assert smallest * lustre_gib_month(catalog(), 1000, "us-central1") == pytest.approx(5400)
    assert smallest * 0.60 / catalog().hours_per_month == pytest.approx(7.397, abs=1e-3)


def test_the_dynamic_tier_is_listed_refused_by_the_config_and_dearer_at_its_minimum():
    assert catalog().lustre_dynamic_gib_month == {"us-central1": 0.06}
    assert LUSTRE_DYNAMIC_TIER.min_gib == 472000
    # The reason in core/facts: its smallest instance bills about five times the smallest 1000 MB/s/TiB one.
    dynamic = LUSTRE_DYNAMIC_TIER.min_gib * catalog().lustre_dynamic_gib_month["us-central1"]
    thousand = LUSTRE_TIERS[1000].min_gib * LUSTRE_IOWA[1000]
    assert (dynamic, thousand) == (pytest.approx(28320), pytest.approx(5400))
    assert 5 < dynamic / thousand < 6
    # storage.throughput cannot ask for it: 25 (its aggregate MB/s per TiB) is refused with the tiers offered.
    with pytest.raises(ConfigError, match="must be one of 125, 250, 500 or 1000, got 25"):
        config_of("nemo-rl-standard-b200", storage={"throughput": 25})


@pytest.mark.parametrize(
    ("storage_class", "region", "rate"),
    [("STANDARD", "us-central1", 0.02), ("NEARLINE", "us-central1", 0.01), ("COLDLINE", "us-east4", 0.006),
     ("ARCHIVE", "us-west2", 0.0025), ("STANDARD", "us-east4", 0.023)],
)  # fmt: skip
def test_cloud_storage_is_priced_per_class_and_region(storage_class, region, rate):
    assert gcs_gib_month(catalog(), region, storage_class) == rate


def test_cloud_storage_in_a_region_the_rows_read_lack_has_no_price():
    assert gcs_gib_month(catalog(), "europe-west4") is None
    assert gcs_gib_month(catalog(), "us-central1", "MULTI_REGIONAL") is None


def test_artifact_registry_bills_above_the_free_half_gb():
    assert artifact_registry_monthly(catalog(), 0.4) == 0.0
    assert artifact_registry_monthly(catalog(), 30.5) == pytest.approx(30 * 0.10)


def test_the_lookup_finds_a_listed_price():
    assert gpu_node_hourly(catalog(), "a3-ultragpu-8g", "us-central1-b", "spot") == pytest.approx(
        H200_SPOT_US_CENTRAL1_B
    )
    assert gpu_node_hourly(catalog(), "a4-highgpu-8g", "us-central1-b", "on-demand") == B200_ON_DEMAND_US_CENTRAL1_B


def test_the_l4_machine_is_priced_as_its_host_row_plus_its_gpu_row_in_each_provisioning():
    assert gpu_node_hourly(catalog(), "g2-standard-8", "us-central1-b", "spot") == pytest.approx(L4_SPOT_US_CENTRAL1_B)
    assert gpu_node_hourly(catalog(), "g2-standard-8", "us-central1-b", "on-demand") == pytest.approx(
        L4_ON_DEMAND_US_CENTRAL1_B
    )
    assert gpu_node_rate(config_of("first-run"), catalog()) == pytest.approx(L4_SPOT_US_CENTRAL1_B)


@pytest.mark.parametrize(
    ("machine", "zone", "provisioning"),
    [
        ("a3-ultragpu-8g", "asia-south2-c", "spot"),  # the H200 row has no SpotPrice there
        ("a3-ultragpu-8g", "us-central1-a", "spot"),  # no A3 Ultra row in that zone
        ("a4-highgpu-8g", "us-central1-b", "flex-start"),  # the catalog has no flex-start prices
        ("a2-highgpu-8g", "us-central1-b", "spot"),  # not a machine of this project
    ],
)
def test_the_lookup_of_a_missing_price_is_none(machine, zone, provisioning):
    assert gpu_node_hourly(catalog(), machine, zone, provisioning) is None


def test_the_stacks_gpu_rate_is_what_the_plan_prices_its_gpu_nodes_at():
    assert gpu_node_rate(config_of("dev"), catalog()) == pytest.approx(H200_SPOT_US_CENTRAL1_B)
    assert gpu_hourly(config_of("nemo-rl-standard-b200"), catalog()) == pytest.approx(8 * B200_SPOT_US_CENTRAL1_B)
    for stack in SHIPPED_STACKS:
        config = config_of(stack)
        assert gpu_hourly(config, catalog()) == estimate(config, catalog()).lines[0].hourly


def test_the_gpu_rate_of_a_reservation_is_the_users_else_on_demand():
    reservation = {"provisioning": "reservation", "reservation": "grpo-a", "type": "b200"}
    assert gpu_node_rate(config_of("dev", gpu=reservation), catalog()) == B200_ON_DEMAND_US_CENTRAL1_B
    own = config_of("dev", gpu={**reservation, "nodes": 2}, pricing={"reservationHourly": 61.5})
    assert gpu_node_rate(own, catalog()) == 61.5
    assert gpu_hourly(own, catalog()) == 123.0


def test_a_rungs_most_per_node_is_its_rate_and_flex_starts_the_on_demand_rate():
    """What status prices each GPU node's hours at (jobs/runs/pricing.py): flex-start has no list price, so at most
    the on-demand rate; a zone the catalog lacks has none on any rung."""
    b200 = config_of("dev", gpu={"type": "b200"})
    assert gpu_node_ceiling(b200, catalog(), "spot") == B200_SPOT_US_CENTRAL1_B
    assert gpu_node_ceiling(b200, catalog(), "flex-start") == B200_ON_DEMAND_US_CENTRAL1_B
    assert gpu_node_ceiling(b200, catalog(), "reservation") == B200_ON_DEMAND_US_CENTRAL1_B
    elsewhere = config_of("dev").model_copy(update={"zone": "us-central1-a"})  # no A3 Ultra row in that zone
    assert gpu_node_ceiling(elsewhere, catalog(), "flex-start") is None
    assert gpu_node_ceiling(elsewhere, catalog(), "spot") is None


def test_flex_start_and_a_zone_the_catalog_lacks_have_no_gpu_rate():
    assert gpu_hourly(config_of("dev", gpu={"provisioning": "flex-start"}), catalog()) is None
    elsewhere = config_of("dev").model_copy(update={"zone": "us-central1-a"})
    assert gpu_hourly(elsewhere, catalog()) is None


EXPECTED_TOTALS = {
    "first-run": L4_SPOT_US_CENTRAL1_B
    + E2_STANDARD_8_US_CENTRAL1
    + 0.5e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB
    + 2 * BOOT_DISK_US_CENTRAL1
    + CLUSTER_FEE
    + nat(2),
    "dev": H200_SPOT_US_CENTRAL1_B
    + C2_STANDARD_16_US_CENTRAL1
    + 0.5e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB
    + BOOT_DISK_US_CENTRAL1
    + CLUSTER_FEE
    + nat(2),
    "verl-standard-h200": 2 * H200_SPOT_US_CENTRAL1_B
    + C2_STANDARD_16_US_CENTRAL1
    + 32e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB
    + BOOT_DISK_US_CENTRAL1
    + CLUSTER_FEE
    + nat(3),
    "verl-autopilot-b200": 2 * B200_SPOT_US_CENTRAL1_B
    + 32e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB
    + 2 * BOOT_DISK_US_CENTRAL1
    + CLUSTER_FEE
    + nat(3),
    "nemo-rl-standard-b200": 8 * B200_SPOT_US_CENTRAL1_B
    + C2_STANDARD_16_US_CENTRAL1
    + 9000 * LUSTRE_1000_US_CENTRAL1 / 730
    + 9 * BOOT_DISK_US_CENTRAL1
    + CLUSTER_FEE
    + nat(9),
}
"""Each shipped stack's $/h: GPU nodes, head and storage (the model in bf16 on the bucket), the boot disks the
catalog prices (pd-balanced: the head's, and B200 nodes'; A3 Ultra's Hyperdisk Balanced has no price), the cluster
fee and the NAT gateway for the head's node and the GPU nodes."""


def test_every_shipped_stack_has_a_hand_computed_total():
    assert set(EXPECTED_TOTALS) == set(SHIPPED_STACKS)


@pytest.mark.parametrize("stack", sorted(EXPECTED_TOTALS))
def test_the_cost_of_each_shipped_stack(stack):
    cost = estimate(config_of(stack), catalog())
    assert cost.total == pytest.approx(EXPECTED_TOTALS[stack], rel=1e-12)


def test_the_parts_of_the_dev_stack():
    cost = estimate(config_of("dev"), catalog())
    assert [(line.part, line.hourly) for line in cost.lines] == [
        ("gpu nodes", pytest.approx(40.81698)),
        ("head", 0.83523),
        ("storage", pytest.approx(0.9313225746154785 * 0.020 / 730)),
        ("gpu boot disks", None),
        ("head boot disk", pytest.approx(BOOT_DISK_US_CENTRAL1)),
        ("cluster fee", CLUSTER_FEE),
        ("cloud nat", pytest.approx(nat(2))),
    ]
    assert cost.unpriced == ("gpu boot disks",)


def test_the_whole_cost_output_of_the_nemo_rl_stack():
    """Issue 23 item 5: the 1000 MB/s/TiB tier's 9,000 GiB at $0.60 a GiB-month, about $7.40 an hour. Issue 34 item 2:
    every part the stack creates (8 + 1 boot disks, the cluster fee, the NAT gateway for 9 nodes), and the instance
    that keepOnDestroy (its default) leaves billing after destroy, 9,000 x $0.60 = $5,400 a month."""
    assert summary_lines(estimate(config_of("nemo-rl-standard-b200"), catalog())) == [
        f"cost per hour (list prices of {DATE}, core/facts/prices.json):",
        "  gpu nodes: $260.85/h for 8 x a4-highgpu-8g spot in us-central1-b at $32.61/h a node",
        "  head: $0.84/h for 1 x c2-standard-16 on-demand in us-central1",
        "  storage: $7.40/h for 9000 GiB of Managed Lustre at 1000 MB/s/TiB in us-central1 at $0.6/GiB-month over 730 h",
        "  gpu boot disks: $0.11/h for 8 x 100 GB pd-balanced in us-central1 at $0.1/GiB-month",
        "  head boot disk: $0.01/h for 1 x 100 GB pd-balanced in us-central1 at $0.1/GiB-month",
        "  cluster fee: $0.10/h for GKE's management fee for 1 regional cluster (the free tier's $74.40 a month covers"
        " zonal and Autopilot ones only)",
        "  cloud nat: $0.02/h for 1 gateway for 9 nodes at $0.0014/h a node and 1 address at $0.005/h; plus $0.045 per"
        " GiB it carries (downloads from outside Google Cloud, such as the Hub's)",
        "  total: $269.32/h",
        f"  idle, GPUs at zero: $8.35/h for the {IDLE_PARTS_SHOWN}",
        "  after destroy: storage.keepOnDestroy is true: the Lustre instance outlives pulumi destroy and keeps billing,"
        " $5,400.00 a month, until you park it (storage.parked) or delete it",
    ]
    assert json.loads(render_cost_json(estimate(config_of("nemo-rl-standard-b200"), catalog())))["afterDestroy"]


def test_only_a_kept_lustre_instance_bills_after_destroy():
    def after(stack, **storage):
        overrides = {"storage": storage} if storage else {}
        return estimate(config_of(stack, **overrides), catalog()).kept_after_destroy

    assert after("nemo-rl-standard-b200") is not None
    assert after("nemo-rl-standard-b200", keepOnDestroy=False) is None
    assert after("dev") is None, "a bucket stack: its bucket is named in the storage line, no instance"


def test_a_total_without_the_gpus_is_said_to_be_unknown_not_shown_as_the_total():
    """Issue 21 item 2: the sum of the head and the storage is no total when the GPU nodes have no price."""
    cost = estimate(config_of("dev", gpu={"provisioning": "flex-start"}), catalog())
    lines = summary_lines(cost)
    assert lines[-2] == (
        "  total: UNKNOWN: the catalog has no price for the gpu nodes (the head, storage, head boot disk, cluster fee,"
        " cloud nat alone: $0.96/h, not the total)"
    )
    assert not any(line.startswith("  total: $") for line in lines)
    document = json.loads(render_cost_json(cost))
    assert (document["totalHourly"], document["unpriced"]) == (None, ["gpu nodes", "gpu boot disks"])


def test_the_same_gpu_cheaper_in_another_zone_is_one_line_naming_the_keys_to_set():
    lines = summary_lines(estimate(config_of("dev"), catalog()))
    assert lines[-3:] == [
        "  total: at least $41.77/h (without the gpu boot disks: no price)",
        f"  idle, GPUs at zero: $0.96/h for the {IDLE_PARTS_SHOWN}",
        "  cheaper elsewhere: H200 spot $31.92/h a node in us-east4-b against $40.82/h in us-central1-b:"
        " set gcp:region us-east4 and grpo-gke:zone us-east4-b",
    ]


def test_a_cheaper_zone_of_the_same_region_needs_only_the_zone():
    document = json.loads(CATALOG_PATH.read_text())
    document["gpu_nodes"]["prices"]["a4-highgpu-8g"]["us-central1-a"] = {"spot": 30.0}
    cost = estimate(config_of("dev", gpu={"type": "b200"}), read_catalog(document))
    assert cost.elsewhere == (
        "B200 spot $30.00/h a node in us-central1-a against $32.61/h in us-central1-b: set grpo-gke:zone us-central1-a"
    )


def test_no_move_is_offered_where_none_is_possible_or_cheaper():
    # A reservation's capacity lies in its zone; flex-start has no list price; B200 spot is nowhere cheaper.
    reservation = {"provisioning": "reservation", "reservation": "grpo-a"}
    assert estimate(config_of("dev", gpu=reservation), catalog()).elsewhere is None
    assert estimate(config_of("dev", gpu={"provisioning": "flex-start"}), catalog()).elsewhere is None
    assert estimate(config_of("dev", gpu={"type": "b200"}), catalog()).elsewhere is None
    # Managed Lustre is zonal: a move needs the Lustre tier priced (offered) in the new region, and says it is new.
    assert estimate(config_of("nemo-rl-standard-b200", gpu={"type": "h200"}), catalog()).elsewhere is None
    document = json.loads(CATALOG_PATH.read_text())
    document["lustre_gib_month"]["prices"] = {"1000": {"us-central1": 0.5, "us-east4": 0.5}}
    moved = estimate(config_of("nemo-rl-standard-b200", gpu={"type": "h200"}), read_catalog(document)).elsewhere
    assert moved == (
        "H200 spot $31.92/h a node in us-east4-b against $40.82/h in us-central1-b: set gcp:region us-east4 and"
        " grpo-gke:zone us-east4-b; Managed Lustre is zonal: a new, empty instance there"
    )


def test_a_zone_the_catalog_lacks_says_so_instead_of_guessing():
    cost = estimate(
        config_of("dev", gpu={"provisioning": "spot"}).model_copy(update={"zone": "us-central1-a"}), catalog()
    )
    assert cost.lines[0].what == f"no price for a3-ultragpu-8g spot in us-central1-a in the catalog (dated {DATE})"
    assert cost.lines[0].hourly is None
    assert cost.unpriced == ("gpu nodes", "gpu boot disks")
    assert cost.total == pytest.approx(sum(line.hourly for line in cost.lines[1:] if line.hourly is not None))


def test_a_head_machine_the_catalog_lacks_in_the_region_says_so():
    config = config_of("dev", gpu={"type": "b200"}).model_copy(update={"region": "us-south1", "zone": "us-south1-b"})
    cost = estimate(config, catalog())
    assert cost.lines[0].hourly == B200_SPOT_US_CENTRAL1_B  # the same price in us-south1-b
    assert cost.lines[1].what == f"no price for c2-standard-16 in us-south1 in the catalog (dated {DATE})"


def test_a_reservation_costs_the_on_demand_rate_unless_the_user_gives_theirs():
    reservation = {"provisioning": "reservation", "reservation": "grpo-a"}
    default = estimate(config_of("dev", gpu={**reservation, "type": "b200"}), catalog()).lines[0]
    assert default.hourly == B200_ON_DEMAND_US_CENTRAL1_B
    assert "reservation at the on-demand rate (set pricing.reservationHourly for yours)" in default.what
    own = estimate(
        config_of("dev", gpu={**reservation, "nodes": 2}, pricing={"reservationHourly": 61.5}), catalog()
    ).lines[0]
    assert own.hourly == 2 * 61.5
    assert own.what == "2 x a3-ultragpu-8g reservation at pricing.reservationHourly in us-central1-b at $61.50/h a node"


def test_flex_start_has_no_price_and_says_what_it_can():
    line = estimate(config_of("dev", gpu={"provisioning": "flex-start", "type": "b200"}), catalog()).lines[0]
    assert line.hourly is None
    assert line.what == (
        f"no price for a4-highgpu-8g flex-start in us-central1-b in the catalog (dated {DATE});"
        " flex-start bills up to 53% below on-demand, $90.22/h a node on demand"
    )


def test_autopilot_prices_the_gpu_nodes_by_the_node_and_names_the_head_it_cannot_price():
    cost = estimate(config_of("verl-autopilot-b200"), catalog())
    assert cost.lines[0].what.endswith(
        "; Autopilot bills GPU Pods by their node at Compute Engine rates plus a premium the catalog lacks"
    )
    assert cost.lines[1].what == (
        f"no price for Autopilot's general-purpose Pods in us-central1 in the catalog (dated {DATE}) (the head asks for 12 CPUs, 32Gi)"
    )
    assert cost.unpriced == ("head",)


def test_cost_json_is_sorted_and_holds_every_part_and_the_total():
    cost = estimate(config_of("verl-standard-h200"), catalog())
    text = render_cost_json(cost)
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True) + "\n"
    assert document["catalogDate"] == DATE
    assert [part["part"] for part in document["parts"]] == [
        "gpu nodes", "head", "storage", "gpu boot disks", "head boot disk", "cluster fee", "cloud nat"
    ]  # fmt: skip
    assert document["totalHourly"] == pytest.approx(EXPECTED_TOTALS["verl-standard-h200"], abs=1e-8)
    assert document["unpriced"] == ["gpu boot disks"]


TOTAL_LINES = {
    "first-run": "  total: $0.74/h",
    "dev": "  total: at least $41.77/h (without the gpu boot disks: no price)",
    "verl-standard-h200": "  total: at least $82.59/h (without the gpu boot disks: no price)",
    "verl-autopilot-b200": "  total: at least $65.35/h (without the head: no price)",
    "nemo-rl-standard-b200": "  total: $269.32/h",
}
"""The total line each shipped stack's plan prints (EXPECTED_TOTALS rounded to the cent)."""

EXPECTED_IDLE = {
    "first-run": E2_STANDARD_8_US_CENTRAL1 + 0.5e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB + IDLE_EXTRAS,
    "dev": C2_STANDARD_16_US_CENTRAL1 + 0.5e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB + IDLE_EXTRAS,
    "verl-standard-h200": C2_STANDARD_16_US_CENTRAL1 + 32e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB + IDLE_EXTRAS,
    "verl-autopilot-b200": 32e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB + CLUSTER_FEE + nat(1),
    "nemo-rl-standard-b200": C2_STANDARD_16_US_CENTRAL1 + 9000 * LUSTRE_1000_US_CENTRAL1 / 730 + IDLE_EXTRAS,
}
"""Each shipped stack's $/h once the GPUs are at zero: the head's pool and its boot disk, the storage, the cluster
fee and the gateway for the head's node (Autopilot's head Pod has no price and no node disk of the stack's)."""

IDLE_LINES = {
    "first-run": f"  idle, GPUs at zero: $0.39/h for the {IDLE_PARTS_SHOWN}",
    "dev": f"  idle, GPUs at zero: $0.96/h for the {IDLE_PARTS_SHOWN}",
    "verl-standard-h200": f"  idle, GPUs at zero: $0.96/h for the {IDLE_PARTS_SHOWN}",
    "verl-autopilot-b200": "  idle, GPUs at zero: at least $0.11/h for the head, storage, cluster fee and cloud nat"
    " (without the head: no price)",
    "nemo-rl-standard-b200": f"  idle, GPUs at zero: $8.35/h for the {IDLE_PARTS_SHOWN}",
}
"""The idle line each shipped stack's plan prints under its total (EXPECTED_IDLE rounded)."""


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_plan_command_prints_the_cost_of_each_shipped_stack_and_writes_cost_json(stack, shipped_plan_command):
    run = shipped_plan_command(stack)
    result, out = run.result, run.out
    # The open control plane's warning is printed once, in the Security block, not again on stderr.
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.count(OPEN_CONTROL_PLANE) == 1
    expected = summary_lines(estimate(config_of(stack), catalog()))
    printed = result.stdout.splitlines()
    start = printed.index(f"  {expected[0]}")
    assert printed[start : start + len(expected)] == [f"  {line}" for line in expected]
    total = printed.index(f"  {TOTAL_LINES[stack]}")
    assert printed[total + 1] == f"  {IDLE_LINES[stack]}"
    assert printed[total + 2 : start + len(expected)] == [
        f"  {line}" for line in expected if line.startswith(("  cheaper elsewhere:", "  after destroy:"))
    ]
    budget = [f"  {line}" for line in budget_lines(config_of(stack), estimate(config_of(stack), catalog()))]
    assert printed[start + len(expected) : start + len(expected) + len(budget)] == budget  # first-run's cap
    after = printed[start + len(expected) + len(budget)]
    assert after.startswith("  first step: "), "the budget, if any, then the time to the first step follows"
    assert printed[-1].startswith("Wrote ") and ", cost.json and first-step.json to " in printed[-1]
    cost = json.loads((out / "cost.json").read_text())
    assert cost["totalHourly"] == pytest.approx(EXPECTED_TOTALS[stack], abs=1e-8)
    assert cost["idleHourly"] == pytest.approx(EXPECTED_IDLE[stack], abs=1e-8)


def test_lustre_costs_its_capacity_at_the_tiers_price_over_730_hours():
    document = json.loads(CATALOG_PATH.read_text())
    document["lustre_gib_month"]["prices"] = {"1000": {"us-central1": 0.5}}
    line = estimate(config_of("nemo-rl-standard-b200"), read_catalog(document)).lines[2]
    assert line.hourly == pytest.approx(9000 * 0.5 / 730)
    assert line.what == "9000 GiB of Managed Lustre at 1000 MB/s/TiB in us-central1 at $0.5/GiB-month over 730 h"


def test_a_bucket_whose_model_size_is_unknown_says_so():
    # The config refuses such a model (jobs/spec/validate.py model_size_problems); the estimate still never guesses.
    dev = config_of("dev")
    unsized = dev.model_copy(update={"workload": dev.workload.model_copy(update={"model": "my-org/my-policy"})})
    line = estimate(unsized, catalog()).lines[2]
    assert line.hourly is None
    assert line.what == (
        "Cloud Storage Standard in us-central1 at $0.02/GiB-month: the model's size is unknown (set workload.modelSizeB)"
    )
    sized = estimate(config_of("dev", workload={"model": "my-org/my-policy", "modelSizeB": 7}), catalog()).lines[2]
    assert sized.hourly == pytest.approx(7e9 * 2 / 2**30 * GCS_US_CENTRAL1_HOURLY_PER_GIB)


def test_the_readme_shows_what_the_dev_plan_prints_and_the_catalogs_date():
    section = (REPO_ROOT / "docs" / "cost.md").read_text()
    shown = section.split("```text\n", 1)[1].split("```", 1)[0]
    assert shown == "".join(f"  {line}\n" for line in summary_lines(estimate(config_of("dev"), catalog())))
    assert f"`core/facts/prices.json`, dated {DATE}" in section


LADDER_B200 = {"type": "b200", "nodes": 2, "capacity": ["reservation", "flex-start", "spot", "on-demand"],
               "reservation": "res-b200"}  # fmt: skip
"""Two B200 nodes in us-central1-b on a ladder of all four rungs."""


def test_a_ladder_prices_each_rung_and_its_best_and_worst_case():
    cost = estimate(config_of("dev", gpu=LADDER_B200, pricing={"reservationHourly": 50.0}), catalog())
    flex_low = B200_ON_DEMAND_US_CENTRAL1_B * (1 - 0.53)
    assert [(rung.rung, rung.low, rung.high) for rung in cost.rungs] == [
        ("reservation", 100.0, 100.0),
        ("flex-start", pytest.approx(2 * flex_low), pytest.approx(2 * B200_ON_DEMAND_US_CENTRAL1_B)),
        ("spot", pytest.approx(2 * B200_SPOT_US_CENTRAL1_B), pytest.approx(2 * B200_SPOT_US_CENTRAL1_B)),
        ("on-demand", pytest.approx(2 * B200_ON_DEMAND_US_CENTRAL1_B), pytest.approx(2 * B200_ON_DEMAND_US_CENTRAL1_B)),
    ]
    assert cost.best_hourly == pytest.approx(2 * B200_SPOT_US_CENTRAL1_B)
    assert cost.worst_hourly == pytest.approx(2 * B200_ON_DEMAND_US_CENTRAL1_B)
    lines = summary_lines(cost)
    assert lines[lines.index("  gpu nodes per rung of gpu.capacity, in the order GKE tries them:") :] == [
        "  gpu nodes per rung of gpu.capacity, in the order GKE tries them:",
        "    reservation: $100.00/h for 2 x a4-highgpu-8g reservation at pricing.reservationHourly at $50.00/h a node;"
        " draws on the GPU family quota (GPUS-PER-GPU-FAMILY-per-project-region), as on-demand; the reservation"
        " only holds the capacity",
        "    flex-start: $84.80 to $180.43/h for 2 x a4-highgpu-8g flex-start: $42.40 to $90.22/h a node (up to 53%"
        " below on-demand); draws on the family's preemptible GPU quota (the same Cloud Quotas filter lists it), or"
        " the GPU family quota (GPUS-PER-GPU-FAMILY-per-project-region) where the project has no preemptible GPU quota",
        "    spot: $65.21/h for 2 x a4-highgpu-8g spot at $32.61/h a node; draws on the family's preemptible GPU quota"
        " (the same Cloud Quotas filter lists it), or the GPU family quota (GPUS-PER-GPU-FAMILY-per-project-region)"
        " where the project has no preemptible GPU quota",
        "    on-demand: $180.43/h for 2 x a4-highgpu-8g on-demand at $90.22/h a node; draws on the GPU family quota"
        " (GPUS-PER-GPU-FAMILY-per-project-region)",
        "    best case $65.21/h, worst case $180.43/h for the GPU nodes (any mix of rungs lies between)",
    ]
    ladder = json.loads(render_cost_json(cost))["ladder"]
    assert [rung["rung"] for rung in ladder["rungs"]] == LADDER_B200["capacity"]
    assert (ladder["bestHourly"], ladder["worstHourly"]) == (round(2 * B200_SPOT_US_CENTRAL1_B, 8), 180.432)


def test_a_rung_without_a_price_leaves_best_and_worst_unknown():
    config = config_of("dev", gpu={"type": "b200", "nodes": 2, "capacity": ["spot", "on-demand"]})
    cost = estimate(config.model_copy(update={"zone": "us-central1-a"}), catalog())
    assert cost.best_hourly is None and cost.worst_hourly is None
    assert summary_lines(cost)[-1] == "    best and worst case: unknown (spot, on-demand: no price)"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_a_stack_without_a_ladder_has_no_ladder_lines_or_cost_json_block(stack):
    cost = estimate(config_of(stack), catalog())
    assert cost.rungs == () and "ladder" not in json.loads(render_cost_json(cost))
    assert not any("rung" in line for line in summary_lines(cost))


def test_the_idle_bill_of_a_bucket_is_the_head_and_what_the_bucket_holds():
    """Issue 23 item 4, Cloud Storage: with the GPUs at zero, c2-standard-16 on demand plus 32B parameters in bf16
    on Standard in us-central1 bill on: $0.83523 + 59.6 GiB x $0.02 / 730 h; issue 34 item 2: with the head's boot
    disk, the cluster fee and the gateway for the head's node."""
    cost = estimate(config_of("verl-standard-h200"), catalog())
    model_gib = 32e9 * 2 / 2**30
    assert model_gib == pytest.approx(59.6046, abs=1e-4)
    assert cost.idle_hourly == pytest.approx(0.83523 + model_gib * 0.02 / 730 + IDLE_EXTRAS, rel=1e-12)
    assert cost.idle_hourly == pytest.approx(0.956962, abs=1e-6)
    assert cost.idle_unpriced == ()
    document = json.loads(render_cost_json(cost))
    assert (document["idleHourly"], document["idleParts"], document["idleUnpriced"]) == (
        round(cost.idle_hourly, 8), ["head", "storage", "head boot disk", "cluster fee", "cloud nat"], [])  # fmt: skip
    # What stops with the GPUs: their nodes and the gateway's price for them (their boot disks have no price).
    gpus_away = 2 * H200_SPOT_US_CENTRAL1_B + 2 * 0.0014
    assert document["totalHourly"] - document["idleHourly"] == pytest.approx(gpus_away, abs=1e-7)


@pytest.mark.parametrize(
    ("tier", "gib", "hourly"),
    # GiB x the tier's $/GiB-month (us-central1) / 730 h, plus the head's $0.83523 and IDLE_EXTRAS.
    [(1000, 9000, 0.83523 + 9000 * 0.60 / 730), (500, 18000, 0.83523 + 18000 * 0.34 / 730),
     (250, 36000, 0.83523 + 36000 * 0.21 / 730), (125, 72000, 0.83523 + 72000 * 0.145 / 730)],
)  # fmt: skip
def test_the_idle_bill_of_lustre_is_the_head_and_the_whole_instance(tier, gib, hourly):
    """Issue 23 item 4, Managed Lustre: the instance bills its capacity whether used or not; at the smallest size of
    each tier the idle bill runs from $8.35/h (1000) to $15.26/h (125) with the head's disk, the fee and the NAT."""
    config = config_of("nemo-rl-standard-b200", storage={"throughput": tier, "capacityGib": gib})
    cost = estimate(config, catalog())
    assert cost.idle_hourly == pytest.approx(hourly + IDLE_EXTRAS, rel=1e-12)
    assert idle_line(cost) == f"  idle, GPUs at zero: ${hourly + IDLE_EXTRAS:.2f}/h for the {IDLE_PARTS_SHOWN}"


def test_the_idle_bill_names_lustre_outside_the_priced_region_instead_of_guessing():
    config = config_of("nemo-rl-standard-b200").model_copy(update={"region": "us-east4", "zone": "us-east4-b"})
    cost = estimate(config, catalog())
    assert cost.idle_unpriced == ("storage", "head boot disk")
    assert cost.idle_hourly == pytest.approx(0.94058 + CLUSTER_FEE + nat(1))  # the head in us-east4, the fee, the NAT
    assert idle_line(cost) == (
        f"  idle, GPUs at zero: at least $1.05/h for the {IDLE_PARTS_SHOWN} (without the storage and head boot disk:"
        " no price)"
    )


IMAGE_STORAGE_US_CENTRAL1 = 0.05
"""Compute Engine "Storage Image" (multi-regional, us-central1 among its regions), $ per GiB-month."""


def test_an_image_cache_disk_image_bills_on_with_the_gpus_at_zero_at_the_image_storage_rate():
    """Issue 23 items 2 and 4: gpu.imageCacheDisk's disk image stays while the GPUs are at zero; at the builder's
    100 GB (docs/before-first-up.md) and $0.05 per GiB-month: 100 x 0.05 / 730 = $0.00685/h, $5 a month."""
    plain = estimate(config_of("verl-standard-h200"), catalog())
    cached = config_of("verl-standard-h200", workload={"imageSource": "registry"}, gpu={"imageCacheDisk": "verl-cache"})
    cost = estimate(cached, catalog())
    parts = ("head", "storage", "head boot disk", "cluster fee", "cloud nat")
    assert cost.idle.parts == (*parts, "image cache")
    assert cost.idle_hourly - plain.idle_hourly == pytest.approx(100 * IMAGE_STORAGE_US_CENTRAL1 / 730, rel=1e-12)
    assert idle_line(cost) == (
        f"  idle, GPUs at zero: ${cost.idle_hourly:.2f}/h for the head, storage, head boot disk, cluster fee, cloud nat"
        " and image cache"
    )
    document = json.loads(render_cost_json(cost))
    assert (document["idleParts"], document["idleUnpriced"]) == ([*parts, "image cache"], [])
    assert plain.idle.parts == parts


def test_an_image_cache_outside_the_image_storage_skus_regions_is_named_unpriced():
    cached = config_of("verl-standard-h200", workload={"imageSource": "registry"}, gpu={"imageCacheDisk": "verl-cache"})
    elsewhere = cached.model_copy(update={"region": "us-east4", "zone": "us-east4-b"})
    cost = estimate(elsewhere, catalog())
    assert "image cache" in cost.idle_unpriced and cost.idle.parts[-1] == "image cache"


def test_a_parked_lustre_stack_bills_its_bucket_per_tib_instead_of_the_instance():
    """Issue 23 item 4, parked: the instance is gone; the parked bucket (Standard, us-central1, $0.02/GiB-month) bills
    1024 x 0.02 / 730 = $0.028/h per TiB it holds; cost.json says so for every Lustre stack, parked or not."""
    per_tib = 1024 * 0.02 / 730
    running = estimate(config_of("nemo-rl-standard-b200"), catalog())
    assert json.loads(render_cost_json(running))["parkedHourlyPerTib"] == round(per_tib, 8)
    parked = estimate(config_of("nemo-rl-standard-b200", storage={"keepOnDestroy": False, "parked": True}), catalog())
    storage = parked.lines[2]
    assert (storage.part, storage.hourly) == ("storage", 0.0)
    assert storage.what == (
        "parked: no Lustre instance; the parked bucket bills what it holds, $0.03/h per TiB (Cloud Storage Standard in"
        " us-central1 at $0.02/GiB-month over 730 h)"
    )
    assert parked.idle_hourly == pytest.approx(0.83523 + IDLE_EXTRAS, rel=1e-12), "no storage but the bucket's bytes"
    assert "parkedHourlyPerTib" not in json.loads(render_cost_json(estimate(config_of("dev"), catalog())))


def test_a_ladders_headline_is_the_rung_gke_tries_first_and_a_reservation_first_offers_no_move():
    """Issue 34 item 2: gpu.provisioning (default spot) is not what a ladder tries first; a reservation's capacity lies
    in its zone, so no cheaper zone is offered (docs/cost.md), where spot H200 would offer us-east4-b."""
    ladder = {"type": "h200", "nodes": 1, "capacity": ["reservation", "spot"], "reservation": "res-h200"}
    cost = estimate(config_of("dev", gpu=ladder, pricing={"reservationHourly": 50.0}), catalog())
    assert cost.lines[0].hourly == 50.0
    assert cost.lines[0].what == (
        "1 x a3-ultragpu-8g reservation at pricing.reservationHourly in us-central1-b at $50.00/h a node, the rung GKE"
        " tries first (the others below)"
    )
    assert cost.elsewhere is None
    assert not any(line.startswith("  cheaper elsewhere") for line in summary_lines(cost))
    on_demand_first = estimate(
        config_of("dev", gpu={"type": "h200", "nodes": 1, "capacity": ["on-demand", "spot"]}), catalog()
    )
    assert on_demand_first.lines[0].hourly == 86.75992
    assert on_demand_first.elsewhere.startswith("H200 on-demand $49.36/h a node in asia-south1-b against $86.76/h")


def test_the_readme_says_a_kept_lustre_instance_bills_after_destroy_at_its_monthly_price():
    readme = " ".join((REPO_ROOT / "README.md").read_text().split())
    monthly = estimate(config_of("nemo-rl-standard-b200"), catalog()).lines[2].hourly * 730
    assert f"{monthly:,.2f}" == "5,400.00"
    assert (
        "With `storage.keepOnDestroy: true`, the default, a Managed Lustre stack's instance outlives `pulumi destroy`"
        " and keeps billing" in readme
    )
    assert f"costs ${monthly:,.2f} a month" in readme
