"""The in-cluster guardian's settings (plain, deterministic, no secret) and its code (import-closed: the guardian
runs from those files alone, without Pulumi or the typed config)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.prices import catalog
from incluster.guardian.settings import GuardError, settings_from
from incluster.shipping import shipped_files
from jobs.guardian.objects import guardian_command
from jobs.guardian.settings import guardian_settings
from jobs.preflight.settings import preflight_template
from jobs.runs.export import export_submission
from jobs.spec.training import submission_for, training_spec
from plan.prices import estimate, render_cost_json
from tests.conftest import SHIPPED_STACKS, config_of
from tests.plan.test_prices import EXPECTED_IDLE

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
    # without a budget (first-run ships job.maxGpuHours), so no gpuPrices: tests/incluster/test_guardian_budget.py covers them
    config = config_of(stack, secret_token=True, job={"maxRecoveries": 3, "idleMinutes": 0, "maxGpuHours": None})
    values = guardian_settings(config)
    assert values == {
        "stack": stack, "run": submission_for(config)["metadata"]["run"], "submission": submission_for(config),
        "gpuNodes": config.gpu.nodes, "maxRecoveries": 3, "idleMinutes": 0,
        "readyTimeoutSeconds": config.job.ready_timeout_seconds, "framework": config.workload.framework,
        "worldSize": (1 if stack == "first-run" else 8) * config.gpu.nodes, "namespace": "grpo", "rayCluster": "grpo", "gpuWorkerGroup": "gpu",
        "preflight": preflight_template(config), "cordonBadNodes": False,
        "export": export_submission(config, training_spec(config)), "ladder": False,
        "provisioning": "spot", "idleBill": values["idleBill"], "park": None,
    }  # fmt: skip
    assert values["preflight"]["mode"] == ("full" if config.gpu.nodes >= 2 else "gpu")
    text = json.dumps(values, sort_keys=True)
    assert text == json.dumps(guardian_settings(config), sort_keys=True)
    assert "hf_do_not_leak" not in text and "HF_TOKEN" not in text
    assert (
        settings_from(json.loads(text), "settings.json").world_size
        == (1 if stack == "first-run" else 8) * config.gpu.nodes
    )


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_the_idle_bill_in_the_settings_is_cost_jsons_figure_for_the_guardian_to_record(stack):
    """Issue 23 item 4: the guardian has no price catalog; `pulumi up` hands it cost.json's `idleHourly` (the same
    function makes both), the parts it covers, those without a price (Autopilot's head Pod) and the catalog's date."""
    config = config_of(stack)
    bill = guardian_settings(config)["idleBill"]
    cost = json.loads(render_cost_json(estimate(config, catalog())))
    assert bill == {"hourly": cost["idleHourly"], "parts": cost["idleParts"], "unpriced": cost["idleUnpriced"],
                    "catalogDate": "2026-12-01"}  # fmt: skip
    assert bill["hourly"] == pytest.approx(EXPECTED_IDLE[stack], abs=1e-8)
    assert bill["unpriced"] == (["head"] if stack == "verl-autopilot-b200" else [])
    rate = settings_from(guardian_settings(config), "settings.json").idle_rate
    assert {"cluster fee", "cloud nat"} <= set(bill["parts"]), "issue 34 item 2: the whole idle bill"
    assert rate.details() == {"idleHourly": bill["hourly"], "idleParts": bill["parts"],
                              "idleUnpriced": bill["unpriced"], "catalogDate": "2026-12-01"}  # fmt: skip


@pytest.mark.parametrize(
    ("bill", "message"),
    [
        ({"parts": [], "unpriced": [], "catalogDate": "d"}, "'idleBill.hourly' must be a number of 0 or more, got None"),
        ({"hourly": -1, "parts": [], "unpriced": [], "catalogDate": "d"}, "'idleBill.hourly' must be a number of 0 or more, got -1"),
        ({"hourly": 1, "parts": "head", "unpriced": [], "catalogDate": "d"}, "'idleBill.parts' must be a list of part names, got 'head'"),
        ({"hourly": 1, "parts": [], "unpriced": [], "catalogDate": None}, "'idleBill.catalogDate' must be the price catalog's date, got None"),
    ],
)  # fmt: skip
def test_a_bad_idle_bill_in_the_settings_is_one_line_naming_its_field(bill, message):
    values = {**guardian_settings(config_of("dev")), "idleBill": bill}
    with pytest.raises(GuardError) as refused:
        settings_from(values, "settings.json")
    assert str(refused.value) == f"settings.json: {message}"
    missing = {key: value for key, value in guardian_settings(config_of("dev")).items() if key != "idleBill"}
    with pytest.raises(GuardError, match="the key 'idleBill' is missing"):
        settings_from(missing, "settings.json")


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
        "incluster/job_client.py",
        "incluster/readiness.py",
        "incluster/run_submission.py",
        "incluster/export_submission.py",
        "incluster/record.py",
    } <= set(files)
    assert not any(path.startswith(("core/config/", "infra/", "plan/", "jobs/", "workloads/")) for path in files)
    code = "import sys, json, incluster.guardian, incluster.attempt, incluster.job_client\nimport pulumi\n"
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


def test_the_pods_command_beats_the_heartbeat_its_liveness_probe_reads_from_the_code_files_alone(
    guardian_dir, tmp_path
):
    from jobs.guardian.objects import liveness_command

    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(guardian_settings(config_of("dev"))))
    heartbeat = tmp_path / "heartbeat"
    # The pod's own command and probe, with this machine's paths for the settings, the code and the heartbeat.
    command, probe = guardian_command(), liveness_command()
    assert command[-2] == "--heartbeat" and command[-1] == probe[3]
    argv = [*command[1:4], str(settings), "--address", "http://127.0.0.1:9", "--heartbeat", str(heartbeat)]
    unreachable = in_guardian_dir(guardian_dir, *argv)
    assert unreachable.returncode == 2 and len(unreachable.stderr.splitlines()) == 1, unreachable.stderr
    assert heartbeat.is_file()  # beaten before the first look at Ray
    script = str(guardian_dir / probe[2].removeprefix("/opt/grpo-gke/"))
    alive = subprocess.run([sys.executable, "-I", script, str(heartbeat), probe[4]], capture_output=True, text=True,
                           cwd="/", timeout=60)  # fmt: skip
    assert (alive.returncode, alive.stdout, alive.stderr) == (0, "", "")


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
