"""`python -m jobs export` against a real local Ray head: the export job of the stack's run with a stand-in converter,
its paths under --data-root (`/data/x` is `DIR/x`, as in every subcommand), and the one-line refusals."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from core import names
from incluster import job_client, readiness, scaling
from incluster.endpoint import Endpoint
from incluster.job_client import JobError
from jobs.cli.main import main
from jobs.spec.training import training_spec
from jobs.submit.target import load_stack
from tests.incluster.test_checkpoints_on_ray import _run_attempt
from tests.incluster.test_scaling import apply_json_patch
from tests.jobs.runs.test_export import STAND_IN, _verl_step
from tests.jobs.test_cli_on_ray import common, run_cli
from tests.ray_fixtures import stand_in_trainer
from tests.support.service_proxy_stand_in import ProxyStandIn, service_proxy_stand_in
from workloads.raycluster import render_manifest

pytestmark = pytest.mark.usefixtures("ray_head")


def test_export_writes_the_model_and_its_lineage_under_the_data_root(ray_head, make_stack, tmp_path, capsys):
    """The run directory is an attempt's, run on the Ray head: the stand-in trainer through the attempt wrapper (three
    steps, each saved, the newest two kept). The reward in lineage.json is the one the exported step's line logged in
    the attempt's log (issue 30 item 7: no verl file logger)."""
    name, directory = make_stack("cli-export")
    run = training_spec(load_stack(name, directory)).run
    data_root = tmp_path / "root"
    run_dir = data_root / "checkpoints" / run
    run_dir.mkdir(parents=True)
    _run_attempt(job_client.connect(Endpoint(address=ray_head)), run_dir, run, 1, steps=3)
    source = run_dir / "global_step_3"
    converter = shlex.join([sys.executable, "-c", STAND_IN, "@STEP_DIR@/actor", "@TARGET_DIR@"])
    code, out, err = run_cli(
        capsys, "export", *common(name, directory, ray_head), "--data-root", str(data_root), "--converter", converter
    )
    assert code == 0, err
    # /data/x is DIR/x, as for the attempts, and the printed path is where the model is
    model = data_root / "exports" / run / "step-3"
    assert f"the export of {run} into {data_root}/exports/{run}/" in err and "SUCCEEDED" in err
    assert (model / "config.json").read_text() == f"{source}/actor"
    lineage = json.loads((model / "lineage.json").read_text())
    assert (lineage["run"], lineage["step"], lineage["sourceCheckpoint"]) == (run, 3, str(source))
    assert lineage["finalReward"] == 3 / 4  # the stand-in's step 3 line, critic/score/mean:np.float64(0.75)


def test_a_second_export_of_a_step_follows_the_first_by_its_submission_id(ray_head, make_stack, tmp_path, capsys):
    """The export of a step has a deterministic submission id; Ray refuses it a second time (ray 2.60.0
    dashboard/modules/job/job_manager.py L549-556), and the CLI follows the job already there."""
    name, directory = make_stack("cli-export-twice")
    run = training_spec(load_stack(name, directory)).run
    data_root = tmp_path / "root"
    _verl_step(data_root / "checkpoints" / run, 10, world_size=8)
    converter = shlex.join([sys.executable, "-c", STAND_IN, "@STEP_DIR@/actor", "@TARGET_DIR@"])
    args = [*common(name, directory, ray_head), "--data-root", str(data_root), "--converter", converter, "--step", "10"]
    code, out, err = run_cli(capsys, "export", *args)
    assert code == 0 and out.strip() == f"{run}-export-step-10" and f"submitted {run}-export-step-10:" in err
    code, out, err = run_cli(capsys, "export", *args)
    assert code == 0 and out.strip() == f"{run}-export-step-10", err
    assert f"already submitted, following it {run}-export-step-10:" in err and "SUCCEEDED" in err


def test_an_export_after_the_scale_to_zero_brings_the_workers_back_and_scales_them_to_zero_again(
    quiet_ray_head, make_stack, tmp_path, capsys
):
    """After the guardian's scale to zero, an export brings the GPU workers back for itself through the API server
    and, once it ends with nothing else live, scales them to zero again at once: left up they would bill at the
    running rate until a guardian's next look (none runs with job.recover false)."""
    name, directory = make_stack("cli-export-idle")
    config = load_stack(name, directory)
    run = training_spec(config).run
    data_root = tmp_path / "root"
    _verl_step(data_root / "checkpoints" / run, 10, world_size=8)
    converter = shlex.join([sys.executable, "-c", STAND_IN, "@STEP_DIR@/actor", "@TARGET_DIR@"])
    scaled_down = apply_json_patch(render_manifest(config), scaling.worker_patch(0))
    with service_proxy_stand_in(ProxyStandIn(quiet_ray_head, scaled_down)) as api:
        args = ["--stack", name, "--dir", str(directory), "--address", api.dashboard_url, "--data-root", str(data_root)]
        code, out, err = run_cli(capsys, "export", *args, "--converter", converter)
    assert code == 0, err
    assert api.patches == [scaling.worker_patch(names.WORKER_REPLICAS), scaling.worker_patch(0)]
    assert api.replicas() == 0
    assert f"the GPU workers were scaled to zero: scaling them back to {config.gpu.nodes}" in err
    assert out.strip().startswith("raysubmit_") and f"the export of {run} into {data_root}/exports/{run}/" in err
    assert "SUCCEEDED" in err
    assert err.splitlines()[-1] == "the GPU workers were at zero before this export: scaled back to zero"


