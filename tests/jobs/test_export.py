"""Hand over the model: the export job's submission per framework, and its driver run here on a verl-layout run
directory with a stand-in converter: the step it picks, the model directory and lineage.json."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from jobs import export, export_run
from jobs.spec import training_spec
from tests.conftest import combination_config


def test_the_verl_export_runs_verls_model_merger_on_the_steps_actor_shards():
    config = combination_config()
    spec = training_spec(config)
    submission = export.export_submission(config, spec, step=20)
    command = shlex.split(submission["entrypoint"])
    assert command[:3] == ["python3", "-m", "jobs.export_run"]
    assert command[command.index("--run-dir") + 1] == f"/data/checkpoints/{spec.run}"
    assert command[command.index("--exports-root") + 1] == f"/data/exports/{spec.run}"
    assert command[command.index("--spec-hash") + 1] == spec.run.rsplit("-", 1)[1]
    assert command[command.index("--step") + 1] == "20"
    assert command[command.index("--world-size") + 1] == "8"
    assert command[command.index("--") + 1 :] == [
        "python3", "-m", "verl.model_merger", "merge", "--backend", "fsdp",
        "--local_dir", "@STEP_DIR@/actor", "--target_dir", "@TARGET_DIR@",
    ]  # fmt: skip
    assert submission["entrypoint_num_gpus"] == 1
    assert "run" not in submission["metadata"] and submission["metadata"]["exportOf"] == spec.run
    assert "submission_id" not in submission and "py_modules" not in submission["runtime_env"]


def test_the_nemo_rl_export_runs_its_dcp_converter_and_the_newest_step_by_default():
    config = combination_config(framework="nemo-rl")
    submission = export.export_submission(config, training_spec(config))
    command = shlex.split(submission["entrypoint"])
    assert "--step" not in command
    assert command[command.index("--") + 1 :] == [
        "bash", "-c",
        "cd /opt/nemo-rl && uv run python examples/converters/convert_dcp_to_hf.py --config @STEP_DIR@/config.yaml"
        " --dcp-ckpt-path @STEP_DIR@/policy/weights --hf-ckpt-path @TARGET_DIR@",
    ]  # fmt: skip


def test_the_data_root_moves_the_paths_as_an_attempts_and_the_export_uri_names_the_bucket(tmp_path):
    from jobs.spec import on_data_root, submission_of

    config = combination_config()
    spec = training_spec(config)
    command = shlex.split(on_data_root(export.export_submission(config, spec), str(tmp_path))["entrypoint"])
    attempt = on_data_root(submission_of(config, spec, 1), str(tmp_path))
    # /data/x is DIR/x for the export as for the attempt whose checkpoints it reads
    assert command[command.index("--run-dir") + 1] == attempt["runtime_env"]["env_vars"]["GRPO_RUN_DIR"]
    assert command[command.index("--run-dir") + 1] == f"{tmp_path}/checkpoints/{spec.run}"
    assert command[command.index("--exports-root") + 1] == f"{tmp_path}/exports/{spec.run}"
    assert export.export_uri("my-bucket") == "gs://my-bucket/exports"


def _verl_step(run_dir: Path, step: int, world_size: int = 2, complete: bool = True) -> Path:
    step_dir = run_dir / f"global_step_{step}"
    (step_dir / "actor").mkdir(parents=True)
    ranks = range(world_size if complete else world_size - 1)
    for kind in ("model", "optim", "extra_state"):
        for rank in ranks:
            (step_dir / "actor" / f"{kind}_world_size_{world_size}_rank_{rank}.pt").write_text("x")
    (step_dir / "actor" / "fsdp_config.json").write_text("{}")
    (step_dir / "data.pt").write_text("x")
    return step_dir


STAND_IN = "import pathlib, sys; target = pathlib.Path(sys.argv[2]); (target / 'config.json').write_text(sys.argv[1])"


def _driver(run_dir: Path, exports: Path, *extra: str) -> int:
    return export_run.main([
        "--framework", "verl", "--run-dir", str(run_dir), "--world-size", "2", "--exports-root", str(exports),
        "--run", "dev-0123456789", "--spec-hash", "0123456789", *extra,
        "--", sys.executable, "-c", STAND_IN, "@STEP_DIR@/actor", "@TARGET_DIR@",
    ])  # fmt: skip


def test_the_driver_exports_the_newest_complete_step_with_its_lineage(tmp_path, capsys):
    run_dir, exports = tmp_path / "run", tmp_path / "exports"
    _verl_step(run_dir, 10)
    source = _verl_step(run_dir, 20)
    _verl_step(run_dir, 30, complete=False)
    metrics = run_dir / "metrics" / "attempt-1" / "grpo-gke"
    metrics.mkdir(parents=True)
    lines = [{"step": step, "data": {"critic/score/mean": step / 100}} for step in (10, 20, 25)]
    (metrics / "dev.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines) + "{torn")
    assert _driver(run_dir, exports) == 0
    model = exports / "step-20"
    assert (model / "config.json").read_text() == f"{source}/actor"
    assert json.loads((model / "lineage.json").read_text()) == {
        "finalReward": 0.2, "run": "dev-0123456789", "sourceCheckpoint": str(source), "specHash": "0123456789",
        "step": 20,
    }  # fmt: skip
    assert "step 20 from" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("steps", "asked", "message"),
    [((10,), "30", "no complete checkpoint of step 30"), ((), None, "none is complete")],
)
def test_the_driver_refuses_a_missing_or_incomplete_step_in_one_line(tmp_path, capsys, steps, asked, message):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    for step in steps:
        _verl_step(run_dir, step)
    _verl_step(run_dir, 30, complete=False)
    code = _driver(run_dir, tmp_path / "exports", *(["--step", asked] if asked else []))
    out = capsys.readouterr().out.strip().splitlines()
    assert code == export_run.REFUSED and len(out) == 1 and message in out[0]
    assert not (tmp_path / "exports").exists()
