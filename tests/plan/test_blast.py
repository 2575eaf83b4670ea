"""Blast radius: the classification of two plans, the `plan --against` command, and the README's
column of what changing each config key does."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.config.model import PROJECT_NAMESPACE
from core.facts.changes import FORCE_NEW_INPUTS
from plan.blast import RAY_CLUSTER_TYPE as RAY_TYPE
from plan.blast import (
    SPECIAL_TYPES,
    blast_radius,
    changed_paths,
    default_image_source_warning,
    effect,
    pulls_through_registry,
    render,
)
from plan.writer import render_plan_json
from tests.conftest import (
    COMBINATIONS,
    LUSTRE,
    REPO_ROOT,
    SHIPPED_STACKS,
    combination_values,
    recorded_run,
    shipped_stack_file,
    values_of,
)

LUSTRE_BASE = {"storage": dict(LUSTRE)}
"""The dev stack on an 18000 GiB Lustre at 1000 MB/s/TiB."""
RESERVATION_BASE = {"gpu": {"provisioning": "reservation", "reservation": "grpo-a"}}
"""The dev stack on a reservation."""
WANDB_BASE = {"wandbApiKey": "wandb-offline-example"}
"""The dev stack with Weights & Biases on."""
IMAGE_BASE = {"workload": {"image": "example.com/verl:custom", "rayVersion": "2.49.0"}}
"""The dev stack on its own image."""
REGISTRY_BASE = {"workload": {"imageSource": "registry"}}
"""The dev stack pulling through its remote repository, streamed (what gpu.imageCacheDisk needs)."""
NEMO_IMAGE_BASE = {
    "workload": {"image": "example.com/nemo-rl:custom", "rayVersion": "2.49.0", "nemoRlRelease": "v0.7.0"}
}
"""The NeMo-RL stack on its own image."""

NVCR_REGISTRY_BASE = {"workload": {"imageSource": "registry"}}
"""The NeMo-RL stack pulling through its nvcr.io remote repository."""
NGC_VERSION = "projects/my-grpo-project/secrets/ngc-api-key/versions/1"
"""A Secret Manager secret version holding an NGC API key."""

KEY_CHANGES: dict[str, tuple[str, dict, dict]] = {
    "grpo-gke:zone": ("dev", {"gpu": {"type": "b200"}}, {"zone": "us-central1-a"}),  # both zones have B200
    "grpo-gke:cluster.mode": ("dev", {}, {"cluster": {"mode": "autopilot"}}),
    "grpo-gke:cluster.name": ("dev", {}, {"cluster": {"name": "grpo-renamed"}}),
    "grpo-gke:cluster.releaseChannel": ("dev", {}, {"cluster": {"releaseChannel": "STABLE"}}),
    "grpo-gke:cluster.minVersion": ("dev", {}, {"cluster": {"minVersion": "1.34.1-gke.1000000"}}),
    "grpo-gke:cluster.deletionProtection": ("dev", {}, {"cluster": {"deletionProtection": True}}),
    "grpo-gke:cluster.headMachineType": ("dev", {}, {"cluster": {"headMachineType": "c2-standard-30"}}),
    "grpo-gke:cluster.authorizedNetworks": ("dev", {}, {"cluster": {"authorizedNetworks": ["203.0.113.0/24"]}}),
    "grpo-gke:cluster.dnsEndpoint": ("dev", {}, {"cluster": {"dnsEndpoint": True}}),
    "grpo-gke:cluster.secretsKmsKey": (
        "dev",
        {},
        {
            "cluster": {
                "secretsKmsKey": "projects/my-grpo-project/locations/us-central1/keyRings/grpo/cryptoKeys/secrets"
            }
        },
    ),
    "grpo-gke:gpu.type": ("dev", {}, {"gpu": {"type": "b200"}}),
    "grpo-gke:gpu.nodes": ("dev", {}, {"gpu": {"nodes": 2}}),
    "grpo-gke:gpu.provisioning": ("dev", {}, {"gpu": {"provisioning": "on-demand"}}),
    "grpo-gke:gpu.reservation": ("dev", RESERVATION_BASE, {"gpu": {"reservation": "grpo-b"}}),
    "grpo-gke:gpu.capacity": ("dev", {}, {"gpu": {"capacity": ["spot", "on-demand"]}}),
    "grpo-gke:gpu.imageCacheDisk": ("dev", REGISTRY_BASE, {"gpu": {"imageCacheDisk": "verl-cache"}}),
    "grpo-gke:storage.type": ("dev", {}, {"storage": dict(LUSTRE)}),
    "grpo-gke:storage.bucket": ("dev", {}, {"storage": {"bucket": "my-grpo-data"}}),
    "grpo-gke:storage.capacityGib": ("dev", LUSTRE_BASE, {"storage": {"capacityGib": 27000}}),
    "grpo-gke:storage.throughput": ("dev", LUSTRE_BASE, {"storage": {"throughput": 500}}),
    "grpo-gke:storage.keepOnDestroy": ("dev", {}, {"storage": {"keepOnDestroy": False}}),
    "grpo-gke:storage.parked": ("dev", {"storage": {**LUSTRE, "keepOnDestroy": False}}, {"storage": {"parked": True}}),
    "grpo-gke:storage.parkWhenIdle": ("dev", LUSTRE_BASE, {"storage": {"parkWhenIdle": True}}),
    "grpo-gke:network.nodeRange": ("dev", {}, {"network": {"nodeRange": "172.16.0.0/18"}}),
    "grpo-gke:network.podRange": ("dev", {}, {"network": {"podRange": "10.8.0.0/14"}}),
    "grpo-gke:network.serviceRange": ("dev", {}, {"network": {"serviceRange": "10.0.48.0/20"}}),
    "grpo-gke:network.gvnicRange": ("dev", {}, {"network": {"gvnicRange": "172.17.0.0/18"}}),
    "grpo-gke:network.rdmaRange": ("dev", {}, {"network": {"rdmaRange": "172.18.0.0/18"}}),
    "grpo-gke:network.lustreRange": ("dev", LUSTRE_BASE, {"network": {"lustreRange": "10.0.68.0/22"}}),
    "grpo-gke:workload.framework": ("dev", {}, {"workload": {"framework": "nemo-rl", "dataset": "deepscaler"}}),
    "grpo-gke:workload.model": ("dev", {}, {"workload": {"model": "Qwen/Qwen2.5-1.5B-Instruct"}}),
    "grpo-gke:workload.dataset": ("dev", {}, {"workload": {"framework": "nemo-rl", "dataset": "deepscaler"}}),
    "grpo-gke:workload.image": ("dev", IMAGE_BASE, {"workload": {"image": "example.com/verl:other"}}),
    "grpo-gke:workload.rayVersion": ("dev", IMAGE_BASE, {"workload": {"rayVersion": "2.50.0"}}),
    "grpo-gke:workload.nemoRlRelease": (
        "nemo-rl-standard-b200",
        NEMO_IMAGE_BASE,
        {"workload": {"nemoRlRelease": "v0.6.0"}},
    ),
    "grpo-gke:workload.modelSizeB": ("dev", {}, {"workload": {"modelSizeB": 1}}),
    "grpo-gke:workload.extraEnv": ("dev", {}, {"workload": {"extraEnv": {"NCCL_DEBUG": "INFO"}}}),
    "grpo-gke:workload.cudaVersion": ("dev", IMAGE_BASE, {"workload": {"cudaVersion": "12.8"}}),
    "grpo-gke:workload.memoryCheck": ("dev", {}, {"workload": {"memoryCheck": False}}),
    "grpo-gke:workload.imageSource": ("dev", {}, {"workload": {"imageSource": "direct"}}),
    "grpo-gke:workload.ngcApiKeySecretVersion": (
        "nemo-rl-standard-b200",
        NVCR_REGISTRY_BASE,
        {"workload": {"ngcApiKeySecretVersion": NGC_VERSION}},
    ),
    "grpo-gke:grpo.promptsPerStep": ("dev", {}, {"grpo": {"promptsPerStep": 128}}),
    "grpo-gke:grpo.generationsPerPrompt": ("dev", {}, {"grpo": {"generationsPerPrompt": 16}}),
    "grpo-gke:grpo.rolloutTensorParallel": ("dev", {}, {"grpo": {"rolloutTensorParallel": 2}}),
    "grpo-gke:grpo.learningRate": ("dev", {}, {"grpo": {"learningRate": 2e-6}}),
    "grpo-gke:grpo.maxPromptLength": ("dev", {}, {"grpo": {"maxPromptLength": 1024}}),
    "grpo-gke:grpo.maxResponseLength": ("dev", {}, {"grpo": {"maxResponseLength": 2048}}),
    "grpo-gke:grpo.miniBatchSize": ("dev", {}, {"grpo": {"miniBatchSize": 64}}),
    "grpo-gke:grpo.microBatchSizePerGpu": ("dev", {}, {"grpo": {"microBatchSizePerGpu": 2}}),
    "grpo-gke:grpo.klLossCoef": ("dev", {}, {"grpo": {"klLossCoef": 0.01}}),
    "grpo-gke:grpo.gpuMemoryUtilization": ("dev", {}, {"grpo": {"gpuMemoryUtilization": 0.7}}),
    "grpo-gke:grpo.cpuOffload": ("dev", {}, {"grpo": {"cpuOffload": True}}),
    "grpo-gke:grpo.epochs": ("dev", {}, {"grpo": {"epochs": 2}}),
    "grpo-gke:grpo.maxSteps": ("dev", {}, {"grpo": {"maxSteps": 100}}),
    "grpo-gke:grpo.saveEvery": ("dev", {}, {"grpo": {"saveEvery": 20}}),
    "grpo-gke:grpo.validateEvery": ("dev", {}, {"grpo": {"validateEvery": 20}}),
    "grpo-gke:grpo.keepCheckpoints": ("dev", {}, {"grpo": {"keepCheckpoints": 3}}),
    "grpo-gke:job.submit": ("dev", {}, {"job": {"submit": False}}),
    "grpo-gke:job.readyTimeoutSeconds": ("dev", {}, {"job": {"readyTimeoutSeconds": 3600}}),
    "grpo-gke:job.runGeneration": ("dev", {}, {"job": {"runGeneration": 1}}),
    "grpo-gke:job.preflight": ("dev", {}, {"job": {"preflight": "off"}}),
    "grpo-gke:job.cordonBadNodes": ("dev", {}, {"job": {"cordonBadNodes": True}}),
    "grpo-gke:job.recover": ("dev", {}, {"job": {"recover": False}}),
    "grpo-gke:job.maxRecoveries": ("dev", {}, {"job": {"maxRecoveries": 5}}),
    "grpo-gke:job.idleMinutes": ("dev", {}, {"job": {"idleMinutes": 30}}),
    "grpo-gke:job.maxCost": ("dev", {}, {"job": {"maxCost": 500}}),
    "grpo-gke:job.maxGpuHours": ("dev", {}, {"job": {"maxGpuHours": 100}}),
    "grpo-gke:hfToken": ("dev", {}, {"hfToken": "hf_offline_example"}),
    "grpo-gke:secretEnv": ("dev", {}, {"secretEnv": {"WANDB_API_KEY": "offline-example"}}),
    "grpo-gke:wandbApiKey": ("dev", {}, {"wandbApiKey": "wandb-offline-example"}),
    "grpo-gke:tracking.wandbProject": ("dev", WANDB_BASE, {"tracking": {"wandbProject": "my-grpo"}}),
    "grpo-gke:tracking.wandbEntity": ("dev", WANDB_BASE, {"tracking": {"wandbEntity": "my-team"}}),
    "grpo-gke:pricing.reservationHourly": ("dev", RESERVATION_BASE, {"pricing": {"reservationHourly": 61.5}}),
}
"""Config key -> (base stack, sections merged into it first, the change): one valid change per key."""

TOP_LEVEL_KEYS = {"zone", "hfToken", "wandbApiKey"}
"""Keys that are plain values, not sections."""


def _merged(values: dict[str, str], changes: dict) -> dict[str, str]:
    values = dict(values)
    for section, change in changes.items():
        key = f"{PROJECT_NAMESPACE}:{section}"
        if section in TOP_LEVEL_KEYS:
            values[key] = change
        else:
            values[key] = json.dumps(json.loads(values.get(key, "{}")) | change)
    return values


def plan_for(values: dict[str, str]) -> dict:
    """The plan.json document of a mocked run."""
    secret = [
        key
        for key in (f"{PROJECT_NAMESPACE}:{name}" for name in ("hfToken", "wandbApiKey", "secretEnv"))
        if key in values
    ]
    return json.loads(render_plan_json(recorded_run(values, secret)))


_PLANS: dict[str, dict] = {}


def cached_plan(values: dict[str, str]) -> dict:
    """plan_for, once per distinct set of values in a session."""
    key = json.dumps(values, sort_keys=True)
    if key not in _PLANS:
        _PLANS[key] = plan_for(values)
    return _PLANS[key]


def readme_effects() -> dict[str, str]:
    """Config key -> the README config table's last column."""
    table = (
        (REPO_ROOT / "docs" / "configuration.md").read_text().split("<!-- config-reference", 1)[1].split("\n## ", 1)[0]
    )
    rows = re.findall(r"^\| `(grpo-gke:[A-Za-z.]+)` \|.*\| ([^|]+) \|$", table, flags=re.M)
    return dict(rows)


