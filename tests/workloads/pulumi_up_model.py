"""A pure model of what a later `pulumi up` does to the stack's RayCluster: the engine's step (ignoreChanges, the
provider's Diff, replaceOnChanges), a refresh, the provider's Server-Side Apply of an in-place update, the
guardian's JSON patch, and KubeRay's validation of the object it then reconciles.

What mocks cannot show, written from the sources below and cited line by line. The stored copies lack the
pinned releases, so the nearest were read:
- pulumi (the engine; pinned 3.272.0): commit 1b5949891b3c (2026-08-21, after tag v3.259.0, the newest stored),
  pkg/resource/deploy/step_generator.go, pkg/resource/deploy/step.go, sdk/go/common/resource/properties_path.go.
- pulumi-kubernetes (pinned 4.34.2): commit 94977969d641 (2026-07-01, v4.32.0-27-g94977969d, the newest stored),
  provider/pkg/provider/provider.go, provider/pkg/await/await.go, provider/pkg/metadata/overrides.go.
- KubeRay v1.7.0 ray-operator/controllers/ray/utils/validation.go and util.go (jobs/scaling.desired_workers).
- Kubernetes Server-Side Apply, https://kubernetes.io/docs/reference/using-api/server-side-apply/ ("Field
  management": a changed value moves ownership to the manager that changed it, a non-apply PATCH included; an
  apply of a different value to a field another manager owns is a conflict unless forced; "Merge strategy": a
  list without x-kubernetes-list-type is atomic, one field). KubeRay v1.7's CRD gives `spec.workerGroupSpecs`
  no x-kubernetes-list-type (/work/shared/kuberay/raycluster.v1.schema.json).

Only what the stack's RayCluster needs is modelled: objects, lists of objects, scalars; one atomic list.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field
from typing import Any

from incluster.scaling import desired_workers

ATOMIC_LIST = ("spec", "workerGroupSpecs")
"""The RayCluster's atomic list: one field for Server-Side Apply (no x-kubernetes-list-type in KubeRay's CRD)."""

PULUMI_MANAGER = "pulumi-kubernetes"
"""Stand-in for the provider's field manager (`pulumi-kubernetes-<random>`, provider.go fieldManager)."""

PATCH_FORCE = "pulumi.com/patchForce"
"""The annotation that makes the provider force its apply (await.go patchForce L1031-1033)."""

Path = tuple[Any, ...]


def parse_path(text: str) -> Path:
    """A property path as the engine parses it: dots between keys, `[N]` an index, `[*]` the key "*"
    (properties_path.go ParsePropertyPath, L66-67 and L123-124)."""
    parts: list[Any] = []
    for key, index in re.findall(r"([^.\[\]]+)|\[([^\]]+)\]", text):
        parts.append(key if key else ("*" if index == "*" else int(index)))
    return tuple(parts)


def contains(path: Path, other: Path) -> bool:
    """PropertyPath.Contains (properties_path.go L314-340): `other` lies at or below `path`, "*" matching any key."""
    if len(other) < len(path):
        return False
    return all(mine == "*" or mine == theirs for mine, theirs in zip(path, other, strict=False))


def reset(path: Path, old: Any, new: Any) -> bool:
    """PropertyPath.reset (properties_path.go L354-530): set `new` at `path` to `old`'s value there, deleting it
    where `old` lacks the key (L513-519); "*" walks every element of two lists (L487-504); False on a path error."""
    key, rest = path[0], path[1:]
    if key == "*":
        if isinstance(old, list) and isinstance(new, list):
            for index in range(min(len(old), len(new))):
                if rest and not reset(rest, old[index], new[index]):
                    return False
                if not rest:
                    new[index] = copy.deepcopy(old[index])
            return len(old) == len(new)
        if isinstance(old, dict) and isinstance(new, dict):
            return all(k in new and (not rest or reset(rest, old[k], new[k])) for k in old)
        return False
    if isinstance(key, int):
        if not (isinstance(old, list) and isinstance(new, list)) or key >= min(len(old), len(new)):
            return False
        if not rest:
            new[key] = copy.deepcopy(old[key])
            return True
        return reset(rest, old[key], new[key])
    if not rest:
        if isinstance(old, dict) and key in old:
            if not isinstance(new, dict):
                return False
            new[key] = copy.deepcopy(old[key])
        elif isinstance(new, dict):
            new.pop(key, None)
        return True
    if isinstance(old, dict) and isinstance(new, dict) and key in old and key in new:
        return reset(rest, old[key], new[key])
    return not (isinstance(old, dict) and key in old) and not (isinstance(new, dict) and key in new)


