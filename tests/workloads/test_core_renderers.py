"""Renderers of the GKE network objects, the gIB installer, identity, storage and worker sizing."""

from __future__ import annotations

import dataclasses

import pytest

from core import names
from core.facts.platform import GPU_MACHINES, NODE_BOOT_DISK_GB
from core.facts.pods import (
    GCSFUSE_SIDECAR_ANNOTATIONS,
    GIB_INSTALLER_IMAGE,
    LOCAL_SSD_GIB,
    NODE_DAEMON_HEADROOM,
    NODE_MEMORY_MARGIN,
    OBJECT_STORE_GIB,
    PAUSE_IMAGE,
    SHM_GIB,
)
from infra.outputs import GcsStorage, GpuNetworks, LustreStorage
from tests.conftest import combination_config
from workloads import gib, identity, network, pods, sizing, storage

SUBNETS = tuple(f"sub-{n}" for n in range(8))
LUSTRE = LustreStorage(instance_id="inst", mount_point="192.0.2.20@tcp:/grpo", filesystem="grpo", capacity_gib=18000)


def test_nine_networks_name_the_vpcs_and_subnets_in_interface_order():
    specs = network.network_specs(GpuNetworks("gvnic-vpc", "gvnic-sub", "rdma-vpc", SUBNETS))
    assert [s.name for s in specs] == ["gvnic-1", *(f"rdma-{n}" for n in range(8))]
    assert network.render_param_set_spec(specs[0]) == {
        "deviceMode": "NetDevice",
        "vpc": "gvnic-vpc",
        "vpcSubnet": "gvnic-sub",
    }
    assert network.render_param_set_spec(specs[3]) == {"deviceMode": "RDMA", "vpc": "rdma-vpc", "vpcSubnet": "sub-2"}
    assert network.render_network_spec(specs[5]) == {
        "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": "rdma-4"},
        "type": "Device",
    }


def test_networks_refuse_a_wrong_number_of_rdma_subnets():
    with pytest.raises(ValueError, match="8 RDMA subnets"):
        GpuNetworks("g", "gs", "r", SUBNETS[:7])


@pytest.mark.parametrize(
    ("mode", "namespace", "command", "priority"),
    [
        ("standard", "kube-system", "/scripts/container_entry.sh install\n", "system-node-critical"),
        ("autopilot", "rdma-system", "/scripts/container_entry.sh install --install-nccl\n", None),
    ],
)
def test_gib_installer_follows_the_pinned_cea_manifest(mode, namespace, command, priority):
    daemonset = gib.render_daemonset(mode)
    pod = daemonset.spec.template.spec
    assert daemonset.metadata.namespace == namespace
    assert pod.priority_class_name == priority
    assert command in pod.init_containers[0].args[0]
    assert pod.init_containers[0].image == GIB_INSTALLER_IMAGE
    assert pod.init_containers[0].image.endswith(":v1.1.1")
    assert pod.containers[0].image == PAUSE_IMAGE and "@sha256:" in pod.containers[0].image
    assert pod.host_network and pod.host_pid and pod.init_containers[0].security_context.privileged
    terms = pod.affinity.node_affinity.required_during_scheduling_ignored_during_execution.node_selector_terms
    assert sorted(terms[0].match_expressions[0].values) == ["nvidia-b200", "nvidia-h200-141gb"]
    assert [v.host_path.path for v in pod.volumes] == ["/home/kubernetes/bin/nvidia/lib64", "/home/kubernetes/bin/gib"]


CEA_INSTALLER_ARGS = {
    # The `args` block of CEA gpudirect-rdma/nccl-rdma-installer{,-autopilot}.yaml @992db81, as YAML parses it.
    "standard": (
        "set -ex\n/scripts/container_entry.sh install\n"
        "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64\n"
        'cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib\necho "installation finishes"\n'
    ),
    "autopilot": (
        "set -ex\n/scripts/container_entry.sh install --install-nccl\n"
        "cp -r /var/lib/gib/lib64/. /usr/local/home/kubernetes/bin/nvidia/lib64\n"
        'cp -r /var/lib/gib/. /usr/local/home/kubernetes/bin/gib\necho "installation finishes"\n'
    ),
}