# --- the classification, on two small hand-made plans -------------------------------------------

STACK = "urn:pulumi:s::grpo-gke::"
CLUSTER = STACK + "gcp:container/cluster:Cluster::c"
POOL = STACK + "gcp:container/nodePool:NodePool::pool"
SUBNET = STACK + "gcp:compute/subnetwork:Subnetwork::sub"
BUCKET = STACK + "gcp:storage/bucket:Bucket::data"
PROVIDER = STACK + "pulumi:providers:kubernetes::gke"
RAY = STACK + "kubernetes:ray.io/v1:RayCluster::grpo"
JOB = STACK + "pulumi-python:dynamic:Resource::job"


def _resource(urn: str, inputs: dict, dependencies: dict | None = None, **options) -> dict:
    return {
        "urn": urn,
        "type": urn.split("::")[2],
        "name": urn.rsplit("::", 1)[1],
        "custom": True,
        "provider": options.pop("provider", ""),
        "dependsOn": sorted({u for urns in (dependencies or {}).values() for u in urns}),
        "propertyDependencies": dependencies or {},
        "deleteBeforeReplace": options.pop("deleteBeforeReplace", False),
        "replaceOnChanges": options.pop("replaceOnChanges", []),
        "ignoreChanges": [],
        "protect": False,
        "retainOnDelete": options.pop("retainOnDelete", False),
        "inputs": inputs,
    }


