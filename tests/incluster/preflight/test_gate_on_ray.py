"""The post-deploy step's preflight (incluster/preflight/gate.py through jobs/submit/provider.py) on a real local Ray head:
a failed preflight refuses the training job and fails create with one line per bad node, after cordoning its node
on the real API server of the test run (with the user's kubeconfig: tests/incluster/preflight/conftest.py ApiServer); a resume on the same RayCluster runs none.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from incluster.job_client import attempts, connect, endpoint_for_address, stop_jobs
from jobs.preflight.settings import preflight_template
from jobs.spec.training import run_directory, submission_of, training_spec
from jobs.submit.provider import JobProvider
from tests.conftest import config_of
from tests.incluster.preflight.conftest import STAMP

pytestmark = pytest.mark.usefixtures("ray_head")


def in_run_dir(submission: dict, data_root: Path) -> dict:
    """`submission` naming its run directory under `data_root` (GRPO_RUN_DIR, which every attempt keeps)."""
    run_dir = f"{data_root}{run_directory(submission['metadata']['run'])}"
    env = {**submission["runtime_env"]["env_vars"], "GRPO_RUN_DIR": run_dir}
    return {**submission, "runtime_env": {**submission["runtime_env"], "env_vars": dict(sorted(env.items()))}}


def props_for(
    address: str, stack: str, kubeconfig: str, results: Path, entrypoint: str = "sleep 60", nodes: int = 2, **job
) -> dict:
    """The dynamic resource's inputs as build_job gives them for a stack of `nodes` GPU nodes, with the address
    override, the preflight's results in `results` and the run's directory under it (the test's directory, not the
    shared storage's /data)."""
    config = config_of("dev", stack=stack, gpu={"nodes": nodes}, job=job)
    template = preflight_template(config)
    return {
        "submission": in_run_dir(submission_of(config, training_spec(config, entrypoint), 1), results / "data"),
        "kubeconfig": kubeconfig,
        "address": address,
        "gpu_nodes": 1,
        "gpus_per_node": 8,
        "ready_timeout_seconds": 5,
        "cluster_uid": "uid-1",
        "preflight": None if template is None else {**template, "results_dir": str(results)},
        "cordon_bad_nodes": config.job.cordon_bad_nodes,
        "run": None,
        "submission_id": None,
    }


def preflight_jobs(address: str, stack: str) -> list[str]:
    client = connect(endpoint_for_address(address))
    return [job.submission_id for job in client.list_jobs() if (job.metadata or {}).get("preflightOf") == stack]


def test_a_failed_preflight_cordons_the_bad_node_and_refuses_the_job(
    ray_head, on_local_head, api_server, capsys, tmp_path
):
    node = api_server.pod("gke-grpo-h200-pool-1")  # the Ray pod the stand-in measurement names, on a node
    props = props_for(ray_head, "gate-bad", api_server.kubeconfig(), tmp_path, preflight="gpu", cordonBadNodes=True)
    run = props["submission"]["metadata"]["run"]
    with pytest.raises(Exception) as refused:
        JobProvider().create(props)
    results = tmp_path / f"{STAMP}.json"
    assert str(refused.value) == (
        f"grpo-gke job {run}: refused: the gpu preflight failed (results {results}):\n"
        "  gke-grpo-h200-pool-1: FAIL GPU 0 bf16 matmul 512 TFLOP/s is 73.4% of the NVIDIA H200 reference"
        " 698 TFLOP/s (threshold 80%)"
    )
    assert json.loads(results.read_text())["verdict"]["passed"] is False
    assert attempts(connect(endpoint_for_address(ray_head)), run) == [], "the training job must not be submitted"
    assert preflight_jobs(ray_head, "gate-bad") == ["gate-bad-preflight-20261201t120000000z"]
    assert [request[:2] for request in api_server.requests] == [
        ("GET", "/api/v1/namespaces/grpo/pods/gke-grpo-h200-pool-1"),
        ("PATCH", f"/api/v1/nodes/{node}"),
    ]
    assert api_server.cordoned(node)
    err = capsys.readouterr().err
    assert f"grpo-gke preflight: cordoned node {node} (Ray pod gke-grpo-h200-pool-1)" in err


def test_a_resume_on_the_same_ray_cluster_runs_no_preflight(ray_head, on_local_head, api_server, tmp_path):
    provider = JobProvider()
    kubeconfig = api_server.kubeconfig()
    olds = props_for(ray_head, "gate-resume", kubeconfig, tmp_path, preflight="off")
    created = provider.create(olds).outs
    news = props_for(ray_head, "gate-resume", kubeconfig, tmp_path, "sleep 61", preflight="gpu", cordonBadNodes=True)
    updated = provider.update("gate-resume", created, news).outs
    client = connect(endpoint_for_address(ray_head))
    try:
        assert updated["submission_id"] == f"{news['submission']['metadata']['run']}-1"
        assert preflight_jobs(ray_head, "gate-resume") == []
        assert api_server.requests == []
    finally:
        stop_jobs(client, [client.get_job_info(updated["submission_id"])])


def test_a_replaced_ray_cluster_runs_the_preflight_again_and_a_pass_submits_the_same_run(
    ray_head, on_local_head, api_server, capsys, tmp_path
):
    provider = JobProvider()
    kubeconfig = api_server.kubeconfig()
    olds = props_for(ray_head, "gate-fresh", kubeconfig, tmp_path, nodes=1, preflight="off")
    created = provider.create(olds).outs
    client = connect(endpoint_for_address(ray_head))
    stop_jobs(client, [client.get_job_info(created["submission_id"])])
    news = {**props_for(ray_head, "gate-fresh", kubeconfig, tmp_path, nodes=1), "cluster_uid": "uid-2"}
    updated = provider.update("gate-fresh", created, news).outs
    try:
        assert updated["submission_id"] == f"{created['run']}-2"
        assert preflight_jobs(ray_head, "gate-fresh") == ["gate-fresh-preflight-20261201t120000000z"]
        assert f"grpo-gke preflight: PASS (gpu, 1 nodes; results {tmp_path / STAMP}.json)" in capsys.readouterr().err
        assert api_server.requests == []
    finally:
        stop_jobs(client, [client.get_job_info(updated["submission_id"])])