def process_ignore_changes(inputs: dict[str, Any], old_inputs: dict[str, Any], ignore_changes: list[str]) -> dict:
    """processIgnoreChanges (step_generator.go L3076-3096): a copy of `inputs` with each ignored path reset to
    the old inputs' value. The engine calls it on every registration of a resource that has old state (L1264-1269)
    before Check, and the result becomes the new state's inputs (L1350) for an update and for a replacement alike
    (the CreateReplacementStep gets the same `new`, L2150-2163)."""
    result = copy.deepcopy(inputs)
    for text in ignore_changes:
        reset(parse_path(text), old_inputs, result)
    return result


def prune(live: Any, shape: Any) -> Any:
    """pruneLiveState (provider.go L2966-2971, pruneMap): the live object cut to the keys the inputs have."""
    if isinstance(live, dict) and isinstance(shape, dict):
        return {key: prune(live[key], shape[key]) for key in shape if key in live}
    if isinstance(live, list) and isinstance(shape, list):
        return [prune(item, shape[min(index, len(shape) - 1)]) if shape else item for index, item in enumerate(live)]
    return live


def differences(old: Any, new: Any, at: Path = ()) -> list[Path]:
    """The property paths where two values differ: what the provider's Diff finds in the JSON patch from the
    pruned live object to the new inputs (provider.go L1536-1575, convertPatchToDiff), lists element by element."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [
            path
            for key in sorted(old.keys() | new.keys())
            for path in differences(old.get(key), new.get(key), at + (key,))
        ]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            path for index, pair in enumerate(zip(old, new, strict=True)) for path in differences(*pair, at + (index,))
        ]
    return [] if old == new else [at]


@dataclass
class Options:
    """The RayCluster's resource options that a later `up` depends on."""

    ignore_changes: list[str]
    """ignoreChanges."""
    replace_on_changes: list[str]
    """replaceOnChanges."""
    custom_timeouts: dict[str, str] = field(default_factory=dict)
    """customTimeouts: not an input, so never diffed."""


@dataclass
class Deployed:
    """The engine's state of the RayCluster and the object in the cluster."""

    inputs: dict[str, Any]
    """The state's inputs."""
    outputs: dict[str, Any]
    """The state's outputs: the live object when the state was last written."""
    live: dict[str, Any]
    """The object in the cluster now."""
    owner: str
    """The field manager that owns the atomic `spec.workerGroupSpecs`."""


class ApplyConflict(Exception):
    """The API server refused the provider's Server-Side Apply (HTTP 409)."""


def create(inputs: dict[str, Any]) -> Deployed:
    """A create (or the create of a replacement): the provider applies the inputs to a new object, owning all."""
    return Deployed(copy.deepcopy(inputs), copy.deepcopy(inputs), copy.deepcopy(inputs), PULUMI_MANAGER)


def guardian_patch(deployed: Deployed, patched: dict[str, Any], manager: str) -> None:
    """A JSON patch (a non-apply PATCH) by `manager`: when it changes the atomic list, `manager` owns all of it."""
    if _at(patched, ATOMIC_LIST) != _at(deployed.live, ATOMIC_LIST):
        deployed.owner = manager
    deployed.live = copy.deepcopy(patched)


def refresh(deployed: Deployed) -> None:
    """`pulumi refresh` / `up --refresh`: Read returns the live object as outputs and, as inputs, the live object
    pruned to the old inputs (provider.go L2083, L2133-2150); the engine stores both (step.go L1624-1625)."""
    deployed.inputs = prune(deployed.live, deployed.inputs)
    deployed.outputs = copy.deepcopy(deployed.live)


def plan_step(deployed: Deployed, inputs: dict[str, Any], options: Options) -> tuple[str, dict[str, Any]]:
    """The engine's step for the RayCluster: ("same" | "update" | "replace", the inputs it sends).

    processIgnoreChanges first (step_generator.go L1267); the provider's Diff compares the new inputs with the
    old outputs pruned to the old inputs' shape (provider.go L1494, L1540) and drops every path an ignoreChanges
    path contains (L1577-1601); replaceOnChanges turns a change below one of its paths into a replacement
    (applyReplaceOnChanges, step_generator.go L3168-3225); any other change is an update."""
    sent = process_ignore_changes(inputs, deployed.inputs, options.ignore_changes)
    ignored = [parse_path(text) for text in options.ignore_changes]
    changed = [
        path
        for path in differences(prune(deployed.outputs, deployed.inputs), sent)
        if not any(contains(ignore, path) for ignore in ignored)
    ]
    if not changed:
        return "same", sent
    forcing = [parse_path(text) for text in options.replace_on_changes]
    if any(contains(force, path) for force in forcing for path in changed):
        return "replace", sent
    return "update", sent


