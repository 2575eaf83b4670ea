"""`python3 -m incluster.attempt --framework verl|nemo-rl --world-size W -- COMMAND...`: one attempt of a run.

The entrypoint of every attempt, whoever submits it (`pulumi up`, the CLI, the guardian): first it
prepares the resume in `$GRPO_RUN_DIR` (incluster/checkpoints.py: the newest complete checkpoint, verl's
tracker rewritten to it, incomplete step directories moved aside) and, with `--keep K` (`grpo.keepCheckpoints`),
removes the oldest moved-aside directories beyond K and, for verl, its rotated remains and the complete steps beyond
the newest K, which verl's own rotation never reaches once the attempt that saved them is over, once the framework has
loaded the step it resumed from (incluster/checkpoints.py prunable; NeMo-RL's, only moved-aside directories that no
resume reads, at once: its complete steps are keep_top_k's); then it runs COMMAND,
passing its output (stdout and stderr merged) through unchanged and appending every line to
`$GRPO_RUN_DIR/logs/attempt-$GRPO_ATTEMPT.log` as `<UTC time, ISO 8601 with milliseconds and Z>\\t<line>` (best
effort: a failed write is reported once on stderr and the output goes on). A verl step that fails to load (torch's
LOAD_FAILED before any step beyond it) and never loaded before is moved aside and COMMAND runs again from the previous
complete step, in the same attempt (the wrapper, not the guardian, falls back: it alone sees the load fail and
can resume in seconds, without spending one of job.maxRecoveries).
When checkpoints exist but none is complete it refuses the attempt: the reason is its last line and
it exits with REFUSED_EXIT, so the attempt ends FAILED and the guardian does not retry it.

A deadline stop is not the end of the run. NeMo-RL, told `checkpointing.checkpoint_must_save_by`, saves, prints
NEMO_RL_DEADLINE_LINE and returns, so its command exits 0 before the schedule is done. When COMMAND exits 0 after
that line, the wrapper's last line says so: DEADLINE_STOP_LINE with the newest complete step it saved (the guardian
and incluster/run_submission.py `settled` resume the run from it), or, when this attempt saved no checkpoint (NeMo-RL
returns on the timeout with checkpointing off too), a failure line and UNSAVED_STOP_EXIT: the attempt ends FAILED.

Pod-side: it runs in the framework image, stdlib only, and reaches the cluster as
the submission's `py_modules` (incluster/shipping.py).
Exit codes: COMMAND's (128 + N when a signal N ended it); REFUSED_EXIT; UNSAVED_STOP_EXIT; 2 bad usage.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from incluster.checkpoints import (
    CheckpointError,
    StepDir,
    loaded_step,
    mark_loaded,
    move_aside,
    newest_complete,
    prepare_resume,
    prunable,
    prune,
    step_dirs,
)
from incluster.logs import RAY_WORKER_PREFIX, plain
from incluster.record import utc_stamp

REFUSED_EXIT = 3
"""Exit code of an attempt refused because checkpoints exist and none is complete."""

PREFIX = "grpo-gke attempt"
"""Start of the lines the wrapper itself writes."""

REFUSED_LINE = re.compile(rf"^{PREFIX} \d+: refused: ")
"""The refusal line (the attempt's last) as the guardian recognises it."""

NEMO_RL_DEADLINE_LINE = "Timeout has been reached, stopping training early"
"""NeMo-RL v0.7.0 nemo_rl/algorithms/grpo.py L3125 (async_grpo_train L4312; grpo_sync.py L1312, the
`data_plane.enabled` trainer examples/run_grpo.py L40-45 picks): printed once its TimeoutChecker
(`checkpointing.checkpoint_must_save_by`) fired, after the save that check asked for (L2880-2884, only with
`checkpointing.enabled`), then grpo_train returns (L3126) and examples/run_grpo.py ends normally (L231-232): exit 0. It is
checked before the end of the schedule (L3127-3133), so a timeout at the last step prints only this line."""

DEADLINE_STOP_LINE = re.compile(rf"^{PREFIX} (\d+): stopped at its deadline after saving step (\d+)")
"""The wrapper's last line after a deadline stop that saved; group 2 is the newest complete step."""

UNSAVED_STOP_EXIT = 4
"""Exit code of an attempt that stopped at its deadline and saved no checkpoint in the attempt: a failed attempt."""

TAIL_BYTES = 4096
"""Bytes read from the end of an attempt's log to find its last line."""

RESUMED_LINE = re.compile(rf"^{PREFIX} (\d+): resuming from \S+ \(step (\d+)\) in ")
"""The wrapper's line (the attempt's first) naming the checkpoint step it resumed from, as `main` writes it:
attempt number and step."""

FRAMEWORKS = ("verl", "nemo-rl")
"""Frameworks whose checkpoints the wrapper knows."""

STEP_LINE = re.compile(r"^step:(\d+)(?: - |$)")
"""verl's console line of a training step, `step:<N> - <metric>:<value> - ...` (verl v0.9.0
verl/utils/logger/aggregate_logger.py L26-32 concat_dict_to_str, printed by LocalLogger.log L49-51), after Ray's
actor prefix: a step beyond the one resumed from means that step's checkpoint loaded."""

LOAD_FAILED = "PytorchStreamReader failed reading"
"""The start of torch's error when torch.load meets an archive it cannot read (torch 2.13.0, raised from
caffe2/serialize/inline_container.cc; read from a cut file: "PytorchStreamReader failed reading zip archive: failed
finding central directory"; from a damaged local header: "PytorchStreamReader failed reading file data/0: invalid
header or archive is corrupted"). verl 0.9's load_checkpoint torch.loads every shard (verl v0.9.0
fsdp_checkpoint_manager.py L215, L235, L245)."""


def log_path(run_dir: Path, attempt: int) -> Path:
    """The attempt's timestamped log on the shared storage (its first part: `log_part`)."""
    return run_dir / "logs" / f"attempt-{attempt}.log"


ROLL_SECONDS = 300.0
"""How long one part of an attempt's log stays open. On Cloud Storage FUSE an object is written only when its file is
closed (gcsfuse docs/semantics.md, "Streaming Writes": "the object will be finalized only when the file is closed ...
Data is guaranteed to be on GCS only after the file is closed"; the staged write path it falls back to uploads on close
or fsync), so the wrapper closes each part after this long and writes on in the next: a lost head loses at most the
lines of the last ROLL_SECONDS (plus ROLL_CHECK_SECONDS)."""

ROLL_CHECK_SECONDS = 10.0
"""How often the wrapper looks whether the open part is due to be closed, output or not."""


def log_part(run_dir: Path, attempt: int, part: int) -> Path:
    """Part `part` of the attempt's log: `logs/attempt-<N>.log`, then `logs/attempt-<N>.<part>.log` from part 1."""
    return log_path(run_dir, attempt) if part == 0 else run_dir / "logs" / f"attempt-{attempt}.{part}.log"


def log_parts(run_dir: Path, attempt: int) -> list[Path]:
    """The parts of the attempt's log that exist, in the order they were written (empty when there is no log)."""
    parts: list[Path] = []
    while (path := log_part(run_dir, attempt, len(parts))).is_file():
        parts.append(path)
    return parts


def last_log_part(run_dir: Path, attempt: int) -> Path:
    """The part of the attempt's log written last (its first part's path when there is none)."""
    return (log_parts(run_dir, attempt) or [log_path(run_dir, attempt)])[-1]


def _log_tail(run_dir: Path, attempt: int, most: int) -> tuple[bytes, bool]:
    """The last `most` bytes of the attempt's log across its parts, and whether that is less than the whole log."""
    chunks: list[bytes] = []
    left = most
    for path in reversed(log_parts(run_dir, attempt)):
        try:
            with path.open("rb") as log:
                size = log.seek(0, os.SEEK_END)
                start = max(0, size - left)
                log.seek(start)
                chunks.insert(0, log.read(size - start))
        except OSError:
            continue
        left -= size - start
        if left <= 0:
            return b"".join(chunks), start > 0
    return b"".join(chunks), False


TAIL_BYTES = 256 * 1024
"""The most of an attempt's log `logged_lines` reads, from its end: a log is GBs, a judgement needs its last lines."""


def logged_lines(run_dir: Path, attempt: int, count: int, most: int = TAIL_BYTES) -> list[str]:
    """The last `count` lines of the attempt's log (all its parts) without their time stamps, read from its end (at most
    `most` bytes, whatever its size); empty when there is no log."""
    data, cut = _log_tail(run_dir, attempt, most)
    lines = data.decode(errors="replace").splitlines()
    if cut and lines:
        lines = lines[1:]  # the first line read may be cut short
    return [line.split("\t", 1)[-1] for line in lines[-count:]] if count > 0 else []


class AttemptLog:
    """The attempt's timestamped log in parts (`log_part`), each closed ROLL_SECONDS after it was opened, by a thread,
    whether output comes or not; the next line opens the next part. Written best effort: the first write that fails (a
    full or flaky shared volume) is reported once on stderr and the log is dropped; the output goes on to stdout
    whatever happens to the log."""

    def __init__(self, run_dir: Path, attempt: str, roll_seconds: float = ROLL_SECONDS) -> None:
        self.run_dir, self.attempt, self.roll_seconds = run_dir, attempt, roll_seconds
        self.part = len(log_parts(run_dir, int(attempt)))
        """The part written now (a wrapper started again for the same attempt goes on after the parts there)."""
        self.file: BinaryIO | None = None
        self.opened = 0.0
        self.failed = False
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.roller = threading.Thread(target=self._roll_on, name="attempt-log-roll", daemon=True)
        self.roller.start()

    def _fail(self, error: OSError) -> None:
        """Report the first failure, drop the log (the lock is held)."""
        print(
            f"{PREFIX} {self.attempt}: cannot write its log {log_part(self.run_dir, int(self.attempt), self.part)}:"
            f" {error.strerror or error}; the output goes on to stdout only",
            file=sys.stderr,
            flush=True,
        )
        self.failed = True
        if self.file is not None:
            try:
                self.file.close()
            except OSError:
                pass
        self.file = None

    def _close_part(self) -> None:
        """Close the open part, so that it is written whole to the storage; the next line opens the next (lock held)."""
        if self.file is None:
            return
        try:
            self.file.close()
        except OSError as error:
            self._fail(error)
        self.file, self.part = None, self.part + 1

    def _roll_on(self) -> None:
        while not self.stopped.wait(min(ROLL_CHECK_SECONDS, self.roll_seconds / 4)):
            with self.lock:
                if self.file is not None and time.monotonic() - self.opened >= self.roll_seconds:
                    self._close_part()

    def write(self, line: bytes) -> None:
        """Append one output line after its UTC time stamp and a tab."""
        with self.lock:
            if self.failed:
                return
            try:
                if self.file is None:
                    path = log_part(self.run_dir, int(self.attempt), self.part)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    self.file, self.opened = path.open("ab"), time.monotonic()
                self.file.write(utc_stamp(time.time()).encode() + b"\t" + line + b"\n")
                self.file.flush()
            except OSError as error:
                self._fail(error)

    def close(self) -> None:
        """Close the log (a failure to is reported like a failed write)."""
        self.stopped.set()
        self.roller.join()
        with self.lock:
            self._close_part()


def _emit(data: bytes, log: AttemptLog) -> None:
    """One line of output: unchanged to stdout, timestamped to the attempt's log (best effort)."""
    sys.stdout.buffer.write(data)
    sys.stdout.buffer.flush()
    log.write(data.rstrip(b"\n").rstrip(b"\r"))


def deadline_stop_step(lines: list[str]) -> int | None:
    """The step an attempt saved before it stopped at its deadline, from its last log lines (the wrapper's
    DEADLINE_STOP_LINE is the last); None when it did not stop at its deadline."""
    for line in reversed(lines):
        text = line.split("\t", 1)[1] if "\t" in line and not line.startswith(PREFIX) else line
        if text.strip():
            found = DEADLINE_STOP_LINE.match(text.strip())
            return int(found.group(2)) if found else None
    return None


def deadline_stop_in(run_dir: Path, attempt: int) -> int | None:
    """`deadline_stop_step` of attempt `attempt`'s timestamped log in `run_dir` (all its parts), reading only its last
    TAIL_BYTES; None when the log is missing."""
    data, _ = _log_tail(run_dir, attempt, TAIL_BYTES)
    return deadline_stop_step(data.decode(errors="replace").splitlines()) if data else None


def _newest(run_dir: Path, framework: str, world_size: int) -> StepDir | None:
    try:
        return newest_complete(run_dir, framework, world_size)
    except CheckpointError:
        return None


def _after_deadline(attempt: str, before: StepDir | None, after: StepDir | None, log: AttemptLog) -> int:
    """The attempt's last line and exit code after the framework stopped at its deadline and exited 0."""
    if after is not None and (before is None or after.step > before.step):
        _emit(f"{PREFIX} {attempt}: stopped at its deadline after saving step {after.step} ({NEMO_RL_DEADLINE_LINE!r})"
              "; the run resumes from it\n".encode(), log)  # fmt: skip
        return 0
    _emit(f"{PREFIX} {attempt}: failed: the framework stopped at its deadline ({NEMO_RL_DEADLINE_LINE!r}) and this"
          " attempt saved no checkpoint (NeMo-RL saves at the deadline only with checkpointing.enabled)\n".encode(),
          log)  # fmt: skip
    return UNSAVED_STOP_EXIT


@dataclass
class Outcome:
    """How the framework's command ended, and what its output said on the way."""

    code: int
    """Its exit code (128 + N when a signal N ended it)."""
    deadline: bool = False
    """Whether it printed NEMO_RL_DEADLINE_LINE."""
    load_failed: bool = False
    """Whether it printed torch's LOAD_FAILED error."""
    progressed: bool = False
    """Whether it reported a training step beyond the one it resumed from (STEP_LINE)."""


def _run(command: list[str], log: AttemptLog, resumed: int, on_progress: Callable[[], None]) -> Outcome:
    """Run `command` with its output merged through `_emit`; SIGTERM and SIGINT are passed on to it. `on_progress` is
    called once, at its first step line beyond step `resumed`."""
    try:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    except OSError as error:
        _emit(f"{PREFIX}: cannot run {command[0]!r}: {error.strerror or error}\n".encode(), log)
        return Outcome(127)

    def forward(signum: int, _frame: object) -> None:
        child.send_signal(signum)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, forward)
    assert child.stdout is not None
    outcome, marker = Outcome(0), NEMO_RL_DEADLINE_LINE.encode()
    for data in iter(child.stdout.readline, b""):
        _emit(data, log)
        outcome.deadline = outcome.deadline or data.strip() == marker
        text = RAY_WORKER_PREFIX.sub("", plain(data.decode(errors="replace"))).strip()
        outcome.load_failed = outcome.load_failed or LOAD_FAILED in text
        step = STEP_LINE.match(text)
        if step is not None and int(step.group(1)) > resumed and not outcome.progressed:
            outcome.progressed = True
            on_progress()
    code = child.wait()
    outcome.code = 128 - code if code < 0 else code
    return outcome