def small_plan(
    network: str = "net",
    spot: bool = True,
    machine: str = "a3-ultragpu-8g",
    subnet: str = "10.0.0.0/20",
    image: str = "verl:1",
    run: str = "s-1",
    ready_timeout: int = 1800,
    cluster_identifier: str | None = None,
    bucket: bool = True,
) -> dict:
    """A stack of a cluster, a GPU pool, a subnet, a bucket, the Kubernetes provider, a RayCluster and the job."""
    provider_inputs = {"kubeconfig": "[secret]"}
    if cluster_identifier is not None:
        provider_inputs["clusterIdentifier"] = cluster_identifier
    resources = [
        _resource(CLUSTER, {"name": "c", "network": network}),
        _resource(
            POOL,
            {"name": "gpu", "cluster": "c", "nodeConfig": {"machineType": machine, "spot": spot}},
            {"cluster": [CLUSTER]},
        ),
        _resource(SUBNET, {"name": "sub", "ipCidrRange": subnet}),
        _resource(PROVIDER, provider_inputs, {"kubeconfig": [CLUSTER]}),
        _resource(
            RAY,
            {"metadata": {"name": "grpo", "namespace": "grpo"}, "spec": {"image": image}},
            provider=PROVIDER,
            replaceOnChanges=["spec"],
            deleteBeforeReplace=True,
        ),
        _resource(
            JOB,
            {"cluster_uid": "uid", "ready_timeout_seconds": ready_timeout, "submission": {"metadata": {"run": run}}},
            {"cluster_uid": [RAY]},
        ),
    ]
    if bucket:
        resources.append(_resource(BUCKET, {"name": "data"}, retainOnDelete=True))
    return {"project": "grpo-gke", "stack": "s", "resources": resources, "outputs": {}}


def actions(blast) -> dict[str, tuple[str, bool]]:
    """Logical name -> (action, delete first)."""
    return {change.name: (change.action, change.delete_first) for change in blast.changes}


def test_a_forcenew_input_replaces_the_pool_and_another_input_updates_it_in_place():
    replaced = blast_radius(small_plan(), small_plan(spot=False))
    assert actions(replaced) == {"pool": ("replace", False)}
    assert replaced.changes[0].reason == "nodeConfig.spot"
    assert actions(blast_radius(small_plan(), small_plan(machine="a4-highgpu-8g"))) == {"pool": ("update", False)}


def test_a_replaced_cluster_replaces_its_pools_the_provider_and_every_object_and_restarts_the_job():
    blast = blast_radius(small_plan(), small_plan(network="other"))
    assert actions(blast) == {
        "c": ("replace", False),
        "pool": ("replace", False),
        "gke": ("replace", False),
        "grpo": ("replace", True),
        "job": ("update", False),
    }
    reasons = {change.name: change.reason for change in blast.changes}
    assert reasons["pool"] == "cluster comes from c, which is replaced"
    assert reasons["grpo"] == "its provider gke is replaced"
    assert blast.job_restarts
    assert blast.verdict.startswith("the RayCluster grpo is replaced: pulumi up submits run s-1 again")


def test_an_unchanged_cluster_identifier_keeps_the_provider_and_its_objects():
    blast = blast_radius(small_plan(cluster_identifier="c-1"), small_plan(network="other", cluster_identifier="c-1"))
    assert actions(blast) == {"c": ("replace", False), "pool": ("replace", False)}
    assert not blast.job_restarts
    changed = blast_radius(small_plan(cluster_identifier="c-1"), small_plan(cluster_identifier="c-2"))
    assert actions(changed)["gke"] == ("replace", False) and changed.job_restarts


def test_a_changed_run_restarts_the_job_and_an_unwatched_input_changes_nothing():
    blast = blast_radius(small_plan(), small_plan(run="s-2"))
    assert actions(blast) == {"job": ("update", False)}
    assert blast.job_restarts and blast.verdict == "the run changes (s-1 -> s-2): pulumi up stops s-1 and submits s-2"
    unwatched = blast_radius(small_plan(), small_plan(ready_timeout=60))
    assert unwatched.changes == () and not unwatched.job_restarts


