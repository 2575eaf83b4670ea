"""Mocked runs of the whole program: the in-cluster objects per mode x GPU x storage, their ordering,
the recorded RayCluster against KubeRay's strict schema, and the token kept out of every file."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from core import names
from core.names import GPU_NODE_POOL
from plan.graph import upstream, waits_for
from plan.monitor import RecordingMonitor
from plan.writer import kubernetes_objects, manifests_yaml, summary, write_plan
from tests.conftest import COMBINATIONS, SHIPPED_STACKS, manifests_without_guardian_code, run_values
from tests.workloads.conftest import (
    TEST_SECRET_ENV,
    TEST_TOKEN,
    TEST_WANDB_KEY,
    combination_values,
    mocked_run,
    schema_errors,
)

GOLDEN = Path(__file__).with_name("golden")
RAY = "kubernetes:ray.io/v1:RayCluster"
JOB = "kubernetes:batch/v1:Job"


def _kinds(recording, urns):
    return {urn.split("::")[-2].split("$")[-1] for urn in urns}


def _by_urn(recording):
    return {resource.urn: resource for resource in recording.resources}


@pytest.mark.parametrize(("mode", "gpu", "storage"), COMBINATIONS)
def test_in_cluster_objects_per_combination(mode, gpu, storage):
    recording = mocked_run(mode, gpu, storage)
    kubernetes = [r for r in recording.resources if r.type.startswith("kubernetes:")]
    providers = recording.by_type("pulumi:providers:kubernetes")
    assert len(providers) == 1
    assert all(r.provider.startswith(providers[0].urn) for r in kubernetes)
    by_urn = _by_urn(recording)
    guardian = {r.urn for r in kubernetes if by_urn[r.parent].type == "grpo-gke:jobs:RunGuardian"}
    assert len(guardian) == 8
    assert all(by_urn[r.parent].type.startswith("grpo-gke:workloads:") for r in kubernetes if r.urn not in guardian)
    assert len(recording.by_type("kubernetes:networking.gke.io/v1:GKENetworkParamSet")) == 9
    assert len(recording.by_type("kubernetes:networking.gke.io/v1:Network")) == 9
    daemonset = recording.one("kubernetes:apps/v1:DaemonSet")
    assert daemonset.inputs["metadata"]["namespace"] == ("rdma-system" if mode == "autopilot" else "kube-system")
    assert len(recording.by_type("kubernetes:core/v1:Namespace")) == (2 if mode == "autopilot" else 1)
    volume = recording.one("kubernetes:core/v1:PersistentVolume").inputs["spec"]
    if storage == "gcs":
        bucket = recording.one("gcp:storage/bucket:Bucket").inputs["name"]
        assert volume["csi"]["volumeHandle"] == bucket and "mountOptions" in volume
    else:
        instance = recording.one("gcp:lustre/instance:Instance").inputs["instanceId"]
        assert volume["csi"]["volumeHandle"] == f"my-grpo-project/us-central1-b/{instance}"
        assert volume["csi"]["volumeAttributes"]["ip"] == "192.0.2.20"
    assert volume["persistentVolumeReclaimPolicy"] == "Retain"
    ray = recording.one(RAY)
    manifest = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        "metadata": ray.inputs["metadata"],
        "spec": ray.inputs["spec"],
    }
    assert schema_errors(manifest) == []
    assert ray.inputs["spec"]["workerGroupSpecs"][0]["maxReplicas"] == 1
    assert ray.custom_timeouts == {"create": "1800s", "update": "1800s"}


@pytest.mark.parametrize(("mode", "gpu", "storage"), [("standard", "h200", "gcs"), ("autopilot", "b200", "lustre")])
def test_ray_cluster_waits_for_what_its_pods_need(mode, gpu, storage):
    recording = mocked_run(mode, gpu, storage, token=TEST_TOKEN)
    ray = recording.one(RAY)
    needed = {
        "kubernetes:apps/v1:DaemonSet",
        "kubernetes:networking.gke.io/v1:Network",
        "kubernetes:networking.gke.io/v1:GKENetworkParamSet",
        "kubernetes:core/v1:PersistentVolumeClaim",
        "kubernetes:core/v1:Secret",
        "kubernetes:core/v1:ServiceAccount",
        "gcp:container/cluster:Cluster",
    }
    if mode == "standard":
        needed.add("gcp:container/nodePool:NodePool")
    assert needed <= _kinds(recording, ray.depends_on)
    assert not {JOB, "kubernetes:core/v1:ConfigMap"} & _kinds(recording, ray.depends_on)
    pools = {r.urn for r in recording.by_type("gcp:container/nodePool:NodePool")}
    assert pools <= set(ray.depends_on)


def test_any_changed_ray_cluster_input_replaces_the_cluster(monkeypatch):
    registered = {}
    original = RecordingMonitor.RegisterResource

    def register(self, request):
        registered[request.type] = (list(request.replaceOnChanges), request.deleteBeforeReplace)
        return original(self, request)

    monkeypatch.setattr(RecordingMonitor, "RegisterResource", register)
    values, secret_keys = combination_values("standard", "h200", "gcs")
    run_values(values, secret_keys, stack="test")
    assert registered[RAY] == (["*"], True)
    # The volume is named too (delete before replace) but no spec change of it forces a replacement.
    assert registered["kubernetes:core/v1:PersistentVolume"] == ([], True)


def test_staging_job_waits_only_for_claim_account_secret_script_and_policies():
    recording = mocked_run("standard", "h200", "gcs", token=TEST_TOKEN)
    job = recording.one(JOB)
    assert _kinds(recording, job.depends_on) == {
        "kubernetes:core/v1:PersistentVolumeClaim",
        "kubernetes:core/v1:Secret",
        "kubernetes:core/v1:ServiceAccount",
        "kubernetes:core/v1:ConfigMap",
        "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    }
    without = mocked_run("standard", "h200", "gcs")
    assert "kubernetes:core/v1:Secret" not in _kinds(without, without.one(JOB).depends_on)
    assert without.by_type("kubernetes:core/v1:Secret") == []


def test_claim_waits_for_its_volume_and_the_volume_for_the_storage():
    recording = mocked_run("standard", "b200", "lustre")
    claim = recording.one("kubernetes:core/v1:PersistentVolumeClaim")
    assert {"kubernetes:core/v1:PersistentVolume", "kubernetes:core/v1:Namespace"} <= _kinds(
        recording, claim.depends_on
    )
    volume = recording.one("kubernetes:core/v1:PersistentVolume")
    assert "gcp:lustre/instance:Instance" in _kinds(recording, volume.depends_on)


def _encodings_of(secret: str) -> list[str]:
    """The token in clear and every base64 form it can take, alone or inside a longer encoded text
    (the stable core of each of the three byte alignments)."""
    forms = [secret]
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + secret.encode()).decode()
        start = 4 * ((offset + 2) // 3)
        core = encoded[start : len(encoded) - 4]
        forms += [core, core.translate(str.maketrans("+/", "-_"))]
    return forms


def test_encodings_find_the_token_inside_any_base64_text():
    forms = _encodings_of(TEST_TOKEN)
    for prefix in (b"", b"x", b"xy", b"xyz", b'{"token":"'):
        text = base64.b64encode(prefix + TEST_TOKEN.encode() + b'"}').decode()
        assert any(form in text for form in forms), prefix


@pytest.mark.parametrize(
    ("mode", "gpu", "storage", "framework"),
    [("standard", "h200", "gcs", "verl"), ("autopilot", "b200", "lustre", "nemo-rl")],
)
def test_no_secret_is_in_any_file_output_log_or_recorded_input(tmp_path, mode, gpu, storage, framework):
    """The token, the W&B key and every secretEnv value, in clear or base64, appear nowhere the engine or a
    user reads (the W&B key comes from wandbApiKey, so secretEnv holds no WANDB_API_KEY here)."""
    secret_env = {name: value for name, value in TEST_SECRET_ENV.items() if name != "WANDB_API_KEY"}
    recording = mocked_run(
        mode, gpu, storage, framework, token=TEST_TOKEN, secret_env=secret_env, wandb_key=TEST_WANDB_KEY
    )
    secrets = {r.inputs["metadata"]["name"]: r for r in recording.by_type("kubernetes:core/v1:Secret")}
    assert secrets.keys() == {names.HF_TOKEN_SECRET, names.SECRET_ENV_SECRET, names.WANDB_SECRET}
    assert secrets[names.HF_TOKEN_SECRET].inputs["stringData"] == "[secret]"
    assert secrets[names.SECRET_ENV_SECRET].inputs["stringData"] == "[secret]"
    assert secrets[names.WANDB_SECRET].inputs["stringData"] == "[secret]"
    ray = recording.one(RAY)
    assert secrets[names.WANDB_SECRET].urn in ray.depends_on
    assert secrets[names.WANDB_SECRET].urn not in recording.one(JOB).depends_on
    key_ref = {
        "name": "WANDB_API_KEY",
        "valueFrom": {"secretKeyRef": {"key": names.WANDB_SECRET_KEY, "name": names.WANDB_SECRET}},
    }
    for group in [ray.inputs["spec"]["headGroupSpec"], *ray.inputs["spec"]["workerGroupSpecs"]]:
        assert key_ref in group["template"]["spec"]["containers"][0]["env"]
    write_plan(recording, tmp_path)
    written = [path.read_text() for path in sorted(tmp_path.rglob("*")) if path.is_file()]
    assert len(written) >= 4
    recorded = json.dumps([r.inputs for r in recording.resources], default=str)
    texts = [
        *written,
        recorded,
        json.dumps(recording.outputs, default=str),
        *recording.warnings,
        summary(recording, {}, tmp_path),
    ]
    for value in (TEST_TOKEN, TEST_WANDB_KEY, *secret_env.values()):
        forms = _encodings_of(value)
        for text in texts:
            assert not any(form in text for form in forms), value


def test_only_the_ray_pods_wait_for_the_secret_env_secret():
    recording = mocked_run("standard", "h200", "gcs", token=TEST_TOKEN, secret_env=TEST_SECRET_ENV)
    [secret_env] = [
        r
        for r in recording.by_type("kubernetes:core/v1:Secret")
        if r.inputs["metadata"]["name"] == names.SECRET_ENV_SECRET
    ]
    assert secret_env.urn in recording.one(RAY).depends_on
    assert secret_env.urn not in recording.one(JOB).depends_on
    assert "kubernetes:core/v1:Namespace" in _kinds(recording, secret_env.depends_on)


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_rendered_k8s_yaml_matches_the_golden_file(stack, plan_of):
    text = manifests_yaml(manifests_without_guardian_code(kubernetes_objects(plan_of(stack))))
    golden = GOLDEN / f"{stack}.k8s.yaml"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(text)
    assert golden.is_file(), f"missing {golden}; regenerate on purpose with UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"{golden} differs; if the change is intended, rerun with UPDATE_GOLDEN=1"


GPU_POOL = "gcp:container/nodePool:NodePool"
GRPO_JOB = "pulumi-python:dynamic:Resource"


@pytest.mark.parametrize(
    ("mode", "gpu", "storage"), [(m, "h200", s) for m in ("standard", "autopilot") for s in ("gcs", "lustre")]
)
def test_only_the_ray_cluster_and_the_job_wait_for_the_gpu_pool(mode, gpu, storage):
    recording = mocked_run(mode, gpu, storage, token=TEST_TOKEN)
    waits = waits_for(recording.resources)
    gpu_pools = {r.urn for r in recording.by_type(GPU_POOL) if r.inputs["name"] == GPU_NODE_POOL}
    head_pools = {r.urn for r in recording.by_type(GPU_POOL) if r.inputs["name"] == names.HEAD_NODE_POOL}
    assert len(gpu_pools) == len(head_pools) == (1 if mode == "standard" else 0)
    ray, staging, job = recording.one(RAY), recording.one(JOB), recording.one(GRPO_JOB, "grpo-job-submission")
    # The new edge: the RayCluster waits for the GPU pool itself, not through the provider.
    assert gpu_pools <= set(ray.depends_on)
    assert {ray.urn, staging.urn} <= set(job.depends_on)
    waiting_for_gpus = {urn for urn in waits if gpu_pools & upstream(waits, urn)}
    custom = {r.urn for r in recording.resources if r.custom}
    # The guardian's Deployment follows the run on the RayCluster, so it starts after it; the GPU pools' MIGs (their
    # instanceGroupUrls) go into their own ConfigMap only, which waits for the pools that name them.
    deployment = recording.one("kubernetes:apps/v1:Deployment").urn
    groups = {r.urn for r in recording.by_type("kubernetes:core/v1:ConfigMap") if r.name == "grpo-gpu-instance-groups"}
    assert len(groups) == (1 if mode == "standard" else 0)
    assert waiting_for_gpus & custom == ({ray.urn, job.urn, deployment, *groups} if mode == "standard" else set())
    # The staging Job still waits for the cluster, its NAT, the head's CPU pool and the storage.
    before_staging = upstream(waits, staging.urn)
    if storage == "gcs":
        ray_grant = recording.one(
            "gcp:storage/bucketIAMMember:BucketIAMMember",
            f"{recording.one('gcp:storage/bucket:Bucket').inputs['name']}-ray-object-user",
        )
    else:
        ray_grant = recording.one("gcp:lustre/instance:Instance")
    needed = {
        recording.one("gcp:container/cluster:Cluster").urn,
        recording.one("gcp:compute/routerNat:RouterNat").urn,
        ray_grant.urn,
        *head_pools,
    }
    assert needed <= before_staging
    # Destroy runs this order backwards: the RayCluster goes before the GPU pool, and every in-cluster
    # object before the head pool and the cluster (through the provider).
    provider = recording.one("pulumi:providers:kubernetes")
    assert needed - {ray_grant.urn} <= upstream(waits, provider.urn)
    assert all(provider.urn in upstream(waits, r.urn) for r in recording.resources if r.type.startswith("kubernetes:"))


@pytest.mark.parametrize("gib", [18000, 36000])
def test_the_lustre_volume_has_the_capacity_the_stack_asks_for(infra_run, gib):
    recording = infra_run("standard", "h200", "lustre", storage={"capacityGib": gib})
    assert recording.one("gcp:lustre/instance:Instance").inputs["capacityGib"] == str(gib)
    assert recording.one("kubernetes:core/v1:PersistentVolume").inputs["spec"]["capacity"] == {"storage": f"{gib}Gi"}


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_a_machine_without_rdma_nics_gets_the_same_graph_without_the_gpu_fabric(mode):
    """One L4 (core/facts/platform.py GPU_MACHINES['l4'], rdma_nics 0): no gVNIC or RDMA VPC, no GKE network objects,
    no gIB installer, no compact placement or extra NICs on the pool, no interfaces or gIB mounts on the worker; the
    rest of the graph (cluster VPC and NAT, pools, storage, the RayCluster) as for an 8-GPU machine."""
    recording = mocked_run(mode, "l4", "gcs")
    assert [r.inputs["name"] for r in recording.by_type("gcp:compute/network:Network")] == ["grpo-test-net"]
    assert len(recording.by_type("gcp:compute/subnetwork:Subnetwork")) == 1
    assert recording.by_type("gcp:compute/firewall:Firewall") == []
    assert recording.by_type("kubernetes:networking.gke.io/v1:GKENetworkParamSet") == []
    assert recording.by_type("kubernetes:networking.gke.io/v1:Network") == []
    assert recording.by_type("kubernetes:apps/v1:DaemonSet") == []
    assert len(recording.by_type("gcp:compute/routerNat:RouterNat")) == 1
    if mode == "standard":
        pool = next(
            pool.inputs
            for pool in recording.by_type("gcp:container/nodePool:NodePool")
            if pool.inputs["nodeConfig"].get("guestAccelerators")
        )
        assert pool["nodeConfig"]["machineType"] == "g2-standard-8"
        assert pool["nodeConfig"]["guestAccelerators"][0]["type"] == "nvidia-l4"
        assert pool["nodeConfig"]["guestAccelerators"][0]["count"] == 1
        assert "networkConfig" not in pool and "placementPolicy" not in pool
        assert "ephemeralStorageLocalSsdConfig" not in pool["nodeConfig"]
    worker = recording.one(RAY).inputs["spec"]["workerGroupSpecs"][0]
    assert "networking.gke.io/interfaces" not in worker["template"]["metadata"].get("annotations", {})
    container = worker["template"]["spec"]["containers"][0]
    assert {mount["name"] for mount in container["volumeMounts"]} == {"dshm", "nvidia", "data"}
    assert not {entry["name"] for entry in container["env"]} & {
        "NCCL_NET",
        "NCCL_TUNER_CONFIG_PATH",
        "GLOO_SOCKET_IFNAME",
    }
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
    manifest = {
        "apiVersion": "ray.io/v1",
        "kind": "RayCluster",
        **{k: recording.one(RAY).inputs[k] for k in ("metadata", "spec")},
    }
    assert schema_errors(manifest) == []