def _parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python3 -m incluster.attempt", description=__doc__.splitlines()[0])
    top.add_argument("--framework", required=True, choices=FRAMEWORKS, help="whose checkpoint layout")
    top.add_argument("--world-size", required=True, type=int, help="ranks of the run (8 x gpu.nodes)")
    top.add_argument("--keep", type=int, help="checkpoints kept across attempts (grpo.keepCheckpoints)")
    top.add_argument("command", nargs=argparse.REMAINDER, help="-- and the framework's command")
    return top


def main(argv: list[str] | None = None) -> int:
    """Prepare the resume, then run the command; return the attempt's exit code."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    run_dir, attempt = os.environ.get("GRPO_RUN_DIR", ""), os.environ.get("GRPO_ATTEMPT", "")
    keep_ok = args.keep is None or args.keep >= 1
    if not command or args.world_size < 1 or not keep_ok or not run_dir or not attempt.isdigit():
        print(
            f"{PREFIX}: usage: GRPO_RUN_DIR and GRPO_ATTEMPT set, --world-size and --keep at least 1, and -- COMMAND"
            f" (got GRPO_RUN_DIR={run_dir!r}, GRPO_ATTEMPT={attempt!r}, --world-size {args.world_size},"
            f" --keep {args.keep})",
            file=sys.stderr,
        )
        return 2
    log = AttemptLog(Path(run_dir), attempt)
    try:
        return _attempt(args, command, Path(run_dir), attempt, log)
    finally:
        log.close()


def _attempt(args: argparse.Namespace, command: list[str], run_dir: Path, attempt: str, log: AttemptLog) -> int:
    """Resume from the newest complete step, run the command, and fall back to the previous complete step while a verl
    step the run never loaded before fails to load; the attempt's exit code."""
    while True:
        try:
            chosen = prepare_resume(run_dir, args.framework, args.world_size)
        except CheckpointError as error:
            _emit(f"{PREFIX} {attempt}: {error}\n".encode(), log)
            return REFUSED_EXIT
        where = (
            f"resuming from {chosen.path.name} (step {chosen.step})" if chosen else "no checkpoint; starting at step 0"
        )
        _emit(f"{PREFIX} {attempt}: {where} in {run_dir}\n".encode(), log)
        loaded_before = loaded_step(run_dir)
        doomed = prunable(run_dir, args.framework, args.world_size, args.keep, chosen.step if chosen else None)
        # NeMo-RL's are moved-aside directories only, never what a failed load falls back to: no load to wait for.
        at_once = chosen is None or args.framework != "verl"
        proven = _on_loaded(run_dir, attempt, chosen, [] if at_once else doomed, args.keep, log)
        if at_once:
            _prune(run_dir, attempt, doomed, args.keep, log)
        if chosen is None:
            proven()
        outcome = _run(command, log, chosen.step if chosen else 0, proven)
        unloadable = outcome.code != 0 and outcome.load_failed and not outcome.progressed
        if not unloadable or chosen is None or args.framework != "verl" or chosen.step == loaded_before:
            break
        complete = [item for item in step_dirs(run_dir, args.framework, args.world_size) if item.complete]
        if len(complete) < 2:  # the one that failed is the newest complete step
            _emit(f"{PREFIX} {attempt}: {chosen.path.name} failed to load ({LOAD_FAILED}); no earlier complete step to"
                  " fall back to, so it stays where it is\n".encode(), log)  # fmt: skip
            return outcome.code
        aside = move_aside(run_dir, chosen.path, "unloadable")
        _emit(f"{PREFIX} {attempt}: {chosen.path.name} failed to load ({LOAD_FAILED}); moved to"
              f" {aside.relative_to(run_dir)}; falling back to the previous complete step\n".encode(), log)  # fmt: skip
    if outcome.code != 0 or not outcome.deadline:
        return outcome.code
    return _after_deadline(attempt, chosen, _newest(run_dir, args.framework, args.world_size), log)