def test_a_ray_cluster_spec_change_replaces_it_delete_first():
    blast = blast_radius(small_plan(), small_plan(image="verl:2"))
    assert actions(blast) == {"grpo": ("replace", True), "job": ("update", False)}
    assert blast.job_restarts


def test_a_ray_cluster_metadata_change_replaces_it_too_and_its_ready_timeout_changes_nothing():
    """The stack's RayCluster replaces on any input ("*"): no in-place Server-Side Apply over the guardian's atomic
    worker list (issue 19 item 4); the ready timeout is customTimeouts, no input, so the blast radius has nothing."""
    plan = cached_plan(values_of("dev"))
    changed = json.loads(json.dumps(plan))
    ray = next(resource for resource in changed["resources"] if resource["type"] == RAY_TYPE)
    assert ray["replaceOnChanges"] == ["*"]
    ray["inputs"]["metadata"]["labels"]["example.com/release"] = "2"
    blast = blast_radius(plan, changed)
    assert [(c.type, c.action, c.delete_first) for c in blast.changes if c.type == RAY_TYPE] == [
        (RAY_TYPE, "replace", True)
    ]
    assert blast.job_restarts
    later = cached_plan(_merged(values_of("dev"), {"job": {"readyTimeoutSeconds": 3600}}))
    assert [c.type for c in blast_radius(plan, later).changes if c.type == RAY_TYPE] == []


def test_a_subnet_that_only_grows_updates_in_place_and_one_that_shrinks_or_moves_is_replaced():
    assert actions(blast_radius(small_plan(), small_plan(subnet="10.0.0.0/19"))) == {"sub": ("update", False)}
    assert actions(blast_radius(small_plan(), small_plan(subnet="10.0.0.0/21"))) == {"sub": ("replace", False)}
    assert actions(blast_radius(small_plan(), small_plan(subnet="10.9.0.0/20"))) == {"sub": ("replace", False)}


def test_a_retained_bucket_that_leaves_the_program_stays_in_the_cloud():
    blast = blast_radius(small_plan(), small_plan(bucket=False))
    assert actions(blast) == {"data": ("delete", False)}
    assert "retainOnDelete: the old one stays in the cloud" in blast.changes[0].reason
    assert effect(blast) == "keeps the old bucket in the cloud; the run goes on"


def test_a_plan_written_before_property_dependencies_cascades_through_depends_on():
    earlier = small_plan()
    for resource in earlier["resources"]:
        del resource["propertyDependencies"]
    later = small_plan(network="other")
    for resource in later["resources"]:
        del resource["propertyDependencies"]
    assert actions(blast_radius(earlier, later))["pool"] == ("replace", False)


def test_a_protected_resource_that_would_be_replaced_says_pulumi_up_refuses():
    earlier, later = small_plan(), small_plan(spot=False)
    for resource in earlier["resources"]:
        resource["protect"] = resource["name"] == "pool"
    assert blast_radius(earlier, later).changes[0].reason == "nodeConfig.spot; it is protected, so pulumi up refuses"


def test_the_replaced_gpu_pool_takes_the_nodes_of_a_run_that_is_not_resubmitted():
    blast = blast_radius(small_plan(), small_plan(spot=False))
    assert not blast.job_restarts and blast.job == "the run loses its GPU nodes"


def test_the_report_groups_one_line_per_resource_and_ends_with_the_verdict():
    text = render(blast_radius(small_plan(), small_plan(image="verl:2", machine="a4-highgpu-8g")), Path("old"))
    assert text == (
        "Against old/plan.json, pulumi up on stack 's' would: 0 to create, 2 to update, 1 to replace, 0 to delete\n"
        "update in place:\n"
        "  job (pulumi-python:dynamic:Resource): cluster_uid comes from grpo, which is replaced\n"
        "  pool (gcp:container/nodePool:NodePool): nodeConfig.machineType\n"
        "replace:\n"
        "  grpo (kubernetes:ray.io/v1:RayCluster) (delete first): spec.image\n"
        "the running GRPO job restarts: yes, because the RayCluster grpo is replaced: pulumi up submits run s-1"
        " again, which resumes from its checkpoints"
    )


def test_changed_paths_compare_objects_by_key_and_lists_of_objects_by_element():
    old = {"a": {"b": 1, "c": [1, 2]}, "d": [{"e": 1}, {"e": 2}], "f": [{"g": 1}]}
    new = {"a": {"b": 2, "c": [1, 3]}, "d": [{"e": 1}, {"e": 3}], "f": [{"g": 1}, {"g": 2}], "h": 1}
    assert changed_paths(old, new) == ["a.b", "a.c", "d.e", "f", "h"]


# --- the ForceNew table covers what the stack registers -----------------------------------------


def test_the_forcenew_table_covers_exactly_the_types_the_stack_registers(infra_run):
    registered = set()
    for combination in COMBINATIONS:
        registered |= {r.type for r in infra_run(*combination).resources if r.custom}
    with_token = recorded_run(combination_values("standard", "h200", "gcs") | {f"{PROJECT_NAMESPACE}:hfToken": "hf_x"})
    registered |= {r.type for r in with_token.resources if r.custom}
    key = "projects/my-grpo-project/locations/us-central1/keyRings/grpo/cryptoKeys/secrets"
    with_kms_key = recorded_run(combination_values("standard", "h200", "gcs", cluster={"secretsKmsKey": key}))
    registered |= {r.type for r in with_kms_key.resources if r.custom}
    with_ladder = recorded_run(combination_values("standard", "h200", "gcs", gpu={"capacity": ["spot", "on-demand"]}))
    registered |= {r.type for r in with_ladder.resources if r.custom}
    with_registry = recorded_run(combination_values("standard", "h200", "gcs", workload={"imageSource": "registry"}))
    registered |= {r.type for r in with_registry.resources if r.custom}
    with_ngc_key = recorded_run(
        values_of("nemo-rl-standard-b200", workload={"imageSource": "registry", "ngcApiKeySecretVersion": NGC_VERSION})
    )
    registered |= {r.type for r in with_ngc_key.resources if r.custom}
    assert registered - set(SPECIAL_TYPES) == set(FORCE_NEW_INPUTS)


# --- the command as the user meets it -----------------------------------------------------------


