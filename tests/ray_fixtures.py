"""Job-layer fixtures: one real local Ray head for the session, a real two-node Ray cluster in network
namespaces, and stack files made for a test."""

from __future__ import annotations

import contextlib
import importlib.util
import shlex
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import REPO_ROOT, shipped_stack_file, stop_after_last_use

STAND_IN = Path(__file__).parent / "support" / "stand_in.py"
"""Prints verl-style metric lines in place of the trainer, then exits with the code it is given."""

STAND_IN_TRAINER = REPO_ROOT / "jobs" / "demo" / "stand_in_trainer.py"
"""A driver plus a GPU actor per node writing verl-layout checkpoints to $GRPO_RUN_DIR (see its docstring); the demo
(jobs/demo) runs the same file."""


@pytest.fixture(scope="session")
def ray_head(request: pytest.FixtureRequest) -> Iterator[str]:
    """Dashboard URL of a local Ray head (4 CPUs, 8 declared GPUs: one full 8-GPU node), stopped after the
    last test that uses it."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed: pip install 'ray[default]' (requirements.txt) for the job tests")
    from jobs.submit import local_head

    head = local_head.start(num_cpus=4, num_gpus=8)
    stop = stop_after_last_use(request, head.stop)
    try:
        yield head.dashboard_url
    finally:
        stop()


@pytest.fixture(scope="session")
def pending_ray_head(request: pytest.FixtureRequest) -> Iterator[str]:
    """Dashboard URL of a second local head (1 CPU, no GPU) for the tests that leave a job PENDING: the stop reaches
    its supervisor actor only once that actor starts (ray 2.60.0 dashboard/modules/job/job_manager.py L636-648, a
    remote call on an actor not yet placed), and the job fails only after the start timeout, 15 min by default
    (dashboard/consts.py L64, job_manager.py L155-158); on the session's head it would stay live under every later
    test that needs nothing else live (quiet_ray_head)."""
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed: pip install 'ray[default]' (requirements.txt) for the job tests")
    from jobs.submit import local_head

    head = local_head.start(num_cpus=1)
    stop = stop_after_last_use(request, head.stop)
    try:
        yield head.dashboard_url
    finally:
        stop()


@pytest.fixture
def quiet_ray_head(ray_head: str) -> str:
    """The session's Ray head with no live job: a job an earlier test of this process left PENDING or RUNNING (those
    tests are over) is stopped and waited for, for a test whose outcome depends on nothing else being live."""
    from incluster import job_client

    client = job_client.connect(job_client.endpoint_for_address(ray_head))
    live = [job for job in client.list_jobs() if job_client.status_text(job.status) in job_client.LIVE]
    job_client.stop_jobs(client, live)
    return ray_head


@pytest.fixture(scope="session")
def two_node_cluster(request: pytest.FixtureRequest):
    """A real two-node Ray cluster: a head and a node declaring 8 GPUs, each in a network namespace of its own,
    stopped after the last test that uses it.

    Skips, with the reason, where Ray is missing or `ip netns` is refused (it needs root).
    """
    if importlib.util.find_spec("ray") is None:
        pytest.skip("ray is not installed: pip install 'ray[default]' (requirements.txt) for the job tests")
    from tests.support.netns import NamespaceRefused, namespace_pair
    from tests.support.two_node_ray import TwoNodeRay

    with contextlib.ExitStack() as cleanup:
        try:
            head_ns, gpu_ns = cleanup.enter_context(namespace_pair())
        except NamespaceRefused as refusal:
            pytest.skip(f"the two-node Ray tests need network namespaces (root): {refusal}")
        cluster = TwoNodeRay(head_ns, gpu_ns)
        cleanup.callback(stop_after_last_use(request, cluster.stop))
        cluster.start_head()
        cluster.start_gpu_node()
        yield cluster


@pytest.fixture
def two_nodes(two_node_cluster):
    """The session's two-node cluster with its GPU node up (started again if an earlier test left it down)."""
    two_node_cluster.ensure_gpu_node()
    return two_node_cluster


@pytest.fixture
def make_stack(tmp_path: Path) -> Callable[..., tuple[str, Path]]:
    """Write Pulumi.<name>.yaml from a shipped stack with sections changed; return (name, directory)."""

    def make(name: str, base: str = "dev", **sections: dict) -> tuple[str, Path]:
        document = yaml.safe_load(shipped_stack_file(base).read_text())
        for section, changes in sections.items():
            document["config"].setdefault(f"grpo-gke:{section}", {}).update(changes)
        (tmp_path / f"Pulumi.{name}.yaml").write_text(yaml.safe_dump(document))
        return name, tmp_path

    return make


def stand_in(exit_code: int = 0, steps: int = 3) -> str:
    """Entrypoint of the stand-in trainer."""
    return f"{sys.executable} {STAND_IN} {exit_code} {steps}"


def stand_in_trainer(*flags: str) -> str:
    """Entrypoint of the stand-in trainer: the venv's Python running stand_in_trainer.py with `flags`."""
    return shlex.join([sys.executable, str(STAND_IN_TRAINER), *flags])
