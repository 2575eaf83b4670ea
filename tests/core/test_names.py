"""Resources the stack names itself are replaced by deleting the old one first, in every shipped stack
and every mode x GPU x storage combination (the rule is read from each resource's inputs in the plan)."""

from __future__ import annotations

from typing import Any

import pytest

from core.resource_options import fixed_name_options
from plan.harness import Recording, run_values
from plan.monitor import Recorded
from tests.conftest import COMBINATIONS, SHIPPED_STACKS, combination_values

NAMING_INPUTS = ("name", "instanceId", "accountId", "secretId", "repositoryId", "roleId", "metadata.name")
"""Input paths that give a resource its name in the cloud or the cluster (GCP `name` and the `...Id`
fields of resources created under a chosen id; Kubernetes `metadata.name`)."""


def input_at(inputs: dict[str, Any], path: str) -> Any:
    """The input at a dotted path, or None."""
    value: Any = inputs
    for key in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def explicit_names(resource: Recorded) -> dict[str, str]:
    """The naming inputs the program set on `resource`, path -> name."""
    found = {path: input_at(resource.inputs, path) for path in NAMING_INPUTS}
    return {path: value for path, value in found.items() if isinstance(value, str) and value}


def named_without_delete_first(recording: Recording) -> list[str]:
    """Custom resources with an explicit name that a replacement would create before deleting the old."""
    return sorted(
        f"{resource.type} {resource.name} ({', '.join(explicit_names(resource))})"
        for resource in recording.resources
        if resource.custom and explicit_names(resource) and not resource.delete_before_replace
    )


def test_fixed_name_options_delete_before_replace_and_keep_the_other_options():
    options = fixed_name_options(retain_on_delete=True)
    assert options.delete_before_replace is True
    assert options.retain_on_delete is True


def test_the_check_finds_a_named_resource_that_would_be_created_first():
    """The rule reads the inputs: a named resource without the option is reported, an unnamed one is not."""

    def recorded(name: str, inputs: dict, delete_before_replace: bool) -> Recorded:
        return Recorded(
            urn=f"urn:x::{name}",
            type="t",
            name=name,
            custom=True,
            parent="",
            provider="",
            depends_on=(),
            protect=False,
            retain_on_delete=False,
            delete_before_replace=delete_before_replace,
            replace_on_changes=(),
            ignore_changes=(),
            custom_timeouts={},
            additional_secret_outputs=(),
            inputs=inputs,
            property_dependencies={},
        )

    recording = Recording(
        project="p",
        stack="s",
        resources=[
            recorded("a", {"metadata": {"name": "a"}}, False),
            recorded("b", {"instanceId": "b"}, True),
            recorded("c", {"service": "c"}, False),
        ],
    )
    assert named_without_delete_first(recording) == ["t a (metadata.name)"]


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_named_resource_of_a_shipped_stack_is_deleted_before_its_replacement(plan_of, stack):
    recording = plan_of(stack)
    assert named_without_delete_first(recording) == []
    assert sum(1 for resource in recording.resources if explicit_names(resource)) > 20


@pytest.mark.parametrize(("mode", "gpu", "storage"), COMBINATIONS)
def test_every_named_resource_of_each_combination_is_deleted_before_its_replacement(infra_run, mode, gpu, storage):
    assert named_without_delete_first(infra_run(mode, gpu, storage)) == []


def test_the_token_secret_is_deleted_before_its_replacement():
    """The Secret exists only with a token; a run with one covers it too."""
    values = combination_values("standard", "h200", "gcs") | {"grpo-gke:hfToken": "hf_offline"}
    recording = run_values(values, secret_keys=["grpo-gke:hfToken"])
    assert recording.one("kubernetes:core/v1:Secret").delete_before_replace
    assert named_without_delete_first(recording) == []


def test_the_dashboard_command_uses_the_dns_endpoint_when_the_stack_does(infra_run):
    plain = infra_run("standard", "h200", "gcs").outputs["dashboardCommand"]
    assert "get-credentials grpo-test --location us-central1 --project my-grpo-project &&" in plain
    dns = infra_run("autopilot", "h200", "gcs", cluster={"dnsEndpoint": True}).outputs["dashboardCommand"]
    assert "get-credentials grpo-test --location us-central1 --project my-grpo-project --dns-endpoint &&" in dns
