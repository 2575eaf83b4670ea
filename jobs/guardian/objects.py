"""The run guardian's Kubernetes objects: its service account, the RBAC it needs and nothing more, a ConfigMap
of its settings and one of its code, and a Deployment of one replica on the head's CPU capacity.

Pure renderers (config, the settings dict and the code files in; typed pulumi_kubernetes Args out) and the
thin component `grpo-gke:jobs:RunGuardian`, registered with job.recover. The settings and the code come from
jobs/guardian/settings.py (`guardian_settings(config)`) and incluster/shipping.py (`shipped_files()`); the container runs
`python3 -m incluster.guardian --settings <GUARDIAN_SETTINGS_DIR>/settings.json --address http://<head service>:8265`
with PYTHONPATH=<GUARDIAN_CODE_DIR>, in the head's image.

What it may do is exactly what its code calls (NAMESPACED_CALLS, CLUSTER_CALLS): list the GPU worker pods (how
Kubernetes ended them, which are pending) and the namespace's Pod events (the autoscaler's, for the gate's rung), get
and patch the stack's RayCluster (scale the GPU workers to zero, and see whether they came back, incluster/scaling.py),
list the nodes (their end, their Ready condition) and, only with `cordon_bad_nodes`, get a pod and patch its node (cordon a node the
preflight failed); get, create and update its Lease (incluster/lease.py: one guardian at a time). It reaches the Ray
dashboard as the one pod outside the RayCluster the NetworkPolicies admit (names.GUARDIAN_LABELS), and mounts the
shared storage at /data like the Ray pods (the run's record).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.apps.v1.Deployment import DeploymentInitArgs
from pulumi_kubernetes.core.v1.ConfigMap import ConfigMapInitArgs
from pulumi_kubernetes.core.v1.ServiceAccount import ServiceAccountInitArgs
from pulumi_kubernetes.rbac.v1.ClusterRole import ClusterRoleInitArgs
from pulumi_kubernetes.rbac.v1.ClusterRoleBinding import ClusterRoleBindingInitArgs
from pulumi_kubernetes.rbac.v1.Role import RoleInitArgs
from pulumi_kubernetes.rbac.v1.RoleBinding import RoleBindingInitArgs

from core import names
from core.config.model import StackConfig
from core.facts.gcp import GOOGLE_ACCOUNT_ANNOTATION
from core.resource_options import fixed_name_options
from incluster import heartbeat
from incluster.lease import LEASE_NAME
from workloads import placement, pods, storage
from workloads.identity import LABELS
from workloads.raycluster import API_VERSION

RAY_GROUP = API_VERSION.split("/")[0]
"""The RayCluster's API group (ray.io)."""

SETTINGS_FILE = "settings.json"
"""The settings file in GUARDIAN_SETTINGS_DIR (the settings ConfigMap's one key)."""

REQUESTS = {"cpu": "250m", "memory": "512Mi"}
"""The guardian's requests: a loop of HTTP calls and small file writes. 250m is Autopilot's smallest
general-purpose CPU request before GKE 1.30 (later ones allow 50m); the memory is also its limit."""

CONFIG_MAP_MAX_BYTES = 1024 * 1024
"""Kubernetes refuses a ConfigMap whose data exceeds 1 MiB (the API server's object size limit for it)."""

SETTINGS_CHECKSUM = "grpo-gke/settings-sha256"
"""Pod annotation holding the settings' SHA-256: a changed setting rolls the guardian's pod."""

CODE_CHECKSUM = "grpo-gke/code-sha256"
"""Pod annotation holding the code's SHA-256: changed code rolls the guardian's pod."""


def _metadata(
    name: str, namespaced: bool = True, annotations: dict[str, str] | None = None
) -> k8s.meta.v1.ObjectMetaArgs:
    return k8s.meta.v1.ObjectMetaArgs(
        name=name,
        namespace=names.NAMESPACE if namespaced else None,
        labels={**LABELS, **names.GUARDIAN_LABELS},
        annotations=annotations,
    )


def settings_text(settings: Mapping[str, Any]) -> str:
    """The settings file: sorted keys, indented, one trailing newline (the same settings, the same bytes)."""
    return json.dumps(settings, sort_keys=True, indent=2) + "\n"


