"""`python3 -m jobs.attempt --framework verl|nemo-rl --world-size W -- COMMAND...`: one attempt of a run.

The entrypoint of every attempt, whoever submits it (`pulumi up`, the CLI, the guardian): first it
prepares the resume in `$GRPO_RUN_DIR` (jobs/checkpoints.py: the newest complete checkpoint, verl's
tracker rewritten to it, incomplete step directories moved aside), then it runs COMMAND, passing its
output (stdout and stderr merged) through unchanged and appending every line to
`$GRPO_RUN_DIR/logs/attempt-$GRPO_ATTEMPT.log` as `<UTC time, ISO 8601 with milliseconds and Z>\\t<line>`.
When checkpoints exist but none is complete it refuses the attempt: the reason is its last line and
it exits with REFUSED_EXIT, so the attempt ends FAILED and the guardian does not retry it.

Pod-side: it runs in the framework image (python3 may be 3.10), stdlib only, and reaches the cluster as
the submission's `py_modules` (jobs/control.py POD_MODULES).
Exit codes: COMMAND's (128 + N when a signal N ended it); REFUSED_EXIT; 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import BinaryIO

from jobs.checkpoints import CheckpointError, prepare_resume
from jobs.record import utc_stamp

REFUSED_EXIT = 3
"""Exit code of an attempt refused because checkpoints exist and none is complete."""

PREFIX = "grpo-gke attempt"
"""Start of the lines the wrapper itself writes."""

REFUSED_LINE = re.compile(rf"^{PREFIX} \d+: refused: ")
"""The refusal line (the attempt's last) as the guardian recognises it."""

RESUMED_LINE = re.compile(rf"^{PREFIX} (\d+): resuming from \S+ \(step (\d+)\) in ")
"""The wrapper's line (the attempt's first) naming the checkpoint step it resumed from, as `main` writes it:
attempt number and step."""

FRAMEWORKS = ("verl", "nemo-rl")
"""Frameworks whose checkpoints the wrapper knows."""


def log_path(run_dir: Path, attempt: int) -> Path:
    """The attempt's timestamped log on the shared storage."""
    return run_dir / "logs" / f"attempt-{attempt}.log"


def _emit(data: bytes, log: BinaryIO) -> None:
    """One line of output: unchanged to stdout, timestamped to the attempt's log."""
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    text = data.rstrip(b"\n").rstrip(b"\r")
    log.write(utc_stamp(time.time()).encode() + b"\t" + text + b"\n")
    log.flush()


def _run(command: list[str], log: BinaryIO) -> int:
    """Run `command` with its output merged through `_emit`; SIGTERM and SIGINT are passed on to it."""
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as error:
        _emit(f"{PREFIX}: cannot run {command[0]!r}: {error.strerror or error}\n".encode(), log)
        return 127

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    assert child.stdout is not None
    for data in iter(child.stdout.readline, b""):
        _emit(data, log)
    code = child.wait()
    return 128 - code if code < 0 else code


def _parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python3 -m jobs.attempt", description=__doc__.splitlines()[0])
    top.add_argument("--framework", required=True, choices=FRAMEWORKS, help="whose checkpoint layout")
    top.add_argument("--world-size", required=True, type=int, help="ranks of the run (8 x gpu.nodes)")
    top.add_argument("command", nargs=argparse.REMAINDER, help="-- and the framework's command")
    return top


def main(argv: list[str] | None = None) -> int:
    """Prepare the resume, then run the command; return the attempt's exit code."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run_dir, attempt = os.environ.get("GRPO_RUN_DIR", ""), os.environ.get("GRPO_ATTEMPT", "")
    if not command or args.world_size < 1 or not run_dir or not attempt.isdigit():
        print(
            f"{PREFIX}: usage: GRPO_RUN_DIR and GRPO_ATTEMPT set, --world-size at least 1, and -- COMMAND"
            f" (got GRPO_RUN_DIR={run_dir!r}, GRPO_ATTEMPT={attempt!r}, --world-size {args.world_size})",
            file=sys.stderr,
        )
        return 2
    path = log_path(Path(run_dir), int(attempt))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("ab") as log:
        try:
            chosen = prepare_resume(Path(run_dir), args.framework, args.world_size)
        except CheckpointError as error:
            _emit(f"{PREFIX} {attempt}: {error}\n".encode(), log)
            return REFUSED_EXIT
        where = (
            f"resuming from {chosen.path.name} (step {chosen.step})" if chosen else "no checkpoint; starting at step 0"
        )
        _emit(f"{PREFIX} {attempt}: {where} in {run_dir}\n".encode(), log)
        return _run(command, log)


if __name__ == "__main__":
    sys.exit(main())
