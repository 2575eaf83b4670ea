"""The post-deploy step in the mocked run of the real program: inputs, ordering, secrets, refusals."""

from __future__ import annotations

import pulumi
import pytest

from jobs.spec.training import submission_for
from plan import harness
from plan.harness import run_values
from tests.conftest import SHIPPED_STACKS, config_of, stack_values, values_of

DYNAMIC = "pulumi-python:dynamic:Resource"


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_submission_is_registered_after_the_raycluster_and_staging(plan_of, stack):
    recording = plan_of(stack)
    job = recording.one(DYNAMIC, "grpo-job-submission")
    component = recording.one("grpo-gke:jobs:GrpoJob")
    assert job.parent == component.urn
    assert job.inputs["submission"] == submission_for(config_of(stack))
    assert job.inputs["kubeconfig"] == "[secret]"
    assert job.inputs["address"] == ""
    assert job.inputs["gpu_nodes"] == config_of(stack).gpu.nodes
    # One L4 on first-run's g2-standard-8, eight GPUs on every other shipped stack's A3 Ultra or A4.
    assert job.inputs["gpus_per_node"] == config_of(stack).gpus_per_node == (1 if stack == "first-run" else 8)
    assert job.inputs["ready_timeout_seconds"] == config_of(stack).job.ready_timeout_seconds
    ray_cluster = recording.one("kubernetes:ray.io/v1:RayCluster")
    staging = recording.one("kubernetes:batch/v1:Job")
    assert {ray_cluster.urn, staging.urn} <= set(job.depends_on)
    assert recording.outputs["jobRun"] == job.inputs["submission"]["metadata"]["run"]
    assert recording.outputs["jobStatusCommand"] == f".venv/bin/python -m jobs status --stack {stack}"


def test_no_submission_when_job_submit_is_false():
    recording = run_values(values_of("dev", job={"submit": False}), stack_values("dev").secret_keys, stack="dev")
    assert recording.by_type(DYNAMIC) == []
    assert recording.by_type("kubernetes:ray.io/v1:RayCluster")


def test_a_refused_job_spec_fails_the_program_before_any_resource(monkeypatch):
    values = values_of(
        "nemo-rl-standard-b200",
        workload={"model": "org/mystery", "image": "nvcr.io/nvidia/nemo-rl:v0.4.0", "rayVersion": "2.46.0",
                  "nemoRlRelease": "v0.4.0"},
    )  # fmt: skip
    registered = []
    original = harness.RecordingMonitor.RegisterResource

    def spy(self, request):
        if request.type != "pulumi:pulumi:Stack":
            registered.append(request.type)
        return original(self, request)

    monkeypatch.setattr(harness.RecordingMonitor, "RegisterResource", spy)
    with pytest.raises(pulumi.RunError, match=r"config was refused:\ngrpo-gke:workload.modelSizeB: is required"):
        run_values(values, stack="nemo-rl-standard-b200")
    assert registered == [], "the job is checked before any resource is registered"