@pytest.mark.parametrize("mode", sorted(CEA_INSTALLER_ARGS))
def test_gib_installer_script_is_ceas_text_byte_for_byte(mode):
    assert gib.render_daemonset(mode).spec.template.spec.init_containers[0].args == [CEA_INSTALLER_ARGS[mode]]


def test_gib_namespace_only_on_autopilot():
    assert gib.render_namespace("standard") is None
    assert gib.render_namespace("autopilot").metadata.name == "rdma-system"


def test_identity_uses_the_shared_names_and_the_token_never_enters_a_pod_spec():
    assert identity.render_namespace().metadata.name == names.NAMESPACE
    account = identity.render_service_account().metadata
    assert (account.name, account.namespace) == (names.RAY_SERVICE_ACCOUNT, names.NAMESPACE)
    secret = identity.render_token_secret("value")
    assert secret.string_data == {names.HF_TOKEN_SECRET_KEY: "value"} and secret.data is None
    [env] = [pods.env_var_args(entry) for entry in pods.secret_env(combination_config(token="hf_x"))]
    assert env.name == "HF_TOKEN" and env.value is None
    assert (env.value_from.secret_key_ref.name, env.value_from.secret_key_ref.key) == (
        names.HF_TOKEN_SECRET,
        names.HF_TOKEN_SECRET_KEY,
    )


def test_secret_env_is_one_secret_keyed_by_name_and_read_by_reference():
    secret = identity.render_secret_env_secret({"B_KEY": "b", "A_KEY": "a"})
    assert (secret.metadata.name, secret.metadata.namespace) == (names.SECRET_ENV_SECRET, names.NAMESPACE)
    assert secret.string_data == {"A_KEY": "a", "B_KEY": "b"} and secret.data is None
    config = combination_config(token="hf_x", secret_env={"B_KEY": "b", "A_KEY": "a"})
    assert pods.secret_env(config) == [
        {
            "name": "HF_TOKEN",
            "valueFrom": {"secretKeyRef": {"key": names.HF_TOKEN_SECRET_KEY, "name": names.HF_TOKEN_SECRET}},
        },
        {"name": "A_KEY", "valueFrom": {"secretKeyRef": {"key": "A_KEY", "name": names.SECRET_ENV_SECRET}}},
        {"name": "B_KEY", "valueFrom": {"secretKeyRef": {"key": "B_KEY", "name": names.SECRET_ENV_SECRET}}},
    ]
    assert [entry["name"] for entry in pods.secret_env(config, with_secret_env=False)] == ["HF_TOKEN"]


KES_GCSFUSE_MOUNT_OPTIONS = [
    # kubernetes-engine-samples ai-ml/verl-on-gke/gcsfuse-storage.yaml @616b442, the tutorial's tuned PV.
    "implicit-dirs",
    "metadata-cache:negative-ttl-secs:0",
    "metadata-cache:ttl-secs:0",
    "metadata-cache:stat-cache-max-size-mb:-1",
    "metadata-cache:type-cache-max-size-mb:-1",
    "file-cache:max-size-mb:-1",
    "file-cache:cache-file-for-range-read:true",
    "file-cache:enable-parallel-downloads:true",
    "read_ahead_kb=1024",
    "write:enable-streaming-writes:true",
    "write:global-max-blocks:200000",
]


def test_gcs_volume_is_static_retained_and_tuned():
    config = combination_config(storage_type="gcs")
    volume = storage.render_volume(config, GcsStorage(bucket_name="my-bucket")).spec
    assert volume.csi.driver == "gcsfuse.csi.storage.gke.io" and volume.csi.volume_handle == "my-bucket"
    assert volume.persistent_volume_reclaim_policy == "Retain"
    assert volume.claim_ref.name == names.DATA_CLAIM and volume.claim_ref.namespace == names.NAMESPACE
    assert volume.mount_options == KES_GCSFUSE_MOUNT_OPTIONS
    assert volume.csi.volume_attributes == {
        "gcsfuseMetadataPrefetchOnMount": "true",
        "skipCSIBucketAccessCheck": "true",
    }
    claim = storage.render_claim().spec
    assert claim.volume_name == names.DATA_CLAIM and claim.storage_class_name == volume.storage_class_name == ""
    assert claim.access_modes == volume.access_modes == ["ReadWriteMany"]
    assert storage.pod_annotations(config)["gke-gcsfuse/volumes"] == "true"


