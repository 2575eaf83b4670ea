"""Standard node pools: the Ray head's CPU pool and the 8-GPU pool, per GPU type and provisioning."""

from __future__ import annotations

import pytest

from core import names
from core.facts.platform import GPU_MACHINES
from infra.nodepools import gpu_driver_version, gpu_pool_args, reservation_affinity
from tests.conftest import COMBINATIONS, GPUS, combination_config
from tests.infra.conftest import depends_on

POOL = "gcp:container/nodePool:NodePool"


USER_IMAGE = {"image": "example.com/verl:custom", "rayVersion": "2.55.1"}
"""A user image of the verl framework, without its CUDA version."""

NEMO = {"framework": "nemo-rl", "dataset": "deepscaler", "model": "Qwen/Qwen2.5-1.5B"}
"""The NeMo-RL workload with its pinned image."""


@pytest.mark.parametrize(
    ("gpu", "workload", "cluster", "driver"),
    [
        # The pinned images are CUDA 13.0 (verl) and 13.2 (NeMo-RL): R580, above either GPU's DEFAULT.
        ("b200", {}, {}, "LATEST"),
        ("h200", {}, {}, "LATEST"),
        ("b200", NEMO, {}, "LATEST"),
        ("h200", NEMO, {}, "LATEST"),
        # A user image states its CUDA: 12.x runs on R525 and up, which both DEFAULT drivers carry ...
        ("b200", {**USER_IMAGE, "cudaVersion": "12.8"}, {}, "DEFAULT"),
        ("h200", {**USER_IMAGE, "cudaVersion": "12.8"}, {"minVersion": "1.31.5-gke.1169000"}, "DEFAULT"),
        # ... except below the version from which the GPU's DEFAULT is that driver.
        ("h200", {**USER_IMAGE, "cudaVersion": "12.8"}, {"minVersion": "1.31.4-gke.1183000"}, "LATEST"),
        ("b200", {**USER_IMAGE, "cudaVersion": "13.0"}, {}, "LATEST"),
        # Without a stated CUDA version: LATEST.
        ("b200", USER_IMAGE, {}, "LATEST"),
    ],
)
def test_pool_driver_runs_the_images_cuda(gpu, workload, cluster, driver):
    config = combination_config("standard", gpu, workload=workload, cluster=cluster)
    assert gpu_driver_version(config) == driver
    [accelerator] = gpu_pool_args(
        config, "cluster", [], "nodes@example.iam.gserviceaccount.com"
    ).node_config.guest_accelerators
    assert accelerator.gpu_driver_installation_config.gpu_driver_version == driver


def test_reservation_affinity_per_provisioning():
    reserved = reservation_affinity(
        combination_config("standard", "b200", gpu={"provisioning": "reservation", "reservation": "res-a4"})
    )
    assert (reserved.consume_reservation_type, reserved.key, reserved.values) == (
        "SPECIFIC_RESERVATION",
        "compute.googleapis.com/reservation-name",
        ["res-a4"],
    )
    for provisioning in ("spot", "on-demand", "flex-start"):
        affinity = reservation_affinity(combination_config("standard", "b200", gpu={"provisioning": provisioning}))
        assert affinity.consume_reservation_type == "NO_RESERVATION", provisioning


@pytest.mark.parametrize("mode,gpu,storage", COMBINATIONS)
def test_pools_exist_on_standard_only(infra_run, mode, gpu, storage):
    pools = infra_run(mode, gpu, storage).by_type(POOL)
    expected = {"grpo-test-gpu", "grpo-test-ray-head"} if mode == "standard" else set()
    assert {pool.name for pool in pools} == expected


