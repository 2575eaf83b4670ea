"""Blast radius of a change: what `pulumi up` would create, update, replace and delete when a stack
deployed from one plan.json is brought to another, and whether the running GRPO job restarts.

Replacement follows the ForceNew input paths of each type (core.facts.changes.FORCE_NEW_INPUTS), the
recorded `replaceOnChanges`, and cascades: an input built from a replaced resource's outputs is
unknown until that resource exists again, so a ForceNew input fed by it replaces its resource too
(as a preview shows it), and a replaced Kubernetes provider replaces every object it manages.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core import names
from core.facts.changes import FORCE_NEW_INPUTS, FORCE_NEW_UNLESS_WIDENED, KUBERNETES_PROVIDER_IDENTITY
from jobs.runs import park_guard
from jobs.submit.provider import WATCHED_INPUTS
from plan.writer import DYNAMIC_TYPE

PLAN_FILE = "plan.json"
"""The file of a plan directory that the comparison reads."""

KUBERNETES_PROVIDER_TYPE = "pulumi:providers:kubernetes"
"""Type token of the Kubernetes provider that manages the in-cluster objects."""

RAY_CLUSTER_TYPE = "kubernetes:ray.io/v1:RayCluster"
"""Type token of the RayCluster the job runs on."""

NODE_POOL_TYPE = "gcp:container/nodePool:NodePool"
"""Type token of a GKE node pool."""

EVERY_INPUT = "*"
"""The replaceOnChanges path that contains every input path (pulumi sdk/go/common/resource/properties_path.go
Contains L314-340: a "*" component matches any key; commit 1b5949891b3c): any change replaces."""

ACTIONS = ("create", "update", "replace", "delete")
"""What `pulumi up` does to a resource, in the order the report lists them."""

HEADINGS = {"create": "create", "update": "update in place", "replace": "replace", "delete": "delete"}
"""Heading of each action's group in the report."""

SPECIAL_TYPES = (DYNAMIC_TYPE, KUBERNETES_PROVIDER_TYPE)
"""Types whose diff the code below derives from their provider's own rules, not from FORCE_NEW_INPUTS."""

LABELS = {
    "gcp:container/cluster:Cluster": "the cluster",
    "gcp:compute/network:Network": "the VPCs",
    "gcp:compute/subnetwork:Subnetwork": "the subnets",
    "gcp:compute/firewall:Firewall": "the firewall rules",
    "gcp:compute/router:Router": "the NAT router",
    "gcp:compute/routerNat:RouterNat": "the NAT",
    "gcp:compute/globalAddress:GlobalAddress": "the Lustre peering range",
    "gcp:servicenetworking/connection:Connection": "the service networking connection",
    "gcp:lustre/instance:Instance": "the Lustre instance",
    "gcp:storage/bucket:Bucket": "the bucket",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "the bucket grant",
    "gcp:projects/service:Service": "the API enablements",
    "gcp:serviceaccount/account:Account": "the nodes' service account",
    "gcp:projects/iAMMember:IAMMember": "the nodes' role grant",
    "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember": "the KMS key grant",
    "gcp:monitoring/dashboard:Dashboard": "the monitoring dashboard",
    "gcp:artifactregistry/repository:Repository": "the image repositories",
    "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember": "the image repositories' reader grant",
    "gcp:secretmanager/secretIamMember:SecretIamMember": "the NGC key secret's grant",
    KUBERNETES_PROVIDER_TYPE: "every Kubernetes object",
    RAY_CLUSTER_TYPE: "the RayCluster",
    "kubernetes:cloud.google.com/v1:ComputeClass": "the GPU ComputeClass",
    "kubernetes:batch/v1:Job": "the staging Job",
    "kubernetes:core/v1:ConfigMap": "the staging script",
    "kubernetes:core/v1:Secret": "a Secret",
    "kubernetes:core/v1:Namespace": "a namespace",
    "kubernetes:core/v1:ServiceAccount": "the Ray service account",
    "kubernetes:core/v1:PersistentVolume": "the data volume",
    "kubernetes:core/v1:PersistentVolumeClaim": "the data claim",
    "kubernetes:apps/v1:DaemonSet": "the gIB installer",
    "kubernetes:networking.gke.io/v1:Network": "the pod networks",
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet": "the pod networks",
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": "the NetworkPolicies",
}
"""How the one-line effect of a config key names each type (a node pool is named by its pool name)."""


