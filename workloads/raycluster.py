"""The KubeRay RayCluster (`ray.io/v1`): a CPU head and `gpu.nodes` GPU workers, wired for gIB RDMA where the machine
has RDMA NICs (core/facts/platform.py GpuMachine.rdma_nics).

The spec is plain data (a custom kind), validated in tests against KubeRay's v1 schema with unknown
fields refused. NCCL's environment is in the worker container itself, so `ray start` and every Ray
worker process inherit it and the job layer never carries it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from core import names
from core.config.model import StackConfig
from core.facts.pods import (
    GIB_HOST_DIR,
    GIB_NCCL_ENV,
    GIB_POD_DIR,
    GLOO_SOCKET_IFNAME,
    KUBERAY_READY_WAIT,
    NVIDIA_HOST_DIR,
    NVIDIA_POD_DIR,
    RAY_PORTS,
    RDMA_INTERFACES_START,
)
from core.resource_options import fixed_name_options
from workloads import placement, pods, storage
from workloads.identity import LABELS
from workloads.sizing import worker_requests

API_VERSION = names.RAY_API_VERSION
"""KubeRay API version of the RayCluster."""
KIND = "RayCluster"
"""Kind of the custom resource."""
WORKER_GROUP = names.RAY_WORKER_GROUP
"""Name of the single worker group."""

HEAD_SHM_GIB = 8
"""/dev/shm of the head (Ray's object store there instead of /tmp), inside its memory request."""

REPLACE_ON_CHANGES = ["*"]
"""Every change of the RayCluster's inputs replaces it (deleted first: its name is fixed); `up` never updates it
in place. Why every input and not only `spec`:

- A changed pod template: KubeRay applies it to no running pod (ray-project/kuberay#289, #2534; only
  `spec.upgradeStrategy`, KubeRay >= 1.6, recreates them), and the cluster would stay `ready`, so `up` would
  report success with the old pods.
- Any in-place update is a Server-Side Apply of the whole object (pulumi-kubernetes provider/pkg/await/await.go
  ssaUpdate L643-677, commit 94977969d641, the newest stored, v4.32.0-27; 4.34.2 not stored), `spec` included.
  `spec.workerGroupSpecs` is atomic (no x-kubernetes-list-type in KubeRay v1.7's CRD), and once the guardian's
  JSON patch changed it, the guardian's field manager owns all of it. handleSSAIgnoreFields (L716-806) cannot
  take our ignored `replicas` out of the apply: it splits the path on dots (L752-754), and
  `workerGroupSpecs["*"]` names no field, so the list goes out with the state's old count, a different value of
  a field another manager owns: a conflict, and the update fails (issue 19 item 4).
- The ways out weighed: `pulumi.com/patchForce: "true"` (await.go patchForce L1031-1033) forces that apply, so
  any metadata change would put the old count back and bring every GPU node back, billed, without anyone asking;
  the provider's `enableServerSideApply: false` makes the update a three-way JSON merge patch (csaUpdate
  L604-629; a custom kind, provider/pkg/openapi/openapi.go L115-121, L159-167) whose handleCSAIgnoreFields
  (L682-710) reads the same dotted path and finds nothing, and whose change from the live object to the inputs
  carries the whole list with the old count: the GPUs come back the same way; and the option is the provider's,
  so either every object of the stack changes how it is applied or the RayCluster moves to a second provider,
  which replaces it anyway. A replacement is a create of a new object that
  the provider owns whole: it cannot conflict, and it brings the workers back on purpose, as the preview and
  `python -m infra plan --against` say (a new RayCluster, the run submitted again).

The one input that changed by config alone, the ready timeout, is the customTimeouts option instead
(READY_TIMEOUTS), which is not an input: changing `job.readyTimeoutSeconds` changes nothing in the cluster."""

IGNORE_CHANGES = [f"spec.workerGroupSpecs[*].{field}" for field in names.GUARDIAN_OWNED_FIELDS]
"""What a later `up` leaves to the guardian: the group's `replicas`. pulumi-kubernetes diffs the new inputs
against the old outputs pruned to the old inputs (`Diff`, provider/pkg/provider/provider.go L1494-1540), so after
a refresh the guardian's count would be a change and, with REPLACE_ON_CHANGES, recreate the RayCluster; `Diff`
drops ignored paths (L1577-1601). The engine also keeps the old inputs' value for an ignored path on a
replacement (pulumi pkg/resource/deploy/step_generator.go processIgnoreChanges L3076-3096, called at L1267, its
result the replacement's inputs, L1350 and L2150-2163; commit 1b5949891b3c, the newest stored, after v3.259.0):
so the rendered value is names.WORKER_REPLICAS, which is no node count and fits any gpu.nodes (item 5), and the
guardian writes only 0 or that value."""

HEAD_PORTS = {name: RAY_PORTS[name] for name in ("gcs-server", "dashboard", "client")}
"""Ports the head exposes on its ClusterIP service (KES ray-cluster-standard.yaml)."""


def rdma_interfaces() -> list[dict[str, str]]:
    """Pod interfaces: eth0 the pod network, eth1 gvnic-1, eth2 .. eth9 rdma-0 .. rdma-7 (A.7)."""
    interfaces = [
        {"interfaceName": "eth0", "network": "default"},
        {"interfaceName": "eth1", "network": names.GVNIC_NETWORK},
    ]
    interfaces += [
        {"interfaceName": f"eth{RDMA_INTERFACES_START + index}", "network": network}
        for index, network in enumerate(names.RDMA_NETWORKS)
    ]
    return interfaces


def worker_annotations(config: StackConfig) -> dict[str, str]:
    """Multi-NIC annotations on a machine with RDMA NICs, plus the GCS FUSE sidecar and its resources (gcs)."""
    annotations = dict(storage.pod_annotations(config, gpu_node=True))
    if config.gpu_machine.rdma:
        annotations["networking.gke.io/default-interface"] = "eth0"
        annotations["networking.gke.io/interfaces"] = json.dumps(rdma_interfaces(), separators=(",", ":"))
    return dict(sorted(annotations.items()))


def _named_value(entry: dict[str, Any]) -> dict[str, str]:
    """A plain env piece (pods.hf_home_env) as one name -> value pair of an env map that extraEnv overrides."""
    return {entry["name"]: entry["value"]}


def _env_list(values: dict[str, str], config: StackConfig) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in sorted(values.items())]
    return env + pods.secret_env(config)


