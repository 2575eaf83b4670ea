"""`gpu.imageCacheDisk` under mocks: every GPU pool (each rung of a capacity ladder) carries the disk image as a
container image cache, with image streaming on and the COS node image, in the input form pulumi-gcp 10.2.0's
NodePool takes; the head's CPU pool does not; the ladder's ComputeClass is unchanged and still passes the
ComputeClass CRD's schema. Autopilot is refused (tests/core/test_image_cache_rules.py)."""

from __future__ import annotations

import re

import pulumi._types as pulumi_types
import pulumi_gcp as gcp
import pytest

from core import names
from core.facts.imagecache import CACHE_MODE, IMAGE_CACHE_DISK_GB, IMAGE_CACHE_NODE_IMAGE
from core.facts.platform import GPU_MACHINES
from jobs.spec.load import load_config
from tests.conftest import GPUS, REPO_ROOT, combination_values, recorded_run, values_of
from tests.workloads.test_computeclass import CLASS_TYPE, LADDER, class_errors

POOL = "gcp:container/nodePool:NodePool"
DISK_IMAGE = "projects/my-grpo-project/global/images/verl-cache"
CACHE = {"imageCacheDisk": "verl-cache"}
REGISTRY = {"imageSource": "registry"}

NODE_CONFIG_KEYS = set(pulumi_types.input_type_py_to_pulumi_names(gcp.container.NodePoolNodeConfigArgs).values())
"""The wire names of pulumi-gcp 10.2.0's NodePoolNodeConfigArgs inputs (installed SDK)."""
DISK_KEYS = set(
    pulumi_types.input_type_py_to_pulumi_names(gcp.container.NodePoolNodeConfigSecondaryBootDiskArgs).values()
)
"""`diskImage` (required) and `mode`: NodePoolNodeConfigSecondaryBootDiskArgs."""
MODES = ("MODE_UNSPECIFIED", "CONTAINER_IMAGE_CACHE")
"""google.container.v1 SecondaryBootDisk.Mode, the values GKE takes (core/facts/imagecache.py API)."""


def pools(gpu: str, gpu_section: dict, workload: dict) -> dict[str, dict]:
    """Pool name -> its recorded inputs, for a Standard stack with these sections."""
    recording = recorded_run(combination_values("standard", gpu, "gcs", gpu=gpu_section, workload=workload))
    return {r.inputs["name"]: r.inputs for r in recording.by_type(POOL)}


def schema_problems(node_config: dict) -> list[str]:
    """What in a pool's recorded nodeConfig pulumi-gcp 10.2.0's NodePool would not take, as readable lines."""
    problems = [f"unknown nodeConfig key {key}" for key in node_config if key not in NODE_CONFIG_KEYS]
    for disk in node_config.get("secondaryBootDisks", []):
        problems += [f"unknown secondaryBootDisks key {key}" for key in disk if key not in DISK_KEYS]
        if "diskImage" not in disk:
            problems.append("secondaryBootDisks entry without its required diskImage")
        if disk.get("mode") not in (None, *MODES):
            problems.append(f"secondaryBootDisks mode {disk['mode']!r} is not one of {MODES}")
    return problems


@pytest.mark.parametrize("gpu", GPUS)
def test_the_gpu_pool_takes_the_cache_with_streaming_and_the_head_pool_does_not(gpu):
    by_name = pools(gpu, CACHE, REGISTRY)
    assert set(by_name) == {"gpu", "ray-head"}
    node_config = by_name["gpu"]["nodeConfig"]
    assert node_config["secondaryBootDisks"] == [{"diskImage": DISK_IMAGE, "mode": CACHE_MODE}]
    assert node_config["gcfsConfig"] == {"enabled": True}
    assert node_config["imageType"] == IMAGE_CACHE_NODE_IMAGE
    # The cache disk takes the boot disk's type (IMAGE_CACHE_DISK_TYPE): Hyperdisk Balanced on A3 Ultra, GKE's
    # default on A4; the API has no type field to get wrong.
    boot_disk_type = GPU_MACHINES[gpu].boot_disk_type
    assert node_config.get("bootDisk") == ({"diskType": boot_disk_type} if boot_disk_type else None)
    assert schema_problems(node_config) == []
    assert "secondaryBootDisks" not in by_name["ray-head"]["nodeConfig"]