JOB_OUTCOMES = ("restarts the run", "stops the run", "starts the run", "the run loses its GPU nodes", "the run goes on")
"""What `pulumi up` does to the GRPO job, as the one-line effect of a config key says it."""


class PlanError(Exception):
    """An earlier plan that cannot be compared with: the one-line reason."""


@dataclass(frozen=True)
class Change:
    """What `pulumi up` does to one resource."""

    urn: str
    """Engine-form URN."""
    name: str
    """Logical name."""
    type: str
    """Type token."""
    action: str
    """One of ACTIONS."""
    reason: str
    """Why: the changed input paths, or the replaced resource it follows."""
    delete_first: bool = False
    """A replacement that deletes the old resource before it creates the new one."""
    label: str = ""
    """The resource in words, for the one-line effect of a config key."""


@dataclass(frozen=True)
class BlastRadius:
    """Every change between two plans of a stack, and what becomes of the running job."""

    stack: str
    """Stack name."""
    changes: tuple[Change, ...]
    """Changed resources, grouped by action (ACTIONS order), then by name and type."""
    job_restarts: bool
    """The running GRPO job is stopped and submitted again."""
    job: str
    """What becomes of the job in a few words: one of JOB_OUTCOMES."""
    verdict: str
    """Why the job restarts or not (completes 'the running GRPO job restarts: yes/no, because …')."""

    def of(self, action: str) -> list[Change]:
        """The changes of one action."""
        return [change for change in self.changes if change.action == action]


def read_plan(directory: Path, stack: str) -> dict[str, Any]:
    """The plan.json in `directory`, which must be a plan of `stack`; PlanError otherwise."""
    if not directory.is_dir():
        raise PlanError(f"--against {directory}: no such directory")
    path = directory / PLAN_FILE
    if not path.is_file():
        raise PlanError(
            f"--against {directory}: holds no {PLAN_FILE} (write one with make plan, or .venv/bin/python -m plan --out DIR)"
        )
    try:
        plan = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise PlanError(f"--against {directory}: {PLAN_FILE} cannot be read as JSON ({error})") from None
    if not isinstance(plan, dict) or not isinstance(plan.get("resources"), list):
        raise PlanError(f"--against {directory}: {PLAN_FILE} is not a plan written by .venv/bin/python -m plan")
    if plan.get("stack") != stack:
        other = plan.get("stack")
        raise PlanError(f"--against {directory}: {PLAN_FILE} is a plan of stack '{other}', not of '{stack}'")
    return plan


def changed_paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Sorted dotted paths (no list indices) where two wire-form values differ; a list of objects of
    the same length is compared element by element, any other list as a whole."""
    if isinstance(old, dict) and isinstance(new, dict):
        paths: set[str] = set()
        for key in old.keys() | new.keys():
            paths.update(changed_paths(old.get(key), new.get(key), f"{prefix}{key}."))
        return sorted(paths)
    if (
        isinstance(old, list)
        and isinstance(new, list)
        and len(old) == len(new)
        and all(isinstance(item, dict) for item in old + new)
    ):
        return sorted({path for pair in zip(old, new, strict=False) for path in changed_paths(*pair, prefix)})
    return [] if old == new else [prefix.rstrip(".")]


def overlaps(path: str, other: str) -> bool:
    """`path` lies at, below or above `other`: a change at one touches the other."""
    return path == other or path.startswith(other + ".") or other.startswith(path + ".")


def value_at(inputs: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path through objects, or None."""
    value: Any = inputs
    for key in path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value


def widened(old: Any, new: Any) -> bool:
    """The new CIDR range contains the old one (a subnet that only grows updates in place)."""
    try:
        return ipaddress.ip_network(new).supernet_of(ipaddress.ip_network(old))
    except (TypeError, ValueError):
        return False


def replacing(resource: Mapping[str, Any], path: str, old_inputs: Mapping[str, Any]) -> bool:
    """A change at `path` of `resource` (a plan entry with its new inputs) replaces it."""
    type_ = resource["type"]
    force_new = FORCE_NEW_INPUTS.get(type_, ()) + tuple(resource.get("replaceOnChanges", ()))
    if any(forced == EVERY_INPUT or overlaps(path, forced) for forced in force_new):
        return True
    for cidr in FORCE_NEW_UNLESS_WIDENED.get(type_, ()):
        if overlaps(path, cidr):
            return not widened(value_at(old_inputs, cidr), value_at(resource["inputs"], cidr))
    return False


