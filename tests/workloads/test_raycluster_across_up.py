"""The RayCluster across later `pulumi up` runs (issue 19, items 4 and 5): what the program registers (the mocked
run) put through the pure model of the engine and provider step (tests/workloads/pulumi_up_model.py, cited line by
line): scale to zero then an in-place change, and a change of `gpu.nodes` in both directions."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from core.config.model import GpuConfig
from core.names import WORKER_REPLICAS
from incluster import scaling
from tests.conftest import recorded_run
from tests.incluster.test_scaling import apply_json_patch
from tests.workloads.conftest import combination_values
from tests.workloads.pulumi_up_model import (
    PATCH_FORCE,
    ApplyConflict,
    Deployed,
    Options,
    contains,
    create,
    guardian_patch,
    kuberay_refusal,
    parse_path,
    process_ignore_changes,
    refresh,
    up,
    workers,
)

RAY = "kubernetes:ray.io/v1:RayCluster"

BEFORE = Options(
    ignore_changes=["spec.workerGroupSpecs[*].minReplicas", "spec.workerGroupSpecs[*].replicas"],
    replace_on_changes=["spec"],
)
"""The RayCluster's options before issue 19 (commit ebde951): kept to prove the issue's findings in the model."""


def registered(nodes: int, **sections: dict) -> tuple[dict[str, Any], Options]:
    """The RayCluster's inputs and options as the program registers them for `nodes` GPU nodes."""
    values = combination_values(
        "standard", "h200", "gcs", gpu={"nodes": nodes}, grpo={"promptsPerStep": 128}, **sections
    )
    ray = recorded_run(*values).one(RAY)
    options = Options(list(ray.ignore_changes), list(ray.replace_on_changes), dict(ray.custom_timeouts))
    return copy.deepcopy(ray.inputs), options


def rendered_before(inputs: dict[str, Any], nodes: int, timeout: int = 1800) -> dict[str, Any]:
    """`inputs` as the RayCluster was rendered before issue 19: every count `nodes`, the timeout an annotation."""
    inputs = copy.deepcopy(inputs)
    group = inputs["spec"]["workerGroupSpecs"][0]
    group.update(minReplicas=nodes, maxReplicas=nodes, replicas=nodes)
    inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"] = str(timeout)
    return inputs


def patch_before(replicas: int) -> list[dict[str, Any]]:
    """The guardian's JSON patch before issue 19 (commit ebde951): minReplicas and replicas."""
    group = "/spec/workerGroupSpecs/0"
    return [{"op": "test", "path": f"{group}/groupName", "value": "gpu"}] + [
        {"op": "replace", "path": f"{group}/{name}", "value": replicas} for name in ("minReplicas", "replicas")
    ]


def scaled_to_zero(inputs: dict[str, Any], refreshed: bool, patch: list[dict[str, Any]] | None = None) -> Deployed:
    """The RayCluster created from `inputs`, then scaled to zero by the guardian's patch (today's, or `patch`),
    then maybe refreshed."""
    deployed = create(inputs)
    patch = scaling.worker_patch(0) if patch is None else patch
    guardian_patch(deployed, apply_json_patch(deployed.live, patch), scaling.FIELD_MANAGER)
    assert workers(deployed.live) == 0
    if refreshed:
        refresh(deployed)
    return deployed


@pytest.mark.parametrize("refreshed", [False, True])
def test_a_ready_timeout_change_after_scale_to_zero_changes_nothing_and_keeps_the_count(refreshed):
    """Item 4: the timeout is the customTimeouts option, not an input, so the engine has nothing to apply."""
    inputs, _ = registered(2, job={"readyTimeoutSeconds": 1800})
    later, options = registered(2, job={"readyTimeoutSeconds": 3600})
    step, result = up(scaled_to_zero(inputs, refreshed), later, options)
    assert step == "same" and workers(result.live) == 0
    assert later == inputs and options.custom_timeouts == {"create": "3600s", "update": "3600s"}


@pytest.mark.parametrize("refreshed", [False, True])
@pytest.mark.parametrize("where", ["metadata", "spec"])
def test_any_other_change_after_scale_to_zero_replaces_the_raycluster_and_never_applies_over_the_guardian(
    refreshed, where
):
    """Item 4: every input of the RayCluster replaces it, so no Server-Side Apply ever meets the guardian's list;
    the new RayCluster is valid: full size, or still at zero once a refresh told the state the guardian's count."""
    inputs, options = registered(2)
    later = copy.deepcopy(inputs)
    if where == "metadata":
        later["metadata"]["labels"]["example.com/release"] = "2"
    else:
        later["spec"]["rayVersion"] = "2.61.0"
    step, result = up(scaled_to_zero(inputs, refreshed), later, options)
    assert step == "replace" and kuberay_refusal(result.live) is None
    assert workers(result.live) == (0 if refreshed else 2)


