"""What a newcomer sees from `.venv/bin/python -m jobs` when the cluster cannot be reached: one line, exit 2."""

from __future__ import annotations

import http.server
import os
import stat
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from infra.kubernetes import gke_kubeconfig
from jobs.cli import error_line
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
    assert result.stderr == f"error: gcloud is not logged in, so {plugin} got no Google access token; run gcloud auth login\n"


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


def test_a_wrong_path_in_address_says_what_was_tried_and_what_an_address_looks_like(tmp_path, stack_args, not_found_server):
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


TRACEBACK_LOG = """(TaskRunner pid=812) step:1 - critic/score/mean:np.float64(0.1)
(TaskRunner pid=812, ip=10.0.0.3) Traceback (most recent call last):
(TaskRunner pid=812, ip=10.0.0.3)   File "/verl/trainer/main_ppo.py", line 42, in run
(TaskRunner pid=812, ip=10.0.0.3)     raise ValueError("reward function gsm8k not found")
(TaskRunner pid=812, ip=10.0.0.3) ValueError: reward function gsm8k not found
Traceback (most recent call last):
  File "/verl/trainer/main_ppo.py", line 10, in <module>
    ray.get(runner.run.remote())
ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=812, ip=10.0.0.3)
---------------------------------------
Job 'dev-abc-1' failed
"""


def test_the_error_line_is_the_last_tracebacks_final_line_without_rays_prefix():
    assert error_line(TRACEBACK_LOG) == "ray.exceptions.RayTaskError(ValueError): ray::TaskRunner.run() (pid=812, ip=10.0.0.3)"
    only_actor = TRACEBACK_LOG.split("Traceback (most recent call last):\n  File")[0]
    assert error_line(only_actor) == "ValueError: reward function gsm8k not found"


def test_without_a_traceback_the_error_line_is_the_last_line_that_looks_like_an_error():
    assert error_line("step 1\nCUDA error: out of memory\nstep 2 done\n") == "CUDA error: out of memory"
    assert error_line("step 1\nstep 2\n") is None


def test_validate_and_submit_refuse_what_the_jobs_checks_refuse_and_other_commands_go_on(make_stack, tmp_path, capsys):
    from jobs.cli import main

    release = {"image": "nvcr.io/nvidia/nemo-rl:v0.7.0", "rayVersion": "2.46.0", "nemoRlRelease": "v0.7.0"}
    name, directory = make_stack(
        "cli-megatron", "nemo-rl-standard-b200", workload=release, gpu={"nodes": 1}, grpo={"promptsPerStep": 16}
    )
    stack = ["--stack", name, "--dir", str(directory), "--kubeconfig", str(tmp_path / "absent")]
    for command in ("validate", "submit"):
        assert main([command, *stack]) == 2, command
        err = capsys.readouterr().err
        assert err.startswith("error: the stack config was refused: grpo-gke:gpu.nodes: NeMo-RL's recipe"), err
        assert err.count("\n") == 1
    assert main(["status", *stack]) == 2
    assert capsys.readouterr().err.startswith(f"error: cannot read the kubeconfig {tmp_path / 'absent'}")