def _is_guard(resource: Mapping[str, Any]) -> bool:
    """The park guard (jobs/runs/park_guard.py), the dynamic resource the Lustre instance's deletion waits on."""
    return resource["type"] == DYNAMIC_TYPE and resource["name"] == names.PARK_GUARD


def _watched(resource: Mapping[str, Any]) -> tuple[str, ...]:
    """The inputs a dynamic resource's provider diffs: the guard's, or the run submission's."""
    if _is_guard(resource):
        return (*park_guard.REPLACING_INPUTS, *park_guard.WATCHED_INPUTS)
    return WATCHED_INPUTS


def _inputs(resource: Mapping[str, Any]) -> dict[str, Any]:
    inputs = dict(resource.get("inputs", {}))
    if resource["type"] == DYNAMIC_TYPE:
        inputs = {key: inputs[key] for key in _watched(resource) if key in inputs}
    return inputs


def _property_dependencies(resource: Mapping[str, Any]) -> dict[str, list[str]]:
    """Input -> URNs it was built from; a plan written before they were recorded ties every input to dependsOn."""
    if "propertyDependencies" in resource:
        return resource["propertyDependencies"]
    return {key: list(resource.get("dependsOn", ())) for key in resource.get("inputs", {})}


PARKED_LABELS = {
    "gcp:storage/bucket:Bucket": "the parked bucket",
    "gcp:storage/bucketIAMMember:BucketIAMMember": "the parked bucket's Lustre grant",
}
"""How the one-line effect names a Lustre stack's parked bucket (core/config/model.py parked_bucket_name) and the
Lustre service agent's grant on it (infra/storage.py)."""

GUARDIAN_LABEL = "the run guardian"
"""How the one-line effect names every Kubernetes object of the run guardian (their names start with
names.GUARDIAN)."""


GUARDIAN_IDENTITY_LABEL = "the run guardian's Google account and its grants"
"""How the one-line effect names the guardian's Google service account, its park role and their grants
(storage.parkWhenIdle, infra/identity.py GuardianIdentity: their names start with the account id)."""


INSTANCE_GROUPS_LABEL = "the GPU pools' instance group list"
"""How the one-line effect names the ConfigMap of the GPU pools' MIGs (workloads/instance_groups.py), which a
replaced, added or removed GPU pool updates in place and nothing else follows."""


def _label(resource: Mapping[str, Any]) -> str:
    if resource["type"].startswith("kubernetes:") and resource["name"].startswith(names.GUARDIAN):
        return GUARDIAN_LABEL
    if resource["type"] == "kubernetes:core/v1:ConfigMap" and resource["name"] == names.GPU_INSTANCE_GROUPS_CONFIG_MAP:
        return INSTANCE_GROUPS_LABEL
    suffixes = (
        names.PARK_ROLE_SUFFIX,
        *(names.GUARDIAN_ACCOUNT_SUFFIX + grant for grant in names.GUARDIAN_GRANTS.values()),
    )
    account = resource["type"] == "gcp:serviceaccount/account:Account"
    if resource["name"].endswith(suffixes) or (account and resource["name"].endswith(names.GUARDIAN_ACCOUNT_SUFFIX)):
        return GUARDIAN_IDENTITY_LABEL
    if resource["type"] == NODE_POOL_TYPE:
        return f"the {resource['inputs'].get('name', resource['name'])} node pool"
    if resource["type"] in PARKED_LABELS and re.search(r"-parked-[0-9a-f]{8}(-lustre-agent)?$", resource["name"]):
        return PARKED_LABELS[resource["type"]]
    return LABELS.get(resource["type"], resource["type"])


def _named_kubernetes_object(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """pulumi-kubernetes deletes first when the object keeps its explicit name and namespace (provider.go Diff)."""
    if not new["type"].startswith("kubernetes:"):
        return False
    names = [(value_at(r["inputs"], "metadata.name"), value_at(r["inputs"], "metadata.namespace")) for r in (old, new)]
    return bool(names[1][0]) and names[0] == names[1]


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:4]) + (f" and {len(paths) - 4} more" if len(paths) > 4 else "")


def _done(action: str) -> str:
    return "created" if action == "create" else "replaced"