def test_an_export_whose_gpu_nodes_never_come_scales_the_workers_it_brought_back_to_zero_again(
    quiet_ray_head, make_stack, tmp_path, capsys, monkeypatch
):
    name, directory = make_stack("cli-export-no-gpus")
    config = load_stack(name, directory)
    refusal = "refused: the job can never be placed: 0 of 1 Ray nodes with 8 GPUs are up after 600 s."

    def never(*_: object, **__: object) -> None:
        raise JobError(refusal)

    monkeypatch.setattr(readiness, "wait_for_gpus", never)
    scaled_down = apply_json_patch(render_manifest(config), scaling.worker_patch(0))
    with service_proxy_stand_in(ProxyStandIn(quiet_ray_head, scaled_down)) as api:
        args = ["--stack", name, "--dir", str(directory), "--address", api.dashboard_url, "--data-root", str(tmp_path)]
        code, out, err = run_cli(capsys, "export", *args, "--converter", "true")
    assert (code, out) == (2, "")
    assert api.patches == [scaling.worker_patch(names.WORKER_REPLICAS), scaling.worker_patch(0)]
    assert err.splitlines()[-2:] == [
        "the GPU workers were at zero before this export: scaled back to zero",
        f"error: {refusal}",
    ]


def test_export_of_a_step_that_is_not_there_fails_with_its_reason(ray_head, make_stack, tmp_path, capsys):
    name, directory = make_stack("cli-export-missing")
    (tmp_path / "root" / "checkpoints").mkdir(parents=True)
    args = [*common(name, directory, ray_head), "--data-root", str(tmp_path / "root"), "--step", "7"]
    code, _, err = run_cli(capsys, "export", *args, "--converter", "true")
    assert code == 1 and "no complete checkpoint of step 7" in err
    code, out, err = run_cli(capsys, "export", *args, "--converter", "true")
    assert code == 1 and out.strip().endswith("-export-step-7-try-2") and "no complete checkpoint of step 7" in err


def test_a_step_below_one_is_one_line_and_exit_2(capsys):
    code = main(["export", "--stack", "dev", "--dir", "tests/stacks", "--step", "0"])
    assert (code, capsys.readouterr().err) == (2, "error: --step must be a step number of 1 or more, got 0\n")


def test_export_exports_the_run_it_names_and_never_the_other_run_of_the_directory(ray_head, make_stack, capsys):
    """Issue 34 item 3: two runs of the stack under one data root, each made by the project's own flows: the stack's
    run (an attempt of the attempt wrapper on the Ray head, three steps) and a smoke test's run (`submit --entrypoint`,
    the stand-in trainer, two steps, saved later). `export <an attempt of the other>` exports that run alone, from its
    own checkpoint; `export` with no job, the stack's run alone."""
    name, directory = make_stack("cli-export-two")
    args = common(name, directory, ray_head)
    data_root = Path(directory, "data")
    run = training_spec(load_stack(name, directory)).run
    _run_attempt(job_client.connect(Endpoint(address=ray_head)), data_root / "checkpoints" / run, run, 1, steps=3)
    trainer = stand_in_trainer("--steps", "2", "--save-every", "1", "--step-seconds", "0")
    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", trainer, "--wait")
    assert code == 0, err
    other_attempt = out.strip()
    other = other_attempt.rsplit("-", 1)[0]
    assert other != run and (data_root / "checkpoints" / other / "global_step_2").is_dir()
    converter = shlex.join([sys.executable, "-c", STAND_IN, "@STEP_DIR@/actor", "@TARGET_DIR@"])

    code, out, err = run_cli(capsys, "export", *args, other_attempt, "--converter", converter)
    assert code == 0, err
    assert f"the export of {other} into {data_root}/exports/{other}/" in err
    lineage = json.loads((data_root / "exports" / other / "step-2" / "lineage.json").read_text())
    source = data_root / "checkpoints" / other / "global_step_2"
    assert (lineage["run"], lineage["step"], lineage["sourceCheckpoint"]) == (other, 2, str(source))
    assert not (data_root / "exports" / run).exists()

    code, out, err = run_cli(capsys, "export", *args, "--converter", converter)
    assert code == 0, err
    lineage = json.loads((data_root / "exports" / run / "step-3" / "lineage.json").read_text())
    source = data_root / "checkpoints" / run / "global_step_3"
    assert (lineage["run"], lineage["step"], lineage["sourceCheckpoint"]) == (run, 3, str(source))
    assert [path.name for path in (data_root / "exports" / other).iterdir()] == ["step-2"]
