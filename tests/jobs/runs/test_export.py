"""Hand over the model: the export job's submission per framework and recipe, and its driver run here on verl- and
NeMo-RL-layout run directories with stand-in converters that check what the real ones check
(tests/support/stand_in_converter.py): the step it picks, the model directory made whole or not at all, lineage.json,
and a second export of a step that is a no-op."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from incluster import export_run
from incluster.attempt import log_parts
from jobs.demo.stand_in_trainer import metric_line, write_archive
from jobs.runs import export
from jobs.spec.training import training_spec
from tests.conftest import combination_config, config_of
from tests.incluster.test_attempt import wrapped

STAND_IN_CONVERTER = str(Path(__file__).resolve().parents[2] / "support" / "stand_in_converter.py")
"""Plays NeMo-RL's and verl's converters (tests/support/stand_in_converter.py)."""


def test_the_verl_export_runs_verls_model_merger_on_the_steps_actor_shards():
    config = combination_config()
    spec = training_spec(config)
    submission = export.export_submission(config, spec, step=20)
    command = shlex.split(submission["entrypoint"])
    assert command[:3] == ["python3", "-m", "incluster.export_run"]
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
    assert submission["submission_id"] == f"{spec.run}-export-step-20" and "py_modules" not in submission["runtime_env"]


def test_the_nemo_rl_dtensor_export_runs_its_dcp_converter_on_a_torch_save_checkpoint_and_the_newest_step():
    config = combination_config(framework="nemo-rl")
    spec = training_spec(config)
    submission = export.export_submission(config, spec)
    command = shlex.split(submission["entrypoint"])
    assert "--step" not in command and "submission_id" not in submission
    assert command[command.index("--") + 1 :] == [
        "bash", "-c",
        "cd /opt/nemo-rl && uv run python examples/converters/convert_dcp_to_hf.py --config @STEP_DIR@/config.yaml"
        " --dcp-ckpt-path @STEP_DIR@/policy/weights --hf-ckpt-path @TARGET_DIR@",
    ]  # fmt: skip
    # The DTensor recipe's default, safetensors, writes no DCP .metadata for that converter: torch_save.
    assert "checkpointing.model_save_format=torch_save" in spec.overrides


def test_the_nemo_rl_megatron_export_of_the_72b_stack_runs_the_megatron_converter_on_its_iteration():
    config = config_of("nemo-rl-standard-b200")
    spec = training_spec(config)
    command = shlex.split(export.export_submission(config, spec)["entrypoint"])
    assert command[command.index("--") + 1 :] == [
        "bash", "-c",
        "cd /opt/nemo-rl && uv run --extra mcore python examples/converters/convert_megatron_to_hf.py"
        " --config @STEP_DIR@/config.yaml --megatron-ckpt-path @STEP_DIR@/policy/weights/iter_0000000"
        " --hf-ckpt-path @TARGET_DIR@",
    ]  # fmt: skip
    assert not [item for item in spec.overrides if item.startswith("checkpointing.model_save_format")]


def test_the_data_root_moves_the_paths_as_an_attempts_and_the_export_uri_names_the_bucket(tmp_path):
    from jobs.spec.training import on_data_root, submission_of

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
            write_archive(step_dir / "actor" / f"{kind}_world_size_{world_size}_rank_{rank}.pt", {"step": step})
    (step_dir / "actor" / "fsdp_config.json").write_text("{}")
    write_archive(step_dir / "data.pt", {"step": step})
    return step_dir


STAND_IN = (
    "import pathlib, sys; target = pathlib.Path(sys.argv[2]); target.mkdir(exist_ok=True);"
    " (target / 'config.json').write_text(sys.argv[1])"
)
"""A verl merger that only writes config.json: it makes its target whether or not it exists, as verl 0.9.1's does
(verl/model_merger/base_model_merger.py L162)."""


def _driver(run_dir: Path, exports: Path, *extra: str) -> int:
    """The export driver on a verl run with the inline stand-in converter that only writes config.json."""
    return export_run.main([
        "--framework", "verl", "--run-dir", str(run_dir), "--world-size", "2", "--exports-root", str(exports),
        "--run", "dev-0123456789", "--spec-hash", "0123456789", *extra,
        "--", sys.executable, "-c", STAND_IN, "@STEP_DIR@/actor", "@TARGET_DIR@",
    ])  # fmt: skip


def test_the_driver_exports_the_newest_complete_step_with_the_reward_its_attempts_logged(tmp_path, capsys):
    """Issue 30 item 7: verl's reward at the exported step comes from the step lines of the attempts' logs as the attempt
    wrapper writes them (in parts, with Ray's actor prefix as verl's TaskRunner prints them), not from verl's file
    logger, which holds one file open for the whole attempt. Attempt 1 saved step 10 and logged steps 10 and 15 before
    it was lost; attempt 2 resumed from step 10 and logged step 15, then (a wrapper started again for the attempt,
    in its log's next part) steps 20 and 25; step 30's save was cut."""
    run_dir, exports = tmp_path / "run", tmp_path / "exports"
    _verl_step(run_dir, 10)

    def attempt(number: int, *steps: int) -> None:
        lines = [f"(TaskRunner pid=7) {metric_line(step)}" for step in steps]
        assert wrapped(run_dir, number, "printf", "%s\\n", *lines).returncode == 0

    attempt(1, 10, 15)
    attempt(2, 15)
    source = _verl_step(run_dir, 20)
    attempt(2, 20, 25)
    _verl_step(run_dir, 30, complete=False)
    assert [path.name for path in log_parts(run_dir, 2)] == ["attempt-2.log", "attempt-2.1.log"]
    assert not (run_dir / "metrics").exists()
    assert _driver(run_dir, exports) == 0
    model = exports / "step-20"
    assert (model / "config.json").read_text() == f"{source}/actor"
    assert json.loads((model / "lineage.json").read_text()) == {
        "finalReward": 20 / 21, "run": "dev-0123456789", "sourceCheckpoint": str(source), "specHash": "0123456789",
        "step": 20,
    }  # fmt: skip
    assert "step 20 from" in capsys.readouterr().out
    assert _driver(run_dir, exports, "--step", "10") == 0
    assert json.loads((exports / "step-10" / "lineage.json").read_text())["finalReward"] == 10 / 11


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


def _stand_in(converter: list[str]) -> list[str]:
    """The framework's converter command (jobs/runs/export.py converter_command) with the stand-in in the real script's
    place and the real arguments kept: `cd DIR && uv run [...] python examples/converters/X.py ARGS` and
    `python3 -m verl.model_merger merge ARGS` become `python stand_in_converter.py X.py|merge ARGS`."""
    if converter[0] == "bash":
        words = shlex.split(converter[2])
        script = next(word for word in words if word.startswith("examples/converters/"))
        return [sys.executable, STAND_IN_CONVERTER, Path(script).name, *words[words.index(script) + 1 :]]
    return [sys.executable, STAND_IN_CONVERTER, *converter[converter.index("merge") :]]


def _nemo_rl_step(run_dir: Path, step: int, backend: str) -> Path:
    """A finished NeMo-RL v0.7.0 step_<step>: DTensor v2 torch_save weights (a DCP `.metadata` in policy/weights/model)
    or Megatron's policy/weights/iter_0000000, with training_info.json and config.yaml."""
    step_dir = run_dir / f"step_{step}"
    weights = step_dir / "policy" / "weights" / ("model" if backend == "dtensor" else "iter_0000000")
    weights.mkdir(parents=True)
    (weights / (".metadata" if backend == "dtensor" else "metadata.json")).write_text("x")
    (step_dir / "training_info.json").write_text(json.dumps({"step": step, "val_reward": 0.5}))
    (step_dir / "config.yaml").write_text("policy: {model_name: /data/models/m}\n")
    return step_dir


def _nemo_rl_driver(run_dir: Path, exports: Path, converter: list[str], *extra: str) -> int:
    return export_run.main([
        "--framework", "nemo-rl", "--run-dir", str(run_dir), "--world-size", "16", "--exports-root", str(exports),
        "--run", "nemo-0123456789", "--spec-hash", "0123456789", *extra, "--", *converter,
    ])  # fmt: skip


@pytest.mark.parametrize("backend", ["dtensor", "megatron"])
def test_a_nemo_rl_checkpoint_is_exported_by_its_recipes_converter_into_a_target_that_did_not_exist(
    tmp_path, capsys, backend
):
    """NeMo-RL's converters refuse an existing target (FileExistsError): the driver hands them a fresh one."""
    run_dir, exports = tmp_path / "run", tmp_path / "exports"
    source = _nemo_rl_step(run_dir, 20, backend)
    converter = _stand_in(export.converter_command("nemo-rl", backend))
    assert _nemo_rl_driver(run_dir, exports, converter) == 0, capsys.readouterr().out
    model = exports / "step-20"
    weights = source / "policy" / "weights" / ("model" if backend == "dtensor" else "iter_0000000")
    assert json.loads((model / "config.json").read_text()) == {"source": str(weights)}
    lineage = json.loads((model / "lineage.json").read_text())
    assert (lineage["step"], lineage["finalReward"], lineage["sourceCheckpoint"]) == (20, 0.5, str(source))
    assert sorted(path.name for path in exports.iterdir()) == ["step-20"]


def test_the_verl_merger_through_its_real_arguments_exports_the_step(tmp_path):
    run_dir, exports = tmp_path / "run", tmp_path / "exports"
    source = _verl_step(run_dir, 10)
    converter = _stand_in(export.converter_command("verl"))
    code = export_run.main([
        "--framework", "verl", "--run-dir", str(run_dir), "--world-size", "2", "--exports-root", str(exports),
        "--run", "dev-0123456789", "--spec-hash", "0123456789", "--", *converter,
    ])  # fmt: skip
    assert code == 0 and json.loads((exports / "step-10" / "config.json").read_text()) == {"source": f"{source}/actor"}


def test_a_converter_cut_short_leaves_no_model_directory_and_the_next_export_succeeds(tmp_path, capsys):
    run_dir, exports = tmp_path / "run", tmp_path / "exports"
    _nemo_rl_step(run_dir, 20, "dtensor")
    converter = _stand_in(export.converter_command("nemo-rl", "dtensor"))
    assert _nemo_rl_driver(run_dir, exports, [*converter, "--fail"]) == 1
    assert list(exports.iterdir()) == []
    assert _nemo_rl_driver(run_dir, exports, converter) == 0
    assert sorted(path.name for path in (exports / "step-20").iterdir()) == ["config.json", "lineage.json"]


def test_a_second_export_of_an_exported_step_runs_nothing_and_succeeds_and_a_step_dir_without_lineage_is_refused(
    tmp_path, capsys
):
    run_dir, exports = tmp_path / "run", tmp_path / "exports"
    _nemo_rl_step(run_dir, 20, "dtensor")
    converter = _stand_in(export.converter_command("nemo-rl", "dtensor"))
    assert _nemo_rl_driver(run_dir, exports, converter) == 0
    before = (exports / "step-20" / "lineage.json").read_text()
    capsys.readouterr()
    assert _nemo_rl_driver(run_dir, exports, ["false"], "--step", "20") == 0
    assert capsys.readouterr().out.strip().endswith("is already exported (its lineage.json is there); nothing to do")
    assert (exports / "step-20" / "lineage.json").read_text() == before
    (exports / "step-20" / "lineage.json").unlink()
    assert _nemo_rl_driver(run_dir, exports, converter) == export_run.REFUSED
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1 and "refused:" in out[0] and "exists without its lineage.json" in out[0]


def test_the_guardians_export_of_the_newest_step_is_pinned_to_its_step_with_a_deterministic_submission_id():
    config = combination_config()
    spec = training_spec(config)
    newest = export.export_submission(config, spec)
    pinned = export_run.for_step(newest, spec.run, 30)
    assert pinned == {
        **export.export_submission(config, spec, step=30),
        "metadata": {**newest["metadata"], "step": "30"},
    }
    assert export_run.retry_id(pinned["submission_id"], 1) == f"{spec.run}-export-step-30"
    assert export_run.retry_id(pinned["submission_id"], 3) == f"{spec.run}-export-step-30-try-3"
