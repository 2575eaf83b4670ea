"""What a newcomer sees from `.venv/bin/python -m jobs` when the cluster cannot be reached: one line, exit 2."""

from __future__ import annotations

import http.server
import json
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from infra.kubernetes import gke_kubeconfig
from plan.harness import REPO_ROOT

CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJ0ZXN0Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K"
STACK_CONTEXT = "gke_my-grpo-project_us-central1_grpo-cli"
"""The context `get-credentials` writes for the test stack (project, region of dev; cluster grpo-<stack>)."""
GET_CREDENTIALS = "gcloud container clusters get-credentials grpo-cli --location us-central1 --project my-grpo-project"


def jobs_cli(*argv: str, home: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`.venv/bin/python -m jobs ARGV` from the repository root, as typed in a fresh clone."""
    environment = {"PATH": os.environ["PATH"], "HOME": str(home), **(env or {})}
    return subprocess.run(
        [".venv/bin/python", "-m", "jobs", *argv],
        cwd=REPO_ROOT, env=environment, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.fixture
def stack_args(make_stack) -> list[str]:
    """--stack/--dir of a stack named `cli`, a copy of dev."""
    name, directory = make_stack("cli")
    return ["--stack", name, "--dir", str(directory)]


def kubeconfig(path: Path, contexts: dict[str, dict], current: str) -> Path:
    """A kubeconfig with one cluster and user per context."""
    document = yaml.safe_load(gke_kubeconfig("unused", "34.1.2.3", CA))
    document["clusters"] = [{"name": name, "cluster": {"server": "https://34.1.2.3", "certificate-authority-data": CA}}
                            for name in contexts]  # fmt: skip
    document["users"] = [{"name": name, "user": user} for name, user in contexts.items()]
    document["contexts"] = [{"name": name, "context": {"cluster": name, "user": name}} for name in contexts]
    document["current-context"] = current
    path.write_text(yaml.safe_dump(document))
    return path


def test_no_kubeconfig_prints_the_stacks_get_credentials_command(tmp_path, stack_args):
    result = jobs_cli("status", *stack_args, home=tmp_path)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"error: cannot read the kubeconfig {tmp_path}/.kube/config: No such file or directory;"
        f" write it with: {GET_CREDENTIALS}\n"
    )


def test_a_kubeconfig_without_the_stacks_context_is_refused_not_the_current_one_used(tmp_path, stack_args):
    path = kubeconfig(tmp_path / "kubeconfig", {"other-cluster": {"token": "t"}}, current="other-cluster")
    result = jobs_cli("status", *stack_args, home=tmp_path, env={"KUBECONFIG": str(path)})
    assert result.returncode == 2
    assert result.stderr == (
        f"error: the kubeconfig has no context '{STACK_CONTEXT}' (has: other-cluster; current: other-cluster):"
        f" the stack's cluster is not in it; add it with: {GET_CREDENTIALS} (or pass --context NAME to use another"
        " context)\n"
    )


def fake_plugin(directory: Path, body: str) -> Path:
    """An executable that stands in for gke-gcloud-auth-plugin."""
    plugin = directory / "gke-gcloud-auth-plugin"
    plugin.write_text(f"#!/bin/sh\n{body}\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    return plugin


NOT_LOGGED_IN = """F1201 09:00:00.000000   4242 cred.go:145] print credential failed with error: Failed to retrieve \
access token:: failure while executing gcloud, with args [config config-helper --format=json]: exit status 1 (err: \
ERROR: (gcloud.config.config-helper) You do not currently have an active account selected.
Please run:

  $ gcloud auth login

to obtain new credentials.

If you have already logged in with a different account, run:

  $ gcloud config set account ACCOUNT

to select an already authenticated account to use.
)"""
"""The plugin's stderr without a logged-in gcloud account (its last line is a lone parenthesis)."""


def test_gcloud_not_logged_in_says_so(tmp_path, stack_args):
    (tmp_path / "stderr.txt").write_text(NOT_LOGGED_IN + "\n")
    plugin = fake_plugin(tmp_path, f"cat {tmp_path / 'stderr.txt'} >&2; exit 1")
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": str(plugin)}}
    path = kubeconfig(tmp_path / "kubeconfig", {STACK_CONTEXT: user}, current=STACK_CONTEXT)
    result = jobs_cli("status", *stack_args, "--kubeconfig", str(path), home=tmp_path)
    assert result.returncode == 2
    assert (
        result.stderr
        == f"error: gcloud is not logged in, so {plugin} got no Google access token; run gcloud auth login\n"
    )


