"""The shared pod pieces: each is rendered once, and the RayCluster's plain data and the staging Job's typed
Args both come out equal to it in the recorded run."""

from __future__ import annotations

from typing import Any

import pytest

from core import names
from tests.conftest import combination_config
from tests.workloads.conftest import TEST_SECRET_ENV, TEST_TOKEN, mocked_run
from workloads import pods

RAY = "kubernetes:ray.io/v1:RayCluster"
JOB = "kubernetes:batch/v1:Job"


def _pod_specs(mode: str, storage: str) -> dict[str, dict[str, Any]]:
    """The recorded pod specs of the Ray head, the GPU workers and the staging Job, with a token and secretEnv set."""
    recording = mocked_run(mode, "h200", storage, token=TEST_TOKEN, secret_env=TEST_SECRET_ENV)
    spec = recording.one(RAY).inputs["spec"]
    return {
        "head": spec["headGroupSpec"]["template"]["spec"],
        "worker": spec["workerGroupSpecs"][0]["template"]["spec"],
        "staging": recording.one(JOB).inputs["spec"]["template"]["spec"],
    }


def _by_name(entries: list[dict[str, Any]], name: str) -> dict[str, Any]:
    [entry] = [entry for entry in entries if entry["name"] == name]
    return entry


@pytest.mark.parametrize(("mode", "storage"), [("standard", "gcs"), ("autopilot", "lustre")])
def test_every_pod_carries_the_same_pieces_in_either_rendering(mode, storage):
    config = combination_config(mode, "h200", storage, token=TEST_TOKEN)
    token = pods.secret_env(config, with_secret_env=False)
    for pod, spec in _pod_specs(mode, storage).items():
        [container] = spec["containers"]
        assert _by_name(spec["volumes"], pods.DATA_VOLUME) == pods.data_volume(), pod
        assert [m for m in container["volumeMounts"] if m["name"] == pods.DATA_VOLUME] == [pods.data_mount()], pod
        assert _by_name(container["env"], "HF_HOME") == pods.hf_home_env(), pod
        assert _by_name(container["env"], "HF_TOKEN") == token[0], pod
        assert container["securityContext"] == pods.container_security_context(), pod


def test_the_ray_pods_read_every_secret_variable_and_the_staging_pod_only_the_token():
    config = combination_config(token=TEST_TOKEN, secret_env={name: "x" for name in TEST_SECRET_ENV})
    specs = _pod_specs("standard", "gcs")
    for pod in ("head", "worker"):
        refs = [entry for entry in specs[pod]["containers"][0]["env"] if "valueFrom" in entry]
        assert refs == pods.secret_env(config), pod
    refs = [entry for entry in specs["staging"]["containers"][0]["env"] if "valueFrom" in entry]
    assert refs == pods.secret_env(config, with_secret_env=False)


def test_the_pieces_name_the_shared_claim_mount_and_secrets():
    assert pods.data_volume() == {"name": "data", "persistentVolumeClaim": {"claimName": names.DATA_CLAIM}}
    assert pods.data_mount() == {"mountPath": names.DATA_MOUNT, "name": "data"}
    assert pods.hf_home_env()["value"].startswith(names.DATA_MOUNT + "/")
    assert pods.secret_env(combination_config()) == []


def test_the_adapters_read_the_pieces_fields():
    volume = pods.claim_volume_args(pods.data_volume())
    assert (volume.name, volume.persistent_volume_claim.claim_name) == ("data", names.DATA_CLAIM)
    mount = pods.volume_mount_args(pods.data_mount())
    assert (mount.name, mount.mount_path, mount.read_only) == ("data", names.DATA_MOUNT, None)
    plain = pods.env_var_args(pods.hf_home_env())
    assert (plain.name, plain.value, plain.value_from) == ("HF_HOME", pods.hf_home_env()["value"], None)
    [secret] = [pods.env_var_args(entry) for entry in pods.secret_env(combination_config(token=TEST_TOKEN))]
    assert (secret.value, secret.value_from.secret_key_ref.name) == (None, names.HF_TOKEN_SECRET)
    context = pods.security_context_args(pods.container_security_context())
    assert (context.privileged, context.capabilities.drop, context.seccomp_profile.type) == (
        False,
        ["ALL"],
        "RuntimeDefault",
    )
