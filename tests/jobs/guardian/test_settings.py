"""The in-cluster guardian's settings (plain, deterministic, no secret) and its code (import-closed: the guardian
runs from those files alone, without Pulumi or the typed config)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from incluster.guardian.settings import settings_from
from incluster.shipping import shipped_files
from jobs.guardian.objects import guardian_command
from jobs.guardian.settings import guardian_settings
from jobs.preflight.settings import preflight_template
from jobs.runs.export import export_submission
from jobs.spec.training import submission_for, training_spec
from tests.conftest import SHIPPED_STACKS, config_of

BLOCKED = ("pulumi", "pulumi_gcp", "pulumi_kubernetes", "pydantic")
"""Packages the guardian's image may lack: importing one fails in the closure test."""

BLOCKER = """
import sys

class Blocked:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ImportError("blocked in the guardian's image: " + name)
        return None

sys.meta_path.insert(0, Blocked())
"""


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_settings_are_the_stacks_run_and_knobs_as_plain_deterministic_data(stack):
    config = config_of(stack, secret_token=True, job={"maxRecoveries": 3, "idleMinutes": 0})
    values = guardian_settings(config)
    assert values == {
        "stack": stack, "run": submission_for(config)["metadata"]["run"], "submission": submission_for(config),
        "gpuNodes": config.gpu.nodes, "maxRecoveries": 3, "idleMinutes": 0,
        "readyTimeoutSeconds": config.job.ready_timeout_seconds, "framework": config.workload.framework,
        "worldSize": 8 * config.gpu.nodes, "namespace": "grpo", "rayCluster": "grpo", "gpuWorkerGroup": "gpu",
        "preflight": preflight_template(config), "cordonBadNodes": False,
        "export": export_submission(config, training_spec(config)), "ladder": False,
        "provisioning": "spot", "cluster": f"grpo-{stack}",
    }  # fmt: skip
    assert values["preflight"]["mode"] == ("full" if config.gpu.nodes >= 2 else "gpu")
    text = json.dumps(values, sort_keys=True)
    assert text == json.dumps(guardian_settings(config), sort_keys=True)
    assert "hf_do_not_leak" not in text and "HF_TOKEN" not in text
    assert settings_from(json.loads(text), "settings.json").world_size == 8 * config.gpu.nodes


def test_a_ladder_is_one_flag_so_adding_or_removing_a_rung_leaves_the_guardian_as_it_is():
    """Each GPU node's rung comes from its pool's name, which gpu.provisioning and the rung give
    (core/names.py gpu_pool_name): the settings need only whether gpu.capacity is set, not its rungs."""
    two = guardian_settings(config_of("dev", gpu={"capacity": ["spot", "on-demand"]}))
    three = guardian_settings(config_of("dev", gpu={"capacity": ["spot", "on-demand", "flex-start"]}))
    assert (two["ladder"], two["provisioning"]) == (True, "spot")
    assert two == three
    assert "flexStart" not in two


@pytest.fixture(scope="module")
def guardian_dir(tmp_path_factory) -> Path:
    """A directory holding only shipped_files(), plus sitecustomize.py blocking BLOCKED."""
    directory = tmp_path_factory.mktemp("opt-grpo-gke")
    for path, text in shipped_files().items():
        (directory / path).parent.mkdir(parents=True, exist_ok=True)
        (directory / path).write_text(text)
    (directory / "sitecustomize.py").write_text(BLOCKER.format(blocked=BLOCKED))
    return directory


def in_guardian_dir(directory: Path, *argv: str) -> subprocess.CompletedProcess:
    """The venv's Python with only `directory` on its path (PYTHONPATH=/opt/grpo-gke in the pod)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    return subprocess.run([sys.executable, *argv], cwd=directory, env={**env, "PYTHONPATH": str(directory)},
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_the_code_files_are_import_closed_and_need_neither_pulumi_nor_the_typed_config(guardian_dir):
    files = shipped_files()
    assert {
        "incluster/guardian/__init__.py",
        "incluster/guardian/__main__.py",
        "incluster/attempt.py",
        "incluster/control.py",
        "incluster/record.py",
    } <= set(files)
    assert not any(path.startswith(("core/config/", "infra/", "plan/", "jobs/", "workloads/")) for path in files)
    code = "import sys, json, incluster.guardian, incluster.attempt, incluster.control\nimport pulumi\n"
    blocked = in_guardian_dir(guardian_dir, "-c", code)
    assert "ImportError: blocked in the guardian's image: pulumi" in blocked.stderr
    loaded = in_guardian_dir(guardian_dir, "-c", (
        "import sys, json, incluster.guardian, incluster.attempt\n"
        "mine = [m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)"
        " and m.__name__.split('.')[0] in ('core', 'incluster', 'jobs', 'workloads')]\n"
        "print(json.dumps(mine))\n"
    ))  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    assert all(path.startswith(str(guardian_dir)) for path in json.loads(loaded.stdout))


def test_the_in_cluster_command_runs_from_the_code_files_alone(guardian_dir, tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(guardian_settings(config_of("dev"))))
    command = guardian_command()
    assert command[:3] == ["python3", "-m", "incluster.guardian"] and command[3] == "--settings"
    argv = [*command[1:4], str(settings), "--address", "http://127.0.0.1:9"]
    unreachable = in_guardian_dir(guardian_dir, *argv)
    assert unreachable.returncode == 2, unreachable.stderr
    assert unreachable.stderr.startswith("error: cannot reach the Ray dashboard at http://127.0.0.1:9")
    assert len(unreachable.stderr.splitlines()) == 1
    settings.write_text("{}")
    bad = in_guardian_dir(guardian_dir, *argv)
    assert bad.returncode == 2 and bad.stderr == (
        f"error: {settings}: the key 'stack' is missing; write the file with guardian_settings(config)\n"
    )
    missing = in_guardian_dir(guardian_dir, "-m", "incluster.guardian", "--settings", str(settings))
    assert (
        missing.returncode == 2 and missing.stderr == "error: --settings needs --address http://<head service>:8265\n"
    )