def server_side_apply(deployed: Deployed, inputs: dict[str, Any], ignore_changes: list[str]) -> None:
    """The provider's in-place update (await.go ssaUpdate L643-677) of the live object.

    handleSSAIgnoreFields (L716-806) splits each ignoreChanges path's String() on "." (L752-754): for a path
    through a list (`spec.workerGroupSpecs[*].replicas` prints as `spec.workerGroupSpecs["*"].replicas`) one
    component is `workerGroupSpecs["*"]`, a key no object has, so the path is neither dropped (L763-766) nor
    set from the live object (L786-787): the inputs are applied as they are. The apply is forced only with the
    `pulumi.com/patchForce` annotation or enablePatchForce (patchForce L1031-1035; off in this stack). Applying
    a different atomic list that another manager owns is then a conflict; forced, the applier owns it."""
    for text in ignore_changes:
        path = parse_path(text)
        if any(not isinstance(key, str) or key == "*" for key in path):
            continue
        if deployed.owner != PULUMI_MANAGER and path[: len(ATOMIC_LIST)] == ATOMIC_LIST:
            _drop(inputs, path)
        elif _at(deployed.live, path) is not None:
            _set(inputs, path, copy.deepcopy(_at(deployed.live, path)))
    force = inputs.get("metadata", {}).get("annotations", {}).get(PATCH_FORCE) == "true"
    applied, live = _at(inputs, ATOMIC_LIST), _at(deployed.live, ATOMIC_LIST)
    if applied is not None and applied != live and deployed.owner != PULUMI_MANAGER and not force:
        raise ApplyConflict(f"conflict with {deployed.owner!r}: .{'.'.join(ATOMIC_LIST)}")
    merged = copy.deepcopy(deployed.live)
    merged["metadata"] = copy.deepcopy(inputs["metadata"])
    for key, value in inputs.get("spec", {}).items():
        merged["spec"][key] = copy.deepcopy(value)
    if applied is not None and applied != live:
        deployed.owner = PULUMI_MANAGER
    deployed.inputs, deployed.outputs, deployed.live = copy.deepcopy(inputs), copy.deepcopy(merged), merged


def up(deployed: Deployed, inputs: dict[str, Any], options: Options) -> tuple[str, Deployed]:
    """One later `pulumi up`: the step it takes and the RayCluster it leaves (ApplyConflict if the update fails)."""
    step, sent = plan_step(deployed, inputs, options)
    if step == "replace":
        return step, create(sent)
    if step == "update":
        server_side_apply(deployed, copy.deepcopy(sent), options.ignore_changes)
    return step, deployed


def kuberay_refusal(raycluster: dict[str, Any]) -> str | None:
    """What KubeRay v1.7.0 refuses in a worker group without autoscaling (validation.go L123-136), or None."""
    for group in raycluster["spec"]["workerGroupSpecs"]:
        low, high = group.get("minReplicas"), group.get("maxReplicas")
        if low is None or high is None:
            return f"worker group {group['groupName']} must set both minReplicas and maxReplicas"
        if low < 0 or high < 0:
            return f"worker group {group['groupName']} has a negative count"
        if low > high:
            return f"worker group {group['groupName']} has minReplicas {low} greater than maxReplicas {high}"
    return None


def workers(raycluster: dict[str, Any]) -> int:
    """The GPU worker pods KubeRay keeps (GetWorkerGroupDesiredReplicas, util.go v1.7.0, via incluster.scaling)."""
    return desired_workers(raycluster)


def _at(document: Any, path: Path) -> Any:
    for key in path:
        document = document.get(key) if isinstance(document, dict) else None
    return document


def _drop(document: dict[str, Any], path: Path) -> None:
    parent = _at(document, path[:-1])
    if isinstance(parent, dict):
        parent.pop(path[-1], None)


def _set(document: dict[str, Any], path: Path, value: Any) -> None:
    parent = _at(document, path[:-1])
    if isinstance(parent, dict):
        parent[path[-1]] = value