@pytest.mark.parametrize(("old", "new"), [(4, 2), (2, 4), (1, 8)])
@pytest.mark.parametrize("history", ["running", "scaled back by the guardian, refreshed"])
def test_changing_gpu_nodes_gives_a_valid_raycluster_of_the_new_size(old, new, history):
    """Item 5: the engine keeps the old `replicas` on the replacement, and that value is WORKER_REPLICAS, which
    KubeRay holds to the new maxReplicas in both directions."""
    inputs, _ = registered(old)
    later, options = registered(new)
    deployed = create(inputs)
    if history != "running":
        guardian_patch(deployed, apply_json_patch(deployed.live, scaling.worker_patch(0)), scaling.FIELD_MANAGER)
        guardian_patch(
            deployed, apply_json_patch(deployed.live, scaling.worker_patch(WORKER_REPLICAS)), scaling.FIELD_MANAGER
        )
        refresh(deployed)
    step, result = up(deployed, later, options)
    assert step == "replace"
    assert kuberay_refusal(result.live) is None and workers(result.live) == new


@pytest.mark.parametrize(("old", "new"), [(4, 2), (2, 4)])
def test_changing_gpu_nodes_while_scaled_to_zero_keeps_zero_once_refreshed_and_is_valid(old, new):
    inputs, _ = registered(old)
    later, options = registered(new)
    step, result = up(scaled_to_zero(inputs, refreshed=True), later, options)
    assert step == "replace" and kuberay_refusal(result.live) is None and workers(result.live) == 0
    step, result = up(scaled_to_zero(inputs, refreshed=False), later, options)
    assert step == "replace" and kuberay_refusal(result.live) is None and workers(result.live) == new


def test_worker_replicas_covers_every_node_count_the_config_allows():
    bound = max(meta.le for meta in GpuConfig.model_fields["nodes"].metadata if hasattr(meta, "le"))
    assert WORKER_REPLICAS >= bound


@pytest.mark.parametrize("refreshed", [False, True])
def test_finding_4_before_a_timeout_change_after_scale_to_zero_was_an_apply_conflict(refreshed):
    """The issue's finding holds for a plain `up`: the annotation moved, so the provider applied the whole atomic
    list with the state's old counts over the guardian's, a conflict; the patchForce way out brings the GPUs back.
    After a refresh the state's inputs hold the guardian's counts, the applied list equals the live one, and the
    update goes through: the conflict depends on whether the user refreshed."""
    inputs, _ = registered(2)
    before, later = rendered_before(inputs, 2, 1800), rendered_before(inputs, 2, 3600)
    deployed = scaled_to_zero(before, refreshed, patch_before(0))
    if refreshed:
        step, result = up(deployed, later, BEFORE)
        assert step == "update" and workers(result.live) == 0
        return
    with pytest.raises(ApplyConflict, match="grpo-gke-guardian.*workerGroupSpecs"):
        up(deployed, later, BEFORE)
    forced = copy.deepcopy(later)
    forced["metadata"]["annotations"][PATCH_FORCE] = "true"
    step, result = up(scaled_to_zero(before, refreshed, patch_before(0)), forced, BEFORE)
    assert step == "update" and workers(result.live) == 2


def test_finding_5_before_a_changed_node_count_was_refused_or_kept_the_old_size():
    inputs, _ = registered(2)
    step, result = up(create(rendered_before(inputs, 4)), rendered_before(inputs, 2), BEFORE)
    assert step == "replace"
    assert kuberay_refusal(result.live) == "worker group gpu has minReplicas 4 greater than maxReplicas 2"
    step, result = up(create(rendered_before(inputs, 2)), rendered_before(inputs, 4), BEFORE)
    assert step == "replace" and kuberay_refusal(result.live) is None and workers(result.live) == 2


def test_the_model_follows_the_engines_property_paths():
    assert parse_path("spec.workerGroupSpecs[*].replicas") == ("spec", "workerGroupSpecs", "*", "replicas")
    assert contains(parse_path("*"), parse_path("metadata.labels.a"))
    assert contains(parse_path("spec.workerGroupSpecs[*].replicas"), ("spec", "workerGroupSpecs", 0, "replicas"))
    assert not contains(parse_path("spec.workerGroupSpecs[*].replicas"), ("spec", "workerGroupSpecs", 0, "maxReplicas"))
    old = {"spec": {"groups": [{"n": 1, "m": 1}]}}
    assert process_ignore_changes({"spec": {"groups": [{"n": 5, "m": 5}]}}, old, ["spec.groups[*].n"]) == {
        "spec": {"groups": [{"n": 1, "m": 5}]}
    }
    assert process_ignore_changes({"spec": {"n": 5}}, {"spec": {}}, ["spec.n"]) == {"spec": {}}
