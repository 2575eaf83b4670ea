"""`python -m jobs guard` as the user runs it against a local Ray head, on runs that `python -m jobs submit` made: it
exits once the run is over and nothing is left to do, with its last line and its exit status (docs/runs.md "Run
guardian")."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from plan.harness import REPO_ROOT
from tests.ray_fixtures import stand_in_trainer

GUARD_TIMEOUT_S = 120
"""Longest a guard command may take here: the run is over when it starts, so only the export's end is waited for."""


def jobs_cli(*argv: str, home: Path) -> subprocess.CompletedProcess:
    """`.venv/bin/python -m jobs ARGV` from the repository root, as typed in a fresh clone."""
    environment = {"PATH": os.environ["PATH"], "HOME": str(home)}
    return subprocess.run(
        [".venv/bin/python", "-m", "jobs", *argv],
        cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=GUARD_TIMEOUT_S,
    )  # fmt: skip


def on_the_local_head(make_stack, name: str, address: str) -> tuple[list[str], Path]:
    """The arguments of a copy of the dev stack named `name` on the local head, its shared storage under a directory
    of the test's own; and that directory."""
    stack, directory = make_stack(name)
    data = directory / "data"
    data.mkdir()
    return ["--stack", stack, "--dir", str(directory), "--address", address, "--data-root", str(data)], data


def events(data: Path, run: str) -> list[tuple[int, str]]:
    """(attempt, event) of every entry of the run's record, in order."""
    lines = (data / "checkpoints" / run / "attempts.jsonl").read_text().splitlines()
    return [(entry["attempt"], entry["event"]) for entry in map(json.loads, lines)]


def test_guard_on_a_run_that_succeeded_waits_for_its_export_then_exits_0_with_one_last_line(
    quiet_ray_head, make_stack, tmp_path
):
    """The stand-in trainer succeeds with a complete checkpoint of step 2; guard records it, submits the export of
    step 2 and waits for that export to end before it says nothing is left to do. On this machine's head the export
    fails (no verl to convert with: the real converter command, not a fault of the test's), which its last line
    says; the run itself succeeded, so exit 0. A second guard on the same state exits at once with the same line."""
    args, data = on_the_local_head(make_stack, "guard-ok", quiet_ray_head)
    trainer = stand_in_trainer("--steps", "2", "--save-every", "2")
    submitted = jobs_cli("submit", *args, "--entrypoint", trainer, "--wait", home=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    run = submitted.stdout.strip().rsplit("-", 1)[0]

    guarded = jobs_cli("guard", *args, "--entrypoint", trainer, home=tmp_path)
    export = f"{run}-export-step-2"
    last = (
        f"{run}: attempt 1 SUCCEEDED; the export {export} FAILED: python -m jobs export --step 2 tries it again;"
        " nothing left to do"
    )
    expected = (
        rf"{run}: attempt 1 succeeded\n"
        rf"{run}: attempt 1 export-submitted: {export} exports the newest complete checkpoint \(step 2\)\n"
        rf"(?:{run}: attempt 1 SUCCEEDED; the export {export} is (?:PENDING|RUNNING)\n)*"
        rf"{re.escape(last)}\n"
    )
    assert (guarded.returncode, guarded.stdout) == (0, ""), guarded.stderr
    assert re.fullmatch(expected, guarded.stderr), guarded.stderr
    assert events(data, run) == [(1, "succeeded"), (1, "export-submitted")]

    again = jobs_cli("guard", *args, "--entrypoint", trainer, home=tmp_path)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", last + "\n")


def test_guard_on_a_run_over_without_success_exits_1_with_why_in_its_last_line(quiet_ray_head, make_stack, tmp_path):
    """Attempt 1 is lost right after its only save (the stand-in trainer's once-per-run cut shard: a node lost before
    the save's bytes all reached the storage), so the second `submit` makes attempt 2, which the attempt wrapper
    refuses (a checkpoint, none complete). guard records it not retried and exits 1, its last line saying why."""
    args, data = on_the_local_head(make_stack, "guard-over", quiet_ray_head)
    trainer = stand_in_trainer("--steps", "2", "--save-every", "2", "--cut-shard-at", "2")
    first = jobs_cli("submit", *args, "--entrypoint", trainer, "--wait", home=tmp_path)
    assert first.returncode == 1, first.stderr
    second = jobs_cli("submit", *args, "--entrypoint", trainer, "--wait", home=tmp_path)
    assert second.returncode == 1 and second.stdout.strip().endswith("-2"), second.stderr
    run = second.stdout.strip().rsplit("-", 1)[0]

    guarded = jobs_cli("guard", *args, "--entrypoint", trainer, home=tmp_path)
    refusal = (
        f"grpo-gke attempt 2: refused: {data}/checkpoints/{run} has 1 checkpoint(s) and none is complete (the newest,"
        " global_step_2, lacks "
    )
    lines = guarded.stderr.splitlines()
    assert (guarded.returncode, guarded.stdout) == (1, ""), guarded.stderr
    assert [line.split(refusal, 1)[0] for line in lines] == [
        f"{run}: attempt 2 failed: ",
        f"{run}: attempt 2 not-retried: ",
        f"{run}: attempt 2 not-retried: ",
    ], guarded.stderr
    assert lines[-1].endswith("; not starting over the run: move them away or submit --fresh; nothing left to do")
    assert events(data, run) == [(2, "failed"), (2, "not-retried")]


def test_guard_entrypoint_is_the_foreground_forms_only(tmp_path):
    """The in-cluster form's settings name the run: `--entrypoint` beside `--settings` is one line, exit 2."""
    settings = tmp_path / "settings.json"
    settings.write_text("{}")
    refused = jobs_cli("guard", "--settings", str(settings), "--address", "http://127.0.0.1:9", "--entrypoint", "true",
                       home=tmp_path)  # fmt: skip
    assert (refused.returncode, refused.stdout) == (2, "")
    assert refused.stderr == "error: --entrypoint is for the foreground guardian (--stack); the settings name the run\n"
