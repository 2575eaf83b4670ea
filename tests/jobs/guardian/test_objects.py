"""The run guardian's Kubernetes objects as mocked runs record them: strict Kubernetes 1.33 schemas, only the RBAC
it needs, the head's CPU capacity and image, the hardened security context, its settings and code mounted where
the contract says, /data like the Ray pods, and the labels the NetworkPolicies admit to the dashboard."""

from __future__ import annotations

import json

import pytest

from core import names
from incluster.shipping import PROJECT_DIR
from jobs.guardian import objects as guardian_objects
from tests.conftest import COMBINATIONS, combination_config, run_values
from tests.workloads.conftest import TEST_WANDB_KEY, combination_values, k8s_schema_errors, mocked_run
from tests.workloads.test_policies import HEAD_POD, Pod, may_reach

GUARDIAN_TYPES = {
    "kubernetes:core/v1:ServiceAccount": [names.GUARDIAN],
    "kubernetes:rbac.authorization.k8s.io/v1:Role": [names.GUARDIAN],
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": [names.GUARDIAN],
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": [names.GUARDIAN_NODES_ROLE],
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": [names.GUARDIAN_NODES_ROLE],
    "kubernetes:core/v1:ConfigMap": [names.GUARDIAN_CODE_CONFIG_MAP, names.GUARDIAN_SETTINGS_CONFIG_MAP],
    "kubernetes:apps/v1:Deployment": [names.GUARDIAN],
}
"""Every object of the guardian, by type and name."""

SAMPLE_SETTINGS = {"stack": "test", "run": "test-0123456789", "gpuNodes": 1, "idleMinutes": 15}
SAMPLE_CODE = {"incluster/__init__.py": '"""incluster."""\n', "incluster/guardian/loop.py": "print('guard')\n"}


def _guardian(recording):
    """The guardian's recorded objects, by (type, name)."""
    component = {r.urn for r in recording.resources if r.type == "grpo-gke:jobs:RunGuardian"}
    return {(r.type, r.name): r for r in recording.resources if r.parent in component}


def _manifest(resource) -> dict:
    api_version, kind = resource.type.split(":", 1)[1].rsplit(":", 1)
    return {**resource.inputs, "apiVersion": api_version.replace("core/v1", "v1"), "kind": kind}


@pytest.mark.parametrize(("mode", "gpu", "storage"), COMBINATIONS)
def test_every_guardian_object_passes_the_strict_schema(mode, gpu, storage):
    objects = _guardian(mocked_run(mode, gpu, storage))
    assert sorted(objects) == sorted((type_, name) for type_, found in GUARDIAN_TYPES.items() for name in found)
    for resource in objects.values():
        assert k8s_schema_errors(_manifest(resource)) == [], resource.name


def test_the_schema_check_refuses_a_misspelt_deployment_field():
    deployment = _guardian(mocked_run("standard", "h200", "gcs"))[("kubernetes:apps/v1:Deployment", names.GUARDIAN)]
    broken = _manifest(deployment)
    broken["spec"] = {**broken["spec"], "replica": 1}
    assert any("replica" in error for error in k8s_schema_errors(broken))


def test_rbac_lists_pods_and_nodes_and_gets_and_patches_only_the_stacks_ray_cluster():
    objects = _guardian(mocked_run("standard", "h200", "gcs"))
    role = objects[("kubernetes:rbac.authorization.k8s.io/v1:Role", names.GUARDIAN)].inputs
    assert role["metadata"]["namespace"] == "grpo"
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
        {"apiGroups": ["ray.io"], "resourceNames": ["grpo"], "resources": ["rayclusters"], "verbs": ["get", "patch"]},
        {"apiGroups": ["coordination.k8s.io"], "resourceNames": ["grpo-guardian"], "resources": ["leases"],
         "verbs": ["get", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]  # fmt: skip
    cluster_role = objects[("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole", names.GUARDIAN_NODES_ROLE)].inputs
    assert cluster_role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]}]
    assert "namespace" not in cluster_role["metadata"]
    subject = [{"kind": "ServiceAccount", "name": "grpo-guardian", "namespace": "grpo"}]
    for type_, name, kind in (
        ("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding", names.GUARDIAN, "Role"),
        ("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding", names.GUARDIAN_NODES_ROLE, "ClusterRole"),
    ):
        binding = objects[(type_, name)].inputs
        assert binding["subjects"] == subject
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name}