@pytest.fixture
def not_found_server() -> Iterator[str]:
    """Address of an HTTP server that answers every path with 404, as a dashboard does a wrong path."""

    class NotFound(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(404)
            self.end_headers()
            self.wfile.write(b"404: Not Found")

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def test_a_wrong_path_in_address_says_what_was_tried_and_what_an_address_looks_like(
    tmp_path, stack_args, not_found_server
):
    address = f"{not_found_server}/dashboard"
    result = jobs_cli("list", *stack_args, "--address", address, home=tmp_path)
    assert result.returncode == 2
    assert result.stderr == (
        f"error: no Ray dashboard at {address}: GET {address}/api/version answered 404 Not Found; a dashboard address"
        " has no path after host:port (http://127.0.0.1:8265 with the stack's dashboardCommand) or is the service proxy"
        " https://<api-server>/api/v1/namespaces/grpo/services/grpo-head-svc:8265/proxy\n"
    )


def test_the_printed_program_runs_from_the_repository_root(tmp_path):
    result = jobs_cli("--help", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: .venv/bin/python -m jobs ")


def test_validate_and_submit_refuse_what_the_jobs_checks_refuse_and_other_commands_go_on(make_stack, tmp_path, capsys):
    from jobs.cli.main import main

    release = {"image": "nvcr.io/nvidia/nemo-rl:v0.7.0", "rayVersion": "2.46.0", "nemoRlRelease": "v0.7.0"}
    name, directory = make_stack(
        "cli-megatron", "nemo-rl-standard-b200", workload=release, gpu={"nodes": 1}, grpo={"promptsPerStep": 16}
    )
    stack = ["--stack", name, "--dir", str(directory)]
    cluster = ["--kubeconfig", str(tmp_path / "absent")]
    for command in (["validate", *stack], ["submit", *stack, *cluster]):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("error: the stack config was refused: grpo-gke:gpu.nodes: NeMo-RL's recipe"), err
        assert err.count("\n") == 1
    assert main(["status", *stack, *cluster]) == 2
    assert capsys.readouterr().err.startswith(f"error: cannot read the kubeconfig {tmp_path / 'absent'}")


class StandInJobs:
    """Stands in for ray 2.60.0's JobSubmissionClient (ray/dashboard/modules/job/sdk.py) over a fixed set of jobs:
    `list_jobs` and `get_job_info` answer Ray's own JobDetails (L342-423), `get_job_status` the job's status
    (L425-447), `get_job_logs` the whole log (L449-476); an unknown id is the RuntimeError `_raise_error` makes of
    the Jobs API's 404 (ray/dashboard/modules/dashboard_sdk.py L304-307)."""

    def __init__(self, jobs: list, logs: dict[str, str]) -> None:
        self.jobs = {job.submission_id: job for job in jobs}
        self.logs = logs

    def get_address(self) -> str:
        return "http://127.0.0.1:8265"

    def list_jobs(self) -> list:
        return list(self.jobs.values())

    def get_job_info(self, job_id: str):
        if job_id not in self.jobs:
            raise RuntimeError(f"Request failed with status code 404: Job {job_id} does not exist.")
        return self.jobs[job_id]

    def get_job_status(self, job_id: str):
        return self.get_job_info(job_id).status

    def get_job_logs(self, job_id: str) -> str:
        self.get_job_info(job_id)
        return self.logs.get(job_id, "")


CYAN, RED, RESET = "\x1b[36m", "\x1b[31m", "\x1b[0m"
"""The colour codes Ray puts around the prefix of an actor's lines (ray 2.60.0 ray/_private/worker.py L2388-2404)."""


@pytest.fixture
def cli_run(make_stack, monkeypatch):
    """stand_in_run of stack `cli`, a copy of dev."""
    return stand_in_run(make_stack, monkeypatch)


def stand_in_run(make_stack, monkeypatch, **sections: dict) -> SimpleNamespace:
    """A run of stack `cli` (dev with `sections` changed) on a stand-in cluster, both attempts submitted by the CLI
    (no record; their job metadata the CLI's, jobs/spec/training.py submission_of): attempt 1 FAILED after step 4, attempt 2 resumed from step 2 (its own log's resume line) and
    SUCCEEDED; then an export of the run (an id Ray picked, the newest job of the stack) and a job of another stack.
    Its files lie under DIR/data."""
    from ray.job_submission import JobDetails, JobStatus, JobType

    from incluster import job_client
    from jobs.spec.training import submission_of, training_spec
    from jobs.submit.target import load_stack
    from tests.jobs.runs.test_observed import T0, stamp, verl_log

    name, directory = make_stack("cli", **sections)
    config = load_stack(name, directory)
    spec = training_spec(config)
    run = spec.run
    data = directory / "data"
    logs = data / "checkpoints" / run / "logs"
    logs.mkdir(parents=True)
    (logs / "attempt-1.log").write_text(
        f"{stamp(61)}\tgrpo-gke attempt 1: no checkpoint; starting at step 0 in /data/checkpoints/{run}\n"
        + verl_log((600, 1, 0.1), (700, 2, 0.2), (800, 3, 0.3), (900, 4, 0.4))
    )
    (logs / "attempt-2.log").write_text(
        f"{stamp(1201)}\tgrpo-gke attempt 2: resuming from global_step_2 (step 2) in /data/checkpoints/{run}\n"
        + verl_log((1500, 3, 0.35), (1600, 4, 0.45), (1700, 5, 0.5))
    )

    def job(submission_id: str, status, start: float, end: float | None, metadata: dict, message: str = ""):
        return JobDetails(
            type=JobType.SUBMISSION, submission_id=submission_id, status=status, entrypoint="python3 -m incluster.attempt",
            message=message, start_time=int(start * 1000), end_time=None if end is None else int(end * 1000),
            metadata=metadata,
        )  # fmt: skip

    def attempt(number: int) -> dict:
        """The attempt's job metadata as the CLI submits it (jobs/spec/training.py submission_of)."""
        return submission_of(config, spec, number)["metadata"]

    failed = f"Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):\n{RED}x"
    jobs = [
        job(f"{run}-1", JobStatus.FAILED, T0 + 60, T0 + 950, attempt(1), failed),
        job(f"{run}-2", JobStatus.SUCCEEDED, T0 + 1200, T0 + 1800, attempt(2), "Job finished successfully."),
        job("raysubmit_4kX2", JobStatus.SUCCEEDED, T0 + 1900, T0 + 2000,
            {"stack": name, "framework": "verl", "exportOf": run, "step": "newest"}, "Job finished successfully."),
        job("other-0123456789-1", JobStatus.RUNNING, T0 + 2100, None, {"stack": "other", "run": "other-0123456789", "attempt": "1"}),
    ]  # fmt: skip
    ray_logs = {
        f"{run}-1": f"{CYAN}(TaskRunner pid=9, ip=10.0.0.3){RESET} step:4 - critic/score/mean:np.float64(0.4)\n"
        f"{CYAN}(TaskRunner pid=9, ip=10.0.0.3){RESET} {RED}RuntimeError: NCCL error: unhandled system error{RESET}\n",
        f"{run}-2": "step:5 - critic/score/mean:np.float64(0.5)\n",
        "raysubmit_4kX2": "exported step 5\n",
    }
    monkeypatch.setattr(job_client, "connect", lambda endpoint: StandInJobs(jobs, ray_logs))
    args = ["--stack", name, "--dir", str(directory), "--address", "http://127.0.0.1:8265"]
    return SimpleNamespace(run=run, args=args, data=data, directory=directory)


def status_head(run: str) -> list[str]:
    """The first lines of `status` for stand_in_run's run: its newest attempt and the goodput figures above the cost.
    Attempt 1 ran 60..950 s, its first step at 600 s, step 2 at 700 s; attempt 2 ran 1200..1800 s from checkpoint
    step 2 (its log's resume line), its first step at 1500 s; 5 steps done."""
    return [
        f"{run}-2  SUCCEEDED  run={run}  attempt=2  started=2026-12-01 10:20:00Z",
        "  Job finished successfully.",
        f"run {run} across 2 attempts:",
        "  first step: 9m 00s after submission",
        "  steps: 5 done, 10.3 per hour",
        "  failure of attempt 1 at step 4: lost 9m 10s (4m 10s since checkpoint step 2, 5m 00s restart)",
        "  goodput: 26.8% of 24m 50s GPU time made progress",
    ]


FIRST_STEP_LINES = [
    "time to the first step (measured; `up` itself is not visible from the cluster, so each attempt counts from its"
    " submission):",
    "  attempt 1: 9m 00s from its submission to its first step line",
    "  attempt 2: 9m 10s from attempt 1's end to its first step line (5m 00s from its submission)",
]
"""`status`'s measured first steps of stand_in_run's run: no `submitted` record, so each submission is Ray's start;
attempt 2's first step 300 s after its start and 550 s after attempt 1 ended at 950 s."""


STEP_TIME_LINES = [
    "step time by stage (mean of 7 steps, verl's timing_s/*):",
    "  generation     50.0s   54%",
    "  log-probs      15.0s   16%",
    "  training       20.0s   21%",
    "  weight sync    3.00s    3%",
    "  other          5.14s    6%",
    "  whole step    1m 33s",
    "tokens per second per GPU: 400.0 (median; perf/throughput)",
    "wall time by kind (32m 20s since the first submission):",
    "  setup                  7m 29s   23%",
    "  training              13m 54s   43%",
    "  checkpointing              0s    0%",
    "  recovery               7m 37s   24%",
    "  waiting for capacity       0s    0%",
    "  idle, GPUs up          3m 20s   10%",
    "  idle at zero               0s    0%",
]
"""`status`'s step time and wall time of stand_in_run's run at T0 + 2000 s (tests/jobs/runs/test_observed.py verl_log:
step N takes 90 + N s, 88 s of them in stages; 7 step lines, their mean 93.14 s): attempt 1 from 60 s, its first step
from 509 s (600 s less 91 s) to its end at 950 s; attempt 2 failed-over from 950 s, its first step from 1407 s
(1500 s less 93 s) to its end at 1800 s; idle since (no record: no scale to zero). Setup 449 s, training
441 + 393 s, recovery 457 s, idle 200 s."""


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of the CLI run with `argv`."""
    from jobs.cli.main import main

    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_status_follows_the_runs_attempts_not_its_export_and_shows_the_export_as_the_runs(cli_run, capsys, monkeypatch):
    from core.prices import catalog, gpu_hourly
    from jobs.cli import runs as cli_runs
    from tests.conftest import config_of
    from tests.jobs.runs.test_observed import T0

    monkeypatch.setattr(cli_runs, "now", lambda: T0 + 2000)
    code, out, err = cli(capsys, "status", *cli_run.args, "--data-root", str(cli_run.data))
    run, hourly = cli_run.run, gpu_hourly(config_of("dev"), catalog())
    assert (code, err) == (0, "")
    # Attempt 1 ran 60..950 s, its first step at 600 s, step 2 at 700 s; attempt 2 ran 1200..1800 s from checkpoint
    # step 2 (its log's resume line), its first step at 1500 s. GPU time 890 + 600 = 1490 s; lost: 950 - 700 = 250 s
    # after the checkpoint and 300 s of restart; no progress: 540 + 250 s of attempt 1, 300 s of attempt 2.
    assert out.splitlines() == [
        *status_head(run),
        f"  cost: ${hourly * 1490 / 3600:.2f} so far, ${hourly * 550 / 3600:.2f} lost, ${hourly * 1490 / 3600 / 5:.2f} per step",
        "  priced by the rungs each attempt ran on (core/facts/prices.json of 2026-12-01):",
        f"    attempts 1-2: 1 spot, ${hourly:.2f}/h (not recorded: gpu.nodes on gpu.provisioning)",
        # No record (the CLI submitted both): each submission is Ray's start. Attempt 1's first step at 600 s; attempt
        # 2's at 1500 s, 300 s after its start and 550 s after attempt 1 ended at 950 s.
        *FIRST_STEP_LINES,
        *STEP_TIME_LINES,
        f"export of {run}:",
        f"  raysubmit_4kX2  SUCCEEDED  export of run={run}  step=newest  started=2026-12-01 10:31:40Z",
    ]
    code, out, err = cli(capsys, "status", *cli_run.args, "--data-root", str(cli_run.data), "--json")
    document = json.loads(out)
    assert (code, err, document["attempt"], document["run"]) == (0, "", f"{run}-2", run)
    assert document["exports"] == [{"id": "raysubmit_4kX2", "status": "SUCCEEDED", "step": "newest"}]
    assert document["goodput"]["losses"][0]["checkpoint"] == 2, "attempt 2's own resume line names the checkpoint"
    assert document["stepTime"]["meanSeconds"]["generation"] == 50.0 and document["stepTime"]["steps"] == 7
    assert document["wallTime"]["recovery"] == 457.0 and sum(document["wallTime"].values()) == 1940.0
    assert document["firstSteps"] == [
        {"attempt": 1, "afterSubmissionS": 540.0, "previousAttempt": None, "afterPreviousEndS": None},
        {"attempt": 2, "afterSubmissionS": 300.0, "previousAttempt": 1, "afterPreviousEndS": 550.0},
    ]


def test_status_of_a_failed_attempt_shows_its_lines_without_colour_codes(cli_run, capsys):
    run = cli_run.run
    code, out, err = cli(capsys, "status", *cli_run.args, "--data-root", str(cli_run.data), f"{run}-1")
    assert (code, err) == (0, "")
    assert "\x1b" not in out
    assert out.splitlines()[:3] == [
        f"{run}-1  FAILED  run={run}  attempt=1  started=2026-12-01 10:01:00Z",
        "  Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):",
        "  error: RuntimeError: NCCL error: unhandled system error",
    ]
    assert out.splitlines()[3] == f"run {run} across 2 attempts:"


def test_a_job_of_another_stack_is_refused_in_one_line_not_shown_or_stopped_with_this_stacks(cli_run, capsys):
    for command in ("status", "logs", "stop", "plot"):
        code, out, err = cli(capsys, command, *cli_run.args, "other-0123456789-1")
        assert (code, out) == (2, ""), command
        assert (
            err == "error: job other-0123456789-1 belongs to stack 'other', not 'cli'; name its stack: --stack other\n"
        )


def test_logs_and_list_take_the_runs_newest_attempt_and_show_the_export_as_the_runs(cli_run, capsys):
    run = cli_run.run
    assert cli(capsys, "logs", *cli_run.args) == (0, "step:5 - critic/score/mean:np.float64(0.5)\n", "")
    code, out, err = cli(capsys, "list", *cli_run.args, "--data-root", str(cli_run.data))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        f"{run}-1  FAILED  run={run}  attempt=1  started=2026-12-01 10:01:00Z",
        f"{run}-2  SUCCEEDED  run={run}  attempt=2  started=2026-12-01 10:20:00Z",
        f"raysubmit_4kX2  SUCCEEDED  export of run={run}  step=newest  started=2026-12-01 10:31:40Z",
    ]


def test_plot_marks_the_resume_of_an_attempt_the_cli_submitted_from_its_own_log(cli_run, capsys, tmp_path):
    out_file = tmp_path / "run.png"
    code, out, err = cli(capsys, "plot", *cli_run.args, "--data-root", str(cli_run.data), "--out", str(out_file))
    assert (code, err) == (0, "")
    assert out == f"wrote {out_file}: 7 steps of 2 attempts, 2 marks\n"
    # the export's id names the same run
    code, out, err = cli(
        capsys, "plot", *cli_run.args, "--data-root", str(cli_run.data), "--out", str(out_file), "raysubmit_4kX2"
    )
    assert (code, out, err) == (0, f"wrote {out_file}: 7 steps of 2 attempts, 2 marks\n", "")


def test_every_subcommand_uses_the_same_data_root_and_refuses_a_missing_one(cli_run, capsys):
    missing = cli_run.directory / "absent"
    for command in ("submit", "status", "logs", "list", "plot", "export", "preflight", "park"):
        code, out, err = cli(capsys, command, *cli_run.args, "--data-root", str(missing))
        assert (code, out) == (2, ""), command
        assert err == f"error: --data-root {missing}: no such directory; name the directory that stands for /data\n"
    for command in ("stop", "validate"):
        code, _, err = cli(capsys, command, *cli_run.args[:4], "--data-root", str(cli_run.data))
        assert code == 2 and err.startswith("error: unrecognized arguments: --data-root"), command
        assert err.count("\n") == 1, command


HELP = """usage: .venv/bin/python -m jobs [-h] COMMAND ...

Submit, follow, inspect, plot and export the stack's GRPO run on its Ray
cluster, and guard it.

positional arguments:
  COMMAND
    validate  Check the stack's job spec offline.
    submit    Submit the stack's run (idempotent); with --wait follow it to
              the end.
    status    Show a job (default: the stack's newest attempt), its run's
              goodput and cost across attempts, and its exports.
    logs      Print a job's log (default: the newest attempt); with --follow
              stream it with a progress line.
    list      List the stack's jobs, oldest first.
    stop      Stop a job, or every live job of the stack.
    plot      Draw the run's reward and step time by stage against the step,
              each attempt's preemption and resume marked.
    export    Export a complete checkpoint of the stack's run (default: the
              newest) as a Hugging Face model directory.
    preflight
              Check every GPU node (and, in full, the fabric between them); a
              table per node and a verdict.
    park      Export the run from Managed Lustre to the stack's parked bucket
              and mark it parked (then storage.parked).
    guard     The run guardian: it follows the run's newest attempt and
              decides what comes next.

options:
  -h, --help  show this help message and exit
"""


def test_the_help_lists_every_subcommand_with_one_line_and_validate_is_offline(tmp_path):
    result = jobs_cli("--help", home=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (0, HELP, "")
    result = jobs_cli("validate", "--help", home=tmp_path)
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "usage: .venv/bin/python -m jobs validate [-h] --stack STACK [--dir DIR]\n\n"
        "Check the stack's job spec offline.\n\n"
        "options:\n"
        "  -h, --help     show this help message and exit\n"
        "  --stack STACK  stack name: reads Pulumi.<stack>.yaml in --dir\n"
        "  --dir DIR      directory of the stack files (default: .)\n"
    )
    for command in ("submit", "status", "logs", "list", "stop", "plot", "export", "preflight", "park"):
        shown = jobs_cli(command, "--help", home=tmp_path).stdout.split("\n\n")
        assert len(shown[1].splitlines()) <= 2 and shown[1].endswith("."), (command, shown[1])
        assert ("--data-root DIR" in shown[0]) == (command != "stop"), command
    assert jobs_cli("guard", "--help", home=tmp_path).stdout.startswith("usage: .venv/bin/python -m jobs guard ")


def kubeconfig_of(plane, folder) -> list[str]:
    """`--kubeconfig FILE --context tests` of a kubeconfig of the shared control plane (its CA, the admin's token), as
    `gcloud container clusters get-credentials` writes one for a user with the cluster's admin role."""
    import base64

    from tests.support.control_plane import ADMIN_TOKEN

    ca = base64.b64encode(plane.ca.read_bytes()).decode()
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "tests",
        "clusters": [{"name": "tests", "cluster": {"server": plane.address, "certificate-authority-data": ca}}],
        "users": [{"name": "tests", "user": {"token": ADMIN_TOKEN}}],
        "contexts": [{"name": "tests", "context": {"cluster": "tests", "user": "tests"}}],
    }  # fmt: skip
    path = folder / "kubeconfig"
    path.write_text(json.dumps(config))
    return ["--kubeconfig", str(path), "--context", "tests"]


@pytest.fixture
def gpu_nodes(control_plane, stack_namespace):
    """GPU nodes on the shared control plane, with the stack's namespace, held for the test and deleted after it."""
    from tests.support.kube_objects import Nodes

    nodes = Nodes(control_plane)
    try:
        yield nodes
    finally:
        nodes.delete()


def test_status_through_the_api_server_shows_each_gpu_nodes_rung_and_the_ladders_scale_up(
    cli_run, capsys, control_plane, gpu_nodes, tmp_path
):
    """issue 22 item 5: a stockout on the first rung (spot), then a scale-up on the second (on-demand) that gave one
    node while a worker still waits; on the real API server of the test run: GPU nodes run by kwok with their
    `cloud.google.com/gke-nodepool` label, a worker pod the scheduler cannot place and the autoscaler's own event
    texts created as its events (tests/support/kube_objects.py), reached through the user's kubeconfig."""
    from core import names
    from tests.support import kube_objects as made
    from workloads.instance_groups import groups_text

    cluster, at, namespace = "grpo-cli", 1796126400.0, names.NAMESPACE
    for name, pool in (
        ("gke-grpo-cli-gpu-1a2b3c4d-k2x9", "gpu"),
        ("gke-grpo-cli-gpu-on-demand-5e6f7a8b-p0q1", "gpu-on-demand"),
        ("gke-grpo-cli-l4-pool-0f0f0f0f-zzzz", "l4-pool"),
    ):
        gpu_nodes.ready(name, {"cloud.google.com/gke-nodepool": pool})
    made.create_pending_worker(control_plane, namespace, "grpo-gpu-worker-b")
    made.triggered_scale_up(control_plane, namespace, "grpo-gpu-worker-b", f"gke-{cluster}-gpu-1a2b3c4d-grp", at)
    made.failed_scale_up(control_plane, namespace, "grpo-gpu-worker-b", "GCE out of resources", at + 120)
    second = made.triggered_scale_up(control_plane, namespace, "grpo-gpu-worker-b",
                                     f"gke-{cluster}-gpu-on-demand-5e6f7a8b-grp", at + 300, 1, 2)  # fmt: skip
    # the GPU pools' MIGs as the program writes them from the pools' instanceGroupUrls
    groups = {f"gke-{cluster}-gpu-1a2b3c4d-grp": "spot", f"gke-{cluster}-gpu-on-demand-5e6f7a8b-grp": "on-demand"}
    control_plane.ok("POST", f"/api/v1/namespaces/{namespace}/configmaps", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": names.GPU_INSTANCE_GROUPS_CONFIG_MAP, "namespace": namespace},
        "data": {names.GPU_INSTANCE_GROUPS_FILE: groups_text(groups)},
    })  # fmt: skip
    args = [arg for arg in cli_run.args if arg not in ("--address", "http://127.0.0.1:8265")]
    args += kubeconfig_of(control_plane, tmp_path)
    code, out, err = cli(capsys, "status", *args, "--data-root", str(cli_run.data))
    assert (code, err) == (0, "")
    assert out.splitlines()[-5:] == [
        "GPU nodes by rung (their cloud.google.com/gke-nodepool label):",
        "  gke-grpo-cli-gpu-1a2b3c4d-k2x9  spot",
        "  gke-grpo-cli-gpu-on-demand-5e6f7a8b-p0q1  on-demand",
        "  gke-grpo-cli-l4-pool-0f0f0f0f-zzzz  rung unknown",
        "  scale-up: trying rung on-demand since 2026-12-01T12:05:00Z",
    ]
    # before the second rung: the stockout names itself
    control_plane.ok("DELETE", f"/api/v1/namespaces/{namespace}/events/{second['metadata']['name']}")
    code, out, _ = cli(capsys, "status", *args, "--data-root", str(cli_run.data), "--json")
    document = json.loads(out)
    assert document["scaleUp"] == (
        "trying rung spot since 2026-12-01T12:00:00Z; last scale-up failed: GCE out of resources in us-central1-b"
    )
    assert [item["rung"] for item in document["gpuNodes"]] == ["spot", "on-demand", None]
    _, out, _ = cli(capsys, "status", *cli_run.args, "--data-root", str(cli_run.data))
    assert "GPU nodes" not in out  # a plain dashboard address: no API server, no rungs


def test_status_shows_when_the_gpu_workers_scale_to_zero_then_the_idle_bill_the_guardian_recorded(
    cli_run, capsys, monkeypatch
):
    """Issue 23 item 4: the run's newest attempt SUCCEEDED at 10:30:00Z (the stand-in Jobs API's times). The run
    guardian, run here as its loop runs in the cluster (decide, then apply, at its clock), records the success at
    10:35 and scales the GPU workers to zero at 10:45 (job.idleMinutes 15), keeping the idle $/h its settings carry
    (`idleBill`, from `pulumi up`: cost.json's figure). `python -m jobs status` at a fixed clock: at 10:35 when the
    scale to zero is due, then, at 12:10, since when the rest has billed and about how much."""
    from dataclasses import replace

    from incluster import job_client, readiness
    from incluster.endpoint import Endpoint
    from incluster.guardian.loop import Guardian, Hooks
    from incluster.guardian.policy import decide
    from incluster.guardian.settings import settings_from
    from jobs.cli import runs as cli_runs
    from jobs.guardian.settings import guardian_settings
    from jobs.submit.target import load_stack
    from tests.incluster.test_guardian_preflight import _with_run_dir
    from tests.jobs.runs.test_observed import T0
    from tests.plan.test_prices import EXPECTED_IDLE

    run, data = cli_run.run, cli_run.data
    run_dir = data / "checkpoints" / run
    values = settings_from(guardian_settings(load_stack("cli", cli_run.directory)), "settings.json")
    settings = replace(values, submission=_with_run_dir(values.submission, run_dir))
    stand_in = job_client.connect(Endpoint("http://127.0.0.1:8265"))
    runs_jobs = type(stand_in)([job for job in stand_in.list_jobs() if job.metadata.get("stack") == "cli"], {})
    clock = [T0 + 2100]
    monkeypatch.setattr(job_client, "connect", lambda endpoint: runs_jobs)
    monkeypatch.setattr(readiness, "ray_nodes", lambda endpoint: [])
    patched: list[str] = []
    guardian = Guardian(
        settings, Endpoint("http://127.0.0.1:8265"),
        Hooks(scale_to_zero=lambda _: patched.append("0") or "the GPU worker group gpu patched to 0 replicas"),
        lambda line: None, clock=lambda: clock[0],
    )  # fmt: skip

    def guard() -> str:
        action = decide(guardian.observe())
        if action.kind not in ("wait", "done"):
            guardian.apply(action)
        return action.kind

    def status(at: float) -> tuple[int, list[str], str]:
        monkeypatch.setattr(cli_runs, "now", lambda: at)
        monkeypatch.setattr(job_client, "connect", lambda endpoint: stand_in)
        code, out, err = cli(capsys, "status", *cli_run.args, "--data-root", str(data))
        monkeypatch.setattr(job_client, "connect", lambda endpoint: runs_jobs)
        return code, out.splitlines(), err

    # The head's c2-standard-16 and its boot disk, the bucket's 0.5B model, the cluster fee and the NAT for the head.
    hourly = EXPECTED_IDLE["dev"]
    parts = "head, storage, head boot disk, cluster fee and cloud nat"
    assert (guard(), guard()) == ("record", "wait") and patched == []
    code, out, err = status(T0 + 2100)
    assert (code, err) == (0, "")
    # The job, its goodput priced by rung and the measured first steps: 13 lines, the test above holds them; then
    # where the run's time went (16 lines, the test above holds them at T0 + 2000 s: 100 s more idle here), and the
    # export (2 lines).
    goodput, export = out[:13], out[29:31]
    assert goodput[0] == f"{run}-2  SUCCEEDED  run={run}  attempt=2  started=2026-12-01 10:20:00Z"
    assert out[13:29] == [
        *STEP_TIME_LINES[:8],
        "wall time by kind (34m 00s since the first submission):",
        "  setup                  7m 29s   22%",
        "  training              13m 54s   41%",
        "  checkpointing              0s    0%",
        "  recovery               7m 37s   22%",
        "  waiting for capacity       0s    0%",
        "  idle, GPUs up          5m 00s   15%",
        "  idle at zero               0s    0%",
    ]
    assert export[0] == f"export of {run}:"
    assert out[31:] == [
        f"record of {run} ({data}/checkpoints/{run}/attempts.jsonl):",
        "  2026-12-01T10:35:00.000Z  attempt 2  succeeded",
        "run over since 2026-12-01 10:30:00Z (attempt 2 ended): the GPU workers scale to zero at 2026-12-01"
        f" 10:45:00Z (in 10m 00s, job.idleMinutes=15); then ${hourly:.2f}/h bills on for the {parts}",
    ]
    assert f"${hourly:.2f}" == "$0.96"

    clock[0] = T0 + 2700
    assert (guard(), guard()) == ("scale-to-zero", "done") and patched == ["0"]
    code, out, err = status(T0 + 2700 + 5100)
    assert (code, err) == (0, "")
    assert out[:13] == goodput and out[29:31] == export
    # the guardian's scaled-to-zero entry at 10:45 splits the idle time: GPUs up from attempt 2's end at 10:30
    assert out[13:29] == [
        *STEP_TIME_LINES[:8],
        "wall time by kind (2h 09m since the first submission):",
        "  setup                  7m 29s    6%",
        "  training              13m 54s   11%",
        "  checkpointing              0s    0%",
        "  recovery               7m 37s    6%",
        "  waiting for capacity       0s    0%",
        "  idle, GPUs up         15m 00s   12%",
        "  idle at zero           1h 25m   66%",
    ]
    assert out[31:] == [
        f"record of {run} ({data}/checkpoints/{run}/attempts.jsonl):",
        "  2026-12-01T10:35:00.000Z  attempt 2  succeeded",
        "  2026-12-01T10:45:00.000Z  attempt 2  scaled-to-zero: attempt 2 SUCCEEDED; idle for job.idleMinutes=15:"
        " the GPU worker group gpu patched to 0 replicas",
        f"idle since 2026-12-01 10:45:00Z (1h 25m), about ${hourly * 5100 / 3600:.2f} at ${hourly:.2f}/h for the"
        f" {parts}",
    ]
    assert f"${hourly * 5100 / 3600:.2f}" == "$1.35"
    monkeypatch.setattr(cli_runs, "now", lambda: T0 + 2700 + 5100)
    monkeypatch.setattr(job_client, "connect", lambda endpoint: stand_in)
    code, out, err = cli(capsys, "status", *cli_run.args, "--data-root", str(data), "--json")
    assert (code, err) == (0, "")
    assert json.loads(out)["idle"] == {
        "attempt": 2, "overSince": "2026-12-01 10:30:00Z", "scaleToZeroDue": "2026-12-01 10:45:00Z",
        "idleSince": "2026-12-01 10:45:00Z", "idleHourly": round(hourly, 8),
        "idleParts": ["head", "storage", "head boot disk", "cluster fee", "cloud nat"],
        "idleUnpriced": [], "dollarsSoFar": 1.35, "park": None,
    }  # fmt: skip


def test_status_prices_each_attempt_by_the_rungs_its_gpu_nodes_ran_on_and_says_which(
    make_stack, monkeypatch, capsys, control_plane, gpu_nodes, tmp_path
):
    """issue 22 item 6: a ladder [spot, on-demand] of 2 nodes. The guardian recorded attempt 2's nodes, one on each
    rung (its gpu-rungs entry); attempt 1 has no entry, so it is priced at the stack's 2 spot nodes, and says so.
    Through the real API server of the test run (GPU nodes run by kwok, the user's kubeconfig) status also lists the
    nodes' rungs now."""
    from incluster import record
    from jobs.cli import runs as cli_runs
    from tests.jobs.runs.test_observed import T0

    ladder = stand_in_run(make_stack, monkeypatch, gpu={"nodes": 2, "capacity": ["spot", "on-demand"]})
    monkeypatch.setattr(cli_runs, "now", lambda: T0 + 2000)
    run, spot, on_demand = ladder.run, 40.81698, 86.75992  # core/facts/prices.json a3-ultragpu-8g us-central1-b
    run_dir = ladder.data / "checkpoints" / run
    details = {"rungs": {"spot": 1, "on-demand": 1}, "otherNodes": 0}
    reason = "GPU nodes by rung: 1 spot, 1 on-demand"
    record.append(run_dir, record.entry(T0 + 1210, 2, "gpu-rungs", reason, details=details))
    for name, pool in (
        ("gke-grpo-cli-gpu-1a2b3c4d-k2x9", "gpu"),
        ("gke-grpo-cli-gpu-on-demand-5e6f7a8b-p0q1", "gpu-on-demand"),
    ):
        gpu_nodes.ready(name, {"cloud.google.com/gke-nodepool": pool})
    args = [arg for arg in ladder.args if arg not in ("--address", "http://127.0.0.1:8265")]
    args += kubeconfig_of(control_plane, tmp_path)
    code, out, err = cli(capsys, "status", *args, "--data-root", str(ladder.data))
    _, text, _ = cli(capsys, "status", *args, "--data-root", str(ladder.data), "--json")
    # Attempt 1 ran 890 s on 2 spot nodes (not recorded); attempt 2 ran 600 s on 1 spot + 1 on-demand. Lost: attempt 1's
    # 250 s after its checkpoint at its price, and attempt 2's 300 s restart at attempt 2's.
    first, second = 2 * spot, spot + on_demand
    dollars = (first * 890 + second * 600) / 3600
    lost = (first * 250 + second * 300) / 3600
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        *status_head(run),
        f"  cost: ${dollars:.2f} so far, ${lost:.2f} lost, ${dollars / 5:.2f} per step",
        "  priced by the rungs each attempt ran on (core/facts/prices.json of 2026-12-01):",
        f"    attempt 1: 2 spot, ${first:,.2f}/h (not recorded: gpu.nodes on gpu.provisioning)",
        f"    attempt 2: 1 spot + 1 on-demand, ${second:,.2f}/h (the guardian's record)",
        *FIRST_STEP_LINES,
        *STEP_TIME_LINES,
        f"export of {run}:",
        f"  raysubmit_4kX2  SUCCEEDED  export of run={run}  step=newest  started=2026-12-01 10:31:40Z",
        f"record of {run} ({ladder.data}/checkpoints/{run}/attempts.jsonl):",
        f"  2026-12-01T10:20:10.000Z  attempt 2  gpu-rungs: {reason}",
        "GPU nodes by rung (their cloud.google.com/gke-nodepool label):",
        "  gke-grpo-cli-gpu-1a2b3c4d-k2x9  spot",
        "  gke-grpo-cli-gpu-on-demand-5e6f7a8b-p0q1  on-demand",
    ]
    example = (REPO_ROOT / "docs" / "cost.md").read_text().split("## What a run cost", 1)[1]
    assert example.split("```text\n", 1)[1].split("```", 1)[0].splitlines() == out.splitlines()[7:11]
    document = json.loads(text)
    assert document["gpuPrices"] == [
        {"attempt": 1, "rungs": {"spot": 2}, "hourly": first, "recorded": False},
        {"attempt": 2, "rungs": {"spot": 1, "on-demand": 1}, "hourly": second, "recorded": True},
    ]
    assert document["goodput"]["dollars"] == round(dollars, 4)


