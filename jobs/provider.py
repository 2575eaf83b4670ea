"""The post-deploy step: a Pulumi dynamic resource that submits the GRPO job during `pulumi up`.

create: wait for the GPU nodes, then submit the run (idempotent). update: when the run changed,
stop the old run's live attempts, then submit the new run; when only the RayCluster was
replaced, submit the same run again (it resumes from its checkpoints). delete (`pulumi
destroy`): stop the run's live attempts. A failure fails `pulumi up` with the one-line reason.

Pulumi stores the provider in the state as a dill pickle and unpickles it in a separate provider
process. dill pickles a class of an importable module by reference (`jobs.provider.JobProvider`),
which that process can import only if the project directory is on its path; so the pickle carries
a small loader, pickled by value, that puts the project directory on `sys.path` first. The
provider imports Ray only inside its methods.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult

WATCHED_INPUTS = ("submission", "cluster_uid", "gpu_nodes", "address")
"""Inputs whose change makes `pulumi up` run `update`."""

PROJECT_DIR = str(Path(__file__).resolve().parents[1])
"""The directory holding the `jobs` package, put on the provider process's path."""


def load_provider(project_dir: str) -> JobProvider:
    """A JobProvider, imported from `project_dir` when it exists (else from the process's own path)."""
    import os
    import sys

    if os.path.isdir(project_dir) and project_dir not in sys.path:
        sys.path.insert(0, project_dir)
    from jobs.provider import JobProvider

    return JobProvider()


# dill pickles a function of `__main__` by value (code, no module reference), so the provider
# process needs nothing importable to run the loader above.
load_provider.__module__ = "__main__"


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _endpoint(props: dict[str, Any]):
    from jobs.access import endpoint_from_kubeconfig
    from jobs.control import endpoint_for_address

    if props.get("address"):
        return endpoint_for_address(props["address"])
    return endpoint_from_kubeconfig(props["kubeconfig"])


def _deploy(props: dict[str, Any]) -> dict[str, Any]:
    from jobs.access import AccessError
    from jobs.control import JobError, connect, ensure_run, wait_for_gpus

    submission = props["submission"]
    try:
        endpoint = _endpoint(props)
        client = connect(endpoint)
        wait_for_gpus(endpoint, int(props["gpu_nodes"]), float(props["ready_timeout_seconds"]), _report)
        outcome = ensure_run(client, submission)
    except (AccessError, JobError) as error:
        raise Exception(f"grpo-gke job {submission['metadata']['run']}: {error}") from None
    _report(f"grpo-gke job: {outcome.sentence()}")
    return {**props, "run": submission["metadata"]["run"], "submission_id": outcome.submission_id}


def _stop_run(props: dict[str, Any]) -> None:
    from jobs.access import AccessError
    from jobs.control import JobError, Unreachable, attempts, connect, stop_jobs

    run = props["submission"]["metadata"]["run"]
    try:
        client = connect(_endpoint(props))
        stopped = stop_jobs(client, attempts(client, run))
    except Unreachable:
        _report(f"grpo-gke job: the Ray cluster is gone; nothing of {run} to stop")
        return
    except (AccessError, JobError) as error:
        raise Exception(f"grpo-gke job {run}: cannot stop: {error}") from None
    _report(f"grpo-gke job: stopped {', '.join(stopped)}" if stopped else f"grpo-gke job: nothing of {run} running")


class JobProvider(ResourceProvider):
    """Submits, replaces and stops the stack's GRPO run on its RayCluster."""

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        """Pickle as `load_provider(PROJECT_DIR)`, importable from any working directory."""
        return (load_provider, (PROJECT_DIR,))

    def create(self, props: dict[str, Any]) -> CreateResult:
        """Submit the run once the GPU nodes are up."""
        outs = _deploy(props)
        return CreateResult(id_=props["submission"]["metadata"]["stack"], outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Changed when the submission, the RayCluster, the GPU node count or the address changed."""
        changed = [key for key in WATCHED_INPUTS if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Stop the old run when the spec changed, then submit the new one."""
        if olds["submission"]["metadata"]["run"] != news["submission"]["metadata"]["run"]:
            _stop_run(olds)
        return UpdateResult(outs=_deploy(news))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Stop the run's live attempts (`pulumi destroy`)."""
        _stop_run(props)