def code_key(path: str) -> str:
    """The ConfigMap key of a code file (keys hold no '/'): `incluster/guardian/loop.py` -> `incluster__guardian__loop.py`."""
    return path.replace("/", "__")


def _digest(data: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(sorted(data.items())), separators=(",", ":")).encode()).hexdigest()


def render_service_account(google_account: str | None = None) -> ServiceAccountInitArgs:
    """The guardian's own service account (the bucket grant names it through workload identity); with
    `google_account` (storage.parkWhenIdle), linked to that Google service account, whose tokens the GKE metadata
    server then gives its pod (core/facts/gcp.py GOOGLE_ACCOUNT_ANNOTATION)."""
    annotations = {GOOGLE_ACCOUNT_ANNOTATION: google_account} if google_account is not None else None
    return ServiceAccountInitArgs(metadata=_metadata(names.GUARDIAN, annotations=annotations))


NAMESPACED_CALLS = {
    (
        "",
        "pods",
        "list",
    ): "judging a failed attempt: its GPU worker pods (incluster/guardian/cluster.py worker_pods_of); the readiness"
    " gate: the pending ones (incluster/readiness.py scale_up_events)",
    (RAY_GROUP, "rayclusters", "patch"): "scale to zero (incluster/scaling.py scale_to), the stack's RayCluster only",
    (RAY_GROUP, "rayclusters", "get"): "after the scale to zero: whether the GPU workers came back (a RayCluster"
    " made anew by pulumi up, an unpark; incluster/scaling.py gpu_workers), the stack's RayCluster only",
    ("", "events", "list"): "the readiness gate: the autoscaler's events on the pending GPU worker pods, which rung"
    " and why the last scale-up failed (incluster/readiness.py scale_up_events)",
}
"""Every (API group, resource, verb) the guardian's code calls in its namespace, and where, beside its Lease's
(`lease_rules`: get and update of that Lease by name, create of any, incluster/lease.py). Events only of its namespace,
for the readiness gate's rung (the autoscaler writes them on the pending worker pods); a failure is judged from what
Kubernetes records on the pods and the nodes themselves (Node events go to `default`, out of its Role)."""

CORDON_CALLS = {("", "pods", "get"): "cordoning: the node of a Ray pod the preflight failed (preflight/cordon.py)"}
"""The namespaced calls only job.cordonBadNodes adds."""

CLUSTER_CALLS = {
    ("", "nodes", "list"): "the GPU nodes: their end (deadline), their Ready condition (judging a failure)"
}
"""Every cluster-scoped call of the guardian's code."""

CLUSTER_CORDON_CALLS = {("", "nodes", "patch"): "cordoning a node the preflight failed (preflight/cordon.py cordon)"}
"""The cluster-scoped calls only job.cordonBadNodes adds."""


def _rules(calls: Mapping[tuple[str, str, str], str], names_of: Mapping[str, str]) -> list[k8s.rbac.v1.PolicyRuleArgs]:
    """One rule per (group, resource) with its verbs sorted; `names_of` limits a resource to one object's name."""
    verbs: dict[tuple[str, str], list[str]] = {}
    for group, resource, verb in sorted(calls):
        verbs.setdefault((group, resource), []).append(verb)
    return [
        k8s.rbac.v1.PolicyRuleArgs(
            api_groups=[group],
            resources=[resource],
            resource_names=[names_of[resource]] if resource in names_of else None,
            verbs=found,
        )
        for (group, resource), found in verbs.items()
    ]


def render_role(cordon_bad_nodes: bool) -> RoleInitArgs:
    """In the namespace, exactly NAMESPACED_CALLS (and CORDON_CALLS with `cordon_bad_nodes`) and the Lease's: list the
    GPU worker pods, patch the stack's RayCluster and no other, hold the guardian's Lease."""
    calls = {**NAMESPACED_CALLS, **(CORDON_CALLS if cordon_bad_nodes else {})}
    rules = [*_rules(calls, {"rayclusters": names.RAY_CLUSTER}), *lease_rules()]
    return RoleInitArgs(metadata=_metadata(names.GUARDIAN), rules=rules)


