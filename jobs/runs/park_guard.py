"""The park guard: a Pulumi dynamic resource that the Managed Lustre instance's deletion waits on, and that refuses
to be deleted while the run on the instance is not parked, so that `pulumi destroy`, `pulumi up` with
storage.parked true and an edit that replaces the instance (storage.throughput, capacityGib) stop before the
instance is deleted with the run on it.

Why it holds: the engine deletes a resource's dependents before the resource (destroy, and what leaves the
program), and never deletes what a failed delete depends on: pulumi/pulumi pkg/resource/deploy/deployment_executor.go
performPostSteps runs ScheduleDeletes' antichains in reverse dependency order and drops from each later antichain
every transitive dependency of a step that failed, so even --continue-on-error leaves the instance (the stored
version read 2026-12-07, not checked at the 3.272.0 tag). A delete-before-replace of the instance
(its fixed name, core/resource_options.py) first deletes each dependent whose inputs come from the instance and
whose Diff, with those inputs unknown, asks for a replacement (pkg/resource/deploy/step_generator.go
calculateDependentReplacements, requiresReplacement): hence the instance's name and uid are inputs here and
`diff` replaces on them. The dynamic provider host passes those unknowns to `diff` as rpc.UNKNOWN and runs `delete`
with the state's outputs (pulumi 3.272.0 pulumi/dynamic/__main__.py Diff, Delete).

delete: nothing when the instance is kept on destroy (storage.keepOnDestroy: the engine only forgets it);
otherwise read the parked bucket's marker and ask infra/storage.py park_refusal whether the run of the stack config
of the last `pulumi up` is parked (the config kept in the state without its secrets, which are outside the run's
hash; its run id from jobs/spec/training.py training_spec); a refusal fails the delete with one line saying what to
do. create and update do nothing but keep the inputs.

It pickles as the post-deploy step's provider does (jobs/submit/provider.py: stdlib calls that import this module,
no bytecode).
"""

from __future__ import annotations

import importlib
import json
import operator
import site
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic
from pulumi.dynamic import CreateResult, DiffResult, ResourceProvider, UpdateResult
from pulumi.dynamic.dynamic import PROVIDER_KEY

from core import names
from core.config.model import StackConfig
from incluster.google_token import FreshBearer
from incluster.lustre_transfer import RestObjects, TransferError
from infra.storage import park_refusal
from jobs.spec.training import training_spec
from jobs.submit.access import user_credential
from jobs.submit.provider import PROJECT_DIR, _Call

REPLACING_INPUTS = ("instance", "instance_uid")
"""Inputs taken from the instance: a new instance (or one being replaced) replaces the guard, deleting it first."""

WATCHED_INPUTS = ("bucket", "kept", "config", PROVIDER_KEY)
"""Inputs whose change updates the guard in place, so that its delete reads the last `pulumi up`'s config."""

SECRET_FIELDS = frozenset({"hf_token", "wandb_api_key", "secret_env"})
"""StackConfig fields left out of the config the guard keeps in the state."""


def _report(line: str) -> None:
    print(f"grpo-gke park guard: {line}", file=sys.stderr, flush=True)


def kept_config(config: StackConfig) -> str:
    """The stack config as the guard keeps it in the state: JSON by the stack file's keys, without its secrets."""
    return json.dumps(config.model_dump(mode="json", by_alias=True, exclude=set(SECRET_FIELDS)), sort_keys=True)


def discard_command(props: dict[str, Any]) -> str:
    """What the user runs to delete the instance with the run on it anyway: forget the guard, then delete."""
    return f"pulumi state delete '{props['urn']}' --stack {props['stack']}"


def deletion_refusal(marker_text: str | None, props: dict[str, Any]) -> str | None:
    """Why the instance must not be deleted now (one line), or None: kept on destroy, or its run parked."""
    if props["kept"]:
        return None
    config = StackConfig.model_validate(json.loads(props["config"]))
    refusal = park_refusal(marker_text, config, training_spec(config).run)
    if refusal is None:
        return None
    return (
        f"refusing to delete the Lustre instance {props['instance']} (pulumi destroy, storage.parked true or an edit"
        f" that replaces it) with a run on it that is not parked: {refusal}. To delete it with the run anyway:"
        f" {discard_command(props)}, then run the command again"
    )


class ParkGuardProvider(ResourceProvider):
    """Keeps its inputs; its delete refuses while the instance holds a run that is not parked."""

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        """Pickle as stdlib calls that put the project on the path, import this module and make a ParkGuardProvider."""
        in_order = (_Call(site.addsitedir, PROJECT_DIR), _Call(importlib.import_module, __name__))
        module = _Call(operator.methodcaller("__getitem__", -1), in_order)
        return (operator.methodcaller(type(self).__name__), (module,))

    def create(self, props: dict[str, Any]) -> CreateResult:
        """Nothing to make: the guard is its inputs."""
        return CreateResult(id_=props["instance"], outs=props)

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        """Replaced (deleted first) with the instance; updated when the config, the bucket or the pickle changed."""
        replaces = [key for key in REPLACING_INPUTS if olds.get(key) != news.get(key)]
        changed = replaces or [key for key in WATCHED_INPUTS if olds.get(key) != news.get(key)]
        return DiffResult(changes=bool(changed), replaces=replaces, delete_before_replace=True)

    def update(self, _id: str, _olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        """Keep the new inputs."""
        return UpdateResult(outs=news)

    def delete(self, _id: str, props: dict[str, Any]) -> None:
        """Refuse (raise) unless the instance is kept on destroy or the marker says its run is parked."""
        if props["kept"]:
            _report(f"{props['instance']} is kept on destroy (storage.keepOnDestroy): nothing to guard")
            return
        objects = RestObjects(props["bucket"], FreshBearer(lambda: user_credential({})))
        try:
            stored = objects.read(names.PARK_MARKER)
        except TransferError as error:
            raise Exception(
                f"grpo-gke park guard: refusing to delete {props['instance']}: cannot read"
                f" gs://{props['bucket']}/{names.PARK_MARKER} ({error}); run the command again once it can be read"
            ) from None
        refusal = deletion_refusal(None if stored is None else stored.text, props)
        if refusal is not None:
            raise Exception(f"grpo-gke park guard: {refusal}")
        _report(f"the run on {props['instance']} is parked in gs://{props['bucket']}/: deleting the instance")


@dataclass(frozen=True)
class ParkGuardArgs:
    """Inputs of the guard."""

    config: StackConfig
    """The stack config of this `pulumi up` (its run, its parked bucket, storage.keepOnDestroy)."""
    instance: pulumi.Input[str]
    """`projects/<p>/locations/<zone>/instances/<id>`, from the instance (the guard is deleted before it)."""
    instance_uid: pulumi.Input[str | None]
    """The instance's uid, from the instance."""


class ParkGuard(pulumi.dynamic.Resource):
    """The guard the Lustre instance's deletion waits on (jobs/runs/park_guard.py)."""

    def __init__(self, name: str, args: ParkGuardArgs, opts: pulumi.ResourceOptions | None = None):
        config = args.config
        props = {
            "instance": args.instance,
            "instance_uid": args.instance_uid,
            "bucket": config.parked_bucket_name,
            "kept": config.storage.keep_on_destroy,
            "config": kept_config(config),
            "stack": pulumi.get_stack(),
            "urn": f"urn:pulumi:{pulumi.get_stack()}::{pulumi.get_project()}::pulumi-python:dynamic:Resource::{name}",
        }
        super().__init__(ParkGuardProvider(), name, props, opts)
