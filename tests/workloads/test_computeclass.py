"""The GPU ComputeClass of a capacity ladder, and the workers that select it: strictly valid against the
ComputeClass CRD's schema (tests/workloads/schemas/computeclass.v1.schema.json, its source and date inside)
and the Kubernetes 1.33 OpenAPI."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import GPUS, combination_config, recorded_run
from tests.workloads.conftest import combination_values, k8s_schema_errors, schema_errors
from workloads.computeclass import render_compute_class
from workloads.raycluster import render_manifest

SCHEMA = Path(__file__).parent / "schemas" / "computeclass.v1.schema.json"
"""The ComputeClass schema built from GKE's CRD reference (source and date in its $comment)."""

CLASS_TYPE = "kubernetes:cloud.google.com/v1:ComputeClass"

LADDER = {"capacity": ["reservation", "flex-start", "spot", "on-demand"], "reservation": "res-gpu", "nodes": 2}
"""All four rungs; gpu.provisioning stays spot, so the spot pool keeps the name `gpu`."""


def class_errors(manifest: dict) -> list[str]:
    """Every error of a ComputeClass against the strict schema, as `path: message`."""
    validator = jsonschema.Draft7Validator(json.loads(SCHEMA.read_text()))
    return sorted(
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(copy.deepcopy(manifest))
    )


def ladder_run(gpu: str):
    values, secrets = combination_values("standard", gpu, "gcs", gpu=LADDER)
    return recorded_run(values, secrets, stack="test")


@pytest.mark.parametrize("gpu", GPUS)
def test_the_ladders_compute_class_names_one_pool_per_rung_in_order_and_validates(gpu):
    recorded = ladder_run(gpu).one(CLASS_TYPE)
    manifest = {
        "apiVersion": recorded.inputs["apiVersion"],
        "kind": recorded.inputs["kind"],
        "metadata": recorded.inputs["metadata"],
        "spec": recorded.inputs["spec"],
    }
    assert class_errors(manifest) == []
    assert manifest == {
        "apiVersion": "cloud.google.com/v1",
        "kind": "ComputeClass",
        "metadata": {"name": "grpo-gpu-ladder"},
        "spec": {
            "priorities": [
                {"nodepools": ["gpu-reservation"]},
                {"nodepools": ["gpu-flex-start"]},
                {"nodepools": ["gpu"]},
                {"nodepools": ["gpu-on-demand"]},
            ],
            "nodePoolAutoCreation": {"enabled": False},
            "activeMigration": {"optimizeRulePriority": False},
            "whenUnsatisfiable": "DoNotScaleUp",
        },
    }


def test_the_strict_schema_refuses_what_gke_refuses():
    good = render_compute_class(combination_config(gpu=LADDER))
    assert class_errors(good) == []
    mixed = copy.deepcopy(good)
    mixed["spec"]["priorities"][0]["spot"] = True  # a nodepools priority holds nothing else (CRD CEL rule)
    unknown = copy.deepcopy(good)
    unknown["spec"]["nodePoolAutoCreation"]["enable"] = False
    no_choice = copy.deepcopy(good)
    del no_choice["spec"]["whenUnsatisfiable"]
    assert class_errors(mixed) and class_errors(no_choice)
    assert any("enable" in error for error in class_errors(unknown))


def test_without_a_ladder_there_is_no_compute_class():
    values, secrets = combination_values("standard", "h200", "gcs")
    assert recorded_run(values, secrets, stack="test").by_type(CLASS_TYPE) == []


@pytest.mark.parametrize("gpu", GPUS)
def test_ladder_workers_select_the_class_tolerate_its_taint_and_validate(gpu):
    config = combination_config("standard", gpu, gpu=LADDER)
    manifest = render_manifest(config)
    assert schema_errors(manifest) == []
    [group] = manifest["spec"]["workerGroupSpecs"]
    pod = group["template"]["spec"]
    assert pod["nodeSelector"] == {
        "cloud.google.com/compute-class": "grpo-gpu-ladder",
        "cloud.google.com/gke-accelerator": config.gpu_machine.accelerator,
        "topology.kubernetes.io/zone": "us-central1-b",
    }
    assert {"effect": "NoSchedule", "key": "cloud.google.com/compute-class", "operator": "Equal",
            "value": "grpo-gpu-ladder"} in pod["tolerations"]  # fmt: skip
    assert not any("spot" in key for key in pod["nodeSelector"])
    whole_pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "worker"}, "spec": pod}
    assert k8s_schema_errors(whole_pod) == []


def test_the_class_is_made_before_the_raycluster_whose_workers_select_it():
    recording = ladder_run("h200")
    ray = recording.one("kubernetes:ray.io/v1:RayCluster")
    assert recording.one(CLASS_TYPE).urn in ray.depends_on
