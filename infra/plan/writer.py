"""Write a recorded program run as plan.json, k8s.yaml, job.json and graph.mmd."""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

from infra.plan.harness import Recording
from infra.plan.monitor import STACK_TYPE, Recorded

DYNAMIC_TYPE = "pulumi-python:dynamic:Resource"
"""Type token of Pulumi dynamic resources (the post-deploy job submission)."""

DYNAMIC_PROVIDER_INPUT = "__provider"
"""Input holding a dynamic resource's pickled provider: code, not configuration."""

REDACTED = "[redacted]"
"""What a Secret's values are written as in k8s.yaml."""


def _dumps(document: Any) -> str:
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def _plan_inputs(resource: Recorded) -> dict[str, Any]:
    inputs = dict(resource.inputs)
    if DYNAMIC_PROVIDER_INPUT in inputs:
        inputs[DYNAMIC_PROVIDER_INPUT] = "[dynamic provider code]"
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
    """Every Kubernetes object the stack applies, in API form, Secret values redacted."""
    objects = []
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
        objects.append(manifest)

    def order(manifest: dict[str, Any]) -> tuple[str, str, str, str]:
        metadata = manifest.get("metadata", {})
        return (
            str(manifest.get("apiVersion", "")),
            str(manifest.get("kind", "")),
            str(metadata.get("namespace", "")),
            str(metadata.get("name", "")),
        )

    return sorted(objects, key=order)


class _ManifestDumper(yaml.SafeDumper):
    """Writes multi-line strings (scripts in ConfigMaps) as readable literal blocks."""


def _represent_string(dumper: yaml.SafeDumper, text: str) -> yaml.ScalarNode:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_ManifestDumper.add_representer(str, _represent_string)


def render_k8s_yaml(recording: Recording) -> str:
    """k8s.yaml: the Kubernetes objects as multi-document YAML."""
    documents = kubernetes_objects(recording)
    return yaml.dump_all(
        documents, Dumper=_ManifestDumper, sort_keys=True, explicit_start=True, default_flow_style=False, width=120
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


def _node_id(urn: str) -> str:
    return "n" + str(abs(hash_stable(urn)))


def hash_stable(text: str) -> int:
    """A process-independent 32-bit hash (Python's hash() is salted per process)."""
    value = 2166136261
    for byte in text.encode():
        value = ((value ^ byte) * 16777619) & 0xFFFFFFFF
    return value


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
    lines = ["flowchart LR"]
    for urn in sorted(tops):
        top = tops[urn]
        label = f"{top.name}<br/>{top.type}<br/>{counts[urn]} resources"
        lines.append(f'  {_node_id(urn)}["{label}"]')
    for source, target in sorted(edges, key=lambda edge: (tops[edge[0]].name, tops[edge[1]].name)):
        lines.append(f"  {_node_id(source)} --> {_node_id(target)}")
    return "\n".join(lines) + "\n"


def summary(recording: Recording, facts: dict[str, str], out_dir: Path) -> str:
    """A short readable summary: resources per component, the key facts, where the files are."""
    per_component: dict[str, int] = defaultdict(int)
    for resource in recording.resources:
        if resource.custom:
            top = top_component(recording, resource)
            per_component[f"{top.name} ({top.type})"] += 1
    total = sum(per_component.values())
    lines = [f"Plan of stack '{recording.stack}': {total} resources"]
    lines += [f"  {count:4d}  {name}" for name, count in sorted(per_component.items())]
    lines += [f"  {key}: {value}" for key, value in facts.items()]
    lines.append(f"Wrote plan.json, k8s.yaml, job.json and graph.mmd to {out_dir}")
    return "\n".join(lines)


def write_plan(recording: Recording, out_dir: Path) -> list[Path]:
    """Write the four plan files into `out_dir`; return their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "plan.json": render_plan_json(recording),
        "k8s.yaml": render_k8s_yaml(recording),
        "job.json": render_job_json(recording),
        "graph.mmd": render_graph_mmd(recording),
    }
    paths = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text)
        paths.append(path)
    return paths
