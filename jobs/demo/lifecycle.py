"""The whole run lifecycle on this machine, offline: submit, follow, a lost GPU node, the guardian's resume from the
newest complete checkpoint, then `status` and the plot.

1. A local Ray head on 127.0.0.1 (jobs/submit/local_head.py) and a GPU node beside it (jobs/demo/gpu_node.py), each in a
   process group of its own.
2. The dev stack's real job spec (jobs/spec/training.py, from the copy of the shipped `Pulumi.dev.yaml` in this folder) with
   the stand-in trainer (jobs/demo/stand_in_trainer.py: verl 0.9.1's checkpoint layout and resume) as the
   entrypoint, its shared storage under a local directory (`--data-root`), submitted as `pulumi up` submits it.
3. Attempt 1 followed until the stand-in holds after step HOLD_AFTER (checkpoints at 2 and 4), and `python -m jobs
   status` of it while it runs: its step time by stage and its projected end. Then the GPU node's process group is
   killed, as a preempted spot VM is lost: the head marks the node DEAD and the attempt fails.
4. The run guardian (incluster/guardian/loop.py, the same loop as in the cluster) judges the lost GPU node, backs off, waits
   for GPU nodes (a new node joins, as a new spot VM would) and submits attempt 2, which resumes from step 4. Its
   export and scale-to-zero hooks say what they would do on a real cluster.
5. `python -m jobs status` (goodput, $ per step at the stack's prices, the step time by stage from the stand-in's
   verl metric names, the wall time by kind) and `python -m jobs plot`, then where everything is and the commands
   that read the run from its directory once the demo's Ray head is gone. Both nodes are ended by process group when
   done, on Ctrl-C (exit 130) and on error.

The stack file is a copy shipped in this folder, not the repository's `Pulumi.dev.yaml`: a user's edits to their
own dev stack (another model, two nodes, a preflight) must not break the demo (tests/jobs/test_demo.py checks the
copy is still the shipped dev stack).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, TypeVar

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.stackfile import read_stack_file, stack_file
from incluster import job_client, readiness, record, run_submission
from incluster.endpoint import Endpoint
from incluster.guardian.loop import ExportDone, ExportRequest, Guardian, Hooks
from incluster.guardian.policy import Backoff
from incluster.guardian.settings import GuardError, Settings, settings_from
from jobs.demo.stand_in_trainer import STEPS_ENV
from jobs.guardian.settings import guardian_settings
from jobs.spec.load import load_config
from jobs.spec.training import on_data_root, submission_of, training_spec
from jobs.submit import local_head

DEMO_DIR = Path(__file__).resolve().parent
"""This folder: the stack file copy, the stand-in trainer, the GPU node."""

REPO_ROOT = DEMO_DIR.parents[1]
"""The repository root: the CLI runs from it."""

STACK = "dev"
"""The stack the demo runs: the shipped dev stack (one spot H200 node, verl, Qwen2.5-0.5B)."""

STEPS = 8
"""Training steps of the demo's run (grpo.maxSteps)."""

SAVE_EVERY = 2
"""The stand-in checkpoints every 2 steps (trainer.save_freq)."""

HOLD_AFTER = 5
"""After step 5 attempt 1 waits for the node loss: steps 2 and 4 are saved, step 5 is lost work."""

STEP_SECONDS = 0.3
"""The stand-in's pause per step."""

HOLD_SECONDS = 90.0
"""Longest wait of the stand-in for the node loss (it dies on its own after it)."""

STAND_IN_TRAINER = DEMO_DIR / "stand_in_trainer.py"
"""The stand-in trainer the demo submits as the entrypoint."""

DEMO_CONFIG = {"job": {"preflight": "off"}, "grpo": {"maxSteps": STEPS}}
"""What the demo changes in the dev stack: no preflight (this machine's GPU node has no GPU to measure) and a
short schedule."""

IDLE_MINUTES = 0.01
"""The guardian's job.idleMinutes in the demo: scale to zero a moment after the run is over."""

BACKOFF = Backoff(1, 1)
"""The guardian's wait before a recovery in the demo (30 s in a cluster, incluster/guardian/policy.py BACKOFF)."""

SETTLE_SECONDS = 10.0
"""The guardian's settle time in the demo (incluster/guardian/policy.py SETTLE_SECONDS): the dead node is known within it."""