def _on_loaded(
    run_dir: Path, attempt: str, chosen: StepDir | None, doomed: list[Path], keep: int | None, log: AttemptLog
) -> Callable[[], None]:
    """What to do once the framework has loaded `chosen` (it reported a step beyond it; at once without a checkpoint):
    record the step as loaded, then remove what `prunable` chose at the start (never before that load: the steps kept
    beside it are what a failed load falls back to)."""

    def proven() -> None:
        try:
            if chosen is not None:
                mark_loaded(run_dir, chosen.step)
        except OSError as error:
            _emit(f"{PREFIX} {attempt}: could not record the loaded step: {error}\n".encode(), log)
            return
        _prune(run_dir, attempt, doomed, keep, log)

    return proven


def _prune(run_dir: Path, attempt: str, doomed: list[Path], keep: int | None, log: AttemptLog) -> None:
    """Remove what `prunable` chose, saying what went."""
    try:
        removed = prune(doomed)
    except OSError as error:
        _emit(f"{PREFIX} {attempt}: could not prune: {error}\n".encode(), log)
        return
    if removed:
        names = ", ".join(path.relative_to(run_dir).as_posix() for path in removed)
        _emit(f"{PREFIX} {attempt}: removed {names} (keeping the newest {keep} checkpoints)\n".encode(), log)


if __name__ == "__main__":
    sys.exit(main())
