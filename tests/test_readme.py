"""The README's commands and config reference match the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from pydantic import BaseModel

from core.config.model import StackConfig
from tests.conftest import REPO_ROOT, shipped_stack_file

README = (REPO_ROOT / "README.md").read_text()
INTERNAL = {"stack", "project", "region"}


def config_keys() -> set[str]:
    """Every documented key of the model, as `grpo-gke:<section>.<key>` or `grpo-gke:<key>`."""
    keys = set()
    for name, field in StackConfig.model_fields.items():
        alias = field.alias or name
        if alias in INTERNAL:
            continue
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys |= {f"grpo-gke:{alias}.{sub.alias or sub_name}" for sub_name, sub in annotation.model_fields.items()}
        else:
            keys.add(f"grpo-gke:{alias}")
    return keys


def test_the_quick_start_gives_the_two_commands():
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make plan" in quick_start and "make test" in quick_start


def test_the_quick_start_shows_what_a_refused_config_really_prints(tmp_path):
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    shown = quick_start.split("```text\n", 1)[1].split("```", 1)[0]
    text = shipped_stack_file("dev").read_text().replace("nodes: 1", "nodes: 0").replace("type: h200", "tpye: h200")
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "infra", "plan", "--config", "Pulumi.dev.yaml"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr == shown


def test_every_config_key_is_documented_and_every_documented_key_exists():
    table = README.split("<!-- config-reference", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(grpo-gke:[A-Za-z.]+)` \|", table, flags=re.M))
    assert documented == config_keys()


def test_every_config_field_has_a_description():
    models = [StackConfig] + [
        field.annotation
        for field in StackConfig.model_fields.values()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    ]
    for model in models:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def test_the_versions_table_matches_the_pinned_facts():
    from core.facts.platform import DEFAULT_IMAGES, VERL_VERSION
    from core.facts.pods import GIB_INSTALLER_IMAGE

    versions = README.split("## Versions", 1)[1].split("\n## ", 1)[0]
    for image in DEFAULT_IMAGES.values():
        assert f"`{image.image}`, Ray {image.ray_version}" in versions
    assert GIB_INSTALLER_IMAGE.rsplit("/", 1)[1] in versions
    assert f"| {VERL_VERSION} |" in versions
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    pins = dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))
    sdks = ", ".join(pins[package] for package in ("pulumi", "pulumi-gcp", "pulumi-kubernetes"))
    assert f"| Pulumi SDK, pulumi-gcp, pulumi-kubernetes | {sdks} | `requirements.txt` |" in versions
    assert f"| {pins['ray[default]']} | `requirements.txt` |" in versions


def test_the_documented_stack_outputs_are_the_programs(plan_of):
    sentence = README.split("<!-- stack-outputs", 1)[1].split("\n\n", 1)[0].split("-->", 1)[1]
    documented = set(re.findall(r"`([a-z][A-Za-z]+)`", sentence))
    gcs, lustre = plan_of("dev").outputs, plan_of("nemo-rl-standard-b200").outputs
    assert "bucket" in gcs and "lustreMountPoint" in lustre
    assert documented == set(gcs) | set(lustre)


def test_the_quick_start_lists_every_file_make_plan_writes(plan_of):
    from plan.prices import COST_FILE
    from plan.writer import plan_files

    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([^`]+)` \|", quick_start, flags=re.M)
    assert listed == [*plan_files(plan_of("dev")), COST_FILE]
