"""The plan's time to the first training step (plan/startup.py): the image pull as a step of the critical path,
whole on the first pull, streamed on later ones, from a disk cache on both; the preemption path; and what `python -m
plan` prints and writes for each shipped stack."""

from __future__ import annotations

import json

import pytest

from core.facts.startup import (
    CHECKPOINT_BYTES_PER_PARAMETER,
    GPU_NODE_BOOT_SECONDS,
    RAY_JOIN_SECONDS,
    RESOURCE_CREATION_SECONDS,
    STREAMED_PULL_SECONDS,
    VERL_IMAGE_GB,
    WHOLE_PULL_SECONDS_PER_GB,
)
from plan.monitor import Recorded
from plan.startup import (
    STARTUP_FILE,
    estimate_startup,
    render_startup_json,
    startup_lines,
    streams_image,
)
from tests.conftest import REPO_ROOT, SHIPPED_STACKS, combination_values, config_of, recorded_run

WHOLE = VERL_IMAGE_GB.value * WHOLE_PULL_SECONDS_PER_GB.value
"""Seconds of a whole pull of verl's pinned image (12 GB x 27 s/GB = 324 s)."""
STREAMED, BOOT, JOIN = STREAMED_PULL_SECONDS.value, GPU_NODE_BOOT_SECONDS.value, RAY_JOIN_SECONDS.value


def resource(logical: str, type_: str, depends_on: tuple[str, ...] = (), **inputs) -> Recorded:
    """A custom resource of the recording, waiting for `depends_on`, with `inputs`."""
    return Recorded(
        urn=f"urn:{logical}", type=type_, name=logical, custom=True, parent="", provider="", depends_on=depends_on,
        property_dependencies={}, protect=False, retain_on_delete=False, delete_before_replace=False,
        replace_on_changes=(), ignore_changes=(), custom_timeouts={}, additional_secret_outputs=(), inputs=inputs,
    )  # fmt: skip


def small_stack(initial_nodes: int) -> list[Recorded]:
    """cluster -> GPU pool (created with `initial_nodes`) -> RayCluster -> submission; the staging Job beside."""
    return [
        resource("cluster", "gcp:container/cluster:Cluster"),
        resource("gpu", "gcp:container/nodePool:NodePool", ("urn:cluster",), name="gpu", initialNodeCount=initial_nodes),
        resource("staging", "kubernetes:batch/v1:Job", ("urn:cluster",)),
        resource("ray", "kubernetes:ray.io/v1:RayCluster", ("urn:gpu",)),
        resource("submit", "pulumi-python:dynamic:Resource", ("urn:ray", "urn:staging")),
    ]  # fmt: skip


CLUSTER, POOL, SUBMIT = (RESOURCE_CREATION_SECONDS[kind].value for kind in ("cluster", "gpu-node-pool", "pulumi-python:dynamic:Resource"))  # fmt: skip


def test_the_first_pull_is_whole_even_where_the_image_streams_and_a_replacement_node_streams_it():
    config = config_of("verl-standard-h200", workload={"imageSource": "registry"})
    assert streams_image(config)
    estimate = estimate_startup(config, small_stack(initial_nodes=2))
    # Nodes come with the pool (Standard): the RayCluster is ready after a whole first pull and Ray's join.
    assert [step.seconds for step in estimate.raycluster_ready] == [WHOLE, JOIN]
    assert estimate.from_up.steps[0].seconds == CLUSTER + POOL + WHOLE + JOIN + SUBMIT
    assert estimate.chain == ("cluster", "gpu-node-pool", "raycluster-ready", "pulumi-python:dynamic:Resource")
    # After a preemption the new node boots and streams: the image is in streaming's cache since the first pull.
    names = [step.name for step in estimate.after_preemption.steps]
    assert names == [
        "GPU node boot",
        "image pull, streamed",
        "Ray join",
        "checkpoint load (384 GB)",
        "verl's setup to step 1",
    ]
    assert estimate.after_preemption.seconds == BOOT + STREAMED + JOIN
    assert estimate.after_preemption.left_out() == ["checkpoint load (384 GB)", "verl's setup to step 1"]