HEALTH_CHECKS = {
    "RAY_health_check_initial_delay_ms": "1000",
    "RAY_health_check_period_ms": "500",
    "RAY_health_check_timeout_ms": "5000",
    "RAY_health_check_failure_threshold": "5",
}
"""The head's GCS checks each node every half second and marks it DEAD after 5 failures in a row: a killed node
is DEAD in about 3 s instead of about 20 s with Ray's defaults (initial delay 5000 ms, period 3000 ms, timeout
10000 ms, threshold 5: ray-project/ray src/ray/common/ray_config_def.h, `health_check_*`; read at commit 0006bd6c,
the stored copy, not at the ray-2.60.0 tag; RAY_<name> overrides any of them). A live but loaded node still has
5 s to answer each check."""

HEAD_CPUS = 2
"""CPUs the head declares: the job drivers (and the guardian's one-off jobs) run there."""

START_SECONDS = 90.0
"""Longest wait for a node to start or join (this machine's CPUs may be shared)."""

DEAD_SECONDS = 60.0
"""Longest wait for the head to mark the killed node DEAD."""

ATTEMPT_SECONDS = 120.0
"""Longest wait for attempt 1 to reach the hold."""

GUARD_SECONDS = 240.0
"""Longest run of the guardian."""

PROGRESS_SECONDS = 10.0
"""A long wait prints a progress line at least this often."""

Say = Callable[[str], None]
T = TypeVar("T")


def say(line: str) -> None:
    """One line of the demo's output."""
    print(line, flush=True)


class DemoError(Exception):
    """The demo could not go on; the message is one line."""


def demo_config() -> StackConfig:
    """The shipped dev stack (this folder's copy) with DEMO_CONFIG merged in, validated as the CLI validates it."""
    values = read_stack_file(stack_file(DEMO_DIR, STACK), PROJECT_NAMESPACE, STACK)
    merged = dict(values.values)
    for section, changes in DEMO_CONFIG.items():
        key = f"{PROJECT_NAMESPACE}:{section}"
        merged[key] = json.dumps({**json.loads(merged.get(key, "{}")), **changes})
    return load_config(merged, values.secret_keys, STACK).config


def entrypoint() -> str:
    """The stand-in trainer's command line: verl's checkpoints every SAVE_EVERY steps, a hold after HOLD_AFTER."""
    flags = ["--save-every", str(SAVE_EVERY), "--hold-after", str(HOLD_AFTER), "--hold-seconds", str(HOLD_SECONDS)]
    return shlex.join([sys.executable, str(STAND_IN_TRAINER), *flags, "--step-seconds", str(STEP_SECONDS)])


def wait_for(what: str, done: Callable[[], bool], timeout: float, report: Say, poll: float = 0.5) -> None:
    """Wait until `done()`, with a progress line every PROGRESS_SECONDS; DemoError after `timeout` seconds."""
    start = time.monotonic()
    shown = start
    while not done():
        now = time.monotonic()
        if now - start > timeout:
            raise DemoError(f"{what}: not within {timeout:.0f} s")
        if now - shown >= PROGRESS_SECONDS:
            report(f"  ... {what}: {now - start:.0f} s")
            shown = now
        time.sleep(poll)


DEMO_ID_ENV = "GRPO_GKE_DEMO_ID"
"""Set, to an id of this demo, in the environment of the Ray nodes it starts: every process of theirs inherits it,
Ray's workers included, which Ray puts in process groups of their own (`process_group_cleanup_enabled`, default
true: ray-project/ray src/ray/common/ray_config_def.h, stored commit 0006bd6c) and which outlive a killed raylet for
a while; the demo ends each of them by its process id."""


def processes_of(demo_id: str) -> list[int]:
    """Ids of the processes whose environment holds DEMO_ID_ENV=`demo_id` (Linux /proc)."""
    found = []
    needle = f"{DEMO_ID_ENV}={demo_id}".encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def end_processes_of(demo_id: str, timeout: float = 30.0) -> None:
    """SIGKILL every process of the demo's nodes, by id, until none is left (at most `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while (pids := processes_of(demo_id)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)


@dataclass
class GpuNode:
    """One GPU node process (`python -m jobs.demo.gpu_node`) in a process group of its own."""

    process: subprocess.Popen
    """The node's process: the leader of its process group."""
    temp_dir: Path
    """Its Ray temporary directory."""
    node_id: str = ""
    """Ray's id of the node, once it joined."""

    def kill(self) -> None:
        """SIGKILL the node's process group, as a lost VM takes every process of the node at once."""
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=30)