def worker_library_path(config: StackConfig) -> str:
    """The worker's LD_LIBRARY_PATH, which replaces the image's: an NCCL the image installs on purpose,
    then the host driver, then the image's own entries (CUDA compat libraries, cuDNN, ...) after it."""
    image = config.workload.resolved_image()
    host = f"{NVIDIA_POD_DIR}/lib64"
    entries = [image.own_nccl_dir] if image.own_nccl_dir else []
    entries += [host, *(entry for entry in image.library_path if entry != host)]
    return ":".join(entries)


def worker_env(config: StackConfig) -> list[dict[str, Any]]:
    """The GPU worker's environment: the library path, on a machine with RDMA NICs gIB's NCCL settings for this GPU
    and Gloo's interface, the shared HF_HOME, then workload.extraEnv (which wins), and the secret variables."""
    values = {"LD_LIBRARY_PATH": worker_library_path(config)}
    machine = config.gpu_machine
    if machine.rdma and machine.nccl_tuner_config is not None:
        values.update(GIB_NCCL_ENV)
        values["NCCL_TUNER_CONFIG_PATH"] = machine.nccl_tuner_config
        values["GLOO_SOCKET_IFNAME"] = GLOO_SOCKET_IFNAME
    values.update(_named_value(pods.hf_home_env()))
    values.update(config.workload.extra_env)
    return _env_list(values, config)


