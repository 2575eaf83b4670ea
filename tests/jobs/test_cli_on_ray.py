"""The job CLI against a real local Ray head, with the real spec and a stand-in trainer entrypoint."""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from incluster import job_client
from jobs.cli.main import main
from jobs.submit.local_head import refusing_address
from plan.harness import REPO_ROOT
from tests.ray_fixtures import stand_in
from tests.support.signals import default_sigint

pytestmark = pytest.mark.usefixtures("ray_head")

FOLLOW_POLL_S = 0.3
"""How often a followed job's status is polled in these tests (job_client.follow's 1 s is a cluster's pace)."""


@pytest.fixture(autouse=True)
def quick_follow(monkeypatch):
    """`--wait` and `logs --follow` poll the job's status every FOLLOW_POLL_S."""
    monkeypatch.setattr(job_client, "follow", functools.partial(job_client.follow, poll=FOLLOW_POLL_S))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    """Exit code, stdout and stderr of `python -m jobs ARGV`."""
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def common(name: str, directory, address: str) -> list[str]:
    """The stack, its directory and the address; the shared storage's paths under `directory`/data (made here,
    as the shared storage exists before any attempt)."""
    Path(directory, "data").mkdir(exist_ok=True)
    return ["--stack", name, "--dir", str(directory), "--address", address, "--data-root", f"{directory}/data"]


def remote(args: list[str]) -> list[str]:
    """`common`'s arguments without --data-root, for logs and stop (they read no run file, so they do not take it)."""
    return args[: args.index("--data-root")]


def ray_jobs(address: str, stack: str) -> list:
    from incluster.job_client import connect, endpoint_for_address, stack_jobs

    return stack_jobs(connect(endpoint_for_address(address)), stack)


def test_submit_prints_the_attempt_id_and_the_same_spec_twice_makes_one_job(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-idem")
    args = common(name, directory, ray_head)

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", "sleep 60")
    assert code == 0, err
    first = out.strip()
    assert first.startswith("cli-idem-") and first.endswith("-1")
    assert f"submitted {first}" in err

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", "sleep 60")
    assert code == 0, err
    assert out.strip() == first
    assert "nothing submitted" in err
    assert [job.submission_id for job in ray_jobs(ray_head, name)] == [first]

    code, out, err = run_cli(capsys, "stop", *remote(args))
    assert code == 0, err
    assert out.strip() == f"stopped {first}"
    code, out, err = run_cli(capsys, "status", *args)
    assert code == 0 and f"{first}  STOPPED" in out, err


def test_wait_follows_to_success_with_a_progress_line_then_status_and_logs(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-ok")
    args = common(name, directory, ray_head)

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(0, 3), "--wait")
    assert code == 0, err
    job = out.strip()
    assert "step 3  critic/score/mean 0.7500" in err
    assert f"{job} SUCCEEDED" in err

    code, out, _ = run_cli(capsys, "status", *args)
    assert code == 0 and f"{job}  SUCCEEDED  run={job[:-2]}  attempt=1" in out

    code, out, _ = run_cli(capsys, "logs", *remote(args), job)
    assert code == 0 and "step:2 - critic/score/mean:np.float64(0.5)" in out

    code, out, err = run_cli(capsys, "logs", *remote(args), "--follow")
    assert code == 0 and "step:3" in out and "step 3  critic/score/mean 0.7500" in err

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(0, 3))
    assert code == 0 and out.strip() == job and "already SUCCEEDED" in err


def test_failing_entrypoint_exits_1_with_its_last_lines_and_the_next_submit_is_attempt_2(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-fail")
    args = common(name, directory, ray_head)

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(3, 1), "--wait")
    assert code == 1
    first = out.strip()
    assert f"{first} FAILED" in err
    assert "stand-in trainer failing with exit code 3" in err
    assert "Traceback" not in err

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(3, 1))
    assert code == 0, err
    second = out.strip()
    assert second == first[:-1] + "2"
    jobs = ray_jobs(ray_head, name)
    assert [job.metadata["attempt"] for job in jobs] == ["1", "2"]
    envs = [dict(job.runtime_env["env_vars"]) for job in jobs]
    assert [env.pop("GRPO_ATTEMPT") for env in envs] == ["1", "2"]
    assert envs[0] == envs[1], "the attempts of a run differ only in GRPO_ATTEMPT"

    code, out, err = run_cli(capsys, "logs", *remote(args), second, "--follow")
    assert code == 1 and f"{second} FAILED" in err