def lease_rules() -> list[k8s.rbac.v1.PolicyRuleArgs]:
    """The guardian's Lease (incluster/lease.py): get and update that Lease alone, and create, which RBAC cannot limit to
    a name ("You cannot restrict create or deletecollection requests by their resource name":
    kubernetes.io/docs/reference/access-authn-authz/rbac/#referring-to-resources), so any Lease of the namespace
    may be created but only the guardian's read or renewed."""
    group = "coordination.k8s.io"
    return [
        k8s.rbac.v1.PolicyRuleArgs(
            api_groups=[group], resources=["leases"], resource_names=[LEASE_NAME], verbs=["get", "update"]
        ),
        k8s.rbac.v1.PolicyRuleArgs(api_groups=[group], resources=["leases"], verbs=["create"]),
    ]


def render_cluster_role(cordon_bad_nodes: bool) -> ClusterRoleInitArgs:
    """The nodes are cluster-scoped: list them; patch them (cordon) only with `cordon_bad_nodes`."""
    calls = {**CLUSTER_CALLS, **(CLUSTER_CORDON_CALLS if cordon_bad_nodes else {})}
    return ClusterRoleInitArgs(metadata=_metadata(names.GUARDIAN_NODES_ROLE, namespaced=False), rules=_rules(calls, {}))


def _subject() -> k8s.rbac.v1.SubjectArgs:
    return k8s.rbac.v1.SubjectArgs(kind="ServiceAccount", name=names.GUARDIAN, namespace=names.NAMESPACE)


def render_role_binding() -> RoleBindingInitArgs:
    """The Role, bound to the guardian's service account."""
    return RoleBindingInitArgs(
        metadata=_metadata(names.GUARDIAN),
        role_ref=k8s.rbac.v1.RoleRefArgs(api_group="rbac.authorization.k8s.io", kind="Role", name=names.GUARDIAN),
        subjects=[_subject()],
    )


def render_cluster_role_binding() -> ClusterRoleBindingInitArgs:
    """The ClusterRole, bound to the guardian's service account."""
    return ClusterRoleBindingInitArgs(
        metadata=_metadata(names.GUARDIAN_NODES_ROLE, namespaced=False),
        role_ref=k8s.rbac.v1.RoleRefArgs(
            api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=names.GUARDIAN_NODES_ROLE
        ),
        subjects=[_subject()],
    )


def render_settings_config_map(settings: Mapping[str, Any]) -> ConfigMapInitArgs:
    """The settings JSON, mounted as GUARDIAN_SETTINGS_DIR/settings.json."""
    return ConfigMapInitArgs(
        metadata=_metadata(names.GUARDIAN_SETTINGS_CONFIG_MAP), data={SETTINGS_FILE: settings_text(settings)}
    )


def code_data(code_files: Mapping[str, str]) -> dict[str, str]:
    """The code ConfigMap's data: one key per file (code_key). ValueError when two paths share a key or the
    files pass a ConfigMap's size limit."""
    data = {code_key(path): text for path, text in sorted(code_files.items())}
    if len(data) != len(code_files):
        raise ValueError("two guardian code files map to the same ConfigMap key")
    size = sum(len(key) + len(text.encode()) for key, text in data.items())
    if size > CONFIG_MAP_MAX_BYTES:
        raise ValueError(f"the guardian's code files hold {size} bytes, over a ConfigMap's {CONFIG_MAP_MAX_BYTES}")
    return data


def render_code_config_map(code_files: Mapping[str, str]) -> ConfigMapInitArgs:
    """The code files, one key each, mounted under GUARDIAN_CODE_DIR at their paths (the volume's items)."""
    return ConfigMapInitArgs(metadata=_metadata(names.GUARDIAN_CODE_CONFIG_MAP), data=code_data(code_files))


def guardian_command() -> list[str]:
    """The guardian's command line (the shared contract): `incluster.guardian` with its settings, the head's
    dashboard and the heartbeat its liveness probe reads (liveness_command)."""
    return [
        "python3",
        "-m",
        "incluster.guardian",
        "--settings",
        f"{names.GUARDIAN_SETTINGS_DIR}/{SETTINGS_FILE}",
        "--address",
        f"http://{names.RAY_HEAD_SERVICE}:{names.RAY_DASHBOARD_PORT}",
        "--heartbeat",
        heartbeat.HEARTBEAT_FILE,
    ]


