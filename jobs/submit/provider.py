"""The post-deploy step: a Pulumi dynamic resource that submits the GRPO job during `pulumi up`.

create: bring back GPU workers the run guardian scaled to zero (incluster/scaling.py), wait for the GPU nodes, run the
preflight (`job.preflight`), then submit the run (idempotent; a SUCCEEDED run with nothing more to do, or one the run's
record says is over, waits for no GPU, runs no preflight and is not submitted: one line says so; on a Lustre stack the
parked bucket's marker is marked stale before a submission, jobs/submit/parked.py). The next attempt is
numbered by incluster/run_submission.py from Ray's table and the run's record and attempt logs, read through the Ray
head (a RayCluster made anew, or an unpark, lists none of the run's attempts), as the run guardian numbers it.
With `job.recover` on, submission is not handed to the guardian: both submit, and of two at once Ray refuses the
second's id (the one numbering makes it the same), which then says so. The guardian submits only after an attempt it
has judged (never a run's first, nor a new run's), it may itself be rolling in the same `up`, and `up` must fail on
missing GPU nodes or a failed preflight with one line, which only this step can say. update: when the run changed, stop the old run's live attempts, then submit the new run;
when the RayCluster was replaced (its uid changed), run the preflight again, then submit the same run again (it
resumes from its checkpoints). A resume on the same RayCluster runs no preflight. A failed preflight refuses the
job and fails `pulumi up` with one line per bad node (incluster/preflight/gate.py). delete (`pulumi
destroy`): stop the run's live attempts, warning (never failing) when they cannot be stopped.
A failure fails `pulumi up` with the one-line reason.

Pulumi stores the provider in the state as a dill pickle and unpickles it in a separate provider
process for every operation, `pulumi destroy` included, possibly under another Python than the one
that made it (bytecode in a pickle crashes another Python minor version). So the pickle holds no
code: JobProvider pickles as stdlib calls with plain arguments that put the project directory on
the path, import `jobs.submit.provider` and make a JobProvider (`JobProvider.__reduce__`); a provider
process started outside the project finds it through that directory. Importing this module imports no
Ray (tests/jobs/submit/test_provider_pickle.py): Ray loads only when a method reaches the cluster.
"""

from __future__ import annotations

import functools
import importlib
import operator
import site
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult
from pulumi.dynamic.dynamic import PROVIDER_KEY

from incluster.endpoint import AccessError
from incluster.google_token import TokenError
from incluster.job_client import JobError, attempts, connect, endpoint_for_address, stop_jobs
from incluster.lustre_transfer import TransferError
from incluster.preflight.gate import before_first_attempt
from incluster.readiness import Capacity, wait_for_gpus
from incluster.run_submission import DONE, ensure_run, head_view, next_step
from incluster.runs import run_dir_of
from incluster.scaling import bring_back
from jobs.submit.access import api_server_from_kubeconfig, endpoint_from_kubeconfig
from jobs.submit.parked import mark_parked_stale

WATCHED_INPUTS = ("submission", "cluster_uid", "gpu_nodes", "address", PROVIDER_KEY)
"""Inputs whose change makes `pulumi up` run `update`; a new provider pickle (PROVIDER_KEY) replaces
the one in the state, so a stale pickle never outlives the next `up`."""

PROJECT_DIR = str(Path(__file__).resolve().parents[2])
"""The directory holding the `jobs` package, put on the provider process's path."""


class _Call:
    """Pickles as the call `function(*args)`: the unpickler makes the call, the pickle names only `function`."""

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self.function = function
        self.args = args

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """The call itself."""
        return (self.function, self.args)


