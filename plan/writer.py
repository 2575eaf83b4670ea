"""Write a recorded program run as plan.json, k8s.yaml, job.json and graph.mmd (and cost.json beside them)."""

from __future__ import annotations

import hashlib
import heapq
import json
import re
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from core.facts.changes import KUBERNETES_APPLY_ORDER
from plan.harness import Recording
from plan.monitor import STACK_TYPE, Recorded

DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"
"""Type token of Pulumi dynamic resources (the post-deploy job submission)."""

DYNAMIC_PROVIDER_INPUT = "__provider"
"""Input holding a dynamic resource's pickled provider: code, not configuration."""

REDACTED = "[redacted]"
"""What a Secret's values are written as in k8s.yaml."""


def _dumps(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


CONFIG_MAP_TYPE = "kubernetes:core/v1:ConfigMap"
"""Type token of a ConfigMap, whose multi-line values (scripts) plan.json refers to by file."""


def _attached_name(resource: Recorded, key: str) -> str:
    """File name of a ConfigMap value written beside the plan: `<ConfigMap name>.<key>`."""
    return f"{resource.inputs.get('metadata', {}).get('name', resource.name)}.{key}"


def _attached(resource: Recorded) -> dict[str, str]:
    """The multi-line values of a ConfigMap (scripts, files), by their key."""
    if not resource.custom or resource.type != CONFIG_MAP_TYPE:
        return {}
    data = resource.inputs.get("data") or {}
    return {key: text for key, text in sorted(data.items()) if isinstance(text, str) and "\n" in text}


def attached_files(recording: Recording) -> dict[str, str]:
    """The files plan.json refers to instead of holding them (ConfigMap scripts): file name -> text."""
    return {
        _attached_name(resource, key): text
        for resource in recording.resources
        for key, text in _attached(resource).items()
    }


def file_reference(name: str, text: str) -> str:
    """What plan.json holds in place of a file written beside it: its content hash and file name."""
    return f"sha256:{hashlib.sha256(text.encode()).hexdigest()} (file {name} beside this plan)"


def _plan_inputs(resource: Recorded) -> dict[str, Any]:
    inputs = dict(resource.inputs)
    if DYNAMIC_PROVIDER_INPUT in inputs:
        inputs[DYNAMIC_PROVIDER_INPUT] = "[dynamic provider code]"
    attached = _attached(resource)
    if attached:
        inputs["data"] = {
            key: file_reference(_attached_name(resource, key), text) if key in attached else text
            for key, text in inputs["data"].items()
        }
    return inputs


def render_plan_json(recording: Recording) -> str:
    """plan.json: every resource with parent, provider, dependencies (also per input), its resource options
    and wire-form inputs."""
    resources = [
        {
            "urn": resource.urn,
            "type": resource.type,
            "name": resource.name,
            "custom": resource.custom,
            "parent": resource.parent,
            "provider": resource.provider,
            "dependsOn": list(resource.depends_on),
            "propertyDependencies": {key: list(urns) for key, urns in resource.property_dependencies.items()},
            "protect": resource.protect,
            "retainOnDelete": resource.retain_on_delete,
            "deleteBeforeReplace": resource.delete_before_replace,
            "replaceOnChanges": list(resource.replace_on_changes),
            "ignoreChanges": list(resource.ignore_changes),
            "customTimeouts": resource.custom_timeouts,
            "additionalSecretOutputs": list(resource.additional_secret_outputs),
            "inputs": _plan_inputs(resource),
        }
        for resource in sorted(recording.resources, key=lambda r: r.urn)
    ]
    return _dumps(
        {"project": recording.project, "stack": recording.stack, "resources": resources, "outputs": recording.outputs}
    )


def kubernetes_objects(recording: Recording) -> list[dict[str, Any]]:
    """Every Kubernetes object the stack applies, in API form, Secret values redacted, in apply order."""
    objects: dict[str, dict[str, Any]] = {}
    for resource in recording.resources:
        if not resource.custom or not resource.type.startswith("kubernetes:"):
            continue
        manifest = {key: value for key, value in resource.inputs.items() if not key.startswith("__")}
        if manifest.get("kind") == "Secret":
            for field in ("data", "stringData"):
                if isinstance(manifest.get(field), dict):
                    manifest[field] = {key: REDACTED for key in manifest[field]}
                elif field in manifest:
                    manifest[field] = REDACTED
        objects[resource.urn] = manifest
    return [objects[urn] for urn in apply_order(recording, list(objects))]


def _kind_rank(kind: str) -> int:
    """Position of a kind in the apply order; custom resources after every listed kind."""
    order = KUBERNETES_APPLY_ORDER
    return order.index(kind) if kind in order else len(order)


def _waits_for(recording: Recording, urns: list[str]) -> dict[str, set[str]]:
    """For each of `urns`, the others among them it waits for, directly or through any resource
    (a dependency on a component waits for everything below it)."""
    by_urn = {resource.urn: resource for resource in recording.resources}
    children: dict[str, list[str]] = defaultdict(list)
    for resource in recording.resources:
        children[resource.parent].append(resource.urn)
    wanted = set(urns)
    result = {}
    for urn in urns:
        seen: set[str] = set()
        pending = list(by_urn[urn].depends_on)
        while pending:
            current = pending.pop()
            if current in seen:
                continue
            seen.add(current)
            pending.extend(children[current])
            if current in by_urn:
                pending.extend(by_urn[current].depends_on)
        result[urn] = (seen & wanted) - {urn}
    return result


def apply_order(recording: Recording, urns: list[str]) -> list[str]:
    """`urns` (Kubernetes objects) in apply order: each after everything it waits for, and among
    those free to go, by kind (KUBERNETES_APPLY_ORDER, then by name), apiVersion, namespace and name."""

    def key(urn: str) -> tuple[int, str, str, str, str, str]:
        inputs = recording.by_urn(urn).inputs
        metadata = inputs.get("metadata", {})
        kind = str(inputs.get("kind", ""))
        return (_kind_rank(kind), kind, str(inputs.get("apiVersion", "")), str(metadata.get("namespace", "")),
                str(metadata.get("name", "")), urn)  # fmt: skip

    waits_for = _waits_for(recording, urns)
    waiting = {urn: set(before) for urn, before in waits_for.items()}
    ready = [key(urn) for urn, before in waiting.items() if not before]
    heapq.heapify(ready)
    ordered: list[str] = []
    while ready:
        urn = heapq.heappop(ready)[-1]
        ordered.append(urn)
        for other, before in waiting.items():
            if urn in before:
                before.discard(urn)
                if not before:
                    heapq.heappush(ready, key(other))
    if len(ordered) != len(urns):
        raise ValueError(f"Kubernetes objects wait for each other in a cycle: {sorted(set(urns) - set(ordered))}")
    return ordered


class _ManifestDumper(getattr(yaml, "CSafeDumper", yaml.SafeDumper)):  # type: ignore[misc]
    """Writes multi-line strings (scripts in ConfigMaps) as readable literal blocks, with libyaml's emitter
    where PyYAML was built with it (its output is the pure-Python emitter's, several times faster)."""


def _represent_string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_ManifestDumper.add_representer(str, _represent_string)


def render_k8s_yaml(recording: Recording) -> str:
    """k8s.yaml: the Kubernetes objects as multi-document YAML, in the order they can be applied."""
    return manifests_yaml(kubernetes_objects(recording))


def manifests_yaml(documents: list[dict[str, Any]]) -> str:
    """Kubernetes objects as k8s.yaml writes them: multi-document YAML, keys sorted, scripts as blocks."""
    return yaml.dump_all(
        documents,
        Dumper=_ManifestDumper,
        sort_keys=True,
        explicit_start=True,
        default_flow_style=False,
        width=120,
        allow_unicode=True,
    )


def job_submission(recording: Recording) -> dict[str, Any]:
    """The keyword arguments the post-deploy step passes to `JobSubmissionClient.submit_job`."""
    for resource in recording.by_type(DYNAMIC_TYPE):
        if "submission" in resource.inputs:
            return resource.inputs["submission"]
    return {}


def render_job_json(recording: Recording) -> str:
    """job.json: the Ray job the post-deploy step would submit (empty when it submits none)."""
    return _dumps(job_submission(recording))


def top_component(recording: Recording, resource: Recorded) -> Recorded:
    """The outermost resource below the stack that holds `resource` (itself when top-level)."""
    by_urn = {r.urn: r for r in recording.resources}
    current = resource
    while current.parent in by_urn and by_urn[current.parent].type != STACK_TYPE:
        current = by_urn[current.parent]
    return current


def node_ids(tops: dict[str, Recorded]) -> dict[str, str]:
    """A readable Mermaid node id per top-level component, from its logical name (letters, digits
    and `_`); a name two components share gets the type's last part added."""
    names = Counter(top.name for top in tops.values())
    ids = {}
    for urn, top in sorted(tops.items()):
        text = top.name if names[top.name] == 1 else f"{top.name}_{top.type.rsplit(':', 1)[-1]}"
        ids[urn] = re.sub(r"[^A-Za-z0-9_]", "_", text)
    return ids


def plural(count: int, noun: str) -> str:
    """`1 resource`, `2 resources`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def transitive_reduction(edges: dict[tuple[str, str], None]) -> dict[tuple[str, str], None]:
    """Drop every edge a -> c that another path a -> ... -> c already implies."""
    successors: dict[str, set[str]] = defaultdict(set)
    for source, target in edges:
        successors[source].add(target)

    def reachable_without(source: str, target: str) -> bool:
        stack = [node for node in successors[source] if node != target]
        seen = set(stack)
        while stack:
            node = stack.pop()
            if node == target:
                return True
            for following in successors[node] - seen:
                seen.add(following)
                stack.append(following)
        return False

    return {edge: None for edge in edges if not reachable_without(*edge)}


def render_graph_mmd(recording: Recording) -> str:
    """graph.mmd: the top-level components and what waits for what (Mermaid flowchart), each
    ordering shown once: an edge implied by a longer path is left out."""
    tops: dict[str, Recorded] = {}
    owner: dict[str, str] = {}
    counts: Counter[str] = Counter()
    for resource in recording.resources:
        top = top_component(recording, resource)
        tops[top.urn] = top
        owner[resource.urn] = top.urn
        if resource.custom:
            counts[top.urn] += 1
    edges: dict[tuple[str, str], None] = {}
    for resource in recording.resources:
        waits_for = list(resource.depends_on) + ([resource.provider] if resource.provider else [])
        for dependency in waits_for:
            if dependency in owner and owner[dependency] != owner[resource.urn]:
                edges[(owner[dependency], owner[resource.urn])] = None
    edges = transitive_reduction(edges)
    ids = node_ids(tops)
    lines = ["flowchart LR"]
    for urn in sorted(tops):
        top = tops[urn]
        label = f"{top.name}<br/>{top.type}<br/>{plural(counts[urn], 'resource')}"
        lines.append(f'  {ids[urn]}["{label}"]')
    for source, target in sorted(edges, key=lambda edge: (tops[edge[0]].name, tops[edge[1]].name)):
        lines.append(f"  {ids[source]} --> {ids[target]}")
    return "\n".join(lines) + "\n"


def plan_files(recording: Recording) -> dict[str, str]:
    """Every file of the plan by name: plan.json, k8s.yaml, job.json, graph.mmd and the ConfigMap
    scripts plan.json refers to by content hash."""
    return {
        "plan.json": render_plan_json(recording),
        "k8s.yaml": render_k8s_yaml(recording),
        "job.json": render_job_json(recording),
        "graph.mmd": render_graph_mmd(recording),
        **attached_files(recording),
    }


MANY_FILES = 3
"""A ConfigMap whose values fill more files than this beside the plan is named once in the summary (`<name>.*`)."""


def written_names(files: list[str]) -> list[str]:
    """The written files as the summary names them: a ConfigMap's many files (the guardian's code) as one entry."""
    prefixes = [name.split(".", 1)[0] for name in files]
    shown: list[str] = []
    for name, prefix in zip(files, prefixes, strict=True):
        count = prefixes.count(prefix)
        if count <= MANY_FILES:
            shown.append(name)
        elif f"{prefix}.* ({count} files)" not in shown:
            shown.append(f"{prefix}.* ({count} files)")
    return shown


def summary(
    recording: Recording,
    facts: dict[str, str],
    out_dir: Path,
    cost_lines: Sequence[str] = (),
    extra_files: Sequence[str] = (),
) -> str:
    """A short readable summary: resources per component, the key facts, the cost lines, where the files
    are (the plan files, then `extra_files` written beside them)."""
    per_component: dict[str, int] = defaultdict(int)
    for resource in recording.resources:
        if resource.custom:
            top = top_component(recording, resource)
            per_component[f"{top.name} ({top.type})"] += 1
    total = sum(per_component.values())
    lines = [f"Plan of stack '{recording.stack}': {plural(total, 'resource')}"]
    lines += [f"  {count:4d}  {name}" for name, count in sorted(per_component.items())]
    lines += [f"  {key}: {value}" for key, value in facts.items()]
    lines += [f"  {line}" for line in cost_lines]
    *first, last = written_names([*plan_files(recording), *extra_files])
    lines.append(f"Wrote {', '.join(first)} and {last} to {out_dir}")
    return "\n".join(lines)


def write_plan(recording: Recording, out_dir: Path, extra_files: Mapping[str, str] | None = None) -> list[Path]:
    """Write the plan files (plan_files) and `extra_files` (name -> text, such as cost.json) into `out_dir`;
    return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, text in {**plan_files(recording), **(extra_files or {})}.items():
        path = out_dir / name
        path.write_text(text, encoding="utf-8")
        paths.append(path)
    return paths
