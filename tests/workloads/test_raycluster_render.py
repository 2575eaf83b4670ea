"""The RayCluster renderer: strict KubeRay v1 schema, Ray version, workers, NCCL environment, placement."""

from __future__ import annotations

import copy
import itertools
import json

import pulumi_kubernetes as k8s
import pytest

from core import names
from core.facts.platform import DEFAULT_IMAGES, GPU_MACHINES
from core.facts.pods import GIB_NCCL_ENV, KUBERAY_READY_WAIT, SHM_GIB
from incluster.scaling import desired_workers
from tests.conftest import COMBINATIONS, FRAMEWORKS, combination_config
from tests.workloads.conftest import TEST_TOKEN, schema_errors
from workloads import raycluster
from workloads.sizing import worker_requests


def _worker(manifest):
    return manifest["spec"]["workerGroupSpecs"][0]


def _env(container):
    return {item["name"]: item.get("value", item.get("valueFrom")) for item in container["env"]}


@pytest.mark.parametrize(("mode", "gpu", "storage", "framework"), [(*c, f) for c in COMBINATIONS for f in FRAMEWORKS])
def test_every_rendered_raycluster_passes_the_strict_schema(mode, gpu, storage, framework):
    manifest = raycluster.render_manifest(combination_config(mode, gpu, storage, framework, token=TEST_TOKEN))
    assert schema_errors(manifest) == []