def _plan_command(directory: Path, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "plan", *arguments],
        cwd=directory,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def earlier_plan(tmp_path_factory: pytest.TempPathFactory, shipped_plan_command) -> Path:
    """A directory holding the dev stack file and, in before/, the plan.json its plan command wrote."""
    directory = tmp_path_factory.mktemp("against")
    shutil.copy(shipped_stack_file("dev"), directory / "Pulumi.dev.yaml")
    dev = shipped_plan_command("dev")
    assert dev.result.returncode == 0, dev.result.stderr
    (directory / "before").mkdir()
    shutil.copy(dev.out / "plan.json", directory / "before" / "plan.json")
    return directory


def test_plan_against_an_earlier_plan_prints_the_blast_radius_and_the_job_verdict(earlier_plan):
    text = (earlier_plan / "Pulumi.dev.yaml").read_text().replace("provisioning: spot", "provisioning: on-demand")
    (earlier_plan / "Pulumi.dev.yaml").write_text(text)
    try:
        result = _plan_command(earlier_plan, "--config", "Pulumi.dev.yaml", "--out", "after", "--against", "before")
    finally:
        shutil.copy(shipped_stack_file("dev"), earlier_plan / "Pulumi.dev.yaml")
    assert (result.returncode, result.stderr) == (0, "")  # the warning is in the Security block, once
    plan, report = re.split(r"Wrote [^\n]* to after\n", result.stdout)
    assert plan.startswith("Plan of stack 'dev': ")
    assert report == (
        "Against before/plan.json, pulumi up on stack 'dev' would:"
        " 0 to create, 3 to update, 1 to replace, 0 to delete\n"
        "update in place:\n"
        # the replaced pool's MIGs (its rung too) go into their ConfigMap alone; the guardian rolls for its settings'
        # provisioning, in place, never replaced for the pool
        "  grpo-gpu-instance-groups (kubernetes:core/v1:ConfigMap): data.groups.json\n"
        "  grpo-guardian (kubernetes:apps/v1:Deployment): spec.template.metadata.annotations.grpo-gke/settings-sha256\n"
        "  grpo-guardian-settings (kubernetes:core/v1:ConfigMap): data.settings.json\n"
        "replace:\n"
        "  grpo-dev-gpu (gcp:container/nodePool:NodePool) (delete first): nodeConfig.spot\n"
        "the running GRPO job restarts: no, because neither the run (dev-b8ddd27a63) nor the RayCluster changes;"
        " but the replaced node pool grpo-dev-gpu takes away the nodes the Ray pods run on\n"
    )


def test_plan_against_the_same_config_changes_nothing(earlier_plan):
    result = _plan_command(earlier_plan, "--config", "Pulumi.dev.yaml", "--out", "again", "--against", "before")
    assert (result.returncode, result.stderr) == (0, "")  # the warning is in the Security block, once
    assert result.stdout.endswith(
        "Against before/plan.json, pulumi up on stack 'dev' would:"
        " 0 to create, 0 to update, 0 to replace, 0 to delete\n"
        "the running GRPO job restarts: no, because neither the run (dev-b8ddd27a63) nor the RayCluster changes\n"
    )


@pytest.mark.parametrize(
    ("against", "message"),
    [
        ("missing", "error: --against missing: no such directory\n"),
        (
            "empty",
            "error: --against empty: holds no plan.json (write one with make plan, or .venv/bin/python -m plan --out DIR)\n",
        ),
        ("other", "error: --against other: plan.json is a plan of stack 'prod', not of 'dev'\n"),
    ],
)
def test_an_earlier_plan_that_cannot_be_compared_is_one_line_and_exit_2(earlier_plan, against, message):
    (earlier_plan / "empty").mkdir(exist_ok=True)
    (earlier_plan / "other").mkdir(exist_ok=True)
    (earlier_plan / "other" / "plan.json").write_text(json.dumps({"stack": "prod", "resources": []}))
    result = _plan_command(earlier_plan, "--config", "Pulumi.dev.yaml", "--out", "never", "--against", against)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", message)
    assert not (earlier_plan / "never").exists()


# --- the README says what changing each key does ------------------------------------------------


def test_every_config_key_has_a_change_and_a_documented_effect():
    from tests.test_readme import config_keys

    assert set(KEY_CHANGES) == config_keys() == set(readme_effects())


@pytest.mark.parametrize("key", sorted(KEY_CHANGES))
def test_the_readme_says_what_changing_each_key_does(key):
    stack, base, change = KEY_CHANGES[key]
    values = _merged(values_of(stack), base)
    blast = blast_radius(cached_plan(values), cached_plan(_merged(values, change)))
    assert effect(blast) == readme_effects()[key]


# --- the capacity ladder: turning it on, adding and removing a rung -----------------------------

INSTANCE_GROUPS = "grpo-gpu-instance-groups"
"""The ConfigMap of the GPU pools' MIGs (workloads/instance_groups.py)."""

LADDER_ON = {"gpu": {"capacity": ["spot", "on-demand"]}}
"""The dev stack (spot) with an on-demand rung behind its spot pool."""


def _ladder_blast(before: dict, after: dict):
    values = values_of("dev")
    return blast_radius(cached_plan(_merged(values, before)), cached_plan(_merged(values, after)))


def test_turning_the_ladder_on_replaces_the_raycluster_once_and_restarts_the_run():
    blast = _ladder_blast({}, LADDER_ON)
    assert sorted(c.name for c in blast.of("create")) == ["grpo-gpu-ladder", "grpo-test-gpu-on-demand"]
    assert [c.name for c in blast.of("replace")] == ["grpo"]
    assert not blast.of("delete")
    updated = {c.name: c.reason for c in blast.of("update")}
    assert "grpo-test-gpu" in updated  # the spot pool gains the class label and taint in place
    assert blast.job_restarts


def test_adding_a_rung_creates_only_its_pool_and_updates_the_class_without_touching_the_run():
    blast = _ladder_blast(LADDER_ON, {"gpu": {"capacity": ["spot", "on-demand", "flex-start"]}})
    assert [(c.name, c.type) for c in blast.of("create")] == [
        ("grpo-test-gpu-flex-start", "gcp:container/nodePool:NodePool")
    ]
    assert [(c.name, c.type, c.reason) for c in blast.of("update")] == [
        # the new pool's MIGs (its instanceGroupUrls, unknown until it exists) reach the gate, the guardian and
        # status through this ConfigMap alone: the guardian is neither replaced nor rolled
        (INSTANCE_GROUPS, "kubernetes:core/v1:ConfigMap", "data.groups.json"),
        ("grpo-gpu-ladder", "kubernetes:cloud.google.com/v1:ComputeClass", "spec.priorities"),
    ]
    assert not blast.of("replace") and not blast.of("delete")
    assert (blast.job_restarts, blast.job) == (False, "the run goes on")