@pytest.mark.parametrize("gpu", GPUS)
def test_gpu_pool_machine_accelerators_disks_and_nics(infra_run, gpu):
    recording = infra_run("standard", gpu, "gcs", gpu={"nodes": 2})
    pool = recording.one(POOL, "grpo-test-gpu")
    inputs, node = pool.inputs, pool.inputs["nodeConfig"]
    machine = GPU_MACHINES[gpu]
    assert node["machineType"] == {"b200": "a4-highgpu-8g", "h200": "a3-ultragpu-8g"}[gpu] == machine.machine_type
    assert node["guestAccelerators"] == [
        {
            "count": 8,
            "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"},
            "type": {"b200": "nvidia-b200", "h200": "nvidia-h200-141gb"}[gpu],
        }
    ]
    assert node["gvnic"] == {"enabled": True}
    assert node["imageType"] == "COS_CONTAINERD"
    assert node["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 32}
    if gpu == "h200":
        assert node["bootDisk"] == {"diskType": "hyperdisk-balanced"}
    else:
        assert "bootDisk" not in node
    assert node["taints"] == [{"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"}]
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert (inputs["name"], inputs["cluster"], inputs["location"]) == ("gpu", "grpo-test", "us-central1")
    assert inputs["nodeLocations"] == ["us-central1-b"]
    assert "nodeCount" not in inputs
    assert inputs["initialNodeCount"] == 2
    assert inputs["autoscaling"] == {"totalMaxNodeCount": 2, "totalMinNodeCount": 0}
    nics = inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    assert nics == [{"network": "grpo-test-gvnic", "subnetwork": "grpo-test-gvnic-sub"}] + [
        {"network": "grpo-test-rdma", "subnetwork": f"grpo-test-rdma-sub-{index}"} for index in range(8)
    ]


def test_spot_has_no_reservation(infra_run):
    node = infra_run("standard", "b200", "gcs", gpu={"provisioning": "spot"}).one(POOL, "grpo-test-gpu").inputs
    assert node["nodeConfig"]["spot"] is True
    assert node["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert "flexStart" not in node["nodeConfig"]
    assert node["autoscaling"] == {"totalMaxNodeCount": 1, "totalMinNodeCount": 0}


def test_on_demand_is_neither_spot_nor_reserved(infra_run):
    pool = infra_run("standard", "b200", "gcs", gpu={"provisioning": "on-demand"}).one(POOL, "grpo-test-gpu")
    assert "spot" not in pool.inputs["nodeConfig"]
    assert pool.inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert (pool.inputs["initialNodeCount"], pool.inputs["autoscaling"]["totalMaxNodeCount"]) == (1, 1)


def test_reservation_names_the_reservation(infra_run):
    pool = infra_run(
        "standard", "h200", "gcs", gpu={"provisioning": "reservation", "reservation": "my-a3u", "nodes": 2}
    ).one(POOL, "grpo-test-gpu")
    assert pool.inputs["nodeConfig"]["reservationAffinity"] == {
        "consumeReservationType": "SPECIFIC_RESERVATION",
        "key": "compute.googleapis.com/reservation-name",
        "values": ["my-a3u"],
    }
    assert "spot" not in pool.inputs["nodeConfig"]
    assert (pool.inputs["initialNodeCount"], pool.inputs["autoscaling"]["totalMaxNodeCount"]) == (2, 2)


def test_flex_start_autoscales_from_zero_without_a_static_count_or_auto_repair(infra_run):
    pool = infra_run("standard", "b200", "gcs", gpu={"provisioning": "flex-start", "nodes": 4}).one(
        POOL, "grpo-test-gpu"
    )
    inputs = pool.inputs
    assert inputs["nodeConfig"]["flexStart"] is True
    assert "spot" not in inputs["nodeConfig"]
    assert inputs["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert "nodeCount" not in inputs
    assert inputs["initialNodeCount"] == 0
    assert inputs["autoscaling"] == {"locationPolicy": "ANY", "totalMaxNodeCount": 4, "totalMinNodeCount": 0}
    assert inputs["management"] == {"autoRepair": False, "autoUpgrade": True}


@pytest.mark.parametrize("provisioning", ["spot", "on-demand", "reservation", "flex-start"])
def test_the_gpu_pool_autoscales_to_zero_and_a_later_up_leaves_its_first_count_alone(infra_run, provisioning):
    gpu = {"provisioning": provisioning, "nodes": 4, **({"reservation": "r"} if provisioning == "reservation" else {})}
    recording = infra_run("standard", "h200", "gcs", gpu=gpu)
    pool = recording.one(POOL, "grpo-test-gpu")
    assert (pool.inputs["autoscaling"]["totalMinNodeCount"], pool.inputs["autoscaling"]["totalMaxNodeCount"]) == (0, 4)
    assert pool.inputs["initialNodeCount"] == (0 if provisioning == "flex-start" else 4)
    assert pool.ignore_changes == ("initialNodeCount",)
    head = recording.one(POOL, "grpo-test-ray-head")
    assert "autoscaling" not in head.inputs and head.ignore_changes == ()


def test_gpu_pool_keeps_auto_repair_outside_flex_start(infra_run):
    pool = infra_run("standard", "b200", "gcs").one(POOL, "grpo-test-gpu")
    assert pool.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}


@pytest.mark.parametrize("provisioning", ["spot", "on-demand", "reservation"])
def test_gpu_pool_upgrades_in_place_without_surge_nodes(infra_run, provisioning):
    gpu = {"provisioning": provisioning} | ({"reservation": "res-a4"} if provisioning == "reservation" else {})
    pool = infra_run("standard", "b200", "gcs", gpu=gpu).one(POOL, "grpo-test-gpu")
    assert pool.inputs["upgradeSettings"] == {"maxSurge": 0, "maxUnavailable": 1, "strategy": "SURGE"}


def test_flex_start_pool_has_no_surge_settings(infra_run):
    pool = infra_run("standard", "b200", "gcs", gpu={"provisioning": "flex-start"}).one(POOL, "grpo-test-gpu")
    assert "upgradeSettings" not in pool.inputs


def test_head_pool_is_an_on_demand_cpu_pool_in_the_gpu_zone(infra_run):
    pool = infra_run("standard", "b200", "lustre").one(POOL, "grpo-test-ray-head")
    inputs = pool.inputs
    assert inputs["name"] == names.HEAD_NODE_POOL
    assert inputs["nodeConfig"]["machineType"] == "c2-standard-16"
    assert "guestAccelerators" not in inputs["nodeConfig"] and "spot" not in inputs["nodeConfig"]
    assert (inputs["nodeCount"], inputs["nodeLocations"]) == (1, ["us-central1-b"])


def test_head_machine_type_comes_from_config(infra_run):
    pool = infra_run("standard", "b200", "gcs", cluster={"headMachineType": "n2-standard-32"}).one(
        POOL, "grpo-test-ray-head"
    )
    assert pool.inputs["nodeConfig"]["machineType"] == "n2-standard-32"


def test_pools_wait_for_the_cluster_and_the_gpu_pool_for_its_networks(infra_run):
    recording = infra_run("standard", "h200", "gcs")
    # Both run as the nodes' service account; its role reaches them through the cluster, which waits for it.
    assert depends_on(recording, recording.one(POOL, "grpo-test-ray-head")) == {"grpo-test", "grpo-test-node-sa"}
    assert depends_on(recording, recording.one(POOL, "grpo-test-gpu")) == {
        "grpo-test",
        "grpo-test-node-sa",
        "grpo-test-gvnic",
        "grpo-test-gvnic-sub",
        "grpo-test-rdma",
        *(f"grpo-test-rdma-sub-{index}" for index in range(8)),
    }


@pytest.mark.parametrize(
    ("gpu", "provisioning", "nodes", "compact"),
    [
        ("b200", "on-demand", 2, True),
        ("h200", "spot", 4, True),
        ("h200", "on-demand", 1, False),
        ("b200", "spot", 1, False),
        ("h200", "reservation", 4, False),
        ("b200", "flex-start", 4, False),
    ],
)
def test_multi_node_pools_without_a_reservation_are_compact_placed(infra_run, gpu, provisioning, nodes, compact):
    section = {"provisioning": provisioning, "nodes": nodes}
    if provisioning == "reservation":
        section["reservation"] = "my-block"
    pool = infra_run("standard", gpu, "gcs", gpu=section).one(POOL, "grpo-test-gpu").inputs
    assert pool.get("placementPolicy") == ({"type": "COMPACT"} if compact else None)
    assert (
        "placementPolicy" not in infra_run("standard", gpu, "gcs", gpu=section).one(POOL, "grpo-test-ray-head").inputs
    )


def test_the_largest_gpu_pool_fits_one_compact_placement_policy():
    from core.config.model import GpuConfig
    from core.facts.gcp import COMPACT_PLACEMENT_MAX_NODES

    most = next(m.le for m in GpuConfig.model_fields["nodes"].metadata if hasattr(m, "le"))
    assert most <= COMPACT_PLACEMENT_MAX_NODES


LADDER = {"capacity": ["reservation", "flex-start", "spot", "on-demand"], "reservation": "res-a4", "nodes": 4}
"""A ladder of all four rungs; gpu.provisioning spot (the dev stack's), so the spot pool keeps today's name."""

RUNG_OWN = ("name", "nodeConfig.spot", "nodeConfig.flexStart", "nodeConfig.reservationAffinity", "placementPolicy",
            "autoscaling.locationPolicy", "management.autoRepair", "upgradeSettings")  # fmt: skip
"""Input paths a rung may set for itself; every other input is the same in every rung's pool."""

RUNG_VALUES = {
    "spot": {"name": "gpu", "nodeConfig.spot": True, "nodeConfig.reservationAffinity.consumeReservationType": "NO_RESERVATION",
             "placementPolicy.type": "COMPACT", "management.autoRepair": True, "upgradeSettings.strategy": "SURGE"},
    "on-demand": {"name": "gpu-on-demand", "nodeConfig.reservationAffinity.consumeReservationType": "NO_RESERVATION",
                  "placementPolicy.type": "COMPACT", "management.autoRepair": True, "upgradeSettings.strategy": "SURGE"},
    "reservation": {"name": "gpu-reservation", "nodeConfig.reservationAffinity.consumeReservationType": "SPECIFIC_RESERVATION",
                    "nodeConfig.reservationAffinity.key": "compute.googleapis.com/reservation-name",
                    "nodeConfig.reservationAffinity.values": ["res-a4"], "management.autoRepair": True,
                    "upgradeSettings.strategy": "SURGE"},
    "flex-start": {"name": "gpu-flex-start", "nodeConfig.flexStart": True, "autoscaling.locationPolicy": "ANY",
                   "nodeConfig.reservationAffinity.consumeReservationType": "NO_RESERVATION", "management.autoRepair": False},
}  # fmt: skip
"""Each rung's own fields (a subset of RUNG_OWN's paths): Spot and on-demand place compactly, the reservation
names its reservation, flex-start autoscales ANY-where without auto-repair or surge settings."""


def _flat(value: object, prefix: str = "") -> dict[str, object]:
    """Nested inputs as `a.b.c` -> leaf value."""
    if isinstance(value, dict):
        flat: dict[str, object] = {}
        for key, inner in value.items():
            flat |= _flat(inner, f"{prefix}{key}.")
        return flat
    return {prefix.rstrip("."): value}


def _rung_own(path: str) -> bool:
    return any(path == own or path.startswith(own + ".") for own in RUNG_OWN)


@pytest.mark.parametrize("gpu", GPUS)
def test_a_ladder_of_four_rungs_makes_four_pools_that_differ_only_in_the_rungs_own_fields(infra_run, gpu):
    recording = infra_run("standard", gpu, "gcs", gpu=LADDER)
    pools = {
        pool.inputs["name"]: _flat(pool.inputs) for pool in recording.by_type(POOL) if pool.name != "grpo-test-ray-head"
    }
    by_rung = {rung: pools.pop(names.gpu_pool_name("spot", rung)) for rung in LADDER["capacity"]}
    assert pools == {}
    shared = {path for flat in by_rung.values() for path in flat if not _rung_own(path)}
    for path in sorted(shared):
        values = [by_rung[rung].get(path, "<absent>") for rung in by_rung]
        assert all(value == values[0] for value in values), (path, values)
    for rung, flat in by_rung.items():
        assert {
            path: value
            for path, value in flat.items()
            if _rung_own(path) and not path.startswith("upgradeSettings.max")
        } == RUNG_VALUES[rung], rung


def test_every_rungs_pool_starts_empty_autoscales_to_gpu_nodes_and_carries_the_class_label_and_taint(infra_run):
    recording = infra_run("standard", "b200", "gcs", gpu=LADDER)
    for pool in recording.by_type(POOL):
        if pool.name == "grpo-test-ray-head":
            continue
        inputs = pool.inputs
        assert inputs["initialNodeCount"] == 0, pool.name
        assert (inputs["autoscaling"]["totalMinNodeCount"], inputs["autoscaling"]["totalMaxNodeCount"]) == (0, 4)
        assert inputs["nodeConfig"]["labels"] == {"cloud.google.com/compute-class": "grpo-gpu-ladder"}
        assert inputs["nodeConfig"]["taints"] == [
            {"effect": "NO_SCHEDULE", "key": "nvidia.com/gpu", "value": "present"},
            {"effect": "NO_SCHEDULE", "key": "cloud.google.com/compute-class", "value": "grpo-gpu-ladder"},
        ]
        assert pool.ignore_changes == ("initialNodeCount",)


def test_without_a_ladder_the_pool_carries_no_class_label(infra_run):
    inputs = infra_run("standard", "b200", "gcs").one(POOL, "grpo-test-gpu").inputs
    assert "labels" not in inputs["nodeConfig"]