DIRECT = {"imageSource": "direct"}
"""A stack pulling its image directly from its registry, whole (images are streamed by default, issue 33 item 4)."""


def test_without_streaming_every_new_node_pulls_the_image_whole():
    config = config_of("verl-standard-h200", workload=DIRECT)
    assert not streams_image(config), "a Docker Hub image pulled directly is not streamed"
    estimate = estimate_startup(config, small_stack(initial_nodes=2))
    assert estimate.after_preemption.seconds == BOOT + WHOLE + JOIN
    assert estimate.after_preemption.steps[1].name == "image pull, whole (12 GB)"
    assert estimate_startup(config, small_stack(2), streamed=True).after_preemption.seconds == BOOT + STREAMED + JOIN


def test_a_disk_cache_takes_the_pull_off_the_first_up_and_every_replacement():
    config = config_of("verl-standard-h200")
    estimate = estimate_startup(config, small_stack(initial_nodes=2), disk_cache=True)
    assert [step.seconds for step in estimate.raycluster_ready] == [0.0, JOIN]
    assert estimate.from_up.steps[0].seconds == CLUSTER + POOL + JOIN + SUBMIT
    assert estimate.after_preemption.seconds == BOOT + JOIN


def test_a_stack_with_gpu_image_cache_disk_is_estimated_with_its_cache_and_one_without_is_not():
    """The shipped figure follows the config: gpu.imageCacheDisk set means the nodes pull from their disk cache."""
    cached = config_of("verl-standard-h200", workload={"imageSource": "registry"}, gpu={"imageCacheDisk": "verl-cache"})
    plain = config_of("verl-standard-h200", workload={"imageSource": "registry"})
    assert estimate_startup(cached, small_stack(initial_nodes=2)).disk_cache is True
    assert estimate_startup(plain, small_stack(initial_nodes=2)).disk_cache is False
    assert estimate_startup(cached, small_stack(initial_nodes=2)).after_preemption.seconds == BOOT + JOIN


def test_nodes_made_for_the_pending_workers_boot_inside_the_rayclusters_readiness():
    # Autopilot, a capacity ladder and flex-start create the pool (if any) without nodes.
    estimate = estimate_startup(config_of("verl-standard-h200", workload=DIRECT), small_stack(initial_nodes=0))
    assert [step.name for step in estimate.raycluster_ready] == [
        "GPU node boot",
        "image pull, whole (12 GB)",
        "Ray join",
    ]
    assert estimate.from_up.steps[0].seconds == CLUSTER + POOL + BOOT + WHOLE + JOIN + SUBMIT


def test_the_staging_job_sets_the_path_when_the_rayclusters_readiness_is_shorter():
    estimate = estimate_startup(
        config_of("verl-standard-h200", workload=DIRECT), small_stack(2)[:1] + small_stack(2)[2:]
    )
    # Without a GPU pool: cluster -> staging Job (15 min) -> submission; the RayCluster (9m 10s) beside it.
    assert estimate.chain == ("cluster", "kubernetes:batch/v1:Job", "pulumi-python:dynamic:Resource")
    assert startup_lines(estimate)[2].startswith("  RayCluster ready (beside the critical path): GPU node boot 5m 00s")


def test_the_checkpoint_load_on_lustre_is_its_bytes_over_the_instances_throughput():
    config = config_of("nemo-rl-standard-b200")  # 72B on 9000 GiB at 1000 MB/s/TiB
    step = estimate_startup(config, small_stack(2)).after_preemption.steps[3]
    rate = 1000 * 9000 / 1024
    assert step.name == f"checkpoint load (864 GB at {rate:.0f} MB/s)"
    assert step.seconds == pytest.approx(72 * CHECKPOINT_BYTES_PER_PARAMETER.value * 1000 / rate)