def test_a_grown_lustre_instance_changes_the_volume_but_never_the_unresizable_claim():
    config = combination_config(storage_type="lustre")
    small, large = (dataclasses.replace(LUSTRE, capacity_gib=gib) for gib in (18000, 36000))
    assert storage.render_volume(config, small).spec.capacity != storage.render_volume(config, large).spec.capacity
    claim = storage.render_claim().spec.resources.requests["storage"]
    assert claim == storage.CLAIM_REQUEST
    for hand_off in (small, large, GcsStorage(bucket_name="b")):
        volume = storage.render_volume(config, hand_off)
        assert _gib(claim) <= _gib(volume.spec.capacity["storage"])


def test_lustre_volume_has_no_fuse_options_and_needs_the_instance():
    config = combination_config(storage_type="lustre")
    volume = storage.render_volume(config, LUSTRE).spec
    assert volume.csi.driver == "lustre.csi.storage.gke.io" and volume.mount_options is None
    assert volume.csi.volume_handle == "my-grpo-project/us-central1-b/inst"
    assert volume.csi.volume_attributes == {"filesystem": "grpo", "ip": "192.0.2.20"}
    assert volume.capacity == {"storage": "18000Gi"} and volume.persistent_volume_reclaim_policy == "Retain"
    assert storage.pod_annotations(config) == {}
    assert storage.lustre_ip("192.0.2.20@tcp:/grpo") == "192.0.2.20"
    with pytest.raises(TypeError, match="mount_point"):
        LustreStorage(instance_id="inst", filesystem="grpo", capacity_gib=18000)
    with pytest.raises(TypeError, match="bucket_name"):
        GcsStorage()


def test_gke_reservation_matches_the_documented_example():
    # GKE's plan-node-sizes formula: 150 GiB reserves 9.86 GiB (incl. the 100 MiB eviction threshold).
    assert sizing.gke_reserved_memory_gib(150) == pytest.approx(9.8577, abs=1e-4)
    assert sizing.gke_reserved_cpu(4) == pytest.approx(0.08)


@pytest.mark.parametrize("gpu", sorted(GPU_MACHINES))
def test_worker_requests_leave_gke_and_daemonset_headroom(gpu):
    machine = GPU_MACHINES[gpu]
    requests = sizing.worker_requests(machine)
    allocatable = machine.memory_gib - sizing.gke_reserved_memory_gib(machine.memory_gib)
    assert requests.memory_gib + machine.daemon_headroom_gib <= allocatable
    assert requests.cpu + machine.daemon_headroom_cpu <= machine.vcpus - sizing.gke_reserved_cpu(machine.vcpus)
    disk_gib = machine.local_ssd_count * LOCAL_SSD_GIB or NODE_BOOT_DISK_GB
    assert requests.ephemeral_gib < disk_gib * 0.9
    assert requests.memory_gib > machine.worker_shm_gib > machine.worker_object_store_gib


def test_the_eight_gpu_machines_keep_the_pods_pages_shm_object_store_and_headroom():
    for gpu in ("b200", "h200"):
        machine = GPU_MACHINES[gpu]
        assert (machine.worker_shm_gib, machine.worker_object_store_gib) == (SHM_GIB, OBJECT_STORE_GIB)
        assert (machine.daemon_headroom_cpu, machine.daemon_headroom_gib) == tuple(NODE_DAEMON_HEADROOM.values())


