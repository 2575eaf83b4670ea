"""The preflight's settings and submission (pure) and the report of a judged result (what it ships into the cluster:
tests/incluster/test_shipping.py)."""

from __future__ import annotations

import copy
import json
import shlex

from core.facts.pods import GIB_NCCL_ENV
from incluster.preflight import driver, run
from jobs.preflight import settings as preflight_settings
from jobs.spec.training import training_spec
from tests.conftest import config_of
from tests.incluster.preflight.conftest import device_run


def _settings(stack: str = "verl-standard-h200", mode: str = "full") -> dict:
    return preflight_settings.preflight_settings(
        config_of(stack), mode, "/data/checkpoints/r/preflight", "20261201T120000.000Z"
    )


def test_the_settings_carry_the_stacks_nccl_environment_with_gib_and_the_gate_sweep():
    settings = _settings()
    assert settings["nodes"] == 2 and settings["gpus_per_node"] == 8 and settings["strategy"] == "STRICT_SPREAD"
    env = settings["fabric"]["env"]
    assert {name: env[name] for name in GIB_NCCL_ENV} == GIB_NCCL_ENV and env["NCCL_NET"] == "gIB"
    assert env["NCCL_TUNER_CONFIG_PATH"].startswith("/usr/local/gib/configs/")
    assert env["GLOO_SOCKET_IFNAME"] == "eth0"
    assert all(name.startswith("NCCL_") or name == "GLOO_SOCKET_IFNAME" for name in env)
    measure = settings["fabric"]["measure"]
    assert (measure["min_bytes"], measure["max_bytes"], measure["floor_gbps"]) == (1 << 10, 8 << 30, 100.0)
    assert (measure["warmups"], measure["iterations"], measure["backend"]) == (5, 100, "nccl")


def test_the_submission_is_plain_and_deterministic_and_the_code_is_added_only_when_submitted():
    settings = _settings()
    submission = run.preflight_submission(settings)
    assert submission == run.preflight_submission(copy.deepcopy(settings))
    assert submission["submission_id"] == "verl-standard-h200-preflight-20261201t120000000z"
    assert submission["metadata"] == {"preflightOf": "verl-standard-h200", "mode": "full"}
    assert "stack" not in submission["metadata"], "a preflight must never count as an attempt of the stack's run"
    assert "py_modules" not in submission["runtime_env"]
    command = shlex.split(submission["entrypoint"])
    assert command[:3] == ["python3", "-m", "incluster.preflight.driver"]
    assert json.loads(command[3]) == settings
    shipped = run.with_code(submission, ["/tmp/ship/incluster", "/tmp/ship/core"])
    assert shipped["runtime_env"]["py_modules"] == ["/tmp/ship/incluster", "/tmp/ship/core"]
    assert {key: value for key, value in shipped.items() if key != "runtime_env"} == {
        key: value for key, value in submission.items() if key != "runtime_env"
    }


def test_the_results_lie_beside_the_runs_record_and_under_a_local_data_root():
    config = config_of("dev")
    run_dir = training_spec(config).run_dir
    assert preflight_settings.results_dir(config) == f"{run_dir}/preflight"
    assert (
        preflight_settings.results_dir(config, "/tmp/local") == f"/tmp/local{run_dir.removeprefix('/data')}/preflight"
    )


def test_the_result_is_the_last_marked_line_of_the_log():
    log = f"preflight: placing\n{driver.RESULT_MARKER}" + '{"a": 1}\nsomething after\n'
    assert run.result_in_log(log) == {"a": 1}
    assert run.result_in_log("preflight: placing\nTraceback ...\n") is None


def test_a_failing_node_gets_one_line_and_is_the_bad_node():
    healthy = device_run("run2-preflight.json")["reports"]["healthy"][0]
    nodes = []
    for index in range(3):
        report = copy.deepcopy(healthy)
        report["node"] = f"gke-n{index}"
        report["gpus"] = [{**report["gpus"][0], "index": gpu, "uuid": f"GPU-{gpu}"} for gpu in range(8)]
        nodes.append(report)
    nodes[0]["gpus"][2]["copy_tbps"] = 2.0
    settings = _settings()
    settings["nodes"] = 3
    result = {"mode": "gpu", "reports": nodes, "fabric_report": None, "path": "/data/x.json"}
    report = run.judge_result(settings, result)
    assert not report.passed and report.bad_nodes() == ["gke-n0"]
    assert report.failure_lines() == [
        "gke-n0: FAIL GPU 2 device copy (read+write) 2 TB/s is 46.9% of the NVIDIA H200 reference 4.26 TB/s"
        " (threshold 80%)"
    ]