def test_the_follow_line_of_a_ladder_stack_says_its_dollars_are_at_gpu_provisionings_rate(make_stack, monkeypatch):
    """The follow line reads no record, so it cannot price by rung: on a ladder it says whose rate it used."""
    from incluster import job_client
    from jobs.cli.follow import cost_so_far
    from jobs.submit.target import load_stack

    ladder = stand_in_run(make_stack, monkeypatch, gpu={"capacity": ["spot", "on-demand"]})
    config = load_stack("cli", ladder.directory)
    client, attempt = job_client.connect(None), f"{ladder.run}-2"
    spot = 40.81698  # core/facts/prices.json a3-ultragpu-8g spot in us-central1-b; the attempts ran 890 + 600 s
    assert (
        cost_so_far(client, config, attempt)()
        == f"  ${spot * 1490 / 3600:,.2f} so far at spot's rate (status: by rung)"
    )
    plain = config.model_copy(update={"gpu": config.gpu.model_copy(update={"capacity": None})})
    assert cost_so_far(client, plain, attempt)() == f"  ${spot * 1490 / 3600:,.2f} so far"


@pytest.mark.parametrize(
    ("grpo", "projected", "seconds_left"),
    [
        ({"maxSteps": 10}, "step 10 in ~7m 45s (2026-12-01T10:37:45.000Z)", 5 * 93),
        # epochs-only: dev's 1 epoch of GSM8K's 7473 training rows at 64 prompts a step is 116 steps, 111 left
        ({}, "step 116 in ~2h 52m (2026-12-01T13:22:03.000Z)", 111 * 93),
    ],
)
def test_status_of_a_live_run_shows_its_projected_end_at_the_current_rungs(
    make_stack, capsys, monkeypatch, grpo, projected, seconds_left
):
    """Issue 33 item 3: stand_in_run's run with job.maxCost 50, grpo.maxSteps 10 or no step limit (its last step from
    its epochs and the data set's size, in the attempts' job metadata as the CLI submits them), attempt 2 still RUNNING
    at 1800 s: 5 steps done, the rest at the median of the measured step times (verl's timing_s/step 91 to 95 s: 93 s),
    at attempt 2's spot node's $/h; attempt 1's failure is no preemption, so no recovery is folded in. The whole
    output."""
    from ray.job_submission import JobStatus

    from core.prices import catalog, gpu_hourly
    from incluster import job_client
    from jobs.cli import runs as cli_runs
    from tests.conftest import config_of
    from tests.jobs.runs.test_observed import T0

    live = stand_in_run(make_stack, monkeypatch, grpo=grpo, job={"maxCost": 50})
    stand_in = job_client.connect(None)
    jobs = [
        job.model_copy(update={"status": JobStatus.RUNNING, "end_time": None, "message": ""})
        if job.submission_id == f"{live.run}-2" else job
        for job in stand_in.list_jobs()
    ]  # fmt: skip
    monkeypatch.setattr(job_client, "connect", lambda endpoint: StandInJobs(jobs, stand_in.logs))
    monkeypatch.setattr(cli_runs, "now", lambda: T0 + 1800)
    code, out, err = cli(capsys, "status", *live.args, "--data-root", str(live.data))
    run, hourly = live.run, gpu_hourly(config_of("dev"), catalog())
    assert (code, err) == (0, "")
    spent = hourly * 1490 / 3600
    assert out.splitlines() == [
        f"{run}-2  RUNNING  run={run}  attempt=2  started=2026-12-01 10:20:00Z",
        *status_head(run)[2:],
        f"  cost: ${spent:.2f} so far, ${hourly * 550 / 3600:.2f} lost, ${spent / 5:.2f} per step",
        "  priced by the rungs each attempt ran on (core/facts/prices.json of 2026-12-01):",
        f"    attempts 1-2: 1 spot, ${hourly:.2f}/h (not recorded: gpu.nodes on gpu.provisioning)",
        f"  budget: ${spent:.2f} of $50.00 spent, ${50 - spent:.2f} left",
        f"  projected end: {projected}, ~${hourly * seconds_left / 3600:.2f} more at ${hourly:.2f}/h",
        *FIRST_STEP_LINES,
        *STEP_TIME_LINES[:8],
        # STEP_TIME_LINES' wall time at 1800 s: attempt 2 still running, so nothing idle yet.
        "wall time by kind (29m 00s since the first submission):",
        "  setup                  7m 29s   26%",
        "  training              13m 54s   48%",
        "  checkpointing              0s    0%",
        "  recovery               7m 37s   26%",
        "  waiting for capacity       0s    0%",
        "  idle, GPUs up              0s    0%",
        "  idle at zero               0s    0%",
        f"export of {run}:",
        f"  raysubmit_4kX2  SUCCEEDED  export of run={run}  step=newest  started=2026-12-01 10:31:40Z",
    ]