@dataclass
class Cluster:
    """The demo's Ray head and its GPU nodes, ended by process group."""

    head: local_head.LocalHead
    """The local head."""
    demo_id: str
    """This demo's DEMO_ID_ENV value, in the environment of every node it starts."""
    nodes: list[GpuNode] = field(default_factory=list)
    """Every GPU node started, live or killed."""

    @property
    def endpoint(self) -> Endpoint:
        """The head's dashboard / Jobs API."""
        return Endpoint(address=self.head.dashboard_url)

    def gcs_address(self) -> str:
        """The head's GCS address (`ray start` writes it to its temp dir's `ray_current_cluster`)."""
        return (self.head.temp_dir / "ray_current_cluster").read_text().strip()

    def add_gpu_node(self) -> GpuNode:
        """Start a GPU node (it joins in the background; `joined` says when)."""
        temp_dir = Path(tempfile.mkdtemp(prefix="rg", dir="/tmp"))
        env = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
        env.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO_ROOT),
                    DEMO_ID_ENV: self.demo_id})  # fmt: skip
        command = [sys.executable, "-m", "jobs.demo.gpu_node", self.gcs_address(), str(temp_dir)]
        with open(temp_dir / "gpu-node.log", "wb") as log:
            process = subprocess.Popen(command, env=env, cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT,
                                       start_new_session=True)  # fmt: skip
        node = GpuNode(process, temp_dir)
        self.nodes.append(node)
        return node

    def joined(self, node: GpuNode) -> bool:
        """Whether `node` is ALIVE at the head with its GPUs (its id noted); DemoError when its process ended."""
        if node.process.poll() is not None:
            log = (node.temp_dir / "gpu-node.log").read_text(errors="replace")[-2000:]
            raise DemoError(f"the GPU node exited with {node.process.returncode}: {log.strip().splitlines()[-1:]}")
        known = {other.node_id for other in self.nodes if other is not node}
        for entry in readiness.ray_nodes(self.endpoint):
            if entry.get("state") == "ALIVE" and readiness.node_gpus(entry) > 0 and entry["node_id"] not in known:
                node.node_id = entry["node_id"]
                return True
        return False

    def node_state(self, node_id: str) -> str:
        """ALIVE, DEAD or "" (unknown) for `node_id`, as the head's state API lists it."""
        return next(
            (entry.get("state", "") for entry in readiness.ray_nodes(self.endpoint) if entry["node_id"] == node_id), ""
        )

    def stop(self) -> None:
        """End every GPU node and the head by process group, then whatever of theirs is left by process id; remove
        their temporary directories."""
        for node in self.nodes:
            node.kill()
        self.head.stop()
        end_processes_of(self.demo_id)
        for node in self.nodes:
            shutil.rmtree(node.temp_dir, ignore_errors=True)


class Printing:
    """The guardian's hooks on this machine: each says what it would do on the stack's cluster."""

    def export(self, request: ExportRequest) -> ExportDone:
        """On a cluster: the export job of the newest complete step (jobs/runs/export.py); here no job, so the
        guardian follows none."""
        return ExportDone(
            None,
            f"on a cluster this submits the export of global_step_{request.step} as a Hugging Face model"
            f" (jobs/runs/export.py; here nothing is converted)",
        )

    def scale_to_zero(self, settings: Settings) -> str:
        """On a cluster: the GPU worker group at 0 replicas (incluster/scaling.py)."""
        raw = settings.raw
        return (
            f"on a cluster this sets RayCluster {raw['namespace']}/{raw['rayCluster']} worker group"
            f" {raw['gpuWorkerGroup']} to 0 replicas (incluster/scaling.py; here the GPU node stays until the demo ends)"
        )

    def hooks(self) -> Hooks:
        """Both hooks."""
        return Hooks(export=self.export, scale_to_zero=self.scale_to_zero)


def follow_until_hold(client, submission_id: str, report: Say) -> None:
    """Print attempt 1's metric lines as they come until the stand-in holds after HOLD_AFTER; DemoError when the
    attempt ends first."""
    shown = 0
    hold = f"stand-in: holding after step {HOLD_AFTER}"

    def held() -> bool:
        nonlocal shown
        lines = client.get_job_logs(submission_id).splitlines()
        for line in lines[shown:]:
            if line.startswith("step:") or line.startswith(("Resuming from", "Training from scratch")):
                report(f"  {submission_id} | {line.split(' - ')[0]}")
        shown = len(lines)
        if any(line.startswith(hold) for line in lines):
            return True
        status = job_client.status_of(client, submission_id)
        if status not in job_client.LIVE:
            raise DemoError(f"{submission_id} ended {status} before step {HOLD_AFTER}: {lines[-1:] or 'no log'}")
        return False

    wait_for(f"{submission_id} reaching step {HOLD_AFTER}", held, ATTEMPT_SECONDS, report)