def head_env(config: StackConfig) -> list[dict[str, Any]]:
    """The head's environment: the shared HF_HOME and workload.extraEnv, and the secret variables."""
    return _env_list({**_named_value(pods.hf_home_env()), **config.workload.extra_env}, config)


def _shm_volume(size_gib: int) -> dict[str, Any]:
    return {"emptyDir": {"medium": "Memory", "sizeLimit": f"{size_gib}Gi"}, "name": "dshm"}


def _host_volume(name: str, path: str) -> dict[str, Any]:
    return {"hostPath": {"path": path}, "name": name}


def render_head(config: StackConfig) -> dict[str, Any]:
    """The head group: CPU only, dashboard on the ClusterIP service (reachable only inside the cluster)."""
    requests = config.head_requests
    pod_spec: dict[str, Any] = {
        "containers": [
            {
                "env": head_env(config),
                "image": config.pulled_image(),
                "name": "ray-head",
                "ports": [{"containerPort": port, "name": name} for name, port in HEAD_PORTS.items()],
                "resources": {"limits": {"memory": requests["memory"]}, "requests": requests},
                "securityContext": pods.container_security_context(),
                "volumeMounts": [{"mountPath": "/dev/shm", "name": "dshm"}, pods.data_mount()],
            }
        ],
        "serviceAccountName": names.RAY_SERVICE_ACCOUNT,
        "volumes": [pods.data_volume(), _shm_volume(HEAD_SHM_GIB)],
    }
    selector = placement.cpu_node_selector(config)
    if selector:
        pod_spec["nodeSelector"] = selector
    metadata: dict[str, Any] = {"labels": dict(LABELS)}
    if storage.pod_annotations(config):
        metadata["annotations"] = storage.pod_annotations(config)
    return {
        "rayStartParams": {"dashboard-host": "0.0.0.0"},
        "serviceType": "ClusterIP",
        "template": {"metadata": metadata, "spec": pod_spec},
    }


def render_worker_group(config: StackConfig) -> dict[str, Any]:
    """The GPU worker group: one pod per node, the whole node's GPUs, its RDMA NICs and gIB mounts where it has them;
    gpu.nodes pods (minReplicas 0, maxReplicas gpu.nodes, replicas names.WORKER_REPLICAS, which KubeRay holds to
    maxReplicas)."""
    machine = config.gpu_machine
    requests = worker_requests(machine)
    quantities = requests.quantities()
    read_only = config.cluster.mode == "autopilot"
    mounts = [
        {"mountPath": "/dev/shm", "name": "dshm"},
        {"mountPath": NVIDIA_POD_DIR, "name": "nvidia", "readOnly": read_only},
    ]
    volumes = [pods.data_volume(), _shm_volume(machine.worker_shm_gib)]
    if machine.rdma:
        mounts.append({"mountPath": GIB_POD_DIR, "name": "gib", "readOnly": read_only})
        volumes.append(_host_volume("gib", GIB_HOST_DIR))
    volumes.append(_host_volume("nvidia", NVIDIA_HOST_DIR))
    container = {
        "env": worker_env(config),
        "image": config.pulled_image(),
        "name": "ray-worker",
        "resources": {
            "limits": {"memory": quantities["memory"], "nvidia.com/gpu": quantities["nvidia.com/gpu"]},
            "requests": quantities,
        },
        "securityContext": pods.container_security_context(),
        "volumeMounts": [*mounts, pods.data_mount()],
    }
    pod_spec = {
        "containers": [container],
        "nodeSelector": placement.gpu_node_selector(config),
        "serviceAccountName": names.RAY_SERVICE_ACCOUNT,
        "tolerations": placement.gpu_tolerations(config),
        "volumes": volumes,
    }
    return {
        "groupName": WORKER_GROUP,
        "maxReplicas": config.gpu.nodes,
        "minReplicas": 0,
        "rayStartParams": {
            "num-cpus": str(requests.cpu),
            "object-store-memory": str(machine.worker_object_store_gib * 1024**3),
        },
        "replicas": names.WORKER_REPLICAS,
        "template": {
            "metadata": {"annotations": worker_annotations(config), "labels": dict(LABELS)},
            "spec": pod_spec,
        },
    }


