"""The offline plan: the real program under mocks, its recording and the files it writes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pulumi
import pytest
import yaml

from jobs.runs.goodput import duration
from plan import harness, writer
from plan.cli import main
from plan.monitor import SECRET_PLACEHOLDER, UNKNOWN, UNKNOWN_PLACEHOLDER, wire_value
from plan.writer import kubernetes_objects, manifests_yaml, render_graph_mmd, render_plan_json
from tests.conftest import (
    REPO_ROOT,
    SHIPPED_STACKS,
    guardian_code_names,
    plan_json_without_guardian_code,
    shipped_stack_file,
    values_of,
)
from tests.core.test_config import OPEN_CONTROL_PLANE

GOLDEN = Path(__file__).parent / "golden"
PLAN_KEYS = {
    "urn",
    "type",
    "name",
    "custom",
    "parent",
    "provider",
    "propertyDependencies",
    "dependsOn",
    "protect",
    "retainOnDelete",
    "deleteBeforeReplace",
    "replaceOnChanges",
    "ignoreChanges",
    "customTimeouts",
    "additionalSecretOutputs",
    "inputs",
}


def test_wire_value_turns_floats_secrets_and_unknowns_into_stable_json():
    secret = {"4dabf18193072939515e22adb298388d": "1b47061264138c4ac30d75fd1eb44270", "value": "hf_x"}
    assert wire_value({"b": 8896.0, "a": [0.5, 2.0], "s": secret, "u": UNKNOWN}) == {
        "a": [0.5, 2],
        "b": 8896,
        "s": SECRET_PLACEHOLDER,
        "u": UNKNOWN_PLACEHOLDER,
    }
    assert isinstance(wire_value(8896.0), int)


def test_the_graph_does_not_depend_on_the_process(plan_of):
    code = (
        "import sys; from tests.conftest import stack_values; from plan.harness import run_values;"
        " from plan.writer import render_graph_mmd; v = stack_values('dev');"
        " sys.stdout.write(render_graph_mmd(run_values(v.values, v.secret_keys, 'dev')))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "123", "PYTHONPATH": str(REPO_ROOT)}
    other = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True, timeout=120
    )
    assert other.stdout == render_graph_mmd(plan_of("dev"))


def test_urns_are_in_the_engines_form(plan_of):
    recording = plan_of("dev")
    assert recording.resources
    for resource in recording.resources:
        assert resource.urn.startswith("urn:pulumi:dev::grpo-gke::"), resource.urn
        assert "pulumi:pulumi:Stack$" not in resource.urn
        assert resource.urn.endswith(f"::{resource.name}")
    children = [r for r in recording.resources if r.parent and "::pulumi:pulumi:Stack::" not in r.parent]
    assert children, "components own their children"
    for child in children:
        parent = recording.by_urn(child.parent)
        parent_chain = parent.urn.split("::")[2]
        assert child.urn.split("::")[2] == f"{parent_chain}${child.type}"


def test_plan_json_has_the_documented_shape_and_redacts_secrets(plan_of):
    document = json.loads(render_plan_json(plan_of("dev")))
    assert set(document) == {"project", "stack", "resources", "outputs"}
    assert (document["project"], document["stack"]) == ("grpo-gke", "dev")
    urns = [resource["urn"] for resource in document["resources"]]
    assert urns == sorted(urns)
    for resource in document["resources"]:
        assert set(resource) == PLAN_KEYS
        assert resource["dependsOn"] == sorted(resource["dependsOn"])
        assert set(resource["dependsOn"]) <= set(urns), resource["urn"]
        for dependencies in resource["propertyDependencies"].values():
            assert dependencies == sorted(dependencies) and set(dependencies) <= set(resource["dependsOn"])
    assert document["outputs"]["kubeconfig"] == SECRET_PLACEHOLDER


def test_the_recording_ties_each_input_to_the_resources_it_was_built_from(plan_of):
    """propertyDependencies: the GPU pool's `cluster` comes from the cluster, the job's `cluster_uid`
    from the RayCluster (whose offline uid the mocks give it, as the API server would)."""
    recording = plan_of("dev")
    cluster = recording.one("gcp:container/cluster:Cluster")
    ray = recording.one("kubernetes:ray.io/v1:RayCluster")
    pool = recording.one("gcp:container/nodePool:NodePool", "grpo-dev-gpu")
    job = recording.one("pulumi-python:dynamic:Resource")
    assert pool.property_dependencies["cluster"] == (cluster.urn,)
    assert job.property_dependencies["cluster_uid"] == (ray.urn,)
    assert job.inputs["cluster_uid"]


def test_the_recording_keeps_the_resource_options_the_engine_acts_on(plan_of):
    """deleteBeforeReplace, replaceOnChanges, ignoreChanges, customTimeouts and additionalSecretOutputs
    reach plan.json as the program set them (the RayCluster and the post-deploy step set some of them)."""
    recording = plan_of("dev")
    ray = recording.one("kubernetes:ray.io/v1:RayCluster")
    assert (ray.delete_before_replace, ray.replace_on_changes) == (True, ("*",))
    assert ray.custom_timeouts == {"create": "1800s", "update": "1800s"}
    job = recording.one("pulumi-python:dynamic:Resource")
    assert job.additional_secret_outputs == ("kubeconfig",)
    assert job.replace_on_changes == () and job.ignore_changes == () and job.custom_timeouts == {}
    document = {entry["urn"]: entry for entry in json.loads(render_plan_json(recording))["resources"]}
    assert document[ray.urn]["deleteBeforeReplace"] is True
    assert document[ray.urn]["replaceOnChanges"] == ["*"]
    assert document[ray.urn]["customTimeouts"] == {"create": "1800s", "update": "1800s"}
    assert document[job.urn]["additionalSecretOutputs"] == ["kubeconfig"]


def testcustom_timeouts_of_are_recorded_by_operation():
    """A customTimeouts option reaches the recording with only the operations it sets."""
    from pulumi.runtime.proto import resource_pb2

    from plan.monitor import custom_timeouts_of

    request = resource_pb2.RegisterResourceRequest(
        customTimeouts=resource_pb2.RegisterResourceRequest.CustomTimeouts(create="45m", delete="20m")
    )
    assert custom_timeouts_of(request) == {"create": "45m", "delete": "20m"}
    assert custom_timeouts_of(resource_pb2.RegisterResourceRequest()) == {}


def test_plan_of_dev_matches_its_golden_file(plan_of):
    rendered = plan_json_without_guardian_code(render_plan_json(plan_of("dev")))
    golden = GOLDEN / "dev.plan.json"
    if os.environ.get("UPDATE_GOLDEN") == "1":
        golden.write_text(rendered)
    assert golden.is_file(), "run UPDATE_GOLDEN=1 make test to create the golden file"
    assert rendered == golden.read_text(), "the dev plan changed: review it, then UPDATE_GOLDEN=1 make test"


@pytest.mark.parametrize("stack", ["dev", "nemo-rl-standard-b200"])
def test_k8s_yaml_is_the_same_from_libyaml_and_the_pure_python_emitter(plan_of, monkeypatch, stack):
    documents = kubernetes_objects(plan_of(stack))
    assert writer._ManifestDumper.__mro__[1] is getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    with_libyaml = manifests_yaml(documents)

    class PurePython(yaml.SafeDumper):
        pass

    PurePython.add_representer(str, writer._represent_string)
    monkeypatch.setattr(writer, "_ManifestDumper", PurePython)
    assert manifests_yaml(documents) == with_libyaml
    assert "\\xA7" not in with_libyaml and "§" in with_libyaml, "non-ASCII text stays literal, not escaped"


def test_the_cli_writes_byte_identical_files_on_every_run(tmp_path, capsys):
    first, second = tmp_path / "first", tmp_path / "second"
    assert main(["--config", str(shipped_stack_file("dev")), "--out", str(first)]) == 0
    assert main(["--config", str(shipped_stack_file("dev")), "--out", str(second)]) == 0
    names = sorted(path.name for path in first.iterdir())
    assert names == sorted(
        [
            "cost.json",
            "first-step.json",
            "graph.mmd",
            *guardian_code_names(),
            "grpo-guardian-settings.settings.json",
            "grpo-gpu-instance-groups.groups.json",
            "grpo-staging.staging_script.py",
            "job.json",
            "k8s.yaml",
            "plan.json",
        ]
    )
    for name in names:
        assert (first / name).read_bytes() == (second / name).read_bytes(), name
    summary = capsys.readouterr().out
    assert "a3-ultragpu-8g x 1 (spot)" in summary
    assert "verl GRPO on Qwen/Qwen2.5-0.5B-Instruct with gsm8k" in summary
    assert str(first) in summary
    assert list(yaml.safe_load_all((first / "k8s.yaml").read_text()))
    assert (first / "graph.mmd").read_text().startswith("flowchart LR\n")


def test_the_cli_plans_from_a_config_path(tmp_path):
    path = tmp_path / "Pulumi.elsewhere.yaml"
    path.write_text(shipped_stack_file("dev").read_text())
    assert main(["--config", str(path), "--out", str(tmp_path / "out")]) == 0
    assert json.loads((tmp_path / "out" / "plan.json").read_text())["stack"] == "elsewhere"


def _run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_a_refused_config_exits_2_with_one_line_per_problem_and_writes_nothing(tmp_path):
    text = shipped_stack_file("dev").read_text().replace("nodes: 1", "nodes: 0").replace("type: h200", "tpye: h200")
    path = tmp_path / "Pulumi.bad.yaml"
    path.write_text(text)
    out = tmp_path / "out"
    result = _run_cli("plan", "--config", str(path), "--out", str(out))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert lines[1:] == [
        "  grpo-gke:gpu.nodes: must be at least 1, got 0",
        "  grpo-gke:gpu.tpye: unknown key; did you mean 'type'? (known: capacity, imageCacheDisk, nodes, provisioning, reservation, type)",
        "  grpo-gke:gpu.type: is required",
    ]
    assert not out.exists()


def test_a_missing_stack_file_exits_2(tmp_path):
    result = _run_cli("plan", "--stack", "no-such-stack", "--out", str(tmp_path / "out"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: Pulumi.no-such-stack.yaml: no such stack file (stacks here: "), (
        "the path as typed from here"
    )


def test_under_pulumi_up_a_refused_config_stops_the_program_before_any_resource(monkeypatch):
    monitors = []

    class KeptMonitor(harness.RecordingMonitor):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            monitors.append(self)

    monkeypatch.setattr(harness, "RecordingMonitor", KeptMonitor)
    with pytest.raises(pulumi.RunError, match=r"grpo-gke:gpu\.nodes: must be at least 1, got 0"):
        harness.run_values(values_of("dev", gpu={"nodes": 0}), stack="dev")
    assert monitors and monitors[0].records == {}


def test_a_plaintext_token_plans_with_a_warning(tmp_path, capsys):
    text = shipped_stack_file("dev").read_text() + "  grpo-gke:hfToken: hf_plaintext_for_test\n"
    path = tmp_path / "Pulumi.plain.yaml"
    path.write_text(text)
    assert main(["--config", str(path), "--out", str(tmp_path / "out")]) == 0
    out, err = capsys.readouterr()
    # Once, in the Security block (issue 21 item 7), never with the token.
    assert (out.count("grpo-gke:hfToken is set in plaintext"), err) == (1, "")
    assert "hf_plaintext_for_test" not in out


def test_every_shipped_stack_plans_cleanly(plan_of):
    assert {"dev", "verl-standard-h200", "verl-autopilot-b200", "nemo-rl-standard-b200"} <= set(SHIPPED_STACKS)
    for stack in SHIPPED_STACKS:
        recording = plan_of(stack)
        assert recording.resources, stack
        # Their only warning: the control plane's public endpoint is open (a user's CIDRs cannot be shipped).
        assert recording.warnings == [OPEN_CONTROL_PLANE], (stack, recording.warnings)


@pytest.mark.parametrize(
    ("stack", "gpus", "fabric", "head"),
    [
        (
            "first-run",
            "g2-standard-8 x 1 (spot), 1 x nvidia-l4",
            "no RDMA VPC, gVNIC VPC, GKE network objects, gIB or compact placement: g2-standard-8 has no RDMA NICs"
            " (1 GPU a node), and only the 8-GPU A3 Ultra and A4 machines need them",
            "e2-standard-8 (the Ray head's CPU node pool)",
        ),
        (
            "dev",
            "a3-ultragpu-8g x 1 (spot), 8 x nvidia-h200-141gb",
            "8 RDMA NICs a node on the RDMA VPC, with gIB (the NCCL RDMA installer)",
            "c2-standard-16 (the Ray head's CPU node pool)",
        ),
    ],
)
def test_the_plan_says_which_gpu_fabric_the_machine_gets_and_why_it_is_absent(
    stack, gpus, fabric, head, shipped_plan_command
):
    result = shipped_plan_command(stack).result
    assert (result.returncode, result.stderr) == (0, "")
    printed = result.stdout.splitlines()
    start = printed.index(f"  gpus: {gpus}")
    assert printed[start + 1] == f"  fabric: {fabric}"
    assert f"  head: {head}" in printed


def test_graph_shows_what_waits_for_what(plan_of):
    graph = render_graph_mmd(plan_of("dev"))
    assert " --> " in graph
    assert graph == render_graph_mmd(plan_of("dev"))


def test_transitive_reduction_keeps_reachability_and_drops_implied_edges():
    from plan.writer import transitive_reduction

    edges = {("a", "b"): None, ("b", "c"): None, ("a", "c"): None, ("c", "d"): None}
    assert list(transitive_reduction(edges)) == [("a", "b"), ("b", "c"), ("c", "d")]


def test_the_plan_prints_the_budget_as_hours_of_the_stack_and_refuses_one_that_cannot_reach_the_first_step(tmp_path):
    """job.maxCost over the stack's $/h and job.maxGpuHours over its GPUs in the summary; a budget below the first
    step the plan models (first-step.json) exits 2 with one line naming the key, and nothing is written."""
    stack = yaml.safe_load(shipped_stack_file("dev").read_text())
    stack["config"].setdefault("grpo-gke:job", {}).update({"maxCost": 500, "maxGpuHours": 64})
    path = tmp_path / "Pulumi.budget.yaml"
    path.write_text(yaml.safe_dump(stack))
    result = _run_cli("plan", "--config", str(path), "--out", str(tmp_path / "out"))
    assert result.returncode == 0, result.stderr
    hourly = json.loads((tmp_path / "out" / "cost.json").read_text())["totalHourly"]
    said = [line.strip() for line in result.stdout.splitlines() if line.startswith("  budget: ")]
    hours = duration(500 / hourly * 3600)
    assert said == [
        f"budget: job.maxCost $500.00 = {hours} of the stack at ${hourly:,.2f}/h; job.maxGpuHours 64 = 8h 00m of its 8 GPUs,"
        f" about ${hourly * 8:,.2f} of the stack at ${hourly:,.2f}/h"
    ]
    first_step = json.loads((tmp_path / "out" / "first-step.json").read_text())["fromUp"]["seconds"]
    for key, value, line in (
        ("maxCost", 0.5, r"^error: grpo-gke:job\.maxCost: \$0\.50 cannot buy the ~\d+m \d\ds to the first step the plan"
                         r" models \(\$\d+\.\d\d at \$\d+\.\d\d/h\); raise it or unset it$"),
        ("maxGpuHours", 0.1, r"^error: grpo-gke:job\.maxGpuHours: 0\.1 cannot buy the ~\d+m \d\ds to the first step the"
                             r" plan models \(\d+\.\d\d GPU hours on 8 GPUs\); raise it or unset it$"),
    ):  # fmt: skip
        stack["config"]["grpo-gke:job"] = {key: value}
        path.write_text(yaml.safe_dump(stack))
        refused = _run_cli("plan", "--config", str(path), "--out", str(tmp_path / key))
        assert (refused.returncode, refused.stdout) == (2, ""), refused.stderr
        assert re.fullmatch(line, refused.stderr.strip()) and not (tmp_path / key).exists(), (
            first_step,
            refused.stderr,
        )
