"""NeMo-RL's init_ray inside a Ray job: the spec's runtime env lets it attach (RAY_OVERRIDE_JOB_RUNTIME_ENV)."""

from __future__ import annotations

import sys
from pathlib import Path

from incluster.job_client import connect, endpoint_for_address, follow
from incluster.run_submission import ensure_run, local_view
from incluster.runs import run_dir_of
from jobs.spec.training import on_data_root, submission_of, training_spec
from tests.jobs.spec.test_training import nemo_rl

INIT_STAND_IN = Path(__file__).resolve().parents[2] / "support" / "nemo_rl_init_stand_in.py"


def run_to_end(address: str, submission: dict) -> tuple[str, str]:
    client = connect(endpoint_for_address(address))
    submission_id = ensure_run(client, submission, lambda: local_view(Path(run_dir_of(submission)))).submission_id
    status = follow(client, submission_id, "nemo-rl", None, lambda _: None)
    return status, client.get_job_logs(submission_id)


def test_nemo_rl_attaches_with_the_spec_runtime_env(ray_head, tmp_path):
    config = nemo_rl("v0.7.0", stack="env-ok")
    submission = submission_of(config, training_spec(config, f"{sys.executable} {INIT_STAND_IN}"), 1)
    status, logs = run_to_end(ray_head, on_data_root(submission, str(tmp_path)))
    assert status == "SUCCEEDED", logs
    assert f"worker HF_HOME={tmp_path}/hf-home" in logs


def test_without_the_override_the_runtime_envs_clash(ray_head, tmp_path):
    config = nemo_rl("v0.7.0", stack="env-clash")
    submission = submission_of(config, training_spec(config, f"{sys.executable} {INIT_STAND_IN}"), 1)
    submission = on_data_root(submission, str(tmp_path))
    env_vars = {k: v for k, v in submission["runtime_env"]["env_vars"].items() if k != "RAY_OVERRIDE_JOB_RUNTIME_ENV"}
    submission = {
        **submission,
        "runtime_env": {"env_vars": env_vars},
        "metadata": {**submission["metadata"], "run": "env-clash-x"},
    }
    status, logs = run_to_end(ray_head, submission)
    assert status == "FAILED"
    assert "Failed to merge the Job's runtime env" in logs
