"""The attempt wrapper (`python3 -m jobs.attempt`): the checkpoint check before the command, the output passed
through unchanged, the timestamped log, the refusal; and its modules, sent to the pods, stdlib only for Python 3.10."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jobs import control
from jobs.attempt import REFUSED_EXIT, REFUSED_LINE, RESUMED_LINE, log_path
from tests.jobs.stand_in_trainer import SHARD_KINDS, shard_name

WORLD = 2
"""A small world size: two ranks' shards make a complete verl checkpoint here."""

STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z\t")
"""The start of every line of the attempt's log."""


def verl_step(run_dir: Path, step: int, complete: bool = True) -> Path:
    """A verl `global_step_<step>`, complete or lacking rank 1's model shard and data.pt."""
    folder = run_dir / f"global_step_{step}"
    (folder / "actor").mkdir(parents=True)
    for kind in SHARD_KINDS:
        for rank in range(WORLD):
            if complete or (kind, rank) != ("model", 1):
                (folder / "actor" / shard_name(kind, WORLD, rank)).write_text("x")
    (folder / "actor" / "fsdp_config.json").write_text("{}")
    if complete:
        (folder / "data.pt").write_text("{}")
    return folder


def wrapped(run_dir: Path, attempt: int, *command: str) -> subprocess.CompletedProcess:
    """`python -m jobs.attempt` around `command` for attempt `attempt` of the run in `run_dir`, from the
    pod package alone (POD_MODULES), as a pod runs it."""
    with control.pod_package() as package:
        env = {
            **os.environ,
            "GRPO_RUN_DIR": str(run_dir),
            "GRPO_ATTEMPT": str(attempt),
            "PYTHONPATH": str(Path(package).parent),
        }
        argv = [sys.executable, "-m", "jobs.attempt", "--framework", "verl", "--world-size", str(WORLD), "--", *command]
        return subprocess.run(argv, env=env, capture_output=True, timeout=60, cwd="/")


def test_without_checkpoints_the_command_runs_its_output_passes_through_and_each_line_is_logged_with_its_time(
    tmp_path,
):
    code = "import sys; print('out one'); print('err one', file=sys.stderr, flush=True); print('out two'); sys.exit(5)"
    result = wrapped(tmp_path, 4, sys.executable, "-c", code)
    assert result.returncode == 5
    lines = result.stdout.decode().splitlines()
    assert lines[0] == f"grpo-gke attempt 4: no checkpoint; starting at step 0 in {tmp_path}"
    assert sorted(lines[1:]) == ["err one", "out one", "out two"]
    assert result.stderr == b""
    logged = log_path(tmp_path, 4).read_text().splitlines()
    assert all(STAMP.match(line) for line in logged)
    assert [STAMP.sub("", line) for line in logged] == lines


def test_the_newest_complete_checkpoint_is_resumed_and_a_newer_half_written_one_moved_aside(tmp_path):
    verl_step(tmp_path, 2)
    verl_step(tmp_path, 4)
    verl_step(tmp_path, 6, complete=False)
    result = wrapped(tmp_path, 2, "sh", "-c", 'cat "$GRPO_RUN_DIR/latest_checkpointed_iteration.txt"')
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == [
        f"grpo-gke attempt 2: resuming from global_step_4 (step 4) in {tmp_path}",
        "4",
    ]
    # the line status and plot read the resume from (jobs/observed.py logged_resumes)
    assert RESUMED_LINE.match(result.stdout.decode().splitlines()[0]).groups() == ("2", "4")
    assert (tmp_path / "latest_checkpointed_iteration.txt").read_text() == "4"
    assert not (tmp_path / "global_step_6").exists()
    assert [path.name.split("-")[0] for path in (tmp_path / "incomplete").iterdir()] == ["global_step_6"]


def test_checkpoints_none_complete_refuse_the_attempt_with_one_last_line_and_exit_3(tmp_path):
    verl_step(tmp_path, 2, complete=False)
    marker = tmp_path / "ran"
    result = wrapped(tmp_path, 3, "touch", str(marker))
    assert result.returncode == REFUSED_EXIT == 3
    lines = result.stdout.decode().splitlines()
    assert len(lines) == 1 and REFUSED_LINE.match(lines[0])
    assert "none is complete" in lines[0] and "global_step_2" in lines[0]
    assert not marker.exists() and (tmp_path / "global_step_2").is_dir()
    assert STAMP.sub("", log_path(tmp_path, 3).read_text().splitlines()[-1]) == lines[0]


def test_a_command_that_cannot_run_and_bad_usage_are_one_line_each(tmp_path):
    missing = wrapped(tmp_path, 1, str(tmp_path / "no-such-program"))
    assert missing.returncode == 127
    assert missing.stdout.decode().splitlines()[-1].startswith("grpo-gke attempt: cannot run ")
    with control.pod_package() as package:
        env = {**os.environ, "PYTHONPATH": str(Path(package).parent)}
        env.pop("GRPO_RUN_DIR", None)
        usage = subprocess.run([sys.executable, "-m", "jobs.attempt", "--framework", "verl", "--world-size", "8", "--", "true"],
                               env=env, capture_output=True, text=True, timeout=60, cwd="/")  # fmt: skip
    assert usage.returncode == 2 and len(usage.stderr.splitlines()) == 1 and "GRPO_RUN_DIR" in usage.stderr


def _imports(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("name", control.POD_MODULES)
def test_each_pod_module_is_python_3_10_and_imports_only_the_stdlib_and_other_pod_modules(name):
    tree = ast.parse((control.PROJECT_DIR / name).read_text(), feature_version=(3, 10))
    pod = {module.removesuffix(".py").replace("/", ".").removesuffix(".__init__") for module in control.POD_MODULES}
    for module in _imports(tree):
        root = module.split(".")[0]
        assert module in pod or (root in sys.stdlib_module_names and root != "jobs"), f"{name} imports {module}"
    assert "datetime.UTC" not in (control.PROJECT_DIR / name).read_text()
    assert "from datetime import UTC" not in (control.PROJECT_DIR / name).read_text()