def test_nodes_are_patched_and_pods_got_only_when_the_guardian_cordons_bad_nodes():
    cordon = guardian_objects.render_cluster_role(cordon_bad_nodes=True)
    assert cordon.rules[0].verbs == ["list", "patch"]
    assert guardian_objects.render_cluster_role(cordon_bad_nodes=False).rules[0].verbs == ["list"]

    def pods_verbs(cordon: bool) -> list[str]:
        [rule] = [
            rule for rule in guardian_objects.render_role(cordon_bad_nodes=cordon).rules if rule.resources == ["pods"]
        ]
        return rule.verbs

    assert pods_verbs(True) == ["get", "list"]
    assert pods_verbs(False) == ["list"]


@pytest.mark.parametrize(("mode", "storage"), [("standard", "gcs"), ("standard", "lustre"), ("autopilot", "gcs")])
def test_one_replica_on_the_heads_capacity_with_its_image_security_context_and_mounts(mode, storage):
    recording = mocked_run(mode, "h200", storage)
    deployment = _guardian(recording)[("kubernetes:apps/v1:Deployment", names.GUARDIAN)].inputs
    ray = recording.one("kubernetes:ray.io/v1:RayCluster").inputs["spec"]
    head = ray["headGroupSpec"]["template"]
    spec = deployment["spec"]
    assert (spec["replicas"], spec["strategy"]) == (1, {"type": "Recreate"})
    assert spec["selector"] == {"matchLabels": names.GUARDIAN_LABELS}
    pod = spec["template"]["spec"]
    assert pod.get("nodeSelector") == head["spec"].get("nodeSelector")
    assert pod.get("nodeSelector") == ({"cloud.google.com/gke-nodepool": "ray-head"} if mode == "standard" else None)
    assert "tolerations" not in pod, "never on a (tainted, spot) GPU node"
    assert pod["serviceAccountName"] == "grpo-guardian"
    [container] = pod["containers"]
    assert container["image"] == head["spec"]["containers"][0]["image"]
    assert container["securityContext"] == head["spec"]["containers"][0]["securityContext"]
    assert container["command"] == [
        "python3",
        "-m",
        "incluster.guardian",
        "--settings",
        "/etc/grpo-gke/guardian/settings.json",
        "--address",
        "http://grpo-head-svc:8265",
        "--heartbeat",
        "/tmp/grpo-guardian-heartbeat",
    ]
    assert container["env"] == [{"name": "PYTHONPATH", "value": "/opt/grpo-gke"}]
    assert container["resources"] == {"limits": {"memory": "512Mi"}, "requests": {"cpu": "250m", "memory": "512Mi"}}
    mounts = {mount["name"]: mount for mount in container["volumeMounts"]}
    assert mounts["settings"] == {"mountPath": "/etc/grpo-gke/guardian", "name": "settings", "readOnly": True}
    assert mounts["code"] == {"mountPath": "/opt/grpo-gke", "name": "code", "readOnly": True}
    assert mounts["data"] == {"mountPath": "/data", "name": "data"}
    # the GPU pools' MIGs: the whole ConfigMap (no subPath: the kubelet brings a changed one), by name only
    assert mounts["instance-groups"] == {"mountPath": "/etc/grpo-gke/instance-groups", "name": "instance-groups",
                                         "readOnly": True}  # fmt: skip
    volumes = {volume["name"]: volume for volume in pod["volumes"]}
    assert volumes["instance-groups"] == {"name": "instance-groups",
                                         "configMap": {"name": "grpo-gpu-instance-groups", "optional": True}}  # fmt: skip
    assert volumes["data"] == next(v for v in head["spec"]["volumes"] if v["name"] == "data")
    head_annotations = head["metadata"].get("annotations", {})
    annotations = spec["template"]["metadata"]["annotations"]
    assert {key: annotations[key] for key in head_annotations} == head_annotations
    assert annotations.keys() - head_annotations.keys() == {"grpo-gke/code-sha256", "grpo-gke/settings-sha256"}


