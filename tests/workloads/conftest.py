"""Configs, strict KubeRay schema validation and cached mocked runs for the workloads tests."""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from plan.harness import Recording
from tests.conftest import SHARED, WORKLOADS, recorded_run, with_secrets
from tests.conftest import combination_values as shared_combination_values

TEST_TOKEN = "hf_WorkloadsTestToken0123456789abcdef"
"""A recognisable fake Hugging Face token; it must never appear in clear or base64 anywhere."""

TEST_SECRET_ENV = {"WANDB_API_KEY": "wandb-TestKey-0123456789abcdef", "MY_SERVICE_PASSWORD": "pw-Test-fedcba9876543210"}
"""Recognisable fake `grpo-gke:secretEnv` values; they must never appear in clear or base64 anywhere."""

TEST_WANDB_KEY = "wandb-ApiKeyTest-0123456789abcdef0123456789"
"""A recognisable fake `grpo-gke:wandbApiKey`; it must never appear in clear or base64 anywhere."""


def combination_values(
    mode: str,
    gpu_type: str,
    storage_type: str,
    framework: str = "verl",
    token: str | None = None,
    secret_env: dict[str, str] | None = None,
    wandb_key: str | None = None,
    **sections: dict,
) -> tuple[dict[str, str], tuple[str, ...]]:
    """Config values (and secret keys) of one combination and framework, sections merged in; `token`,
    `secret_env` and `wandb_key` are set as secrets, as the engine hands them over."""
    workload = WORKLOADS[framework] | sections.pop("workload", {})
    values = shared_combination_values(mode, gpu_type, storage_type, workload=workload, **sections)
    return with_secrets(values, token, secret_env, wandb_key)


def mocked_run(
    mode: str,
    gpu: str,
    storage: str,
    framework: str = "verl",
    token: str | None = None,
    secret_env: dict[str, str] | None = None,
    wandb_key: str | None = None,
) -> Recording:
    """The recorded mocked run of the whole program for one combination (cached)."""
    values, secret_keys = combination_values(mode, gpu, storage, framework, token, secret_env, wandb_key)
    return recorded_run(values, secret_keys, stack="test")


def strict(schema: Any) -> Any:
    """A copy of an OpenAPI schema in which every object with `properties` refuses unknown fields,
    unless it already says otherwise or preserves unknown fields (kubectl's strict field validation)."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict(value) for key, value in schema.items()}
    if (
        "properties" in result
        and "additionalProperties" not in result
        and not result.get("x-kubernetes-preserve-unknown-fields")
    ):
        result["additionalProperties"] = False
    return result


_VALIDATOR: list[jsonschema.Draft7Validator] = []


def raycluster_validator() -> jsonschema.Draft7Validator:
    """A strict validator of whole RayCluster manifests (KubeRay v1.7.0 schema); skips without ../shared."""
    path = Path(SHARED) / "kuberay" / "raycluster.v1.schema.json"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the KubeRay RayCluster schema lives in ../shared/kuberay")
    if not _VALIDATOR:
        _VALIDATOR.append(jsonschema.Draft7Validator(strict(json.loads(path.read_text()))))
    return _VALIDATOR[0]


def schema_errors(manifest: dict[str, Any]) -> list[str]:
    """Every strict-schema error of a RayCluster manifest, as `path: message`."""
    return sorted(
        f"{'.'.join(str(part) for part in error.absolute_path)}: {error.message}"
        for error in raycluster_validator().iter_errors(copy.deepcopy(manifest))
    )


_K8S_VALIDATORS: dict[str, jsonschema.Draft7Validator] = {}


def _k8s_validator(api_version: str, kind: str) -> jsonschema.Draft7Validator:
    """A strict validator of one built-in kind (Kubernetes 1.33 OpenAPI v3); skips without ../shared."""
    path = Path(SHARED) / "k8s-schemas" / "kubernetes-1.33-openapi-v3.json.gz"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the Kubernetes 1.33 OpenAPI lives in ../shared/k8s-schemas")
    key = f"{api_version}/{kind}"
    if key not in _K8S_VALIDATORS:
        document = json.loads(gzip.decompress(path.read_bytes()))
        # The documents refer to #/components/schemas/<name>; the merged file keeps them in definitions.
        text = json.dumps(strict(document["definitions"])).replace("#/components/schemas/", "#/definitions/")
        definitions = json.loads(text)
        schema = {**definitions[document["gvk"][key]], "definitions": definitions}
        _K8S_VALIDATORS[key] = jsonschema.Draft7Validator(schema)
    return _K8S_VALIDATORS[key]


def k8s_schema_errors(manifest: dict[str, Any]) -> list[str]:
    """Every strict-schema error of a built-in Kubernetes object, as `path: message`."""
    validator = _k8s_validator(manifest["apiVersion"], manifest["kind"])
    return sorted(
        f"{'.'.join(str(part) for part in error.absolute_path)}: {error.message}"
        for error in validator.iter_errors(copy.deepcopy(manifest))
    )