def render_spec(config: StackConfig) -> dict[str, Any]:
    """The RayCluster spec: fixed size (no autoscaler), rayVersion = the image's Ray version."""
    return {
        "enableInTreeAutoscaling": False,
        "headGroupSpec": render_head(config),
        "rayVersion": config.workload.resolved_image().ray_version,
        "workerGroupSpecs": [render_worker_group(config)],
    }


def render_metadata(config: StackConfig) -> dict[str, Any]:
    """Name, namespace and the annotation that makes `up` wait for KubeRay's `ready` (how long: READY_TIMEOUTS)."""
    return {
        "annotations": {"pulumi.com/waitFor": KUBERAY_READY_WAIT},
        "labels": dict(LABELS),
        "name": names.RAY_CLUSTER,
        "namespace": names.NAMESPACE,
    }


def render_manifest(config: StackConfig) -> dict[str, Any]:
    """The whole RayCluster object, as `kubectl apply` would take it."""
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": render_metadata(config), "spec": render_spec(config)}


def ready_timeouts(config: StackConfig) -> pulumi.CustomTimeouts:
    """How long `up` waits for `ready` when it creates the RayCluster (a replacement too): job.readyTimeoutSeconds,
    as the customTimeouts option rather than the `pulumi.com/timeoutSeconds` annotation. The provider takes the
    engine's timeout first (pulumi-kubernetes provider/pkg/metadata/overrides.go TimeoutDuration L53-56, given
    as req.Timeout in Create, provider.go L1794; the engine sends new.CustomTimeouts.Create, pulumi
    pkg/resource/deploy/step.go L371), and an option is no input, so a changed timeout is no diff (REPLACE_ON_CHANGES)."""
    duration = f"{config.job.ready_timeout_seconds}s"
    return pulumi.CustomTimeouts(create=duration, update=duration)


@dataclass(frozen=True)
class RayClusterArgs:
    """Inputs of the RayCluster component."""

    config: StackConfig
    """The stack config."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """Node pools, network objects, gIB installer, service account, claim, token and secretEnv Secrets."""


class RayCluster(pulumi.ComponentResource):
    """The RayCluster custom resource; `up` waits until KubeRay reports it ready."""

    cluster: k8s.apiextensions.CustomResource

    def __init__(self, name: str, args: RayClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:RayCluster", name, None, opts)
        manifest = render_manifest(args.config)
        pulumi.log.info(
            f"ray: `up` waits up to {args.config.job.ready_timeout_seconds} s for RayCluster"
            f" {names.NAMESPACE}/{names.RAY_CLUSTER} to be ready ({args.config.gpu.nodes} GPU workers);"
            f" follow it with kubectl -n {names.NAMESPACE} get raycluster,pods",
            resource=self,
        )
        self.cluster = k8s.apiextensions.CustomResource(
            names.RAY_CLUSTER,
            api_version=API_VERSION,
            kind=KIND,
            metadata=k8s.meta.v1.ObjectMetaArgs(**manifest["metadata"]),
            spec=manifest["spec"],
            opts=fixed_name_options(
                parent=self,
                provider=args.provider,
                depends_on=list(args.depends_on),
                replace_on_changes=list(REPLACE_ON_CHANGES),
                ignore_changes=list(IGNORE_CHANGES),
                custom_timeouts=ready_timeouts(args.config),
            ),
        )
        self.register_outputs({"name": names.RAY_CLUSTER, "rayVersion": manifest["spec"]["rayVersion"]})