def test_the_l4_worker_takes_the_node_less_gke_and_its_headroom_and_the_boot_disk_for_its_disk():
    """g2-standard-8: 32 GiB less GKE's 3.7 GiB, the 2% margin and 4 GiB of headroom is 23.7, rounded down to 16;
    8 vCPUs less 0.09 and 2 of headroom is 5; 30% of the 100 GB boot disk; its one GPU."""
    assert sizing.worker_requests(GPU_MACHINES["l4"]).quantities() == {
        "cpu": "5",
        "ephemeral-storage": "30Gi",
        "memory": "16Gi",
        "nvidia.com/gpu": "1",
    }


def test_the_tutorials_2800gi_does_not_fit_beside_the_daemonsets_of_an_a3_ultra():
    machine = GPU_MACHINES["h200"]
    usable = machine.memory_gib * (1 - NODE_MEMORY_MARGIN) - sizing.gke_reserved_memory_gib(machine.memory_gib)
    assert 2800 > usable - NODE_DAEMON_HEADROOM["memory_gib"]


@pytest.mark.parametrize(("gpu", "memory"), [("b200", "3736Gi"), ("h200", "2760Gi")])
def test_worker_memory_starts_from_the_machine_tables_gb_read_as_gib(gpu, memory):
    """a4-highgpu-8g has 3,968 and a3-ultragpu-8g 2,952 binary GB: less GKE's reservation (86.2 / 65.9 GiB),
    the 2% margin and 64 GiB of DaemonSet headroom, rounded down to 8 GiB."""
    assert sizing.worker_requests(GPU_MACHINES[gpu]).quantities()["memory"] == memory


@pytest.mark.parametrize(
    ("mode", "gpu_node", "limits"),
    [("standard", False, "0"), ("standard", True, "0"), ("autopilot", True, "1Ti"), ("autopilot", False, None)],
)
def test_gcs_fuse_sidecar_limits_per_mode_and_node(mode, gpu_node, limits):
    annotations = storage.pod_annotations(combination_config(mode, storage_type="gcs"), gpu_node=gpu_node)
    assert annotations["gke-gcsfuse/volumes"] == "true"
    assert annotations.get("gke-gcsfuse/ephemeral-storage-limit") == limits
    assert storage.pod_annotations(combination_config(mode, storage_type="lustre"), gpu_node=gpu_node) == {}


def _gib(quantity: str) -> float:
    return float(quantity.removesuffix("Gi")) if quantity.endswith("Gi") else float(quantity.removesuffix("Ti")) * 1024


def test_an_autopilot_worker_without_local_ssds_keeps_the_gcs_fuse_sidecars_defaults():
    annotations = storage.pod_annotations(combination_config("autopilot", "l4", "gcs"), gpu_node=True)
    assert annotations == {"gke-gcsfuse/volumes": "true"}


@pytest.mark.parametrize("gpu", sorted(gpu for gpu, machine in GPU_MACHINES.items() if machine.local_ssd_count))
def test_autopilot_gcs_fuse_sidecar_fits_beside_the_worker(gpu):
    # On Autopilot the sidecar's limits become its requests; they may take at most half of the node's
    # DaemonSet headroom, and its file cache must fit on the local SSD beside the worker's request.
    machine = GPU_MACHINES[gpu]
    requests = sizing.worker_requests(machine)
    sidecar = GCSFUSE_SIDECAR_ANNOTATIONS["autopilot"]
    cpu = requests.cpu + float(sidecar["gke-gcsfuse/cpu-limit"])
    assert cpu <= machine.vcpus - sizing.gke_reserved_cpu(machine.vcpus) - NODE_DAEMON_HEADROOM["cpu"] / 2
    memory = requests.memory_gib + _gib(sidecar["gke-gcsfuse/memory-limit"])
    allocatable = machine.memory_gib - sizing.gke_reserved_memory_gib(machine.memory_gib)
    assert memory <= allocatable - NODE_DAEMON_HEADROOM["memory_gib"] / 2
    ephemeral = requests.ephemeral_gib + _gib(sidecar["gke-gcsfuse/ephemeral-storage-limit"])
    assert ephemeral <= machine.local_ssd_count * LOCAL_SSD_GIB * 0.9
