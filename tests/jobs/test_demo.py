"""`make demo` as a user runs it: its command, its exit status, its whole output in order, the files it says it
wrote, and no Ray process left behind (every process the demo started carries a marker in its environment)."""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from core.facts.platform import GPU_MACHINES
from incluster import record
from jobs.demo import gpu_node
from jobs.demo.lifecycle import DEMO_DIR, HOLD_AFTER, SAVE_EVERY, STEPS
from jobs.runs.step_time import KINDS
from tests.conftest import REPO_ROOT, shipped_stack_file
from tests.support.signals import default_sigint

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="ray is not installed: pip install 'ray[default]' (requirements.txt)",
)

DEMO_SECONDS = 600
"""The longest the test lets the demo run (it takes under two minutes on an idle machine; this one is shared)."""

MARKER = "GRPO_GKE_DEMO_TEST"
"""Environment variable set for the demo: every process it starts (Ray's included) inherits it."""


def demo_command() -> list[str]:
    """`make demo`'s recipe, with the venv's Python that runs this test."""
    recipe = re.search(r"^demo: .*\n\t(.+)$", (REPO_ROOT / "Makefile").read_text(), re.MULTILINE)
    assert recipe is not None, "the Makefile has no demo target"
    assert recipe.group(1) == "$(PY) -m jobs.demo"
    return [sys.executable, "-m", "jobs.demo"]


def marked_processes(marker: str) -> list[str]:
    """`pid cmdline` of every process whose environment holds `marker`."""
    found = []
    needle = f"{MARKER}={marker}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                found.append(f"{entry.name} {command[:200]}")
        except OSError:
            continue
    return found


DURATION = r"\d+[hms]( \d+[ms])?"
"""A duration as jobs/runs/goodput.py duration writes it: `42s`, `5m 07s`, `1h 02m`."""

SECONDS = r"\d+\.\d+s"
"""A stage's seconds as jobs/runs/step_time.py seconds_text writes them under a minute: `0.15s`, `12.4s`."""


def stage_lines(steps: int, saves: int) -> list[str]:
    """The lines of the step time by stage (jobs/runs/step_time.py) over `steps` steps, `saves` of them saved, from the
    stand-in's verl 0.9.1 metric names."""
    return [
        rf"step time by stage \(mean of {steps} steps, verl's timing_s/\*\):",
        *(rf"  {stage} +{SECONDS} +\d+%" for stage in ("generation", "log-probs", "training", "weight sync")),
        rf"  checkpoint save +{SECONDS} +\d+% \(saved on {saves} of {steps} steps\)",
        rf"  other +{SECONDS} +\d+%",
        rf"  whole step +{SECONDS}",
        r"tokens per second per GPU: \d+\.\d \(median; perf/throughput\)",
    ]


