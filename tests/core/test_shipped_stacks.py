"""Every shipped `Pulumi.<stack>.yaml` loads through the config model and has the tutorial's shape."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from core.config.load import LoadedConfig
from core.config.model import PROJECT_NAMESPACE
from core.stackfile import read_stack_file
from jobs.spec.load import load_config
from tests.conftest import REPO_ROOT, SHIPPED_STACKS, shipped_stack_file
from tests.core.test_config import OPEN_CONTROL_PLANE

SHIPPED = [shipped_stack_file(stack) for stack in SHIPPED_STACKS]
TUTORIAL_STACKS = ("dev", "nemo-rl-standard-b200", "verl-autopilot-b200", "verl-standard-h200")


def load(stack: str) -> LoadedConfig:
    """The validated config of the shipped stack `stack`."""
    values = read_stack_file(shipped_stack_file(stack), PROJECT_NAMESPACE)
    return load_config(values.values, values.secret_keys, values.stack)


def test_project_name_is_the_config_namespace() -> None:
    """Pulumi.yaml's project name is the namespace the config model reads."""
    assert yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())["name"] == PROJECT_NAMESPACE


def test_tutorial_stacks_are_shipped() -> None:
    """The four tutorial stacks are all there (a missing one must not pass by being skipped)."""
    assert all(path.is_file() for path in SHIPPED)
    assert {path.name for path in SHIPPED} >= {f"Pulumi.{stack}.yaml" for stack in TUTORIAL_STACKS}


@pytest.mark.parametrize("path", SHIPPED, ids=[path.name for path in SHIPPED])
def test_shipped_stack_loads(path: Path) -> None:
    """The stack file is valid, with no warning (no plaintext token) and no encrypted value offline."""
    values = read_stack_file(path, PROJECT_NAMESPACE)
    assert values.secret_keys == frozenset()
    loaded = load_config(values.values, values.secret_keys, values.stack)
    assert loaded.warnings == (OPEN_CONTROL_PLANE,)


def _billions(model: str) -> float:
    match = re.search(r"-(\d+(?:\.\d+)?)B\b", model)
    assert match, f"no parameter count in {model}"
    return float(match.group(1))


def test_dev_stack_shape() -> None:
    """dev: one spot H200 node, Cloud Storage, verl, a small model."""
    config = load("dev").config
    assert (config.gpu.type, config.gpu.nodes, config.gpu.provisioning) == ("h200", 1, "spot")
    assert config.storage.type == "gcs"
    assert config.workload.framework == "verl"
    assert _billions(config.workload.model) <= 3


@pytest.mark.parametrize(
    ("stack", "mode", "gpu"), [("verl-standard-h200", "standard", "h200"), ("verl-autopilot-b200", "autopilot", "b200")]
)
def test_verl_tutorial_stack_shape(stack: str, mode: str, gpu: str) -> None:
    """The verl-on-GKE tutorial: 2 spot nodes, Cloud Storage, Qwen2.5-32B-Instruct on GSM8K."""
    config = load(stack).config
    assert config.cluster.mode == mode
    assert (config.gpu.type, config.gpu.nodes, config.gpu.provisioning) == (gpu, 2, "spot")
    assert config.storage.type == "gcs"
    assert (config.workload.framework, config.workload.model, config.workload.dataset) == (
        "verl",
        "Qwen/Qwen2.5-32B-Instruct",
        "gsm8k",
    )


def test_nemo_rl_codelab_stack_shape() -> None:
    """The NeMo-RL + Managed Lustre codelab: Standard, 8 spot B200, Lustre 9000 GiB at 1000, 72B on DeepScaler."""
    config = load("nemo-rl-standard-b200").config
    assert config.cluster.mode == "standard"
    assert (config.gpu.type, config.gpu.nodes, config.gpu.provisioning) == ("b200", 8, "spot")
    assert (config.storage.type, config.storage.capacity_gib, config.storage.throughput) == ("lustre", 9000, 1000)
    assert (config.workload.framework, config.workload.model, config.workload.dataset) == (
        "nemo-rl",
        "Qwen/Qwen2.5-72B-Instruct",
        "deepscaler",
    )