def test_autopilot_streams_an_artifact_registry_image_by_itself():
    direct = config_of("verl-autopilot-b200", workload=DIRECT)
    registry = config_of("verl-autopilot-b200")  # unset: through its remote repository
    assert (streams_image(direct), streams_image(registry)) == (False, True)


def test_first_step_json_is_sorted_and_names_every_figures_source():
    estimate = estimate_startup(config_of("dev", workload=DIRECT), small_stack(2))
    text = render_startup_json(estimate)
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    steps = document["afterPreemption"]["steps"] + document["fromUp"]["steps"] + document["rayClusterReady"]
    assert all(step["source"] for step in steps)
    assert document["image"] == {
        "reference": "verlai/verl:vllm024.dev2", "sizeGb": 12.0, "sizePublished": True,
        "sizeSource": VERL_IMAGE_GB.source, "streamed": False, "diskCache": False,
    }  # fmt: skip
    assert document["fromUp"]["notIncluded"] == ["verl's setup to step 1"]


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_make_plan_prints_the_time_to_the_first_step_and_writes_first_step_json(stack, shipped_plan_command, plan_of):
    run = shipped_plan_command(stack)
    assert (run.result.returncode, run.result.stderr) == (0, "")
    expected = startup_lines(estimate_startup(config_of(stack), plan_of(stack).resources))
    printed = run.result.stdout.splitlines()
    start = printed.index(f"  {expected[0]}")
    assert printed[start : start + len(expected) + 1] == [*(f"  {line}" for line in expected), "Security:"]
    document = json.loads((run.out / STARTUP_FILE).read_text())
    # images are streamed by default (issue 33 item 4): every shipped stack pulls through its remote repository
    assert document["image"]["streamed"] is True
    assert document["image"]["reference"].startswith("us-central1-docker.pkg.dev/my-grpo-project/")
    assert printed[start + len(expected) - 1].endswith(": streamed after its first pull")
    assert document["fromUp"]["seconds"] == round(
        estimate_startup(config_of(stack), plan_of(stack).resources).from_up.seconds, 1
    )


def test_the_shipped_stacks_expected_figures(plan_of):
    """The figures docs/up-and-destroy.md states, as the model computes them from core/facts/startup.py."""
    found = {}
    for stack in SHIPPED_STACKS:
        estimate = estimate_startup(config_of(stack), plan_of(stack).resources)
        found[stack] = (round(estimate.from_up.seconds / 60), round(estimate.after_preemption.seconds / 60))
    assert found == {
        # streamed by default (issue 33 item 4): a replacement node streams the image (20 s) instead of pulling it
        # whole (12 GB: 5m 24s; NeMo-RL's 20 GB: 9m 00s); the first up's first pull is whole either way
        "first-run": (54, 6),
        "dev": (54, 6),
        "verl-standard-h200": (54, 6),
        "verl-autopilot-b200": (28, 6),
        "nemo-rl-standard-b200": (57, 7),
    }


def test_a_registry_stack_on_standard_streams_its_replacements():
    recording = recorded_run(combination_values("standard", "h200", "gcs", workload={"imageSource": "registry"}))
    config = config_of("dev", "test", workload={"imageSource": "registry"})
    estimate = estimate_startup(config, recording.resources)
    assert estimate.streamed and estimate.after_preemption.steps[1].name == "image pull, streamed"
    assert estimate.raycluster_ready[0].name == "image pull, whole (12 GB, a first pull is not streamed)"


def test_up_and_destroy_shows_devs_lines_as_make_plan_prints_them(plan_of):
    page = (REPO_ROOT / "docs" / "up-and-destroy.md").read_text()
    section = page.split("## Time to the first step", 1)[1]
    for line in startup_lines(estimate_startup(config_of("dev"), plan_of("dev").resources)):
        assert f"\n  {line}\n" in section, line
