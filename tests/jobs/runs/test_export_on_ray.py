"""`python -m jobs export` against a real local Ray head: the export job of the stack's run with a stand-in converter,
its paths under --data-root (`/data/x` is `DIR/x`, as in every subcommand), and the one-line refusals."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from jobs.cli.main import main
from jobs.spec.training import training_spec
from jobs.submit.target import load_stack
from tests.jobs.runs.test_export import STAND_IN, _verl_step
from tests.jobs.test_cli_on_ray import common, run_cli

pytestmark = pytest.mark.usefixtures("ray_head")


def test_export_writes_the_model_and_its_lineage_under_the_data_root(ray_head, make_stack, tmp_path, capsys):
    name, directory = make_stack("cli-export")
    run = training_spec(load_stack(name, directory)).run
    data_root = tmp_path / "root"
    run_dir = data_root / "checkpoints" / run
    run_dir.mkdir(parents=True)
    source = _verl_step(run_dir, 10, world_size=8)
    converter = shlex.join([sys.executable, "-c", STAND_IN, "@STEP_DIR@/actor", "@TARGET_DIR@"])
    code, out, err = run_cli(
        capsys, "export", *common(name, directory, ray_head), "--data-root", str(data_root), "--converter", converter
    )
    assert code == 0, err
    # /data/x is DIR/x, as for the attempts, and the printed path is where the model is
    model = data_root / "exports" / run / "step-10"
    assert f"the export of {run} into {data_root}/exports/{run}/" in err and "SUCCEEDED" in err
    assert (model / "config.json").read_text() == f"{source}/actor"
    lineage = json.loads((model / "lineage.json").read_text())
    assert (lineage["run"], lineage["step"], lineage["sourceCheckpoint"]) == (run, 10, str(source))


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