def test_stop_and_follow_of_a_stopped_job_exits_1(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-stop")
    args = common(name, directory, ray_head)
    code, out, _ = run_cli(capsys, "submit", *args, "--entrypoint", "sleep 60")
    job = out.strip()
    assert code == 0

    code, out, err = run_cli(capsys, "stop", *remote(args), job)
    assert code == 0 and out.strip() == f"stopped {job}"
    code, out, _ = run_cli(capsys, "list", *args)
    assert code == 0 and f"{job}  STOPPED" in out
    code, _, err = run_cli(capsys, "logs", *remote(args), job, "--follow")
    assert code == 1 and f"{job} STOPPED" in err
    code, out, _ = run_cli(capsys, "stop", *remote(args))
    assert code == 0 and "no live job" in out


def test_a_job_that_can_never_be_placed_is_refused_without_submitting(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-unplaceable", gpu={"nodes": 2})
    args = common(name, directory, ray_head)
    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", "sleep 60", "--ready-timeout", "1")
    assert code == 2
    assert out == ""
    assert "never be placed" in err and "1 of 2 Ray nodes with 8 GPUs are up" in err and "missing 1" in err
    assert ray_jobs(ray_head, name) == []


def test_one_full_node_passes_the_readiness_gate(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-ready", gpu={"nodes": 1})
    code, out, err = run_cli(
        capsys, "submit", *common(name, directory, ray_head), "--entrypoint", stand_in(0, 1), "--ready-timeout", "1"
    )
    assert code == 0, err
    assert out.strip().endswith("-1")


def test_an_unreachable_address_exits_2_with_one_line(make_stack, capsys):
    name, directory = make_stack("cli-unreachable")
    for command in ("submit", "status", "list", "stop", "logs"):
        with refusing_address() as address:
            args = common(name, directory, address)
            code, out, err = run_cli(capsys, command, *(remote(args) if command in ("stop", "logs") else args))
        assert code == 2, command
        assert err.startswith("error: cannot reach the Ray dashboard") and err.count("\n") == 1, err


def test_bad_input_exits_2_with_one_line(make_stack, tmp_path, capsys):
    code, _, err = run_cli(capsys, "status", "--stack", "absent", "--dir", str(tmp_path))
    assert code == 2 and "no such stack file" in err and err.count("\n") == 1
    code, _, err = run_cli(capsys, "frobnicate", "--stack", "dev")
    assert code == 2 and err.startswith(
        "error: argument COMMAND: invalid choice: 'frobnicate' (choose from 'validate',"
    )
    name, directory = make_stack("cli-bad", grpo={"learningRate": 5})
    code, _, err = run_cli(capsys, "validate", "--stack", name, "--dir", str(directory))
    assert code == 2 and "grpo-gke:grpo.learningRate" in err and err.count("\n") == 1


def test_a_dashboard_that_fails_mid_command_exits_2_with_one_line(make_stack, capsys):
    import http.server
    import threading

    class HalfBroken(http.server.BaseHTTPRequestHandler):
        """Answers the version check, then refuses every Jobs API call as an expired token would."""

        def do_GET(self) -> None:
            body, code = (
                (b'{"ray_version": "2.60.0", "version": "4"}', 200)
                if self.path == "/api/version"
                else (b"Unauthorized", 401)
            )
            self.send_response(code)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), HalfBroken)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        name, directory = make_stack("cli-halfbroken")
        address = f"http://127.0.0.1:{server.server_address[1]}"
        code, _, err = run_cli(capsys, "list", *common(name, directory, address))
    finally:
        server.shutdown()
    assert code == 2
    assert err.startswith("error: the Ray dashboard failed") and err.count("\n") == 1, err


def test_an_inherited_ray_address_does_not_redirect_an_explicit_one(ray_head, make_stack, capsys, monkeypatch):
    name, directory = make_stack("cli-envaddr")
    with refusing_address() as ray_address, refusing_address() as api_address:
        monkeypatch.setenv("RAY_ADDRESS", ray_address)
        monkeypatch.setenv("RAY_API_SERVER_ADDRESS", api_address)
        code, _, err = run_cli(capsys, "list", *common(name, directory, ray_head))
    assert code == 0, err
    assert "no job of stack 'cli-envaddr'" in err


def test_status_of_a_failed_attempt_shows_its_error_line(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-error")
    args = common(name, directory, ray_head)
    entrypoint = f"{sys.executable} -c \"print('step 1'); raise ValueError('reward function gsm8k not found')\""
    code, out, _ = run_cli(capsys, "submit", *args, "--entrypoint", entrypoint, "--wait")
    assert code == 1
    job = out.strip()
    code, out, _ = run_cli(capsys, "status", *args)
    assert code == 0
    assert out.splitlines()[0].startswith(f"{job}  FAILED  ")
    assert out.splitlines()[1:3] == [
        "  Job entrypoint command failed with exit code 1, last available logs (truncated to 20,000 chars):",
        "  error: ValueError: reward function gsm8k not found",
    ]
    # then the run's goodput: no step, one failure before step 1 (the files are not on this head's /data)
    goodput = out.splitlines()[3:]
    assert goodput[:3] == [f"run {job[:-2]} across 1 attempt:", "  first step: not reached yet", "  steps: 0 done"]
    assert goodput[3].startswith("  failure of attempt 1 before step 1: lost ")
    assert goodput[4].startswith("  goodput: 0.0% of ") and goodput[5].startswith("  cost: $")


def test_the_head_dying_during_logs_follow_is_one_line_and_exit_2(make_stack, capsys, tmp_path):
    """The job outlives its head (Ray does not end a job's processes when the head dies): its entrypoint writes its
    process group, which the test ends once the follow has exited."""
    import signal

    from jobs.submit import local_head

    head = local_head.start(num_cpus=1, num_gpus=8)
    group_file = tmp_path / "entrypoint.pgid"
    try:
        name, directory = make_stack("cli-dying")
        args = common(name, directory, head.dashboard_url)
        entrypoint = (
            f"{sys.executable} -c \"import os, time; open('{group_file}', 'w').write(str(os.getpgid(0)));"
            " print('started', flush=True); time.sleep(120)\""
        )
        code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", entrypoint)
        assert code == 0, err
        job = out.strip()
        env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
        follow = subprocess.Popen(
            [".venv/bin/python", "-m", "jobs", "logs", *remote(args), "--follow"],
            cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        streamed = iter(follow.stdout.readline, "")
        assert "started\n" in streamed, "the job's log is being streamed"
    finally:
        head.stop()
    _, err = follow.communicate(timeout=120)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(int(group_file.read_text()), signal.SIGTERM)
    assert follow.returncode == 2, err
    prefix = f"error: lost the Ray dashboard at {head.dashboard_url} while following {job} ("
    suffix = f"); the job may still be running: .venv/bin/python -m jobs status --stack cli-dying {job}\n"
    assert err.startswith(prefix) and err.endswith(suffix) and err.count("\n") == 1, err


def test_ctrl_c_in_logs_follow_is_one_line_and_exit_130_with_the_stream_closed(ray_head, make_stack, capsys):
    """Ctrl-C while Ray's tail_job_logs (an aiohttp websocket in an async generator) waits for the next line: the
    session is closed before the CLI exits, so neither asyncio nor aiohttp writes anything at exit."""
    import signal

    name, directory = make_stack("cli-ctrl-c")
    args = common(name, directory, ray_head)
    ticking = "import time; [print('tick', n, flush=True) or time.sleep(0.1) for n in range(600)]"
    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", f'{sys.executable} -c "{ticking}"')
    assert code == 0, err
    job = out.strip()
    env = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    follow = subprocess.Popen(
        [".venv/bin/python", "-m", "jobs", "logs", *remote(args), "--follow"],
        cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_sigint,
    )  # fmt: skip
    try:
        streamed = []
        for line in iter(follow.stdout.readline, ""):
            streamed.append(line)
            if line.startswith("tick "):
                break
        assert streamed[-1:] and streamed[-1].startswith("tick "), "the job's log is being streamed"
        follow.send_signal(signal.SIGINT)
        # The rest of stdout through the same buffered reader the lines above came from (communicate() reads the raw
        # pipe and would lose the lines that reader already buffered); a follow that hangs is killed after 60 s.
        killer = threading.Timer(60, follow.kill)
        killer.start()
        try:
            out, err = follow.stdout.read(), follow.stderr.read()
            follow.wait(timeout=60)
        finally:
            killer.cancel()
        log = job_client.connect(job_client.endpoint_for_address(ray_head)).get_job_logs(job)
    finally:
        follow.kill()
        run_cli(capsys, "stop", *remote(args), job)
    assert follow.returncode == 130
    assert (
        err == f"interrupted; {job} keeps running (stop it with .venv/bin/python -m jobs stop --stack {name} {job})\n"
    )
    assert log.startswith("".join(streamed) + out), "stdout is the job's log as far as it streamed, nothing else"


def test_fresh_starts_a_new_run_that_the_next_submit_keeps(ray_head, make_stack, capsys):
    name, directory = make_stack("cli-fresh")
    args = common(name, directory, ray_head)
    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(steps=1), "--wait")
    assert code == 0, err
    first = out.strip().splitlines()[0]

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(steps=1))
    assert (code, out.strip()) == (0, first) and "already SUCCEEDED; nothing submitted" in err

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(steps=1), "--fresh")
    assert code == 0, err
    fresh = out.strip()
    assert fresh.endswith("-1") and fresh != first and fresh.startswith(f"{name}-")
    assert f"a fresh run: grpo-gke:job.runGeneration is now 1 in Pulumi.{name}.yaml" in err
    assert "run guardian" not in err, "through --address there is no guardian in a cluster to speak of"
    assert "runGeneration: 1" in (directory / f"Pulumi.{name}.yaml").read_text()

    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(steps=1))
    assert (code, out.strip()) == (0, fresh) and "nothing submitted" in err