def _report(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _endpoint(props: dict[str, Any]):
    if props.get("address"):
        return endpoint_for_address(props["address"])
    return endpoint_from_kubeconfig(props["kubeconfig"])


def _capacity(props: dict[str, Any]) -> Capacity | None:
    """Where the readiness gate reads the ladder's rung: the kubeconfig's API server (none with a plain `address`)."""
    if props.get("address") or not props.get("kubeconfig"):
        return None
    return Capacity(api_server_from_kubeconfig(props["kubeconfig"]), dict(props.get("gpu_instance_groups") or {}))


def _preflight(props: dict[str, Any], client: Any) -> None:
    """The preflight of a fresh RayCluster (incluster/preflight/gate.py); a failure raises PreflightRefused."""
    api = api_server_from_kubeconfig(props["kubeconfig"]) if props.get("cordon_bad_nodes") else None
    before_first_attempt(client, props.get("preflight"), _report, api)


def _deploy(props: dict[str, Any], fresh_cluster: bool) -> dict[str, Any]:
    """Wait for the GPU nodes, run the preflight on a fresh RayCluster, then submit the run (idempotent); a run with
    nothing more to do (SUCCEEDED, or over by its record) waits for nothing."""
    submission = props["submission"]
    try:
        endpoint = _endpoint(props)
        client = connect(endpoint)
        known = functools.partial(head_view, client, run_dir_of(submission), _report)
        outcome = next_step(client, submission, known)
        if outcome.action not in DONE:
            mark_parked_stale(props.get("parked_bucket"), "pulumi up's post-deploy step", _report)
            bring_back(endpoint, int(props["gpu_nodes"]), _report)
            wait_for_gpus(
                endpoint,
                int(props["gpu_nodes"]),
                float(props["ready_timeout_seconds"]),
                _report,
                capacity=_capacity(props),
            )
            if fresh_cluster:
                _preflight(props, client)
            outcome = ensure_run(client, submission, known)
    except (AccessError, JobError, TransferError, TokenError) as error:
        raise Exception(f"grpo-gke job {submission['metadata']['run']}: {error}") from None
    _report(f"grpo-gke job: {outcome.sentence()}")
    return {**props, "run": submission["metadata"]["run"], "submission_id": outcome.submission_id}


def _stop_run(run: str, props: dict[str, Any]) -> str:
    """Stop the live attempts of `run` on the cluster `props` reaches; say what was stopped.

    AccessError and JobError (unreachable, refused, not stopped in time) propagate.
    """
    client = connect(_endpoint(props))
    stopped = stop_jobs(client, attempts(client, run))
    return f"grpo-gke job: stopped {', '.join(stopped)}" if stopped else f"grpo-gke job: nothing of {run} running"


class JobProvider(ResourceProvider):
    """Submits, replaces and stops the stack's GRPO run on its RayCluster."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """Pickle as stdlib calls, made in this order (the unpickler builds a tuple's items in order):
        `site.addsitedir(PROJECT_DIR)` (appends it to `sys.path` unless there), then
        `importlib.import_module("jobs.submit.provider")`, then that module's `JobProvider()`. Names and
        strings only, no bytecode, so another Python version loads it."""
        in_order = (_Call(site.addsitedir, PROJECT_DIR), _Call(importlib.import_module, __name__))
        module = _Call(operator.methodcaller("__getitem__", -1), in_order)
        return (operator.methodcaller(type(self).__name__), (module,))

    def create(self, props: dict[str, Any]) -> CreateResult:
        """Submit the run once the GPU nodes are up and the preflight passed (the RayCluster is new)."""
        outs = _deploy(props, fresh_cluster=True)
        return CreateResult(id_=props["submission"]["metadata"]["stack"], outs=outs)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Changed when the submission, the RayCluster, the GPU node count, the address or the pickle changed."""
        changed = [key for key in WATCHED_INPUTS if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=[], delete_before_replace=True)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Stop the old run when the spec changed, through the new inputs' cluster access (the state's
        kubeconfig may be stale), then submit the new one (after the preflight when the RayCluster is new);
        an old run that cannot be stopped fails it."""
        old_run, new_run = olds["submission"]["metadata"]["run"], news["submission"]["metadata"]["run"]
        if old_run != new_run:
            try:
                _report(_stop_run(old_run, news))
            except (AccessError, JobError) as error:
                raise Exception(f"grpo-gke job {new_run}: cannot stop the old run {old_run}: {error}") from None
        fresh_cluster = olds.get("cluster_uid") != news.get("cluster_uid")
        return UpdateResult(outs=_deploy(news, fresh_cluster))

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Stop the run's live attempts (`pulumi destroy`). A cluster that is gone, silent or refused, or an
        attempt that does not stop in time, is a warning, not a failure: deleting the RayCluster ends the run."""
        run = props["submission"]["metadata"]["run"]
        try:
            _report(_stop_run(run, props))
        except (AccessError, JobError) as error:
            _report(f"grpo-gke job: warning: {run} not stopped ({error}); deleting the RayCluster ends it")