def test_with_a_w_and_b_key_the_guardian_reads_it_from_its_secret_as_the_trainers_pods_do():
    """The guardian writes the projected end into W&B run summaries (incluster/wandb_summary.py)."""
    values, secret_keys = combination_values("standard", "h200", "gcs", wandb_key=TEST_WANDB_KEY)
    recording = run_values(values, secret_keys, stack="test")
    deployment = _guardian(recording)[("kubernetes:apps/v1:Deployment", names.GUARDIAN)]
    [container] = deployment.inputs["spec"]["template"]["spec"]["containers"]
    key = {"name": "WANDB_API_KEY", "valueFrom": {"secretKeyRef": {"key": "api-key", "name": names.WANDB_SECRET}}}
    assert container["env"] == [{"name": "PYTHONPATH", "value": "/opt/grpo-gke"}, key]
    head = recording.one("kubernetes:ray.io/v1:RayCluster").inputs["spec"]["headGroupSpec"]["template"]["spec"]
    assert key in head["containers"][0]["env"]
    assert TEST_WANDB_KEY not in json.dumps(deployment.inputs)


def test_a_liveness_probe_runs_the_shipped_heartbeat_check_and_no_shell():
    recording = mocked_run("standard", "h200", "gcs")
    objects = _guardian(recording)
    deployment = objects[("kubernetes:apps/v1:Deployment", names.GUARDIAN)].inputs
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    assert container["livenessProbe"] == {
        "exec": {
            "command": ["python3", "-I", "/opt/grpo-gke/incluster/heartbeat.py", "/tmp/grpo-guardian-heartbeat", "600"]
        },
        "initialDelaySeconds": 120,
        "timeoutSeconds": 10,
        "periodSeconds": 60,
        "successThreshold": 1,
        "failureThreshold": 2,
    }
    code = objects[("kubernetes:core/v1:ConfigMap", names.GUARDIAN_CODE_CONFIG_MAP)].inputs["data"]
    assert guardian_objects.code_key("incluster/heartbeat.py") in code  # the probe's script is in the pod's code
    assert "readOnlyRootFilesystem" not in container["securityContext"]  # the heartbeat is written under /tmp


