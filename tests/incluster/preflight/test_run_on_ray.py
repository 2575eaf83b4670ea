"""`python -m jobs preflight` against a real local Ray head: the real driver, placement group and Ray tasks, the
measurement swapped for recorded H200 figures (stand_in_measure.py) and the fabric measured for real with gloo on
127.0.0.1 instead of NCCL. One stand-in node is slow; the table, the verdict and the stored result are checked whole.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

from incluster.preflight import run
from jobs.cli.main import main
from jobs.preflight import settings
from jobs.submit.target import load_stack
from tests.incluster.preflight.conftest import STAMP

pytestmark = [
    pytest.mark.usefixtures("ray_head"),
    pytest.mark.skipif(
        importlib.util.find_spec("torch") is None,
        reason="torch is not installed (requirements-test.txt, installed by `make test`): the gloo fabric is skipped",
    ),
]


def results_of(name, directory, data_root) -> Path:
    """Where the stack's preflight results lie under `data_root`: `<run dir>/preflight`."""
    return Path(settings.results_dir(load_stack(name, directory), str(data_root)))


def preflight(capsys, ray_head, name, directory, data_root, *extra):
    """`python -m jobs preflight` on the local head, the shared storage standing at `data_root` (an existing
    directory, as every subcommand's --data-root must name)."""
    Path(data_root).mkdir(parents=True, exist_ok=True)
    code = main(
        [
            "preflight",
            "--stack",
            name,
            "--dir",
            str(directory),
            "--address",
            ray_head,
            "--data-root",
            str(data_root),
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


HEALTHY_NODE = [
    "node gke-grpo-h200-pool-0: PASS (1 of 1 GPUs pass)",
    "  GPU bf16 TFLOP/s (ref 698)  copy TB/s (ref 4.26)  ECC       remap   SM MHz      result",
    "  0   724.8 (104%)            4.273 (100%)          Enabled   ok      1965/1980   PASS",
    "  driver 580.159.04, CUDA 13.0; XID events: 0",
]
"""The table of the stand-in node on GPU 0: the recorded healthy H200."""

SLOW = (
    "gke-grpo-h200-pool-1 GPU 0: FAIL bf16 matmul 512 TFLOP/s is 73.4% of the NVIDIA H200 reference 698 TFLOP/s"
    " (threshold 80%)"
)
"""The finding on the stand-in node on GPU 1, whose matmul is slowed."""


def test_a_slow_gpu_fails_its_node_with_one_line_beside_a_passing_node_and_the_fabric(
    ray_head, make_stack, on_local_head, capsys, tmp_path
):
    name, directory = make_stack("pf-two", gpu={"nodes": 2})
    code, out, err = preflight(capsys, ray_head, name, directory, tmp_path / "data")
    assert code == 1, err
    results = results_of(name, directory, tmp_path / "data")
    lines = out.splitlines()
    fabric = lines[9:12]
    assert lines[:9] + lines[12:] == [
        *HEALTHY_NODE,
        "node gke-grpo-h200-pool-1: FAIL (0 of 1 GPUs pass; failing GPUs 0)",
        "  GPU bf16 TFLOP/s (ref 698)  copy TB/s (ref 4.26)  ECC       remap   SM MHz      result",
        "  0   512 (73%)               4.273 (100%)          Enabled   ok      1965/1980   FAIL",
        "  driver 580.159.04, CUDA 13.0; XID events: 0",
        f"  {SLOW}",
        "verdict: FAIL (full preflight of 2 nodes)",
        f"results: {results}/{STAMP}.json",
        SLOW.replace(" GPU 0: FAIL", ": FAIL GPU 0"),
    ]
    # gloo's loopback bandwidth varies from run to run: the figures' form, not their values.
    assert fabric[0] == "fabric across 2 nodes: PASS"
    assert [line.split(":")[0] for line in fabric[1:]] == ["  all_gather", "  all_reduce"]
    assert all(line.endswith("GB/s average bus bandwidth (floor 1e-06 GB/s)") for line in fabric[1:])
    assert "preflight RUNNING for " in err
    assert (results / "newest").read_text() == f"{STAMP}.json\n"
    stored = json.loads((results / f"{STAMP}.json").read_text())
    assert stored["verdict"]["passed"] is False
    assert [node["passed"] for node in stored["verdict"]["nodes"]] == [True, False]
    assert stored["verdict"]["fabric"] == {"passed": True, "lines": ["fabric across 2 nodes: PASS"]}
    assert stored["fabric_report"]["nodes"] == ["gke-grpo-h200-pool-0", "gke-grpo-h200-pool-1"]


def test_one_healthy_node_passes_its_gpu_preflight(ray_head, make_stack, on_local_head, capsys, tmp_path):
    name, directory = make_stack("pf-one")
    code, out, err = preflight(capsys, ray_head, name, directory, tmp_path / "data")
    assert code == 0, err
    results = results_of(name, directory, tmp_path / "data")
    assert out.splitlines() == [
        *HEALTHY_NODE,
        "verdict: PASS (gpu preflight of 1 nodes)",
        f"results: {results}/{STAMP}.json",
    ]


def test_a_full_preflight_of_one_node_is_a_usage_error(ray_head, make_stack, capsys, tmp_path):
    name, directory = make_stack("pf-full-one")
    code, out, err = preflight(capsys, ray_head, name, directory, tmp_path / "data", "--mode", "full")
    assert (code, out) == (2, "")
    assert err == (
        "error: --mode full needs 2 or more GPU nodes; stack 'pf-full-one' has gpu.nodes=1 (use --mode gpu)\n"
    )


def test_bundles_that_cannot_be_placed_end_the_preflight_in_one_line(
    ray_head, make_stack, on_local_head, monkeypatch, capsys, tmp_path
):
    made_for_local_head = settings.preflight_settings

    def unplaceable(*args, **kwargs):
        return {
            **made_for_local_head(*args, **kwargs),
            "gpus_per_node": 8,
            "strategy": "STRICT_SPREAD",
            "placement_timeout_s": 1.0,
        }

    monkeypatch.setattr(settings, "preflight_settings", unplaceable)
    name, directory = make_stack("pf-unplaceable", gpu={"nodes": 2})
    code, out, err = preflight(capsys, ray_head, name, directory, tmp_path / "data", "--mode", "gpu")
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (
        f"error: the preflight {name}-preflight-20261201t120000000z FAILED without a result: preflight: could not"
        " place 2 bundles of 8 GPUs (STRICT_SPREAD) within 1 s: fewer GPU nodes with free GPUs are in Ray"
    )


def test_a_head_whose_python3_lacks_ray_is_told_what_the_preflight_needs(
    ray_head, make_stack, on_local_head, monkeypatch, capsys, tmp_path
):
    """Issue 34 item 4: on a Ray head started outside the framework image, `python3` may have no Ray (a user's own
    head on this machine): the one line says what the head needs instead of ending at `No module named 'ray'`. The
    head's python3 is stood for by this venv's Python without its site-packages (-S): a fault at the boundary."""
    bare = tmp_path / "python3"
    bare.write_text(f'#!/bin/sh\nexec {sys.executable} -S "$@"\n')
    bare.chmod(0o755)
    monkeypatch.setattr(run, "POD_PYTHON", str(bare))
    name, directory = make_stack("pf-no-ray")
    code, out, err = preflight(capsys, ray_head, name, directory, tmp_path / "data")
    assert (code, out) == (2, "")
    *progress, last = err.splitlines()
    assert all(line.startswith("preflight ") for line in progress)
    assert last == (
        f"error: the preflight {name}-preflight-20261201t120000000z FAILED without a result: ModuleNotFoundError: No"
        f" module named 'ray': the Ray head runs the preflight's driver with {bare} (the framework image's, with Ray"
        f" and torch), and there {bare} has no ray; on a head of your own, start it with a PATH whose {bare} has Ray"
        " and torch (PATH=$PWD/.venv/bin:$PATH .venv/bin/ray start --head ...); the preflight measures GPUs, so it"
        " needs the stack's GPU nodes"
    )