def test_removing_a_rung_deletes_only_its_pool_last_and_says_what_happens_to_the_run():
    blast = _ladder_blast({"gpu": {"capacity": ["spot", "on-demand", "flex-start"]}}, LADDER_ON)
    assert [(c.name, c.type) for c in blast.of("delete")] == [
        ("grpo-test-gpu-flex-start", "gcp:container/nodePool:NodePool")
    ]
    assert [(c.name, c.type) for c in blast.of("update")] == [
        (INSTANCE_GROUPS, "kubernetes:core/v1:ConfigMap"),  # the pool's MIGs leave it; the guardian stays as it is
        ("grpo-gpu-ladder", "kubernetes:cloud.google.com/v1:ComputeClass"),
    ]
    assert not blast.of("replace") and not blast.of("create")
    assert not blast.job_restarts
    assert blast.job == "the run loses its GPU nodes"
    assert blast.verdict.endswith(
        "; the deleted node pool grpo-test-gpu-flex-start goes last, once the ComputeClass no longer names it: GPU"
        " workers running there lose their nodes, and the guardian resubmits the run from its last checkpoint on"
        " the rungs that remain"
    )


@pytest.mark.parametrize(
    "change", [{"gpu": {"provisioning": "on-demand"}}, {"network": {"rdmaRange": "172.18.0.0/18"}}]
)
def test_a_replaced_gpu_pool_updates_only_the_instance_group_list_and_leaves_the_guardian_deployment(change):
    """A GPU pool replaced has new MIGs (its instanceGroupUrls, unknown until it exists): they go into the ConfigMap
    the guardian re-reads (workloads/instance_groups.py), updated in place, and into nothing of the guardian's
    Deployment, which is never replaced (delete first) for it: what its settings hold may update it in place."""
    values = values_of("dev")
    blast = blast_radius(cached_plan(values), cached_plan(_merged(values, change)))
    assert ("grpo-test-gpu", "replace") in {(c.name, c.action) for c in blast.changes}
    assert [c.action for c in blast.changes if c.name == INSTANCE_GROUPS] == ["update"]
    deployment = [c for c in blast.changes if c.type == "kubernetes:apps/v1:Deployment"]
    assert all(c.action == "update" and "grpo-test-gpu" not in c.reason for c in deployment), deployment


# --- workload.imageSource: turning the registry on and off --------------------------------------