def run_cli(*argv: str) -> int:
    """`python -m jobs ARGV` as a user runs it, from the repository root; its output goes to the demo's."""
    env = {key: value for key, value in os.environ.items() if key not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    sys.stdout.flush()
    return subprocess.run([sys.executable, "-m", "jobs", *argv], cwd=REPO_ROOT, env=env, check=False).returncode


def lifecycle(out: Path, report: Say) -> int:
    """Run the whole demo with its files under `out`; the exit status."""
    config = demo_config()
    spec = training_spec(config, entrypoint())
    data_root = out / "data"
    data_root.mkdir(parents=True)
    submission = on_data_root(submission_of(config, spec, 1), str(data_root))
    submission["runtime_env"]["env_vars"][STEPS_ENV] = str(STEPS)
    run = submission["metadata"]["run"]
    run_dir = Path(submission["runtime_env"]["env_vars"]["GRPO_RUN_DIR"])

    report("starting a local Ray head on 127.0.0.1 (short health checks: a lost node is DEAD in seconds) ...")
    started = time.monotonic()
    demo_id = uuid.uuid4().hex
    try:
        head = with_progress(
            "the Ray head starting",
            lambda: local_head.start(HEAD_CPUS, 0, START_SECONDS, {**HEALTH_CHECKS, DEMO_ID_ENV: demo_id}),
            START_SECONDS + PROGRESS_SECONDS,
            report,
        )
    except BaseException:
        end_processes_of(demo_id)  # a head interrupted while it started (Ctrl-C) is ended too
        raise
    cluster = Cluster(head, demo_id)
    try:
        report(f"Ray head up at {head.dashboard_url} ({time.monotonic() - started:.0f} s)")
        first = cluster.add_gpu_node()
        wait_for("the GPU node joining", lambda: cluster.joined(first), START_SECONDS, report)
        report(f"GPU node {first.node_id[:12]} joined with 8 GPUs (process group {first.process.pid})")

        client = job_client.connect(cluster.endpoint)
        outcome = run_submission.ensure_run(client, submission, lambda: run_submission.local_view(run_dir))
        report(f"submitted {outcome.submission_id}: the dev stack's job spec, the stand-in trainer as the entrypoint,"
               f" {STEPS} steps, a checkpoint every {SAVE_EVERY}")  # fmt: skip
        follow_until_hold(client, outcome.submission_id, report)
        common = [
            "--stack",
            STACK,
            "--dir",
            str(DEMO_DIR),
            "--address",
            head.dashboard_url,
            "--data-root",
            str(data_root),
        ]
        report(
            f"attempt 1 holds after step {HOLD_AFTER} (the node loss comes next): its step time by stage and its projected end"
        )
        report(f"$ python -m jobs status {shlex.join(common)}")
        if run_cli("status", *common) != 0:
            raise DemoError("python -m jobs status failed (its output is above)")

        first.kill()
        report(f"preempted: killed the GPU node's process group {first.process.pid} (node {first.node_id[:12]}),"
               " as a spot VM is lost")  # fmt: skip
        wait_for(f"Ray marking node {first.node_id[:12]} DEAD",
                 lambda: cluster.node_state(first.node_id) == "DEAD", DEAD_SECONDS, report)  # fmt: skip
        report(f"Ray marked node {first.node_id[:12]} DEAD; a new GPU node is starting, as a new spot VM would")
        cluster.add_gpu_node()

        values = {**guardian_settings(config), "run": run, "submission": submission, "idleMinutes": IDLE_MINUTES}
        settings = settings_from(values, "the demo")
        guardian = Guardian(settings, cluster.endpoint, Printing().hooks(), lambda line: report(f"  guardian | {line}"),
                            backoff=BACKOFF, settle=SETTLE_SECONDS)  # fmt: skip
        report("the run guardian follows the run (incluster/guardian/loop.py, the loop that runs in the cluster):")
        with_progress("the guardian", lambda: guardian.run(poll=0.5), GUARD_SECONDS, report)

        resumed = [item for item in record.read(run_dir) if item["event"] == "submitted"]
        if not resumed:
            raise DemoError(f"the guardian submitted no further attempt; see {run_dir / record.RECORD_FILE}")
        report(f"recovered: attempt {resumed[-1]['attempt']} resumed from step {resumed[-1]['resumed_from_step']}")

        report(f"$ python -m jobs status {shlex.join(common)}")
        if run_cli("status", *common) != 0:
            raise DemoError("python -m jobs status failed (its output is above)")
        plot = out / f"{run}.png"
        report(f"$ python -m jobs plot {shlex.join(common)} --out {plot}")
        if run_cli("plot", *common, "--out", str(plot)) != 0:
            raise DemoError("python -m jobs plot failed (its output is above)")
    finally:
        report("ending the demo's Ray nodes (by process group)")
        cluster.stop()
    report(f"done in {time.monotonic() - started:.0f} s. Where everything is:")
    report(f"  run directory: {run_dir}")
    report(f"  attempt logs:  {run_dir / 'logs'}")
    report(f"  record:        {run_dir / record.RECORD_FILE}")
    report(f"  plot:          {plot}")
    for line in closing_commands(run, resumed[-1]["attempt"], run_dir, plot):
        report(line)
    return 0


def closing_commands(run: str, newest: int, run_dir: Path, plot: Path) -> list[str]:
    """The commands that look at the run after the demo, its Ray head gone: `status`, `logs` and `plot` read the run
    from its directory alone (`--run-dir`, jobs/cli/stack_jobs.py reach_or_read), typed from the repository root."""
    where = ["--stack", STACK, "--dir", shown_path(DEMO_DIR), "--run-dir", shown_path(run_dir)]
    return [
        "its Ray head is gone; these read the run from its directory (from the repository root):",
        f"  .venv/bin/python -m jobs status {run}-{newest} {shlex.join(where)}",
        f"  .venv/bin/python -m jobs logs {run}-1 {shlex.join(where)}",
        f"  .venv/bin/python -m jobs plot {shlex.join(where)} --out {shlex.quote(shown_path(plot))}",
    ]


def shown_path(path: Path) -> str:
    """`path` relative to the repository root where it lies under it (the commands are typed there), else whole."""
    return str(path.relative_to(REPO_ROOT)) if path.is_relative_to(REPO_ROOT) else str(path)


def with_progress(what: str, function: Callable[[], T], timeout: float, report: Say) -> T:
    """`function()` run in a thread while this one prints a progress line every PROGRESS_SECONDS; its result, or its
    exception raised here; DemoError after `timeout` seconds."""
    outcome: dict[str, Any] = {}

    def body() -> None:
        try:
            outcome["result"] = function()
        except BaseException as error:  # noqa: BLE001 - re-raised below, in the demo's thread
            outcome["error"] = error

    thread = threading.Thread(target=body, name=f"demo: {what}", daemon=True)
    thread.start()
    wait_for(what, lambda: not thread.is_alive(), timeout, report)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def _terminated(signum: int, _: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def claim_directory(parent: Path, stamp: str) -> Path:
    """A new directory `parent/stamp` of this demo alone, created here; `stamp-2`, `stamp-3`, ... when another demo
    started in the same second took it (mkdir is atomic: two demos never share one)."""
    parent.mkdir(parents=True, exist_ok=True)
    for number in range(1, 1000):
        out = parent / (stamp if number == 1 else f"{stamp}-{number}")
        try:
            out.mkdir()
        except FileExistsError:
            continue
        return out
    raise DemoError(f"{parent}: {stamp} to {stamp}-999 are all taken; remove old demo directories")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        print(f"error: {message} (python -m jobs.demo takes no arguments; --help says what it does)", file=sys.stderr)
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    """The demo's command line: no arguments, `--help` prints what it does."""
    summary = (__doc__ or "").split("\n\n", 1)[0]
    return _Parser(
        prog=".venv/bin/python -m jobs.demo",
        description=summary.replace("\n", " "),
        epilog="Its files go to a new directory build/demo/<UTC time>/ (a second demo started in the same second gets"
        " <UTC time>-2/); Ray's ports are the kernel's picks (jobs/submit/local_head.py). Exit status: 0 done, 1 the"
        " demo failed (one line), 130 interrupted; Ctrl-C ends its Ray nodes.",
    )


def main(argv: list[str] | None = None) -> int:
    """`python -m jobs.demo`: 0 done, 1 the demo failed (one line), 130 interrupted; the Ray nodes end either way."""
    parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminated)
    out = claim_directory(REPO_ROOT / "build" / "demo", time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    say(f"grpo-gke demo: the whole run lifecycle on this machine, offline; its files go to {out}")
    try:
        return lifecycle(out, say)
    except KeyboardInterrupt:
        say("interrupted: the demo's Ray nodes are ended")
        return 130
    except (DemoError, GuardError, job_client.JobError, RuntimeError) as error:
        say(f"demo failed: {error}")
        return 1