def test_the_schema_check_catches_what_pulumi_gcp_would_not_take():
    """The check above can fail: an unknown key, a missing disk image, a mode GKE does not know."""
    assert schema_problems({"secondaryBootDisks": [{"mode": "CACHE"}], "secondaryBootDisk": []}) == [
        "unknown nodeConfig key secondaryBootDisk",
        "secondaryBootDisks entry without its required diskImage",
        "secondaryBootDisks mode 'CACHE' is not one of ('MODE_UNSPECIFIED', 'CONTAINER_IMAGE_CACHE')",
    ]


@pytest.mark.parametrize("gpu", GPUS)
def test_every_rung_of_a_ladder_takes_the_cache_and_the_class_stays_nodepools_alone(gpu):
    """One pool builder for every rung (infra/nodepools.py gpu_pool_args): the cache goes on each; the ComputeClass
    names the pools only (a nodepools priority holds no other field) and passes the CRD's schema."""
    values = combination_values("standard", gpu, "gcs", gpu=LADDER | CACHE, workload=REGISTRY)
    recording = recorded_run(values)
    by_name = {r.inputs["name"]: r.inputs for r in recording.by_type(POOL)}
    gpu_pools = sorted(name for name in by_name if name != "ray-head")
    assert gpu_pools == ["gpu", "gpu-flex-start", "gpu-on-demand", "gpu-reservation"]
    for name in gpu_pools:
        node_config = by_name[name]["nodeConfig"]
        assert node_config["secondaryBootDisks"] == [{"diskImage": DISK_IMAGE, "mode": CACHE_MODE}], name
        assert node_config["gcfsConfig"] == {"enabled": True}, name
        assert schema_problems(node_config) == [], name
    recorded = recording.one(CLASS_TYPE).inputs
    manifest = {key: recorded[key] for key in ("apiVersion", "kind", "metadata", "spec")}
    assert class_errors(manifest) == []
    assert all(list(priority) == ["nodepools"] for priority in manifest["spec"]["priorities"])


def test_a_nodepools_priority_cannot_carry_the_cache_so_the_pools_do():
    """Why the cache is on the pools and not on the class under a ladder: the CRD's CEL rule refuses a `storage`
    beside `nodepools` in one priority (the schema's allOf), while a priority of `storage` alone is well formed."""
    values = combination_values("standard", "h200", "gcs", gpu=LADDER | CACHE, workload=REGISTRY)
    recorded = recorded_run(values).one(CLASS_TYPE).inputs
    manifest = {key: recorded[key] for key in ("apiVersion", "kind", "metadata", "spec")}
    storage = {
        "secondaryBootDisks": [{"diskImageName": "verl-cache", "project": "my-grpo-project", "mode": CACHE_MODE}]
    }
    beside = {**manifest, "spec": {**manifest["spec"], "priorities": [{"nodepools": ["gpu"], "storage": storage}]}}
    alone = {**manifest, "spec": {**manifest["spec"], "priorities": [{"storage": storage}]}}
    assert class_errors(beside) and class_errors(alone) == []


@pytest.mark.parametrize("ladder", [{}, LADDER])
def test_without_the_key_no_pool_has_a_cache(ladder):
    assert all("secondaryBootDisks" not in p["nodeConfig"] for p in pools("h200", ladder, REGISTRY).values())


def test_the_documented_build_command_is_the_dev_stacks_own():
    """docs/before-first-up.md's builder command names what the dev stack with the registry on pulls, its zone,
    project and nodes' account, and the image name the config line then sets, which loads."""
    section = (REPO_ROOT / "docs" / "before-first-up.md").read_text().split("## Image cache disk", 1)[1]
    flags = dict(re.findall(r"--([a-z-]+)=(\S+)", section.split("```sh", 1)[1].split("```", 1)[0]))
    name = re.search(r"pulumi config set --path grpo-gke:gpu\.imageCacheDisk (\S+)", section).group(1)
    values = values_of("dev", workload={"imageSource": "registry"}, gpu={"imageCacheDisk": name})
    config = load_config(values, (), "dev").config
    assert flags["container-image"] == config.pulled_image()
    assert flags["image-name"] == name == config.gpu.image_cache_disk_name
    assert (flags["project-name"], flags["zone"]) == (config.project, config.zone)
    account = names.service_account_email(names.node_service_account_id(config.cluster_name), config.project)
    assert flags["service-account"] == account
    assert flags["image-pull-auth"] == "ServiceAccountToken"
    assert int(flags["disk-size-gb"]) == IMAGE_CACHE_DISK_GB, "the size the idle bill prices the disk image at"
