"""The offline artefacts read well: k8s.yaml in apply order, plan.json naming each resource's
provider and referring to the staging script by content hash, graph.mmd with readable ids and
plurals, and a summary that shows the run and the head's machine."""

from __future__ import annotations

import hashlib
import json
from importlib.metadata import version

import pytest

from plan.monitor import default_provider_name
from plan.writer import MANY_FILES, kubernetes_objects, render_graph_mmd
from tests.conftest import SHIPPED_STACKS, config_of, guardian_code_names
from workloads import staging


@pytest.mark.parametrize(
    ("package_version", "name"),
    [("10.2.0", "default_10_2_0"), ("4.34.2", "default_4_34_2"), ("1.2.3-alpha.1+build.5", "default_1_2_3_alpha_1_build_5"), ("", "default")],
)  # fmt: skip
def test_default_provider_names_follow_the_engine(package_version, name):
    assert default_provider_name(package_version) == name


def test_the_plan_files_as_the_user_gets_them(shipped_plan_command):
    run = shipped_plan_command("dev")
    result, out = run.result, run.out
    assert result.returncode == 0 and result.stderr == "", result.stderr
    script_name = "grpo-staging.staging_script.py"
    code = guardian_code_names()
    guardian = [*code, "grpo-guardian-settings.settings.json"]
    assert sorted(path.name for path in out.iterdir()) == sorted(
        [
            "plan.json",
            "k8s.yaml",
            "job.json",
            "graph.mmd",
            script_name,
            "cost.json",
            "first-step.json",
            *guardian,
            "grpo-gpu-instance-groups.groups.json",
        ]
    )
    assert len(code) > MANY_FILES
    assert result.stdout.splitlines()[-1] == (
        f"Wrote plan.json, k8s.yaml, job.json, graph.mmd, grpo-guardian-code.* ({len(code)} files),"
        f" grpo-guardian-settings.settings.json, grpo-gpu-instance-groups.groups.json, {script_name}, cost.json and"
        f" first-step.json to {out}"
    )
    assert "  head: c2-standard-16 (the Ray head's CPU node pool)" in result.stdout.splitlines()
    run = json.loads((out / "job.json").read_text())["metadata"]["run"]
    assert f"  run: {run}" in result.stdout.splitlines() and run.startswith("dev-")

    plan = json.loads((out / "plan.json").read_text())
    gcp = f"urn:pulumi:dev::grpo-gke::pulumi:providers:gcp::default_{version('pulumi_gcp').replace('.', '_')}"
    for resource in plan["resources"]:
        if resource["type"].startswith("gcp:"):
            assert resource["provider"] == gcp, resource["urn"]
        elif resource["custom"] and not resource["type"].startswith("pulumi:providers:"):
            assert resource["provider"], resource["urn"]
        else:
            assert resource["provider"] == "", resource["urn"]

    script = (out / script_name).read_text()
    assert script == staging.render_script_config_map().data["staging_script.py"]
    (config_map,) = [r for r in plan["resources"] if r["name"] == "grpo-staging-script"]
    digest = hashlib.sha256(script.encode()).hexdigest()
    assert config_map["inputs"]["data"] == {
        "staging_script.py": f"sha256:{digest} (file {script_name} beside this plan)"
    }
    assert "def main(" not in (out / "plan.json").read_text()
    assert "def main(" in (out / "k8s.yaml").read_text(), "k8s.yaml stays appliable as it is"


def test_an_autopilot_summary_says_who_picks_the_head(shipped_plan_command):
    result = shipped_plan_command("verl-autopilot-b200").result
    assert result.returncode == 0, result.stderr
    assert "  head: chosen by Autopilot for the head's request of 12 CPUs and 32Gi memory" in result.stdout.splitlines()


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_k8s_yaml_is_in_apply_order(stack, plan_of):
    objects = kubernetes_objects(plan_of(stack))
    position = {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): i for i, o in enumerate(objects)
    }
    kinds = [o["kind"] for o in objects]
    namespaces = [i for i, kind in enumerate(kinds) if kind == "Namespace"]
    assert namespaces == list(range(len(namespaces))), "namespaces first"
    # The run guardian follows the run on the RayCluster: its Deployment comes right after it.
    assert kinds[-2:] == ["RayCluster", "Deployment"], "the RayCluster after everything it needs, then the guardian"
    for index, item in enumerate(objects):
        namespace = item["metadata"].get("namespace")
        if ("Namespace", "", namespace) in position:
            assert position[("Namespace", "", namespace)] < index, item["metadata"]
    assert position[("PersistentVolume", "", "grpo-data")] < position[("PersistentVolumeClaim", "grpo", "grpo-data")]
    assert position[("ConfigMap", "grpo", "grpo-staging")] < position[("Job", "grpo", "grpo-staging")]
    # The pod networks only where the machine has RDMA NICs (first-run's L4 has none: no such object at all).
    rdma = config_of(stack).gpu_machine.rdma
    for name in ("gvnic-1", *(f"rdma-{i}" for i in range(8))):
        if rdma:
            assert position[("GKENetworkParamSet", "", name)] < position[("Network", "", name)]
        else:
            assert ("GKENetworkParamSet", "", name) not in position and ("Network", "", name) not in position
    custom = [i for i, kind in enumerate(kinds) if kind in ("GKENetworkParamSet", "Network", "RayCluster")]
    assert custom == list(range(len(kinds) - 1 - len(custom), len(kinds) - 1)), (
        "custom resources after the built-in kinds"
    )


def test_graph_ids_are_the_logical_names_and_counts_are_plural_only_when_plural(plan_of):
    graph = render_graph_mmd(plan_of("dev"))
    assert '  node_pools["node-pools<br/>grpo-gke:infra:NodePools<br/>2 resources"]' in graph.splitlines()
    assert '  ray["ray<br/>grpo-gke:workloads:RayCluster<br/>1 resource"]' in graph.splitlines()
    assert "  ray --> grpo_job" in graph.splitlines()
    assert "1 resources" not in graph


def test_the_shipped_lustre_stack_shows_the_park_guard_and_what_destroy_does_to_the_instance(shipped_plan_command):
    result = shipped_plan_command("nemo-rl-standard-b200").result
    lines = result.stdout.splitlines()
    assert "     1  park-guard (pulumi-python:dynamic:Resource)" in lines
    assert (
        "  storage: Managed Lustre 9000 GiB at 1000 MB/s/TiB, kept on pulumi destroy (storage.keepOnDestroy)" in lines
    )