SHAPE = [
    r"grpo-gke demo: the whole run lifecycle on this machine, offline; its files go to (?P<out>/\S+)",
    r"starting a local Ray head on 127\.0\.0\.1 .*",
    r"Ray head up at http://127\.0\.0\.1:\d+ \(\d+ s\)",
    r"GPU node (?P<first>[0-9a-f]{12}) joined with 8 GPUs \(process group \d+\)",
    rf"submitted (?P<run>dev-[0-9a-f]+)-1: the dev stack's job spec, the stand-in trainer as the entrypoint, {STEPS}"
    rf" steps, a checkpoint every {SAVE_EVERY}",
    r"  (?P=run)-1 \| Training from scratch",
    *(rf"  (?P=run)-1 \| step:{step}" for step in range(1, HOLD_AFTER + 1)),
    # issue 33: while attempt 1 runs, `status` shows its step time by stage and its projected end
    rf"attempt 1 holds after step {HOLD_AFTER} \(the node loss comes next\): its step time by stage and its projected end",
    r"\$ python -m jobs status --stack dev --dir \S+ --address http://127\.0\.0\.1:\d+ --data-root (?P=out)/data",
    r"(?P=run)-1  RUNNING  run=(?P=run)  attempt=1  .*",
    rf"  projected end: step {STEPS} in ~\d+m \d\ds \(\d{{4}}-\d\d-\d\dT[0-9:.]+Z\), ~\$\d+\.\d\d more at \$\d+\.\d\d/h",
    *stage_lines(HOLD_AFTER, HOLD_AFTER // SAVE_EVERY),
    r"preempted: killed the GPU node's process group \d+ \(node (?P=first)\), as a spot VM is lost",
    r"Ray marked node (?P=first) DEAD; a new GPU node is starting, as a new spot VM would",
    r"the run guardian follows the run .*",
    r"  guardian \| (?P=run): attempt 1 failed: .*(?P=first).*",
    r"  guardian \| (?P=run): attempt 1 recovering: recovery 1 of \d+ in 1 s: .*",
    r"  guardian \| (?P=run): attempt 2 submitted: attempt 2 after lost GPU capacity",
    r"  guardian \| (?P=run): attempt 2 succeeded",
    r"  guardian \| (?P=run): attempt 2 export-submitted: on a cluster this submits the export of global_step_8 .*",
    r"  guardian \| (?P=run): attempt 2 scaled-to-zero: .* worker group \S+ to 0 replicas .*",
    r"  guardian \| (?P=run): attempt 2 SUCCEEDED; nothing left to do",
    r"recovered: attempt 2 resumed from step 4",
    r"\$ python -m jobs status --stack dev --dir \S+ --address http://127\.0\.0\.1:\d+ --data-root (?P=out)/data",
    r"(?P=run)-2  SUCCEEDED  run=(?P=run)  attempt=2  .*",
    r"run (?P=run) across 2 attempts:",
    rf"  steps: {STEPS} done, .*",
    rf"  preemption of attempt 1 at step {HOLD_AFTER}: lost .*",
    r"  goodput: \d+(\.\d+)?% of \d+s GPU time made progress",
    r"  cost: \$\d+\.\d\d so far, \$\d+\.\d\d lost, \$\d+\.\d\d per step",
    r"time to the first step \(measured; `up` itself is not visible from the cluster, .*\):",
    rf"  attempt 1: {DURATION} from its submission to its first step line",
    rf"  attempt 2: {DURATION} from attempt 1's end to its first step line \({DURATION} from its submission\)",
    # where the time went, from the stand-in's verl 0.9.1 metric names (jobs/runs/step_time.py): every step of both
    # attempts (attempt 2 runs step 5 again), saves on every SAVE_EVERY-th
    *stage_lines(STEPS + 1, STEPS // SAVE_EVERY),
    rf"wall time by kind \({DURATION} since the first submission\):",
    *(rf"  {kind} +{DURATION} +\d+%" for kind in KINDS),
    r"\$ python -m jobs plot .* --out (?P<plot>(?P=out)/(?P=run)\.png)",
    rf"wrote (?P=plot): {STEPS + 1} steps of 2 attempts, 2 marks",
    r"ending the demo's Ray nodes \(by process group\)",
    r"done in \d+ s\. Where everything is:",
    r"  run directory: (?P<run_dir>(?P=out)/data/\S+/(?P=run))",
    r"  attempt logs:  (?P=run_dir)/logs",
    r"  record:        (?P=run_dir)/attempts\.jsonl",
    r"  plot:          (?P=plot)",
    # issue 34 item 3: the commands that read the run once its Ray head is gone, typed from the repository root
    r"its Ray head is gone; these read the run from its directory \(from the repository root\):",
    r"  \.venv/bin/python -m jobs status (?P<newest>(?P=run)-2) (?P<where>--stack dev --dir jobs/demo --run-dir \S+)",
    r"  \.venv/bin/python -m jobs logs (?P=run)-1 (?P=where)",
    r"  \.venv/bin/python -m jobs plot (?P=where) --out \S+",
]
"""The lines that matter, in order (other lines, such as a progress line or the record's lines, may come between)."""


def match_in_order(lines: list[str], patterns: list[str]) -> dict[str, str]:
    """Match each pattern to a later line than the previous one's; the named groups of them all."""
    groups: dict[str, str] = {}
    position = 0
    for pattern in patterns:
        for name, value in groups.items():
            pattern = pattern.replace(f"(?P={name})", re.escape(value))
        compiled = re.compile(pattern)
        for index in range(position, len(lines)):
            found = compiled.fullmatch(lines[index])
            if found:
                groups.update({key: value for key, value in found.groupdict().items() if value is not None})
                position = index + 1
                break
        else:
            raise AssertionError(f"no line after line {position} matches {pattern!r}:\n" + "\n".join(lines))
    return groups


def test_make_demo_runs_the_whole_lifecycle_and_leaves_no_ray_process_behind():
    marker = uuid.uuid4().hex
    result = subprocess.run(demo_command(), cwd=REPO_ROOT, env=demo_env(marker), capture_output=True,
                            text=True, timeout=DEMO_SECONDS, check=False)  # fmt: skip
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Traceback" not in output
    found = match_in_order(result.stdout.splitlines(), SHAPE)

    assert marked_processes(marker) == []
    run_dir, plot = Path(found["run_dir"]), Path(found["plot"])
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert sorted(path.name for path in (run_dir / "logs").iterdir()) == ["attempt-1.log", "attempt-2.log"]
    assert [(item["attempt"], item["event"]) for item in record.read(run_dir)] == [
        (1, "failed"), (1, "recovering"), (2, "submitted"), (2, "succeeded"), (2, "export-submitted"),
        (2, "scaled-to-zero"),
    ]  # fmt: skip
    saved = ["global_step_2", "global_step_4", "global_step_6", "global_step_8"]
    assert sorted(path.name for path in run_dir.glob("global_step_*")) == saved
    # the guardian's export hook here submits no job, so the guardian asks Ray for none (it asked for a job "on")
    assert "is not known" not in output and "does not exist" not in output, output
    after_the_demo(result.stdout.splitlines(), found)


def cli(command: str) -> subprocess.CompletedProcess:
    """A command the demo printed, run as a user types it from the repository root (the venv's Python, which runs
    this test, for `.venv/bin/python`)."""
    words = shlex.split(command)
    assert words[0] == ".venv/bin/python", command
    return subprocess.run([sys.executable, *words[1:]], cwd=REPO_ROOT, env=demo_env(uuid.uuid4().hex),
                          capture_output=True, text=True, timeout=120, check=False)  # fmt: skip


def after_the_demo(lines: list[str], found: dict[str, str]) -> None:
    """Issue 34 item 3: once the demo's Ray head is gone, the commands of its closing lines read the run from its
    directory, each with one line saying so, and its own `status` command (the head's address, --data-root) reads the
    run's directory instead of saying there is no attempt; never another run than the one named."""
    run, run_dir, newest = found["run"], found["run_dir"], found["newest"]
    commands = [line.strip() for line in lines[-3:]]
    reading = f"reading run {run} from its directory {run_dir} (no Ray head asked)\n"

    status = cli(commands[0])
    assert (status.returncode, status.stderr) == (0, reading), status.stdout + status.stderr
    match_in_order(status.stdout.splitlines(), [
        rf"{newest}  SUCCEEDED  run={run}  attempt=2  started=\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\dZ",
        rf"run {run} across 2 attempts:", rf"  steps: {STEPS} done, .*",
        rf"  preemption of attempt 1 at step {HOLD_AFTER}: lost .*", r"  cost: \$\d+\.\d\d so far, .*",
        rf"  attempt 2: {DURATION} from attempt 1's end to its first step line \({DURATION} from its submission\)",
        *stage_lines(STEPS + 1, STEPS // SAVE_EVERY),
        rf"wall time by kind \({DURATION} since the first submission\):",
        *(rf"  {kind} +{DURATION} +\d+%" for kind in KINDS),
        rf"record of {run} \({run_dir}/attempts\.jsonl\):",
        r"  \S+Z  attempt 2  scaled-to-zero: .*",
        r"idle since .*",
    ])  # fmt: skip
    assert status.stdout.splitlines()[0].startswith(f"{newest}  SUCCEEDED")

    logs = cli(commands[1])
    assert (logs.returncode, logs.stderr) == (0, reading), logs.stdout + logs.stderr
    logged = logs.stdout.splitlines()
    assert logged[0] == f"grpo-gke attempt 1: no checkpoint; starting at step 0 in {run_dir}"
    assert [line.split(" - ")[0] for line in logged if line.startswith("step:")] == [f"step:{n}" for n in range(1, 6)]
    assert f"stand-in: holding after step {HOLD_AFTER}" in "\n".join(logged)

    plot = cli(commands[2])
    assert (plot.returncode, plot.stderr) == (0, reading), plot.stdout + plot.stderr
    out = shlex.split(commands[2])[-1]
    assert plot.stdout == f"wrote {out}: {STEPS + 1} steps of 2 attempts, 2 marks\n"

    # The demo's own status command, its head gone: the named attempt from the run's directory under --data-root.
    own = next(line for line in lines if line.startswith("$ python -m jobs status "))
    again = cli(own.replace("$ python", ".venv/bin/python", 1).replace(" status ", f" status {newest} ", 1))
    assert again.returncode == 0, again.stdout + again.stderr
    assert re.fullmatch(
        r"cannot reach the Ray dashboard at http://127\.0\.0\.1:\d+: .*; "
        + re.escape(f"reading run {run} from its directory {run_dir} instead\n"),
        again.stderr,
    ), again.stderr
    recorded = [line for line in status.stdout.splitlines() if re.match(r"  \S+Z  attempt \d", line)]
    assert len(recorded) == 6 and [line for line in again.stdout.splitlines() if line in recorded] == recorded
    assert again.stdout.splitlines()[0] == status.stdout.splitlines()[0]
    # Unnamed, the stack's own run (the dev stack's trainer, not the demo's stand-in) has no directory there: refused
    # in one line naming the run that is, never read in its place.
    unnamed = cli(own.replace("$ python", ".venv/bin/python", 1))
    assert unnamed.returncode == 2 and unnamed.stdout == "", unnamed.stdout + unnamed.stderr
    assert unnamed.stderr.splitlines()[-1].endswith(f"holds the newest attempts {newest}: name one")


def demo_env(marker: str) -> dict[str, str]:
    """The environment the demo runs in: this one without Ray's variables, with the test's marker."""
    return {**{key: value for key, value in os.environ.items() if not key.startswith("RAY_")}, MARKER: marker}


def _until_submitted(demo: subprocess.Popen, lines: list[str]) -> None:
    """Read the demo's output into `lines` up to its first `submitted ` line (or its end)."""
    assert demo.stdout is not None
    for line in demo.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith("submitted "):
            return


def test_two_demos_at_once_each_get_their_own_directory_and_ray_head_and_ctrl_c_ends_each_with_exit_130():
    """Issue 34 item 4: two `make demo` started at once each run in their own directory on their own Ray head (no
    shared ports), and Ctrl-C ends each with its own Ray nodes, one line and exit 130."""
    markers = [uuid.uuid4().hex, uuid.uuid4().hex]
    demos = [
        subprocess.Popen(
            demo_command(),
            cwd=REPO_ROOT,
            env=demo_env(marker),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            preexec_fn=default_sigint,
        )  # fmt: skip
        for marker in markers
    ]
    outputs: list[list[str]] = [[], []]
    try:
        readers = [threading.Thread(target=_until_submitted, args=pair) for pair in zip(demos, outputs, strict=True)]
        for reader in readers:
            reader.start()
        for reader in readers:
            reader.join(timeout=300)
        for demo in demos:
            demo.send_signal(signal.SIGINT)
        for demo, lines in zip(demos, outputs, strict=True):
            assert demo.stdout is not None
            lines += demo.stdout.read().splitlines()
            assert demo.wait(timeout=120) == 130, "\n".join(lines)
    finally:
        for demo in demos:
            if demo.poll() is None:
                demo.kill()
        for marker in markers:
            for entry in marked_processes(marker):
                os.kill(int(entry.split()[0]), signal.SIGKILL)
    starts = [match_in_order(lines, SHAPE[:3]) for lines in outputs]
    for lines in outputs:
        assert any(line.startswith("submitted ") for line in lines), "\n".join(lines)
        assert lines[-2:] == [
            "ending the demo's Ray nodes (by process group)",
            "interrupted: the demo's Ray nodes are ended",
        ]
        assert "Traceback" not in "\n".join(lines)
    directories = [start["out"] for start in starts]
    heads = [next(line for line in lines if line.startswith("Ray head up at ")).split()[4] for lines in outputs]
    assert directories[0] != directories[1], directories
    assert heads[0] != heads[1], heads
    for marker in markers:
        assert marked_processes(marker) == []


def test_the_demo_runs_a_copy_of_the_shipped_dev_stack():
    """The demo's own copy, so a user's edits to the root Pulumi.dev.yaml cannot break it; still the shipped one."""
    assert (DEMO_DIR / "Pulumi.dev.yaml").read_text() == shipped_stack_file("dev").read_text()


def test_the_demos_gpu_node_declares_the_gpus_of_the_demo_stacks_machine():
    """Issue 34 item 1: GPUs per node is a fact of the machine; the stand-in node (which imports nothing of the
    project's) declares those of the machine jobs/demo/Pulumi.dev.yaml names."""
    assert gpu_node.GPUS == GPU_MACHINES["h200"].gpus
    assert "type: h200" in (REPO_ROOT / "jobs" / "demo" / "Pulumi.dev.yaml").read_text()


DEMO_HELP = """usage: .venv/bin/python -m jobs.demo [-h]

The whole run lifecycle on this machine, offline: submit, follow, a lost GPU
node, the guardian's resume from the newest complete checkpoint, then `status`
and the plot.

options:
  -h, --help  show this help message and exit

Its files go to a new directory build/demo/<UTC time>/ (a second demo started
in the same second gets <UTC time>-2/); Ray's ports are the kernel's picks
(jobs/submit/local_head.py). Exit status: 0 done, 1 the demo failed (one
line), 130 interrupted; Ctrl-C ends its Ray nodes.
"""


def test_the_demo_prints_its_help_and_refuses_an_argument_in_one_line_starting_nothing():
    """Issue 34 item 4: `python -m jobs.demo --help` prints help (it started the demo before); an unknown argument is
    one line, exit 2; neither writes a demo directory."""
    before = set((REPO_ROOT / "build" / "demo").glob("*"))
    env = {**os.environ, "COLUMNS": "80"}
    result = subprocess.run(demo_command() + ["--help"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert (result.returncode, result.stdout, result.stderr) == (0, DEMO_HELP, "")
    result = subprocess.run(demo_command() + ["--steps", "3"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                            timeout=60)  # fmt: skip
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        "error: unrecognized arguments: --steps 3 (python -m jobs.demo takes no arguments; --help says what it does)\n"
    )
    assert set((REPO_ROOT / "build" / "demo").glob("*")) == before


def test_a_demo_started_in_the_same_second_as_another_gets_its_own_directory(tmp_path):
    """Issue 34 item 4: two demos at once never share a directory (claim_directory's mkdir is atomic). Two whole demos
    at once cost more than 20 s over this file's demo on a shared machine, so the other demo is stood for by the
    directory it holds."""
    from jobs.demo.lifecycle import claim_directory

    (tmp_path / "demo" / "20261207T193000Z").mkdir(parents=True)  # another demo's, started this second
    (tmp_path / "demo" / "20261207T193000Z" / "data").mkdir()
    mine = claim_directory(tmp_path / "demo", "20261207T193000Z")
    assert mine == tmp_path / "demo" / "20261207T193000Z-2" and mine.is_dir() and not any(mine.iterdir())
    assert claim_directory(tmp_path / "demo", "20261207T193000Z") == tmp_path / "demo" / "20261207T193000Z-3"
    assert claim_directory(tmp_path / "demo", "20261207T193001Z") == tmp_path / "demo" / "20261207T193001Z"