def test_a_slow_fabric_node_and_its_slow_nic_are_one_line_each_and_the_node_is_bad():
    from tests.incluster.preflight.test_fabric import rails_report

    healthy = device_run("run2-preflight.json")["reports"]["healthy"][0]
    reports = [{**copy.deepcopy(healthy), "node": node} for node in ("n0", "n1", "n2")]
    nics = {
        node: {"devices": ["mlx5_0", "mlx5_1"], "rank_devices": {"0": [0], "1": [1]}} for node in ("n0", "n1", "n2")
    }
    settings = {**_settings(), "nodes": 3, "gpus_per_node": 1}
    measured = {**rails_report(1, nics), "method": {"floor_gbps": 100.0}}
    result = {"mode": "full", "reports": reports, "fabric_report": measured, "path": "/data/x.json"}
    report = run.judge_result(settings, result)
    assert report.bad_nodes() == ["n1"]
    assert report.failure_lines() == [
        "n1: FAIL slow: beside healthy n0, all_gather averages 38.5 GB/s bus bandwidth over 1 KiB-8 GiB, below the"
        " floor 100 GB/s",
        "fabric across 3 nodes: FAIL all_gather averages 38.5 GB/s bus bandwidth over 1 KiB-8 GiB, below the floor"
        " 100 GB/s",
        "n1 NIC of GPU 1 (NCCL net device 1 (mlx5_1)): FAIL slow: its rail beside n0's GPU 1 averages 12 GB/s"
        " all_gather bus bandwidth, 42% of the node's median rail 28.5 GB/s (threshold 80%)",
    ]
    table = report.table()
    assert table[table.index("fabric across 3 nodes: FAIL") :] == [
        "fabric across 3 nodes: FAIL",
        "  all_gather: 38.5 GB/s average bus bandwidth (floor 100 GB/s)",
        "  all_reduce: 240 GB/s average bus bandwidth (floor 100 GB/s)",
        "  n0: NCCL network gIB; its net plugin lists 2 devices (mlx5_0, mlx5_1)",
        "  n1: NCCL network gIB; its net plugin lists 2 devices (mlx5_0, mlx5_1)",
        "  n2: NCCL network gIB; its net plugin lists 2 devices (mlx5_0, mlx5_1)",
        "  " + report.failure_lines()[1],
        "  n1: FAIL slow: beside healthy n0, all_gather averages 38.5 GB/s bus bandwidth over 1 KiB-8 GiB, below the"
        " floor 100 GB/s",
        "  " + report.failure_lines()[2],
        "verdict: FAIL (full preflight of 3 nodes)",
    ]


def test_a_fabric_measurement_that_did_not_finish_fails_the_fabric_with_its_reason():
    healthy = device_run("run2-preflight.json")["reports"]["healthy"][0]
    reports = [{**copy.deepcopy(healthy), "node": node} for node in ("n0", "n1")]
    made = {**_settings(), "gpus_per_node": 1}
    hung = {"nodes": ["n0", "n1"], "error": "GetTimeoutError: Get timed out: some object(s) not ready."}
    report = run.judge_result(made, {"mode": "full", "reports": reports, "fabric_report": hung, "path": "/data/x.json"})
    line = "fabric across 2 nodes: FAIL the measurement did not finish: GetTimeoutError: Get timed out: some object(s) not ready."
    assert report.failure_lines() == [line]
    assert report.bad_nodes() == []
    assert report.table()[-3:] == ["fabric across 2 nodes: FAIL", line, "verdict: FAIL (full preflight of 2 nodes)"]


def test_the_cli_runs_the_stacks_preflight_or_when_it_is_off_the_default_for_its_nodes():
    from jobs.cli.checks import preflight_mode_of

    assert preflight_mode_of(config_of("verl-standard-h200"), None) == "full"
    assert preflight_mode_of(config_of("verl-standard-h200", job={"preflight": "gpu"}), None) == "gpu"
    assert preflight_mode_of(config_of("verl-standard-h200", job={"preflight": "off"}), None) == "full"
    assert preflight_mode_of(config_of("dev", job={"preflight": "off"}), None) == "gpu"
    assert preflight_mode_of(config_of("verl-standard-h200"), "gpu") == "gpu"