def test_the_guardian_pod_reaches_the_dashboard_under_the_recorded_policies():
    recording = mocked_run("standard", "h200", "gcs")
    deployment = _guardian(recording)[("kubernetes:apps/v1:Deployment", names.GUARDIAN)].inputs
    policies = [r.inputs for r in recording.by_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")]
    guardian = Pod("grpo", deployment["spec"]["template"]["metadata"]["labels"])
    assert may_reach(policies, guardian, HEAD_POD, 8265)
    assert not may_reach(policies, guardian, HEAD_POD, 6379)


def test_settings_and_code_are_mounted_at_their_paths_and_a_change_rolls_the_pod():
    config = combination_config()
    settings = guardian_objects.render_settings_config_map(SAMPLE_SETTINGS)
    assert settings.data == {"settings.json": json.dumps(SAMPLE_SETTINGS, sort_keys=True, indent=2) + "\n"}
    code = guardian_objects.render_code_config_map(SAMPLE_CODE)
    assert code.data == {
        "incluster____init__.py": '"""incluster."""\n',
        "incluster__guardian__loop.py": "print('guard')\n",
    }
    deployment = guardian_objects.render_deployment(config, SAMPLE_SETTINGS, SAMPLE_CODE)
    items = next(v for v in deployment.spec.template.spec.volumes if v.name == "code").config_map.items
    assert [(item.key, item.path) for item in items] == [
        ("incluster____init__.py", "incluster/__init__.py"),
        ("incluster__guardian__loop.py", "incluster/guardian/loop.py"),
    ]
    annotations = deployment.spec.template.metadata.annotations
    assert (
        annotations
        == guardian_objects.render_deployment(config, SAMPLE_SETTINGS, SAMPLE_CODE).spec.template.metadata.annotations
    )
    other = guardian_objects.render_deployment(config, {**SAMPLE_SETTINGS, "idleMinutes": 0}, SAMPLE_CODE)
    assert (
        other.spec.template.metadata.annotations["grpo-gke/settings-sha256"] != annotations["grpo-gke/settings-sha256"]
    )
    assert other.spec.template.metadata.annotations["grpo-gke/code-sha256"] == annotations["grpo-gke/code-sha256"]
    changed = guardian_objects.render_deployment(
        config, SAMPLE_SETTINGS, {**SAMPLE_CODE, "incluster/guardian/loop.py": "x\n"}
    )
    assert changed.spec.template.metadata.annotations["grpo-gke/code-sha256"] != annotations["grpo-gke/code-sha256"]


def test_code_files_that_share_a_key_or_pass_the_size_limit_are_refused():
    with pytest.raises(ValueError, match="same ConfigMap key"):
        guardian_objects.code_data({"a/b.py": "", "a__b.py": ""})
    with pytest.raises(ValueError, match="over a ConfigMap's 1048576"):
        guardian_objects.code_data({"big.py": "x" * guardian_objects.CONFIG_MAP_MAX_BYTES})


def test_the_deployment_waits_for_the_ray_cluster_and_the_storage_grants():
    recording = mocked_run("standard", "h200", "gcs")
    objects = _guardian(recording)
    deployment = objects[("kubernetes:apps/v1:Deployment", names.GUARDIAN)]
    ray = recording.one("kubernetes:ray.io/v1:RayCluster")
    grants = {r.urn for r in recording.by_type("gcp:storage/bucketIAMMember:BucketIAMMember")}
    assert {ray.urn, *grants} <= set(deployment.depends_on)
    assert {r.urn for key, r in objects.items() if key[0] != "kubernetes:apps/v1:Deployment"} <= set(
        deployment.depends_on
    )
    account = objects[("kubernetes:core/v1:ServiceAccount", names.GUARDIAN)]
    assert ray.urn not in account.depends_on


def test_recover_false_deploys_no_guardian():
    values, secret_keys = combination_values("standard", "h200", "gcs", job={"recover": False})
    recording = run_values(values, secret_keys, stack="test")
    assert _guardian(recording) == {}
    assert not recording.by_type("kubernetes:apps/v1:Deployment")


def test_the_stacks_code_config_map_holds_every_guardian_module_and_the_pod_its_checksum():
    """What the golden files mark (tests/conftest.py GUARDIAN_CODE_MARK): the code and its checksum, checked here."""
    from incluster.shipping import shipped_files

    objects = _guardian(mocked_run("standard", "h200", "gcs"))
    code = objects[("kubernetes:core/v1:ConfigMap", names.GUARDIAN_CODE_CONFIG_MAP)].inputs["data"]
    assert code == guardian_objects.code_data(shipped_files())
    for path in (PROJECT_DIR / "incluster" / "guardian").glob("*.py"):
        assert code[f"incluster__guardian__{path.name}"] == path.read_text()
    template = objects[("kubernetes:apps/v1:Deployment", names.GUARDIAN)].inputs["spec"]["template"]
    assert template["metadata"]["annotations"][guardian_objects.CODE_CHECKSUM] == guardian_objects._digest(code)


@pytest.mark.parametrize("mode", ["standard", "autopilot"])
def test_a_parking_guardians_service_account_is_linked_to_its_google_account_and_it_waits_for_its_grants(
    infra_run, mode
):
    """storage.parkWhenIdle: the Kubernetes service account names the Google one (core/facts/gcp.py
    GOOGLE_ACCOUNT_ANNOTATION), whose tokens the metadata server then gives the guardian's pod; the Deployment
    waits for that account's grants (its park role, the parked bucket, the link)."""
    recording = infra_run(mode, "b200", "lustre", storage={"parkWhenIdle": True})
    objects = _guardian(recording)
    account = objects[("kubernetes:core/v1:ServiceAccount", names.GUARDIAN)]
    assert account.inputs["metadata"]["annotations"] == {
        "iam.gke.io/gcp-service-account": "grpo-test-guardian@my-grpo-project.iam.gserviceaccount.com"
    }
    for resource in objects.values():
        assert k8s_schema_errors(_manifest(resource)) == [], resource.name
    deployment = objects[("kubernetes:apps/v1:Deployment", names.GUARDIAN)]
    identity = {r.urn for r in recording.resources if r.parent and "GuardianIdentity" in r.parent}
    grants = {
        r.urn
        for r in recording.resources
        if r.urn in identity and r.type != "gcp:serviceaccount/account:Account" and "iAMCustomRole" not in r.type
    }
    assert len(grants) == 3 and grants <= set(deployment.depends_on)
    plain = _guardian(mocked_run(mode, "b200", "lustre"))[("kubernetes:core/v1:ServiceAccount", names.GUARDIAN)]
    assert "annotations" not in plain.inputs["metadata"]


def test_the_gpu_pools_instance_groups_reach_the_guardian_through_their_configmap_and_nothing_it_is_built_from():
    """The program hands each GPU pool's `instanceGroupUrls` (plan/mocks.py answers them in the GKE API's shape,
    `.../instanceGroupManagers/gke-<cluster>-<pool>-<8 hex>-grp`) to the ConfigMap of the instance groups, each MIG
    name to its rung, and to the post-deploy gate; no input of the guardian's objects is built from a pool, so a
    replaced or added pool neither rolls nor replaces it (tests/plan/test_blast.py shows the plan's side)."""
    import re

    recording = run_values(*combination_values("standard", "b200", "gcs", gpu={"capacity": ["spot", "on-demand"]}))
    (config_map,) = [
        r for r in recording.by_type("kubernetes:core/v1:ConfigMap") if r.name == "grpo-gpu-instance-groups"
    ]
    groups = json.loads(config_map.inputs["data"]["groups.json"])
    assert sorted(groups.values()) == ["on-demand", "spot"]
    for name, rung in groups.items():
        pool = names.gpu_pool_name("spot", rung)
        assert re.fullmatch(rf"gke-grpo-test-{pool}-[0-9a-f]{{8}}-grp", name), name
    (job,) = recording.by_type("pulumi-python:dynamic:Resource")
    assert job.inputs["gpu_instance_groups"] == groups
    pools = {r.urn for r in recording.by_type("gcp:container/nodePool:NodePool")}
    waits = {r.urn: set(r.depends_on) for r in recording.resources}

    def upstream(urn: str) -> set[str]:
        seen, todo = set(), [urn]
        while todo:
            for before in waits.get(todo.pop(), ()):
                if before not in seen:
                    seen.add(before)
                    todo.append(before)
        return seen

    assert pools & upstream(config_map.urn)
    for (type_, name), resource in _guardian(recording).items():
        text = json.dumps(resource.inputs)
        assert not any(mig in text for mig in groups), (type_, name)
    autopilot = mocked_run("autopilot", "b200", "gcs")
    assert not [r for r in autopilot.by_type("kubernetes:core/v1:ConfigMap") if r.name == "grpo-gpu-instance-groups"]