def test_the_follow_line_adds_the_projected_end_from_the_step_lines_it_has_seen(make_stack, monkeypatch):
    """Issue 33 item 3: `submit --wait` and `logs --follow` add the projected end to their progress line once a verl
    step line gave a step time (its timing_s/step, else the time since the previous step line) and the schedule's last
    step is known: grpo.maxSteps, else its epochs of the data set's training rows (core/facts/job.py TRAIN_ROWS); at
    the stack's $/h, no record read (status folds in preemptions)."""
    from core.facts.job import TRAIN_ROWS
    from jobs.cli.follow import ProjectedEnd
    from jobs.submit.target import load_stack
    from tests.jobs.runs.test_observed import T0, verl_log

    live = stand_in_run(make_stack, monkeypatch, grpo={"maxSteps": 10})
    clock = [T0]
    projected = ProjectedEnd(load_stack("cli", live.directory), "verl", clock=lambda: clock[0])
    assert projected.suffix() == ""
    projected.see("(TaskRunner pid=9) Training Progress: 10%")
    assert projected.suffix() == ""
    for line in verl_log((100, 1, 0.1), (200, 2, 0.2)).splitlines():
        projected.see(line.split("\t", 1)[1])
    spot = 40.81698  # core/facts/prices.json a3-ultragpu-8g spot in us-central1-b
    # timing_s/step 91 and 92 s: 91.5 s a step, 8 steps left
    assert projected.suffix() == (
        f"  projected end: step 10 in ~12m 12s (2026-12-01T10:12:12.000Z), ~${spot * 732 / 3600:.2f} more at"
        f" ${spot:.2f}/h"
    )
    epochs_only = load_stack("cli", live.directory).model_copy(update={"grpo": load_stack(
        "cli", live.directory).grpo.model_copy(update={"max_steps": None})})  # fmt: skip
    no_limit = ProjectedEnd(epochs_only, "verl", clock=lambda: clock[0])
    no_limit.see("step:1 - critic/score/mean:np.float64(0.1) - timing_s/step:91.0")
    # without grpo.maxSteps: one epoch of GSM8K's 7473 training rows at dev's 64 prompts a step, 116 steps, 115 left
    assert no_limit.suffix() == (
        f"  projected end: step 116 in ~2h 54m (2026-12-01T12:54:25.000Z), ~${spot * 115 * 91 / 3600:.2f} more at"
        f" ${spot:.2f}/h"
    )
    monkeypatch.delitem(TRAIN_ROWS, "gsm8k")  # a data set of unknown size: no last step, no projection
    unknown = ProjectedEnd(epochs_only, "verl", clock=lambda: clock[0])
    unknown.see("step:1 - critic/score/mean:np.float64(0.1) - timing_s/step:91.0")
    assert unknown.suffix() == ""


