"""Where each GPU machine type exists: the zones that offer it, dated and sourced. Not the price catalog
(core/facts/prices.json), which says what a machine costs where it is priced, not where it can be created.

Source and date. Compute Engine's "GPU regions and zones" table
(cloud.google.com/compute/docs/gpus/gpu-regions-zones, the GPU locations page that Cluster Director's
docs.cloud.google.com/cluster-director/docs/locations links to) is the list of record. The page itself
is not among the stored sources on 2026-12-01 (searched: the search tool's docs and pages corpora). What was
read on 2026-12-01:
- ZT: the table's A4 rows as copied into stewartpark/private-llm cli/setup.go `zonesForFamily["a4"]`
  ("Source: .../gpus/gpu-regions-zones (2026-02-05)"): us-central1-a, us-east1-b, us-east4-b, us-south1-b,
  us-west2-c, us-west3-b, us-west3-c, europe-west4-b, asia-northeast1-b, asia-southeast1-b. Its "a3" list
  merges A3 High, Mega and Ultra (H100 and H200) and so is no list of where a3-ultragpu-8g exists.
- ZS: the zones Compute Engine's API lists each machine type in, as the SkyPilot catalog records them
  (skypilot-org/skypilot-catalog @8427bbff catalogs/v8/gcp/vms.csv, the rows whose InstanceType is the
  machine, one per AvailabilityZone; the same file prices.json is read from, here read for its zones only).
- ZB: Batch's locations page (docs.cloud.google.com/batch/docs/locations), zones recommended for Dynamic
  Workload Scheduler capacity: A4 in asia-southeast1-b and us-central1-b, among others.
- ZG: for g2-standard-8 (the L4 machine), the same ZS file read on 2026-12-07 for the g2-standard-8 rows from
  asia-south1-c on (the rows before it, asia-east1 to asia-south1-b, were not read: those zones are left out until
  they are) and the L4 x 1 rows of the same zones.
A zone is listed when ZT or ZS lists it: refusing a zone that has the machine would block a user for
nothing, so where the copies differ (ZT's A4 rows lack us-central1-b and europe-north1-b, which ZS and ZB
list; ZS lacks us-central1-a) the union is kept. Re-read the page before relying on a zone absent here.
"""

from __future__ import annotations

GPU_ZONES_DATE = "2026-12-01"
"""The day the sources above were read."""

GPU_ZONES_SOURCE = "Compute Engine's GPU regions and zones, core/facts/zones.py"
"""The table the zones below stand for, as messages name it."""

GPU_MACHINE_ZONES: dict[str, tuple[str, ...]] = {
    "a3-ultragpu-8g": (
        # ZS
        "asia-south1-b",
        "asia-south2-c",
        "europe-west1-b",
        "europe-west4-a",
        "us-central1-b",
        "us-east4-b",
        "us-east5-a",
        "us-south1-b",
        "us-west1-c",
    ),
    "a4-highgpu-8g": (
        # ZT and ZS; us-central1-a from ZT only, europe-north1-b and us-central1-b from ZS (and ZB) only
        "asia-northeast1-b",
        "asia-southeast1-b",
        "europe-north1-b",
        "europe-west4-b",
        "us-central1-a",
        "us-central1-b",
        "us-east1-b",
        "us-east4-b",
        "us-south1-b",
        "us-west2-c",
        "us-west3-b",
        "us-west3-c",
    ),
    "g2-standard-8": (
        # ZG
        "asia-south1-c",
        "asia-southeast1-a",
        "asia-southeast1-b",
        "asia-southeast1-c",
        "europe-west1-b",
        "europe-west1-c",
        "europe-west2-a",
        "europe-west2-b",
        "europe-west3-a",
        "europe-west3-b",
        "europe-west4-a",
        "europe-west4-b",
        "europe-west4-c",
        "europe-west6-b",
        "europe-west6-c",
        "me-central2-a",
        "me-central2-c",
        "northamerica-northeast1-b",
        "northamerica-northeast2-a",
        "northamerica-northeast2-b",
        "us-central1-a",
        "us-central1-b",
        "us-central1-c",
        "us-east1-b",
        "us-east1-c",
        "us-east1-d",
        "us-east4-a",
        "us-east4-c",
        "us-west1-a",
        "us-west1-b",
        "us-west1-c",
        "us-west4-a",
        "us-west4-c",
    ),
}
"""Zones that offer each GPU machine type, sorted (sources above, read on GPU_ZONES_DATE; ZG on 2026-12-07)."""


def region_of(zone: str) -> str:
    """The region a zone lies in: `us-central1-b` -> `us-central1`."""
    return zone.rsplit("-", 1)[0]


def zones_with(machine_type: str, region: str | None = None) -> tuple[str, ...]:
    """The zones that offer `machine_type`, only those of `region` when it is given."""
    zones = GPU_MACHINE_ZONES.get(machine_type, ())
    return tuple(zone for zone in zones if region is None or region_of(zone) == region)
