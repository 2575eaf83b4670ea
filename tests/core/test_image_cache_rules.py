"""`gpu.imageCacheDisk`, the GPU nodes' container image cache: each rule's good and bad case through the loader,
and a refusal the way the user meets it (`python -m plan --config FILE`: exit 2, the whole output, nothing
written). Facts and sources: core/facts/imagecache.py."""

from __future__ import annotations

from typing import Any

import pytest

from core.facts.imagecache import IMAGE_CACHE_FLOORS
from core.facts.platform import GPU_MACHINES, GkeVersion
from tests.conftest import clean_refusal, plan_of_edited_stack
from tests.core.test_config import _below, bad, ok, problem_lines

KEY = "grpo-gke:gpu.imageCacheDisk"
REGISTRY = {"grpo-gke:workload.imageSource": "registry"}
"""The base stack (Standard, verl from Docker Hub) pulling through the stack's remote repository, streamed."""

STREAMING_NEEDED = (
    f"{KEY}: needs image streaming on the GPU pools (GKE's secondary boot disks work only with it), which the stack"
    " turns on with workload.imageSource 'registry' (unset, the default for a Docker Hub or nvcr.io image); unset"
    " workload.imageSource or set it to 'registry', and build the disk image from the image path the pods then"
    " pull (docs/configuration.md, Images)"
)

CASES = [
    ok("name", {**REGISTRY, KEY: "verl-cache"}),
    ok("global-path", {**REGISTRY, KEY: "global/images/verl-cache"}),
    ok("own-project-path", {**REGISTRY, KEY: "projects/my-grpo-project/global/images/verl-cache"}),
    ok("longest-name", {**REGISTRY, KEY: "v" * 63}),
    ok("default-source", {KEY: "verl-cache"}),
    bad("streaming-off", {"grpo-gke:workload.imageSource": "direct", KEY: "verl-cache"}, STREAMING_NEEDED),
    bad(
        "other-registry",
        {
            "grpo-gke:workload.image": "example.com/verl:custom",
            "grpo-gke:workload.rayVersion": "2.49.2",
            KEY: "verl-cache",
        },
        STREAMING_NEEDED,
    ),
    bad(
        "autopilot",
        {**REGISTRY, KEY: "verl-cache", "grpo-gke:cluster.mode": "autopilot"},
        f"{KEY}: is only for cluster.mode 'standard': on Autopilot the disk goes on a ComputeClass priority"
        " (priorities[].storage.secondaryBootDisks), and no GKE document read on 2026-12-02 shows an Autopilot"
        " ComputeClass priority making A4 or A3 Ultra nodes with their RDMA networks (the same gap that keeps"
        " gpu.capacity off Autopilot); unset gpu.imageCacheDisk, or use cluster.mode 'standard'",
    ),
    bad(
        "other-project",
        {**REGISTRY, KEY: "projects/images-project/global/images/verl-cache"},
        f"{KEY}: must be a disk image of gcp:project my-grpo-project: the pages read on 2026-12-02 do not say which"
        " of GKE's accounts needs roles/compute.imageUser on another project's image; copy it into my-grpo-project"
        " with `gcloud compute images create verl-cache --project=my-grpo-project --source-image=verl-cache"
        " --source-image-project=images-project`, then set gpu.imageCacheDisk to verl-cache",
    ),
    bad(
        "mode-given",
        {**REGISTRY, KEY: "disk-image=global/images/verl-cache,mode=DATA"},
        f"{KEY}: takes the disk image alone: the stack always attaches it with mode CONTAINER_IMAGE_CACHE (a"
        " container image cache; GKE's other mode, MODE_UNSPECIFIED, preloads data), got"
        " 'disk-image=global/images/verl-cache,mode=DATA'",
    ),
    *(
        bad(
            f"malformed-{case}",
            {**REGISTRY, KEY: value},
            f"{KEY}: must be a disk image name such as verl-cache (lowercase letters, digits, hyphens, at most 63),"
            f" global/images/<name> or projects/<project>/global/images/<name>, got {value!r}",
        )
        for case, value in (
            ("capitals", "Verl-Cache"),
            ("leading-digit", "1verl"),
            ("trailing-hyphen", "verl-"),
            ("too-long", "v" * 64),
            ("zonal-path", "projects/my-grpo-project/zones/us-central1-b/disks/verl"),
            ("bad-project", "projects/X/global/images/verl"),
        )
    ),
]


@pytest.mark.parametrize(("changes", "expected"), CASES)
def test_rule(changes: dict[str, Any], expected: list[str]) -> None:
    """Each rule: the good case loads, the bad case gives exactly the expected problem lines."""
    assert problem_lines(changes) == expected


def test_a_version_below_the_caches_floor_is_refused_naming_it():
    """The floor sits below every RDMA floor (core/facts/imagecache.py IMAGE_CACHE_FLOORS), so a version under it
    is refused for RDMA too; the cache's own line names what the version is for."""
    floor = IMAGE_CACHE_FLOORS["standard"]
    below = _below(floor)
    rdma = GPU_MACHINES["h200"].rdma_floor["standard"]
    cache_line = (
        f"grpo-gke:cluster.minVersion: must be at least {floor} for secondary boot disks (gpu.imageCacheDisk),"
        f" got {below}"
    )
    lines = problem_lines({**REGISTRY, KEY: "verl-cache", "grpo-gke:cluster.minVersion": below})
    assert cache_line in lines
    assert (
        f"grpo-gke:cluster.minVersion: must be at least {rdma} for GPUDirect RDMA on H200 (standard), got {below}"
        in lines
    )
    assert cache_line not in problem_lines({**REGISTRY, "grpo-gke:cluster.minVersion": below})
    assert all(
        GkeVersion.parse(GPU_MACHINES[gpu].rdma_floor[mode]).key() >= GkeVersion.parse(IMAGE_CACHE_FLOORS[mode]).key()
        for gpu in GPU_MACHINES
        if GPU_MACHINES[gpu].rdma_floor is not None
        for mode in IMAGE_CACHE_FLOORS
    )
    assert problem_lines({**REGISTRY, KEY: "verl-cache", "grpo-gke:cluster.minVersion": rdma}) == []


def test_the_plan_refuses_a_cache_without_streaming_the_way_the_user_meets_it(tmp_path):
    edit = ("    provisioning: spot\n", "    provisioning: spot\n    imageCacheDisk: verl-cache\n")
    direct = ("    dataset: gsm8k\n", "    dataset: gsm8k\n    imageSource: direct\n")
    assert clean_refusal(plan_of_edited_stack(tmp_path, "cache", edit, direct), tmp_path) == (
        "error: the config of stack 'cache' (Pulumi.cache.yaml) was refused:\n"
        f"  grpo-gke:{STREAMING_NEEDED.removeprefix('grpo-gke:')}\n"
    )