def test_a_fresh_run_through_the_kubeconfig_says_the_guardian_guards_it_only_after_pulumi_up(
    ray_head, make_stack, capsys, tmp_path
):
    """The guardian's settings name the run and only `pulumi up` rewrites them: a fresh run submitted through the
    cluster (the kubeconfig, here a stand-in API server forwarding to a real head) says so, naming the generation."""
    import yaml

    from jobs.spec.training import training_spec
    from jobs.submit.target import load_stack, stack_context
    from tests.support.service_proxy_stand_in import ProxyStandIn, service_proxy_stand_in
    from workloads.raycluster import render_manifest

    name, directory = make_stack("cli-fresh-cluster")
    config = load_stack(name, directory)
    context = stack_context(config)
    with service_proxy_stand_in(ProxyStandIn(ray_head, render_manifest(config))) as api:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump({
                "apiVersion": "v1", "kind": "Config", "current-context": context,
                "clusters": [{"name": context, "cluster": {"server": api.address}}],
                "users": [{"name": context, "user": {"token": "ya29.static"}}],
                "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            })
        )  # fmt: skip
        args = ["--stack", name, "--dir", str(directory), "--kubeconfig", str(kubeconfig)]
        (tmp_path / "data").mkdir()
        data = ["--data-root", str(tmp_path / "data")]
        code, out, err = run_cli(capsys, "submit", *args, *data, "--entrypoint", stand_in(steps=1), "--fresh")
    assert code == 0, err
    run = training_spec(load_stack(name, directory), stand_in(steps=1)).run
    assert out.strip() == f"{run}-1"
    assert err.splitlines()[:2] == [
        f"a fresh run: grpo-gke:job.runGeneration is now 1 in Pulumi.{name}.yaml",
        f"the run guardian in the cluster guards generation 1 once pulumi up --stack {name} has updated it; until"
        " then nothing recovers the new run or scales its GPU workers to zero after it",
    ]
    assert api.patches == [] and set(api.authorizations) == {"Bearer ya29.static"}


def test_status_and_list_show_the_runs_record_from_the_data_root(ray_head, make_stack, capsys):
    from incluster import record

    name, directory = make_stack("cli-record")
    args = common(name, directory, ray_head)
    code, out, _ = run_cli(capsys, "submit", *args, "--entrypoint", stand_in(0, 1), "--wait")
    assert code == 0
    job = out.strip()
    run = job.rsplit("-", 1)[0]
    run_dir = directory / "data" / "checkpoints" / run
    record.append(run_dir, record.entry(1796126400.0, 1, "submitted", resumed_from_step=4))
    record.append(run_dir, record.entry(1796126460.0, 1, "succeeded"))
    shown = [
        f"record of {run} ({run_dir}/attempts.jsonl):",
        "  2026-12-01T12:00:00.000Z  attempt 1  submitted  from step 4",
        "  2026-12-01T12:01:00.000Z  attempt 1  succeeded",
    ]
    code, out, _ = run_cli(capsys, "status", *args)
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith(f"{job}  SUCCEEDED") and shown[0] in lines
    at = lines.index(shown[0])
    assert lines[at : at + 3] == shown
    # The record says the run succeeded, so status ends with its idle bill (jobs/runs/idle.py), counted from the
    # attempt's end on the Ray head.
    assert lines[at + 3 :] == [lines[-1]] and lines[-1].startswith("run over since "), lines[at + 3 :]
    assert "(attempt 1 ended): the GPU workers scale to zero at" in lines[-1]
    assert f"run {run} across 1 attempt:" in out.splitlines()
    code, out, _ = run_cli(capsys, "list", *args)
    assert code == 0 and out.splitlines()[1:] == shown
    code, out, _ = run_cli(capsys, "list", *remote(args))
    assert code == 0 and len(out.splitlines()) == 1


def test_status_shows_the_runs_goodput_and_cost_from_its_files_under_data_root(ray_head, make_stack, capsys, tmp_path):
    import json

    from core.prices import catalog, gpu_hourly
    from jobs.spec.training import run_directory
    from tests.conftest import config_of

    name, directory = make_stack("cli-goodput")
    args = common(name, directory, ray_head)
    code, out, err = run_cli(capsys, "submit", *args, "--entrypoint", "sleep 2", "--wait")
    assert code == 0, err
    job = out.strip()
    run = job[:-2]
    details = ray_jobs(ray_head, name)[0]
    start = details.start_time / 1000
    run_dir = tmp_path / "data" / run_directory(run).removeprefix("/data/")
    (run_dir / "logs").mkdir(parents=True, exist_ok=True)
    (run_dir / "attempts.jsonl").write_text(
        json.dumps(
            {
                "attempt": 1,
                "event": "submitted",
                "reason": "",
                "resumed_from_step": None,
                "time": "2026-01-01T00:00:00.000Z",
            }
        )
        + "\n"
    )
    stamp = datetime.fromtimestamp(start + 1, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    (run_dir / "logs" / "attempt-1.log").write_text(f"{stamp}\tstep:1 - critic/score/mean:0.5 - timing_s/step:1.0\n")

    code, out, err = run_cli(capsys, "status", *args, "--data-root", str(tmp_path / "data"), "--json")
    assert code == 0, err
    document = json.loads(out)
    assert (document["attempt"], document["status"], document["run"]) == (job, "SUCCEEDED", run)
    hourly = gpu_hourly(config_of("dev"), catalog())
    assert document["gpuHourly"] == hourly
    figures = document["goodput"]
    assert figures["steps_done"] == 1 and figures["losses"] == []
    ran_s = (details.end_time - details.start_time) / 1000
    assert figures["gpu_s"] == pytest.approx(ran_s)
    assert figures["dollars"] == pytest.approx(round(hourly * ran_s / 3600, 4), abs=1e-4)

    code, out, _ = run_cli(capsys, "status", *args, "--data-root", str(tmp_path / "data"))
    assert code == 0
    assert f"run {run} across 1 attempt:" in out and "  steps: 1 done, " in out and "  cost: $" in out

    code, _, err = run_cli(capsys, "status", *args, "--data-root", str(tmp_path / "missing"))
    assert code == 2 and "--data-root" in err and "no such directory" in err

    picture = tmp_path / "run.png"
    code, out, err = run_cli(capsys, "plot", *args, "--data-root", str(tmp_path / "data"), "--out", str(picture))
    assert code == 0, err
    assert out == f"wrote {picture}: 1 step of 1 attempt, 0 marks\n"
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = run_cli(
        capsys, "plot", *args, "--data-root", str(tmp_path / "data"), "--out", str(tmp_path / "run.jpg")
    )
    assert code == 2 and "name a file ending in .png" in err