def test_a_timeout_or_deadline_not_above_zero_is_refused_naming_the_option(tmp_path, stack_args):
    """Issue 34 item 4: `--ready-timeout` and `park --deadline` take seconds above 0; a positive one is taken and the
    command goes on to its next step (here: the kubeconfig it reads is missing)."""
    for command, option, value in [("submit", "--ready-timeout", "-5"), ("submit", "--ready-timeout", "0"),
                                   ("park", "--deadline", "-1"), ("park", "--deadline", "nan")]:  # fmt: skip
        result = jobs_cli(command, *stack_args, option, value, home=tmp_path)
        assert (result.returncode, result.stdout) == (2, ""), (command, value)
        assert result.stderr == f"error: argument {option}: must be a number of seconds above 0, got '{value}'\n"
    result = jobs_cli("submit", *stack_args, "--ready-timeout", "5", home=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == (
        f"error: cannot read the kubeconfig {tmp_path}/.kube/config: No such file or directory;"
        f" write it with: {GET_CREDENTIALS}\n"
    )


def test_guard_refuses_a_data_root_that_is_no_directory_as_every_subcommand_does(tmp_path, stack_args):
    """Issue 34 item 4: `guard --data-root` is checked before the stack is read or the cluster reached; an existing
    directory goes on to the dashboard (here: nothing listens on port 9)."""
    missing = tmp_path / "absent"
    result = jobs_cli(
        "guard", *stack_args, "--address", "http://127.0.0.1:9", "--data-root", str(missing), home=tmp_path
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr == f"error: --data-root {missing}: no such directory; name the directory that stands for /data\n"
    )
    result = jobs_cli(
        "guard", *stack_args, "--address", "http://127.0.0.1:9", "--data-root", str(tmp_path), home=tmp_path
    )
    assert result.returncode == 2 and result.stderr.startswith(
        "error: cannot reach the Ray dashboard at http://127.0.0.1:9"
    )


def test_export_says_its_converter_runs_without_a_shell_as_the_submission_carries_it(tmp_path):
    """Issue 34 item 4: `--converter CMD` is split as a POSIX shell splits words and run without one: the help and
    docs/runs.md say so, and the export's entrypoint carries CMD's words after `--` (incluster/export_run.py runs
    them with subprocess.call, no shell)."""
    import shlex

    from jobs.runs.export import export_submission
    from jobs.spec.training import training_spec
    from tests.conftest import config_of

    shown = " ".join(jobs_cli("export", "--help", home=tmp_path).stdout.split())
    assert "split into words as a POSIX shell does, quotes kept, and run without a shell" in shown
    runs = " ".join((REPO_ROOT / "docs" / "runs.md").read_text().split())
    assert "`--converter CMD` runs CMD in the converter's place: split into words as a POSIX shell does" in runs
    assert "run without a shell" in runs
    command = "sh -c 'cp -r @STEP_DIR@ @TARGET_DIR@ && echo done'"
    config = config_of("dev")
    entrypoint = export_submission(config, training_spec(config), None, shlex.split(command))["entrypoint"]
    words = shlex.split(entrypoint)
    assert words[words.index("--") + 1 :] == ["sh", "-c", "cp -r @STEP_DIR@ @TARGET_DIR@ && echo done"]


def test_reading_a_run_directory_refuses_what_is_not_the_stacks_run_in_one_line(make_stack, tmp_path, capsys):
    """Issue 34 item 3: `--run-dir` names a copy of a run's directory; a missing one, one that holds no run, a job id
    of another stack or of another run than the directory's are each one line, exit 2, and no Ray head is asked."""
    name, directory = make_stack("cli")
    base = ["--stack", name, "--dir", str(directory)]
    missing, empty = tmp_path / "absent", tmp_path / f"{name}-0123456789"
    empty.mkdir()
    for command in ("status", "logs", "plot"):
        code, out, err = cli(capsys, command, *base, "--run-dir", str(missing))
        assert (code, out, err) == (
            2, "", f"error: --run-dir {missing}: no such directory; name a copy of the run's directory\n"
        ), command  # fmt: skip
    code, out, err = cli(capsys, "status", *base, "--run-dir", str(empty))
    assert (code, out) == (2, "")
    assert err.splitlines()[-1] == (f"error: {empty}: no run directory (no attempts.jsonl nor logs/attempt-<N>.log)")
    code, out, err = cli(capsys, "status", "dev-0123456789-1", *base, "--run-dir", str(empty))
    assert (code, out, err.splitlines()[-1]) == (
        2, "", f"error: 'dev-0123456789-1' is no attempt of stack '{name}': an attempt's id is <run>-<N>, its run {name}-<hash>"
    )  # fmt: skip
    code, out, err = cli(capsys, "status", f"{name}-fedcba9876-1", *base, "--run-dir", str(empty))
    assert (code, out, err.splitlines()[-1]) == (
        2, "", f"error: {name}-fedcba9876-1 is an attempt of run {name}-fedcba9876, not of {empty.name}, the run"
        f" --run-dir {empty} holds"
    )  # fmt: skip