LIVENESS_PERIOD_SECONDS = 60
"""How often the kubelet runs the guardian's liveness probe (Probe.periodSeconds; its default is 10 s)."""

LIVENESS_FAILURES = 2
"""Consecutive failed probes before the kubelet restarts the guardian (Probe.failureThreshold; default 3): a stuck
guardian is restarted within heartbeat.STALE_AFTER_SECONDS and two periods."""

LIVENESS_TIMEOUT_SECONDS = 10
"""How long one probe may run (Probe.timeoutSeconds, default 1 s): a Python start on a busy CPU node."""

LIVENESS_START_SECONDS = 120
"""Probe.initialDelaySeconds: the guardian beats the heartbeat first thing, after its imports (Ray's among them)."""


def liveness_command() -> list[str]:
    """The liveness probe's exec command (incluster/heartbeat.py run by path, stdlib alone): the heartbeat
    file and how old it may be."""
    script = f"{names.GUARDIAN_CODE_DIR}/incluster/heartbeat.py"
    return ["python3", "-I", script, heartbeat.HEARTBEAT_FILE, str(heartbeat.STALE_AFTER_SECONDS)]


def render_deployment(
    config: StackConfig, settings: Mapping[str, Any], code_files: Mapping[str, str]
) -> DeploymentInitArgs:
    """One replica, never two (Recreate: the old pod ends before the new starts, so two guardians never act on
    one run), on the head's CPU capacity with the head's image, the hardened security context, /data, the GPU
    pools' instance groups (names.GPU_INSTANCE_GROUPS_DIR) and, when the stack logs to W&B, the W&B key's Secret."""
    code = code_data(code_files)
    container = k8s.core.v1.ContainerArgs(
        name="guardian",
        image=config.pulled_image(),
        command=guardian_command(),
        env=[
            k8s.core.v1.EnvVarArgs(name="PYTHONPATH", value=names.GUARDIAN_CODE_DIR),
            # the W&B key as the trainer's pods read it: the projected end goes into each ended attempt's W&B run
            *map(pods.env_var_args, pods.wandb_key_env(config)),
        ],
        resources=k8s.core.v1.ResourceRequirementsArgs(requests=dict(REQUESTS), limits={"memory": REQUESTS["memory"]}),
        security_context=pods.security_context_args(pods.container_security_context()),
        # A stuck loop stops the heartbeat and the kubelet restarts the container (k8s.io/api v0.36.3 core/v1
        # types.go L2722-2758 Probe: initialDelaySeconds, timeoutSeconds, periodSeconds, successThreshold "Must be 1
        # for liveness", failureThreshold).
        liveness_probe=k8s.core.v1.ProbeArgs(
            exec_=k8s.core.v1.ExecActionArgs(command=liveness_command()),
            initial_delay_seconds=LIVENESS_START_SECONDS,
            timeout_seconds=LIVENESS_TIMEOUT_SECONDS,
            period_seconds=LIVENESS_PERIOD_SECONDS,
            success_threshold=1,
            failure_threshold=LIVENESS_FAILURES,
        ),
        volume_mounts=[
            k8s.core.v1.VolumeMountArgs(name="settings", mount_path=names.GUARDIAN_SETTINGS_DIR, read_only=True),
            k8s.core.v1.VolumeMountArgs(name="code", mount_path=names.GUARDIAN_CODE_DIR, read_only=True),
            k8s.core.v1.VolumeMountArgs(
                name="instance-groups", mount_path=names.GPU_INSTANCE_GROUPS_DIR, read_only=True
            ),
            pods.volume_mount_args(pods.data_mount()),
        ],
    )
    pod = k8s.core.v1.PodSpecArgs(
        service_account_name=names.GUARDIAN,
        node_selector=placement.cpu_node_selector(config) or None,
        containers=[container],
        volumes=[
            k8s.core.v1.VolumeArgs(
                name="settings",
                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=names.GUARDIAN_SETTINGS_CONFIG_MAP),
            ),
            k8s.core.v1.VolumeArgs(
                name="code",
                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(
                    name=names.GUARDIAN_CODE_CONFIG_MAP,
                    items=[k8s.core.v1.KeyToPathArgs(key=code_key(path), path=path) for path in sorted(code_files)],
                ),
            ),
            # The GPU pools' MIGs (workloads/instance_groups.py), by name only: their values stay out of the pod's
            # spec, so a pool's new groups reach the pod without rolling it; optional, as Autopilot has none.
            k8s.core.v1.VolumeArgs(
                name="instance-groups",
                config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(
                    name=names.GPU_INSTANCE_GROUPS_CONFIG_MAP, optional=True
                ),
            ),
            pods.claim_volume_args(pods.data_volume()),
        ],
    )
    annotations = {
        **storage.pod_annotations(config),
        CODE_CHECKSUM: _digest(code),
        SETTINGS_CHECKSUM: _digest({SETTINGS_FILE: settings_text(settings)}),
    }
    labels = {**LABELS, **names.GUARDIAN_LABELS}
    return DeploymentInitArgs(
        metadata=_metadata(names.GUARDIAN),
        spec=k8s.apps.v1.DeploymentSpecArgs(
            replicas=1,
            strategy=k8s.apps.v1.DeploymentStrategyArgs(type="Recreate"),
            selector=k8s.meta.v1.LabelSelectorArgs(match_labels=dict(names.GUARDIAN_LABELS)),
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(labels=labels, annotations=dict(sorted(annotations.items()))),
                spec=pod,
            ),
        ),
    )