REGISTRY_TYPES = (
    "gcp:artifactregistry/repository:Repository",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_turning_the_registry_on_and_off_keeps_the_cluster_and_every_pool(stack):
    """Image streaming updates the cluster and the pools in place (gcfsConfig and nodePoolDefaults are not
    ForceNew), the repository, its grant and the nodes' streaming role come and go, and the pods' new image replaces
    the RayCluster."""
    registry = values_of(stack)  # images are streamed by default (issue 33 item 4)
    direct = _merged(registry, {"workload": {"imageSource": "direct"}})
    assert pulls_through_registry(cached_plan(registry)) and not pulls_through_registry(cached_plan(direct))
    for old, new, repositories in ((direct, registry, "create"), (registry, direct, "delete")):
        blast = blast_radius(cached_plan(old), cached_plan(new))
        by_type: dict[str, set[str]] = {}
        for change in blast.changes:
            by_type.setdefault(change.type, set()).add(change.action)
        assert by_type.get("gcp:container/cluster:Cluster", {"update"}) == {"update"}
        assert by_type.get("gcp:container/nodePool:NodePool", {"update"}) == {"update"}
        for type_ in REGISTRY_TYPES:
            assert by_type[type_] == {repositories}
        # the nodes' Service Usage Consumer on the project, which image streaming asks of a custom node account
        # (core/facts/gcp.py STREAMING_CONSUMER_ROLE), comes and goes with the repositories
        assert by_type["gcp:projects/iAMMember:IAMMember"] == {repositories}
        assert by_type[RAY_TYPE] == {"replace"}
        standard = json.loads(direct[f"{PROJECT_NAMESPACE}:cluster"]).get("mode", "standard") == "standard"
        changed = {c.name: c.reason for c in blast.changes if c.type == "gcp:container/nodePool:NodePool"}
        assert changed == ({n: "nodeConfig.gcfsConfig" for n in changed} if standard else {})
        assert (len(changed) >= 2) is standard


# --- images streamed by default: a stack deployed pulling directly is warned ---------------------

UNSET_NOW_REGISTRY = (
    "warning: grpo-gke:workload.imageSource is unset, which means 'registry' for verlai/verl:vllm024.dev2 (images are"
    " streamed by default), and the earlier plan before/plan.json pulled it directly: pulumi up creates the remote"
    " repository and replaces the RayCluster, and the run restarts from its last checkpoint; to keep pulling"
    " directly, run `pulumi config set --path grpo-gke:workload.imageSource direct` before pulumi up\n"
)
"""The warning of `make plan AGAINST=` on the dev stack, its key unset, against a plan that pulled directly."""

DIRECT_TO_REGISTRY_REPORT = (
    "Against before/plan.json, pulumi up on stack 'dev' would: 5 to create, 5 to update, 2 to replace, 0 to delete\n"
    "create:\n"
    "  artifactregistry (gcp:projects/service:Service): new\n"
    "  containerfilesystem (gcp:projects/service:Service): new\n"
    "  grpo-dev-dockerhub (gcp:artifactregistry/repository:Repository): new\n"
    "  grpo-dev-dockerhub-reader (gcp:artifactregistry/repositoryIamMember:RepositoryIamMember): new\n"
    "  grpo-dev-node-sa-serviceusage-serviceUsageConsumer (gcp:projects/iAMMember:IAMMember): new\n"
    "update in place:\n"
    "  grpo-dev (gcp:container/cluster:Cluster): nodePoolDefaults\n"
    "  grpo-dev-gpu (gcp:container/nodePool:NodePool): nodeConfig.gcfsConfig\n"
    "  grpo-dev-ray-head (gcp:container/nodePool:NodePool): nodeConfig.gcfsConfig\n"
    "  grpo-guardian (kubernetes:apps/v1:Deployment): spec.template.spec.containers.image\n"
    "  grpo-job-submission (pulumi-python:dynamic:Resource): cluster_uid comes from grpo, which is replaced\n"
    "replace:\n"
    "  grpo (kubernetes:ray.io/v1:RayCluster) (delete first): spec.headGroupSpec.template.spec.containers.image,"
    " spec.workerGroupSpecs.template.spec.containers.image\n"
    "  grpo-staging (kubernetes:batch/v1:Job) (delete first): spec.template.spec.containers.image\n"
    "the running GRPO job restarts: yes, because the RayCluster grpo is replaced: pulumi up submits run"
    " dev-b8ddd27a63 again, which resumes from its checkpoints\n"
)
"""The blast radius of the dev stack going from pulling directly to its remote repository, streamed."""


@pytest.fixture(scope="module")
def direct_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding, in before/, the plan the dev stack's plan command wrote with `imageSource: direct`: a
    stack deployed pulling directly, as every stack that left the key unset was before images streamed by default."""
    directory = tmp_path_factory.mktemp("direct")
    text = shipped_stack_file("dev").read_text()
    assert "    dataset: gsm8k\n" in text
    (directory / "Pulumi.dev.yaml").write_text(
        text.replace("dataset: gsm8k\n", "dataset: gsm8k\n    imageSource: direct\n")
    )
    result = _plan_command(directory, "--config", "Pulumi.dev.yaml", "--out", "before")
    assert result.returncode == 0, result.stderr
    assert not pulls_through_registry(json.loads((directory / "before" / "plan.json").read_text()))
    return directory


@pytest.mark.parametrize(
    ("source", "warning"),
    [
        pytest.param(None, UNSET_NOW_REGISTRY, id="unset"),
        pytest.param("registry", "", id="set-to-registry"),  # the user asked for it: the blast radius alone
    ],
)
def test_a_stack_planned_direct_is_warned_when_its_unset_source_now_streams(direct_plan, source, warning):
    """Images are streamed by default (issue 33 item 4): `make plan AGAINST=` on a stack whose earlier plan pulled
    directly and whose key is unset warns, with what pulumi up does and how to keep `direct`; the blast radius
    says the RayCluster is replaced and the run restarts. The command's whole output, as the user meets it."""
    text = shipped_stack_file("dev").read_text()
    if source is not None:
        text = text.replace("dataset: gsm8k\n", f"dataset: gsm8k\n    imageSource: {source}\n")
    (direct_plan / "Pulumi.dev.yaml").write_text(text)
    result = _plan_command(
        direct_plan, "--config", "Pulumi.dev.yaml", "--out", f"after-{source or 'unset'}", "--against", "before"
    )
    assert (result.returncode, result.stderr) == (0, warning)
    plan, report = re.split(r"Wrote [^\n]* to after-[a-z]+\n", result.stdout)
    assert plan.startswith("Plan of stack 'dev': ")
    assert "  image us-central1-docker.pkg.dev/my-grpo-project/grpo-dev-dockerhub/verlai/verl:vllm024.dev2" in plan
    assert report == DIRECT_TO_REGISTRY_REPORT


def test_the_default_source_warning_is_only_for_an_unset_key_that_newly_streams():
    """Set, either value is what the user asked for; a stack already streaming, or one whose image the stack cannot
    proxy (pulled directly, unset), changes nothing of its source: no warning."""
    dev = values_of("dev")
    direct = cached_plan(_merged(dev, {"workload": {"imageSource": "direct"}}))
    registry = cached_plan(dev)
    other = cached_plan(_merged(dev, IMAGE_BASE))
    image, against = "verlai/verl:vllm024.dev2", Path("before")
    assert default_image_source_warning(direct, registry, None, image, against) == UNSET_NOW_REGISTRY.removeprefix(
        "warning: "
    ).removesuffix("\n")
    assert default_image_source_warning(direct, registry, "registry", image, against) is None
    assert default_image_source_warning(direct, direct, "direct", image, against) is None
    assert default_image_source_warning(registry, registry, None, image, against) is None
    assert default_image_source_warning(direct, other, None, "example.com/verl:custom", against) is None


# --- workload.ngcApiKeySecretVersion: the nvcr.io repository's credentials on and off ------------

SECRET_GRANT_TYPE = "gcp:secretmanager/secretIamMember:SecretIamMember"


def test_turning_the_ngc_key_on_off_or_to_another_version_replaces_the_nvcr_repository_and_the_run_goes_on():
    """upstream_credentials is ForceNew (terraform-provider-google artifactregistry
    resource_artifact_registry_repository.go, core/facts/changes.py): the repository is replaced (delete first:
    its name is fixed), its cached image with it, and its reader grant follows; the secret's grant comes and goes
    with the key (a new version of the same secret keeps it); the pods' image path, and so the RayCluster, the
    cluster and the pools, stay."""
    without = _merged(values_of("nemo-rl-standard-b200"), NVCR_REGISTRY_BASE)
    with_key = _merged(without, {"workload": {"ngcApiKeySecretVersion": NGC_VERSION}})
    rotated = _merged(without, {"workload": {"ngcApiKeySecretVersion": NGC_VERSION[:-1] + "2"}})
    for old, new, grant in ((without, with_key, "create"), (with_key, without, "delete"), (with_key, rotated, None)):
        blast = blast_radius(cached_plan(old), cached_plan(new))
        changes = {(c.type, c.name): (c.action, c.delete_first, c.reason) for c in blast.changes}
        action, delete_first, reason = changes.pop(("gcp:artifactregistry/repository:Repository", "grpo-test-nvcr"))
        assert (action, delete_first) == ("replace", True)
        assert reason.startswith("remoteRepositoryConfig.upstreamCredentials"), reason
        assert (
            changes.pop(("gcp:artifactregistry/repositoryIamMember:RepositoryIamMember", "grpo-test-nvcr-reader"))[0]
            == "replace"
        )
        # A new version of the same secret leaves the secret's grant as it is.
        assert changes.pop((SECRET_GRANT_TYPE, "grpo-test-nvcr-upstream-key"), (None,))[0] == grant
        # The park guard keeps the last up's config for its delete (jobs/runs/park_guard.py): updated, calls nothing.
        assert changes.pop(("pulumi-python:dynamic:Resource", "park-guard")) == ("update", False, "config")
        assert changes == {}, "nothing else: not the cluster, the pools nor the RayCluster"
        assert effect(blast).endswith("the run goes on")


# --- gpu.imageCacheDisk: the cache on every GPU pool -----------------------------------------------

CACHE_ON = {"gpu": {"imageCacheDisk": "verl-cache"}}
"""The cache of a disk image named verl-cache in the stack's project."""


@pytest.mark.parametrize("ladder", [{}, {"gpu": {"capacity": ["spot", "on-demand"]}}], ids=["one-pool", "ladder"])
def test_the_image_cache_replaces_every_gpu_pool_and_nothing_else(ladder):
    """Turning the cache on, changing its disk image and turning it off each replace every GPU pool (node_config's
    secondary_boot_disks is ForceNew, core/facts/imagecache.py IMAGE_CACHE_REPLACES_POOL) and touch nothing else:
    not the cluster, not the head's pool, not the RayCluster; the run loses its GPU nodes and is resubmitted. Turning
    it on or off also changes the idle bill the guardian records (the disk image bills on with the GPUs at zero), so
    its settings are updated in place and its pod rolls. The replaced pools' new MIGs update only the ConfigMap of
    the instance groups: the guardian's Deployment is never replaced, and rolls only for the idle bill."""
    values = _merged(_merged(values_of("dev"), REGISTRY_BASE), ladder)
    cached = _merged(values, CACHE_ON)
    other = _merged(values, {"gpu": {"imageCacheDisk": "verl-cache-2"}})
    gpu_pools = {"grpo-test-gpu"} | ({"grpo-test-gpu-on-demand"} if ladder else set())
    idle_bill = {
        ("grpo-guardian-settings", "kubernetes:core/v1:ConfigMap", "update", "data.settings.json"),
        ("grpo-guardian", "kubernetes:apps/v1:Deployment", "update",
         "spec.template.metadata.annotations.grpo-gke/settings-sha256"),
    }  # fmt: skip
    new_groups = (INSTANCE_GROUPS, "kubernetes:core/v1:ConfigMap", "update", "data comes from grpo-test-gpu, which is"
                  " replaced")  # fmt: skip
    for old, new, path, guardian in (
        (values, cached, "nodeConfig.secondaryBootDisks", idle_bill | {new_groups}),
        (cached, other, "nodeConfig.secondaryBootDisks.diskImage", {new_groups}),
        (cached, values, "nodeConfig.secondaryBootDisks", idle_bill | {new_groups}),
    ):
        blast = blast_radius(cached_plan(old), cached_plan(new))
        assert {(c.name, c.type, c.action, c.reason) for c in blast.changes} == {
            (pool, "gcp:container/nodePool:NodePool", "replace", path) for pool in gpu_pools
        } | guardian
        assert blast.job == "the run loses its GPU nodes"


# --- parking Managed Lustre: only the instance and what mounts it go, and come back ---------------

UNPARKED = {"storage": {**LUSTRE, "keepOnDestroy": False}}
"""The dev stack on Lustre, not kept on destroy (what parking needs recorded first)."""

PARKED_NAMES = {
    "grpo-test-lustre",
    "grpo",
    "grpo-data",
    "grpo-data-volume",
    "grpo-staging",
    "grpo-staging-script",
    "grpo-guardian",
    "grpo-guardian-code",
    "grpo-guardian-settings",
    "grpo-guardian-nodes",
    "grpo-job-submission",
    "restored-run",
    "park-guard",
}
"""What parking deletes and unparking creates again: the instance, the volume and claim holding its address, the
staging Job, the RayCluster, the run guardian's objects, the run's submission and the import of a parked run."""


def test_parking_deletes_only_the_instance_and_what_mounts_it_and_unparking_brings_them_back():
    values = _merged(values_of("dev"), UNPARKED)
    parked = _merged(values, {"storage": {"parked": True}})
    park = blast_radius(cached_plan(values), cached_plan(parked))
    assert not park.of("create") and not park.of("replace") and not park.of("update")
    assert {change.name for change in park.of("delete")} == PARKED_NAMES
    assert not any(change.type.startswith(("gcp:container/", "gcp:compute/")) for change in park.changes)
    unpark = blast_radius(cached_plan(parked), cached_plan(values))
    assert not unpark.of("delete") and not unpark.of("replace") and not unpark.of("update")
    assert {change.name for change in unpark.of("create")} == PARKED_NAMES
    assert effect(unpark).endswith("; starts the run")


GUARD_REFUSES = (
    "park-guard is deleted first and refuses, stopping pulumi up before the instance, unless"
    " gs://grpo-test-parked-7b5ca2ad/parked/marker.json says the run is parked (python -m jobs park)"
)
"""What the blast radius says of an instance that is not kept on destroy (jobs/runs/park_guard.py)."""


def test_a_replacing_edit_of_an_instance_not_kept_deletes_its_guard_first_which_refuses_unless_parked():
    values = _merged(values_of("dev"), UNPARKED)
    blast = blast_radius(cached_plan(values), cached_plan(_merged(values, {"storage": {"throughput": 500}})))
    replaced = {change.name: change for change in blast.of("replace")}
    assert replaced["grpo-test-lustre"].reason == f"perUnitStorageThroughput; {GUARD_REFUSES}"
    guard = replaced["park-guard"]
    assert guard.delete_first and guard.reason == "instance comes from grpo-test-lustre, which is replaced"


def test_parking_says_the_guard_lets_the_instance_go_only_once_parked_and_a_kept_instance_is_only_forgotten():
    values = _merged(values_of("dev"), UNPARKED)
    park = blast_radius(cached_plan(values), cached_plan(_merged(values, {"storage": {"parked": True}})))
    instance = next(change for change in park.of("delete") if change.name == "grpo-test-lustre")
    assert instance.reason == f"gone from the program; {GUARD_REFUSES}"
    kept = _merged(values_of("dev"), {"storage": LUSTRE})
    edit = blast_radius(cached_plan(kept), cached_plan(_merged(kept, {"storage": {"throughput": 500}})))
    instance = next(change for change in edit.of("replace") if change.name == "grpo-test-lustre")
    assert instance.reason == (
        "perUnitStorageThroughput; retainOnDelete: the old one stays in the cloud, only the state forgets it"
    )