def _provider_replaced(old: Mapping[str, Any], new: Mapping[str, Any], replaced: Mapping[str, str]) -> str:
    """Why the Kubernetes provider is replaced, or '' (pulumi-kubernetes DiffConfig)."""
    identity = KUBERNETES_PROVIDER_IDENTITY
    old_id, new_id = old["inputs"].get(identity), new["inputs"].get(identity)
    dependencies = _property_dependencies(new)
    fed_by = sorted(urn for urn in dependencies.get(identity, ()) if urn in replaced)
    if new_id is not None and (fed_by or (old_id is not None and old_id != new_id)):
        return f"{identity} changes"
    if new_id is not None and old_id == new_id:
        return ""
    if old["inputs"].get("kubeconfig") != new["inputs"].get("kubeconfig"):
        return "kubeconfig changes"
    fed_by = sorted(urn for urn in dependencies.get("kubeconfig", ()) if urn in replaced)
    return f"kubeconfig comes from {_urn_name(fed_by[0])}, which is {_done(replaced[fed_by[0]])}" if fed_by else ""


def _urn_name(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


def _direct(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[str, str]:
    """(action, reason) of a resource from its own inputs: replace, update or ''."""
    ignored = [path.replace("[*]", "").split("[")[0] for path in new.get("ignoreChanges", ())]
    paths = [
        path
        for path in changed_paths(_inputs(old), _inputs(new))
        if not any(path == ignore or path.startswith(ignore + ".") for ignore in ignored)
    ]
    if new["type"] == KUBERNETES_PROVIDER_TYPE:
        paths = [path for path in paths if path != "kubeconfig"]
    forcing = [path for path in paths if new["type"] not in SPECIAL_TYPES and replacing(new, path, old["inputs"])]
    if _is_guard(new):
        forcing = [path for path in paths if path in park_guard.REPLACING_INPUTS]
    if old.get("provider") != new.get("provider"):
        return "replace", "its provider changes"
    if forcing:
        return "replace", _shown(forcing)
    return ("update", _shown(paths)) if paths else ("", "")


def blast_radius(old_plan: Mapping[str, Any], new_plan: Mapping[str, Any]) -> BlastRadius:
    """Classify every resource of two plans of one stack: create, update, replace or delete."""
    old = {r["urn"]: r for r in old_plan["resources"] if r.get("custom")}
    new = {r["urn"]: r for r in new_plan["resources"] if r.get("custom")}
    kept = sorted(old.keys() & new.keys())
    decided: dict[str, tuple[str, str]] = {urn: ("create", "new") for urn in new.keys() - old.keys()}
    decided |= {urn: ("delete", "gone from the program") for urn in old.keys() - new.keys()}
    for urn in kept:
        action, reason = _direct(old[urn], new[urn])
        if action:
            decided[urn] = (action, reason)
    settled = False
    while not settled:
        settled = True
        replaced = {urn: action for urn, (action, _) in decided.items() if action in ("replace", "create")}
        for urn in kept:
            if decided.get(urn, ("",))[0] == "replace":
                continue
            outcome = _cascade(old[urn], new[urn], replaced, new)
            if outcome and outcome != decided.get(urn) and (outcome[0] == "replace" or urn not in decided):
                decided[urn] = outcome
                settled = False
    changes = []
    for urn, (action, reason) in decided.items():
        resource = new.get(urn) or old[urn]
        reason += _kept_note(old.get(urn), action) + _guard_note(old.get(urn), action, old)
        delete_first = action == "replace" and (
            bool(resource.get("deleteBeforeReplace")) or _named_kubernetes_object(old[urn], resource)
        )
        changes.append(Change(urn, resource["name"], resource["type"], action, reason, delete_first, _label(resource)))
    changes.sort(key=lambda c: (ACTIONS.index(c.action), c.name, c.type, c.urn))
    job, verdict = _job_verdict(old, new, decided)
    return BlastRadius(str(new_plan.get("stack", "")), tuple(changes), job == JOB_OUTCOMES[0], job, verdict)


def _kept_note(old: Mapping[str, Any] | None, action: str) -> str:
    """What the engine does instead of deleting a protected or retained resource."""
    if old is None or action not in ("replace", "delete"):
        return ""
    if old.get("protect"):
        return "; it is protected, so pulumi up refuses"
    if old.get("retainOnDelete"):
        return "; retainOnDelete: the old one stays in the cloud, only the state forgets it"
    return ""


LUSTRE_TYPE = "gcp:lustre/instance:Instance"
"""Type token of the Managed Lustre instance, whose deletion the park guard stands before."""


def _guard_note(resource: Mapping[str, Any] | None, action: str, old: Mapping[str, Mapping[str, Any]]) -> str:
    """What the park guard does before a Lustre instance that is not retained is deleted or replaced."""
    if resource is None or resource["type"] != LUSTRE_TYPE or action not in ("replace", "delete"):
        return ""
    guards = [r for r in old.values() if _is_guard(r) and resource["urn"] in r.get("dependsOn", ())]
    if not guards or resource.get("retainOnDelete"):
        return ""
    return (
        f"; {names.PARK_GUARD} is deleted first and refuses, stopping pulumi up before the instance, unless"
        f" gs://{guards[0]['inputs']['bucket']}/{names.PARK_MARKER} says the run is parked (python -m jobs park)"
    )


def _cascade(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    replaced: Mapping[str, str],
    resources: Mapping[str, Mapping[str, Any]],
) -> tuple[str, str] | None:
    """(action, reason) a resource gets from the replaced or new resources it follows (`replaced`: URN -> action)."""
    if new["type"] == KUBERNETES_PROVIDER_TYPE:
        reason = _provider_replaced(old, new, replaced)
        return ("replace", reason) if reason else None
    provider = new.get("provider", "")
    if provider in replaced:
        return "replace", f"its provider {resources[provider]['name']} is {_done(replaced[provider])}"
    update = None
    for key, urns in sorted(_property_dependencies(new).items()):
        if new["type"] == DYNAMIC_TYPE and key not in _watched(new):
            continue
        fed_by = sorted(urn for urn in urns if urn in replaced)
        if not fed_by:
            continue
        reason = f"{key} comes from {resources[fed_by[0]]['name']}, which is {_done(replaced[fed_by[0]])}"
        if _is_guard(new) and key in park_guard.REPLACING_INPUTS:
            return "replace", reason
        if new["type"] not in SPECIAL_TYPES and replacing(new, key, old["inputs"]):
            return "replace", reason
        update = update or ("update", reason)
    return update


def _job_verdict(
    old: Mapping[str, Any], new: Mapping[str, Any], decided: Mapping[str, tuple[str, str]]
) -> tuple[str, str]:
    """What becomes of the running job (one of JOB_OUTCOMES), and the clause that says why."""
    restarts, stops, starts, loses, goes_on = JOB_OUTCOMES
    # The run's submission, not the import of a parked run (jobs/runs/restore_provider.py), the other dynamic resource.
    jobs = sorted(
        urn for urn, r in (old | new).items() if r["type"] == DYNAMIC_TYPE and "submission" in r.get("inputs", {})
    )
    if not jobs:
        return goes_on, "the stack submits no job (job.submit is false)"
    urn = jobs[0]
    if urn not in old:
        return starts, f"no job ran before: pulumi up submits run {_run(new[urn])}"
    if urn not in new:
        return stops, f"the job submission leaves the program: pulumi up stops run {_run(old[urn])}"
    before, after = _run(old[urn]), _run(new[urn])
    action, reason = decided.get(urn, ("", ""))
    renewed = {c_urn: a for c_urn, (a, _) in decided.items() if a in ("replace", "create")}
    pools = sorted(u for u, a in renewed.items() if a == "replace" and new[u]["type"] == NODE_POOL_TYPE)
    caveat = ""
    if pools:
        caveat = f"; but the replaced node pool {new[pools[0]]['name']} takes away the nodes the Ray pods run on"
    dropped = sorted(u for u, (a, _) in decided.items() if a == "delete" and old[u]["type"] == NODE_POOL_TYPE)
    if dropped and not pools:
        # A rung leaves gpu.capacity: the engine deletes what left the program last, after the ComputeClass
        # stops naming the pool (pulumi/pulumi#9979: "creates all new resources and schedules the deletion
        # of resources at the very end"); GKE drains the pool's nodes as it deletes it.
        caveat = (
            f"; the deleted node pool {old[dropped[0]]['name']} goes last, once the ComputeClass no longer names it:"
            " GPU workers running there lose their nodes, and the guardian resubmits the run from its last"
            " checkpoint on the rungs that remain"
        )
    stays = loses if pools or dropped else goes_on
    if before != after:
        return restarts, f"the run changes ({before} -> {after}): pulumi up stops {before} and submits {after}"
    ray_clusters = [u for u in _property_dependencies(new[urn]).get("cluster_uid", ()) if u in renewed]
    if ray_clusters:
        ray = ray_clusters[0]
        return restarts, (
            f"the RayCluster {new[ray]['name']} is {_done(renewed[ray])}: pulumi up submits run {after} again,"
            " which resumes from its checkpoints"
        )
    if action:
        return stays, f"run {after} and its RayCluster stay ({reason}){caveat}"
    return stays, f"neither the run ({after}) nor the RayCluster changes{caveat}"


REPOSITORY_TYPE = "gcp:artifactregistry/repository:Repository"
"""Type token of the stack's remote repositories, which a plan holds only with `workload.imageSource: registry`."""


def pulls_through_registry(plan: Mapping[str, Any]) -> bool:
    """Whether a plan's pods pull through the stack's remote repositories (`workload.imageSource: registry`, set or
    the default): the plan holds one (infra/registry.py); a plan written before the key had a default reads the same."""
    return any(r.get("custom") and r.get("type") == REPOSITORY_TYPE for r in plan["resources"])


def default_image_source_warning(
    earlier: Mapping[str, Any], new: Mapping[str, Any], configured: str | None, image: str, against: Path
) -> str | None:
    """The warning for a deployed stack whose unset `workload.imageSource` now means `registry` where its earlier
    plan pulled directly (images streamed by default, issue 33 item 4): the pods' new image path replaces the
    RayCluster and restarts the run, which the user may keep from happening by setting `direct`; None otherwise."""
    if configured is not None or pulls_through_registry(earlier) or not pulls_through_registry(new):
        return None
    return (
        f"grpo-gke:workload.imageSource is unset, which means 'registry' for {image} (images are streamed by"
        f" default), and the earlier plan {against / PLAN_FILE} pulled it directly: pulumi up creates the remote"
        " repository and replaces the RayCluster, and the run restarts from its last checkpoint; to keep pulling"
        " directly, run `pulumi config set --path grpo-gke:workload.imageSource direct` before pulumi up"
    )


def _run(resource: Mapping[str, Any]) -> str:
    return str(value_at(resource["inputs"], "submission.metadata.run") or "?")


def render(blast: BlastRadius, against: Path) -> str:
    """The report: a count line, one line per changed resource grouped by action, the job verdict."""
    counts = ", ".join(f"{len(blast.of(action))} to {action}" for action in ACTIONS)
    lines = [f"Against {against / PLAN_FILE}, pulumi up on stack '{blast.stack}' would: {counts}"]
    for action in ACTIONS:
        changes = blast.of(action)
        if not changes:
            continue
        lines.append(f"{HEADINGS[action]}:")
        for change in changes:
            order = (" (delete first)" if change.delete_first else " (create first)") if action == "replace" else ""
            lines.append(f"  {change.name} ({change.type}){order}: {change.reason}")
    answer = "yes" if blast.job_restarts else "no"
    lines.append(f"the running GRPO job restarts: {answer}, because {blast.verdict}")
    return "\n".join(lines)


def effect(blast: BlastRadius) -> str:
    """What a change does, in a few words (the README config table's column)."""
    if not blast.changes:
        return "nothing on a deployed stack"
    provider_replaced = any(c.type == KUBERNETES_PROVIDER_TYPE for c in blast.of("replace"))
    parts = []
    for action, verb in (("replace", "replaces"), ("create", "creates"), ("delete", "deletes"), ("update", "updates")):
        labels: list[str] = []
        for change in blast.of(action):
            if action == "delete" and "retainOnDelete" in change.reason:
                continue
            hidden = change.type == DYNAMIC_TYPE or (
                provider_replaced and change.type.startswith("kubernetes:") and action == "replace"
            )
            if not hidden and change.label not in labels:
                labels.append(change.label)
        if labels:
            parts.append(f"{verb} {', '.join(sorted(labels))}" + (" in place" if action == "update" else ""))
    kept = sorted({c.label for c in blast.of("delete") + blast.of("replace") if "retainOnDelete" in c.reason})
    if kept:
        parts.append(f"keeps the old {', '.join(label.removeprefix('the ') for label in kept)} in the cloud")
    parts.append(blast.job)
    return "; ".join(parts)