def test_strict_schema_refuses_a_misspelt_field_and_an_int_node_selector():
    manifest = raycluster.render_manifest(combination_config("autopilot", "b200"))
    misspelt = copy.deepcopy(manifest)
    misspelt["spec"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["resourcez"] = {}
    assert any("resourcez" in error for error in schema_errors(misspelt))
    unquoted = copy.deepcopy(manifest)
    unquoted["spec"]["workerGroupSpecs"][0]["template"]["spec"]["nodeSelector"][
        "cloud.google.com/gke-accelerator-count"
    ] = 8
    assert any("gke-accelerator-count" in error for error in schema_errors(unquoted))


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_ray_version_is_the_default_images_fact(framework):
    spec = raycluster.render_spec(combination_config(framework=framework))
    assert spec["rayVersion"] == DEFAULT_IMAGES[framework].ray_version
    # streamed by default (issue 33 item 4): the default image through the stack's remote repository of its registry
    pulled = names.registry_image(DEFAULT_IMAGES[framework].image, "us-central1", "my-grpo-project", "grpo-test")
    assert spec["headGroupSpec"]["template"]["spec"]["containers"][0]["image"] == pulled


def test_ray_version_of_a_users_image_is_the_configured_one():
    config = combination_config(workload={"image": "example.com/my/verl:1", "rayVersion": "2.47.1"})
    spec = raycluster.render_spec(config)
    assert spec["rayVersion"] == "2.47.1"
    assert _worker({"spec": spec})["template"]["spec"]["containers"][0]["image"] == "example.com/my/verl:1"


@pytest.mark.parametrize("nodes", [1, 3])
def test_workers_are_fixed_at_gpu_nodes_with_eight_gpus_each(nodes):
    config = combination_config(gpu={"nodes": nodes}, grpo={"promptsPerStep": 96, "miniBatchSize": 48})
    worker = _worker(raycluster.render_manifest(config))
    assert (worker["minReplicas"], worker["maxReplicas"], worker["replicas"]) == (0, nodes, names.WORKER_REPLICAS)
    assert desired_workers(raycluster.render_manifest(config)) == nodes
    container = worker["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "8"
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "8"
    assert raycluster.render_spec(config)["enableInTreeAutoscaling"] is False


@pytest.mark.parametrize("gpu", ["b200", "h200"])
def test_worker_requests_fit_the_machine_and_shm_fits_the_memory(gpu):
    worker = _worker(raycluster.render_manifest(combination_config(gpu_type=gpu)))
    requests = worker["template"]["spec"]["containers"][0]["resources"]["requests"]
    machine = GPU_MACHINES[gpu]
    assert int(requests["memory"].removesuffix("Gi")) < machine.memory_gib
    assert int(requests["cpu"]) < machine.vcpus
    assert requests == worker_requests(machine).quantities()
    shm = next(v for v in worker["template"]["spec"]["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{SHM_GIB}Gi"}
    assert SHM_GIB < int(requests["memory"].removesuffix("Gi"))
    assert int(worker["rayStartParams"]["object-store-memory"]) < SHM_GIB * 1024**3


def test_h200_worker_memory_is_below_the_tutorials_unschedulable_2800gi():
    requests = _worker(raycluster.render_manifest(combination_config(gpu_type="h200")))["template"]["spec"][
        "containers"
    ][0]
    assert int(requests["resources"]["requests"]["memory"].removesuffix("Gi")) < 2800


@pytest.mark.parametrize(("gpu", "tuner"), [("b200", "tuner_config_a4.txtpb"), ("h200", "tuner_config_a3u.txtpb")])
def test_worker_env_carries_gib_nccl_settings_for_the_gpu(gpu, tuner):
    env = _env(
        _worker(raycluster.render_manifest(combination_config(gpu_type=gpu)))["template"]["spec"]["containers"][0]
    )
    assert env["NCCL_TUNER_CONFIG_PATH"] == f"/usr/local/gib/configs/{tuner}"
    assert env["NCCL_NET"] == "gIB"
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert {k: env[k] for k in GIB_NCCL_ENV} == GIB_NCCL_ENV
    assert "NCCL_SOCKET_IFNAME" not in env and "NCCL_IB_GID_INDEX" not in env


@pytest.mark.parametrize(
    ("gpu", "framework", "workload", "driver"),
    [
        ("b200", "verl", {}, "latest"),
        ("h200", "nemo-rl", {}, "latest"),
        (
            "b200",
            "verl",
            {"image": "example.com/verl:custom", "rayVersion": "2.55.1", "cudaVersion": "12.8"},
            "default",
        ),
        (
            "h200",
            "verl",
            {"image": "example.com/verl:custom", "rayVersion": "2.55.1", "cudaVersion": "12.8"},
            "default",
        ),
        ("h200", "verl", {"image": "example.com/verl:custom", "rayVersion": "2.55.1", "cudaVersion": "13.0"}, "latest"),
        ("h200", "verl", {"image": "example.com/verl:custom", "rayVersion": "2.55.1"}, "latest"),
    ],
)
def test_autopilot_workers_select_the_driver_that_runs_the_images_cuda(gpu, framework, workload, driver):
    config = combination_config("autopilot", gpu, "gcs", framework, workload=workload)
    selector = _worker(raycluster.render_manifest(config))["template"]["spec"]["nodeSelector"]
    assert selector["cloud.google.com/gke-gpu-driver-version"] == driver


VERL_NCCL = "/usr/local/lib/python3.12/dist-packages/nvidia/nccl/lib"
"""Where verl's image installs its own NCCL >= 2.29.7 (pip nvidia-nccl-cu13, Python 3.12)."""


@pytest.mark.parametrize(
    ("mode", "framework", "image", "expected"),
    [
        # verl: its own NCCL first (gIB's NCCL lies in nvidia/lib64 on Autopilot), then the host driver, then
        # the rest of the image's value; the same in both modes.
        ("standard", "verl", None, f"{VERL_NCCL}:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"),
        ("autopilot", "verl", None, f"{VERL_NCCL}:/usr/local/nvidia/lib64:/usr/local/nvidia/lib"),
        # NeMo-RL: the host driver first, so the CUDA compat libraries after it never shadow it.
        (
            "autopilot",
            "nemo-rl",
            None,
            "/usr/local/nvidia/lib64:/opt/amazon/ofi-nccl/lib:/opt/amazon/efa/lib"
            ":/opt/nemo_rl_venv/lib/python3.13/site-packages/nvidia/cudnn/lib:/usr/local/cuda/compat/lib:/usr/local/nvidia/lib",
        ),
        # A user image: only the host driver (its own value is unknown; README: extend it with extraEnv).
        ("standard", "verl", {"image": "example.com/verl:custom", "rayVersion": "2.55.1"}, "/usr/local/nvidia/lib64"),
    ],
)
def test_worker_library_path_puts_the_host_driver_before_the_images_libraries(mode, framework, image, expected):
    config = combination_config(mode, "h200", "gcs", framework, workload=image or {})
    env = _env(_worker(raycluster.render_manifest(config))["template"]["spec"]["containers"][0])
    assert env["LD_LIBRARY_PATH"] == expected


def test_secret_env_reaches_head_and_workers_by_reference_only():
    secrets = {"WANDB_API_KEY": "wandb-clear-value-1", "OTHER_KEY": "other-clear-value-2"}
    manifest = raycluster.render_manifest(combination_config(token=TEST_TOKEN, secret_env=secrets))
    for container in (
        _worker(manifest)["template"]["spec"]["containers"][0],
        manifest["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0],
    ):
        refs = [item for item in container["env"] if "valueFrom" in item]
        assert refs == [
            {
                "name": "HF_TOKEN",
                "valueFrom": {"secretKeyRef": {"key": names.HF_TOKEN_SECRET_KEY, "name": names.HF_TOKEN_SECRET}},
            },
            {"name": "OTHER_KEY", "valueFrom": {"secretKeyRef": {"key": "OTHER_KEY", "name": names.SECRET_ENV_SECRET}}},
            {
                "name": "WANDB_API_KEY",
                "valueFrom": {"secretKeyRef": {"key": "WANDB_API_KEY", "name": names.SECRET_ENV_SECRET}},
            },
        ]
    text = json.dumps(manifest)
    assert not any(value in text for value in secrets.values())


def test_extra_env_is_merged_last_and_wins():
    config = combination_config(workload={"extraEnv": {"NCCL_NET": "Socket", "NCCL_PXN_DISABLE": "1"}})
    manifest = raycluster.render_manifest(config)
    env = _env(_worker(manifest)["template"]["spec"]["containers"][0])
    assert env["NCCL_NET"] == "Socket" and env["NCCL_PXN_DISABLE"] == "1"
    head_env = _env(manifest["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0])
    assert head_env["NCCL_PXN_DISABLE"] == "1"
    plain = _env(_worker(raycluster.render_manifest(combination_config()))["template"]["spec"]["containers"][0])
    assert "NCCL_PXN_DISABLE" not in plain


def test_token_comes_from_the_secret_only_when_set():
    with_token = raycluster.render_manifest(combination_config(token=TEST_TOKEN))
    for container in (
        _worker(with_token)["template"]["spec"]["containers"][0],
        with_token["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0],
    ):
        assert _env(container)["HF_TOKEN"] == {
            "secretKeyRef": {"key": names.HF_TOKEN_SECRET_KEY, "name": names.HF_TOKEN_SECRET}
        }
    assert TEST_TOKEN not in json.dumps(with_token)
    without = raycluster.render_manifest(combination_config())
    assert "HF_TOKEN" not in _env(_worker(without)["template"]["spec"]["containers"][0])


@pytest.mark.parametrize(("mode", "storage"), list(itertools.product(["standard", "autopilot"], ["gcs", "lustre"])))
def test_worker_pod_wiring(mode, storage):
    worker = _worker(raycluster.render_manifest(combination_config(mode, "b200", storage)))
    template = worker["template"]
    assert template["spec"]["containers"][0]["name"] == "ray-worker"
    assert len(template["spec"]["containers"]) == 1
    annotations = template["metadata"]["annotations"]
    interfaces = json.loads(annotations["networking.gke.io/interfaces"])
    assert annotations["networking.gke.io/default-interface"] == "eth0"
    assert [i["network"] for i in interfaces] == ["default", "gvnic-1", *(f"rdma-{n}" for n in range(8))]
    assert [i["interfaceName"] for i in interfaces] == [f"eth{n}" for n in range(10)]
    assert (annotations.get("gke-gcsfuse/volumes") == "true") == (storage == "gcs")
    mounts = {m["name"]: m for m in template["spec"]["containers"][0]["volumeMounts"]}
    assert mounts["data"]["mountPath"] == names.DATA_MOUNT
    assert mounts["gib"]["mountPath"] == "/usr/local/gib" and mounts["nvidia"]["mountPath"] == "/usr/local/nvidia"
    assert mounts["gib"]["readOnly"] is (mode == "autopilot")
    volumes = {v["name"]: v for v in template["spec"]["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"]["claimName"] == names.DATA_CLAIM
    assert volumes["gib"]["hostPath"]["path"] == "/home/kubernetes/bin/gib"
    assert template["spec"]["tolerations"] == [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "operator": "Exists"}]
    assert template["spec"]["serviceAccountName"] == names.RAY_SERVICE_ACCOUNT


def test_gpu_workers_stay_in_the_rdma_zone_and_autopilot_selectors_are_strings():
    autopilot = _worker(raycluster.render_manifest(combination_config("autopilot", "b200")))["template"]["spec"][
        "nodeSelector"
    ]
    assert autopilot == {
        "cloud.google.com/gke-accelerator": "nvidia-b200",
        "cloud.google.com/gke-accelerator-count": "8",
        "cloud.google.com/gke-gpu-driver-version": "latest",
        "cloud.google.com/gke-spot": "true",
        "topology.kubernetes.io/zone": "us-central1-b",
    }
    on_demand = combination_config("autopilot", "h200", gpu={"provisioning": "on-demand"})
    assert (
        "cloud.google.com/gke-spot"
        not in _worker(raycluster.render_manifest(on_demand))["template"]["spec"]["nodeSelector"]
    )
    standard = _worker(raycluster.render_manifest(combination_config("standard", "h200")))["template"]["spec"][
        "nodeSelector"
    ]
    assert standard == {
        "cloud.google.com/gke-accelerator": "nvidia-h200-141gb",
        "topology.kubernetes.io/zone": "us-central1-b",
    }


def test_head_is_cpu_only_on_the_head_pool_and_dashboard_stays_in_the_cluster():
    standard = raycluster.render_manifest(combination_config("standard"))["spec"]["headGroupSpec"]
    assert standard["serviceType"] == "ClusterIP"
    assert standard["template"]["spec"]["nodeSelector"] == {"cloud.google.com/gke-nodepool": names.HEAD_NODE_POOL}
    resources = standard["template"]["spec"]["containers"][0]["resources"]
    assert "nvidia.com/gpu" not in resources["requests"]
    assert "tolerations" not in standard["template"]["spec"]
    autopilot = raycluster.render_manifest(combination_config("autopilot"))["spec"]["headGroupSpec"]["template"]["spec"]
    assert "nodeSelector" not in autopilot


def test_up_waits_for_kuberay_ready_as_long_as_the_custom_timeouts_say():
    config = combination_config(job={"readyTimeoutSeconds": 2400})
    metadata = raycluster.render_manifest(config)["metadata"]
    assert metadata["annotations"] == {"pulumi.com/waitFor": "jsonpath={.status.state}=ready"}
    timeouts = raycluster.ready_timeouts(config)
    assert (timeouts.create, timeouts.update, timeouts.delete) == ("2400s", "2400s", None)
    assert "pulumi.com/skipAwait" not in metadata["annotations"]
    assert (metadata["name"], metadata["namespace"]) == (names.RAY_CLUSTER, names.NAMESPACE)


@pytest.mark.parametrize(("mode", "storage"), list(itertools.product(["standard", "autopilot"], ["gcs", "lustre"])))
def test_every_mount_names_a_declared_volume(mode, storage):
    spec = raycluster.render_spec(combination_config(mode, "b200", storage))
    for group in (spec["headGroupSpec"], *spec["workerGroupSpecs"]):
        pod = group["template"]["spec"]
        volumes = [volume["name"] for volume in pod["volumes"]]
        assert len(set(volumes)) == len(volumes)
        for container in pod["containers"]:
            assert {mount["name"] for mount in container["volumeMounts"]} == set(volumes)


def test_metadata_goes_through_the_typed_object_meta():
    metadata = k8s.meta.v1.ObjectMetaArgs(**raycluster.render_metadata(combination_config()))
    assert metadata.annotations["pulumi.com/waitFor"] == KUBERAY_READY_WAIT
    with pytest.raises(TypeError):
        k8s.meta.v1.ObjectMetaArgs(**{**raycluster.render_metadata(combination_config()), "anotations": {}})


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_every_container_states_its_local_disk(mode):
    # Autopilot turns a missing ephemeral-storage request into a 1 GiB limit, which Ray's logs outgrow.
    spec = raycluster.render_spec(combination_config(mode))
    for group in (spec["headGroupSpec"], *spec["workerGroupSpecs"]):
        for container in group["template"]["spec"]["containers"]:
            assert container["resources"]["requests"]["ephemeral-storage"].endswith("Gi")