@dataclass(frozen=True)
class RunGuardianArgs:
    """Inputs of the RunGuardian component."""

    config: StackConfig
    """The stack config."""
    settings: Mapping[str, Any]
    """The guardian's settings (jobs/guardian/settings.py guardian_settings)."""
    code_files: Mapping[str, str]
    """The guardian's code by relative path (incluster/shipping.py shipped_files)."""
    cordon_bad_nodes: bool
    """Whether the guardian may patch (cordon) nodes."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    depends_on: Sequence[pulumi.Resource]
    """What every object waits for: the namespace (through the data claim)."""
    deployment_needs: Sequence[pulumi.Resource]
    """What the Deployment also waits for: the RayCluster it follows, the storage grants of its mount and, with a
    Google account, that account's grants."""
    google_account: str | None = None
    """The email of the Google service account its Kubernetes one acts as to park the run (storage.parkWhenIdle);
    None: none."""


class RunGuardian(pulumi.ComponentResource):
    """The run guardian: service account, RBAC, settings and code ConfigMaps, and its Deployment."""

    deployment: k8s.apps.v1.Deployment

    def __init__(self, name: str, args: RunGuardianArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:jobs:RunGuardian", name, None, opts)
        child = fixed_name_options(parent=self, provider=args.provider, depends_on=list(args.depends_on))
        account = k8s.core.v1.ServiceAccount(names.GUARDIAN, render_service_account(args.google_account), opts=child)
        bound = fixed_name_options(parent=self, provider=args.provider, depends_on=[account])
        role = k8s.rbac.v1.Role(names.GUARDIAN, render_role(args.cordon_bad_nodes), opts=child)
        cluster_role = k8s.rbac.v1.ClusterRole(
            names.GUARDIAN_NODES_ROLE, render_cluster_role(args.cordon_bad_nodes), opts=child
        )
        bindings = [
            k8s.rbac.v1.RoleBinding(names.GUARDIAN, render_role_binding(), opts=bound),
            k8s.rbac.v1.ClusterRoleBinding(names.GUARDIAN_NODES_ROLE, render_cluster_role_binding(), opts=bound),
        ]
        settings = k8s.core.v1.ConfigMap(
            names.GUARDIAN_SETTINGS_CONFIG_MAP, render_settings_config_map(args.settings), opts=child
        )
        code = k8s.core.v1.ConfigMap(
            names.GUARDIAN_CODE_CONFIG_MAP, render_code_config_map(args.code_files), opts=child
        )
        self.deployment = k8s.apps.v1.Deployment(
            names.GUARDIAN,
            render_deployment(args.config, args.settings, args.code_files),
            opts=fixed_name_options(
                parent=self,
                provider=args.provider,
                depends_on=[
                    *args.depends_on,
                    *args.deployment_needs,
                    account,
                    role,
                    cluster_role,
                    *bindings,
                    settings,
                    code,
                ],
            ),
        )
        self.register_outputs({"deployment": names.GUARDIAN, "serviceAccount": names.GUARDIAN})
