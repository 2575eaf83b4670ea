"""`submit --fresh`: record the next `grpo-gke:job.runGeneration` in the stack file.

The generation is part of the run's identity (jobs.spec.training), so a fresh run of the same spec gets a
new id that stays reproducible: `pulumi up` and every later CLI call read it from
`Pulumi.<stack>.yaml`, as `pulumi config set --path grpo-gke:job.runGeneration N` would write it.
The file is edited as text (one line set or added, comments and secure values untouched) and
read back; an edit that does not read back as N is undone.
"""

from __future__ import annotations

import re
from pathlib import Path

from core.config.model import PROJECT_NAMESPACE

KEY = "runGeneration"
"""The key under `grpo-gke:job`."""

_SECTION = re.compile(rf"^(?P<indent>[ ]+)(?:{PROJECT_NAMESPACE}:)?job:[ ]*(?:#.*)?$")
_CONFIG = re.compile(r"^config:[ ]*(?:#.*)?$")


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def with_generation(text: str, generation: int) -> str | None:
    """`text` of a stack file with `grpo-gke:job.runGeneration: generation`; None when its layout is
    not the block form this edit knows (a flow mapping `job: {...}`, no `config:` line)."""
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines):
        match = _SECTION.match(line.rstrip("\n"))
        if match is None:
            continue
        parent = len(match.group("indent"))
        block = number + 1
        while block < len(lines) and (not lines[block].strip() or _indent(lines[block]) > parent):
            child = lines[block]
            if child.strip() and re.match(rf"^[ ]+{KEY}:", child):
                lines[block] = f"{' ' * _indent(child)}{KEY}: {generation}\n"
                return "".join(lines)
            block += 1
        children = [item for item in lines[number + 1 : block] if item.strip() and not item.lstrip().startswith("#")]
        width = _indent(children[0]) if children else parent + 2
        lines.insert(number + 1, f"{' ' * width}{KEY}: {generation}\n")
        return "".join(lines)
    for number, line in enumerate(lines):
        if _CONFIG.match(line.rstrip("\n")):
            following = [item for item in lines[number + 1 :] if item.strip() and not item.lstrip().startswith("#")]
            width = _indent(following[0]) if following and _indent(following[0]) > 0 else 2
            if not line.endswith("\n"):
                lines[number] = line + "\n"
            block = f"{' ' * width}{PROJECT_NAMESPACE}:job:\n{' ' * (width * 2)}{KEY}: {generation}\n"
            lines.insert(number + 1, block)
            return "".join(lines)
    return None


def record_generation(path: Path, generation: int, read_back) -> None:
    """Write `generation` into the stack file at `path`; `read_back(path)` must then return it, else
    the file is restored and ValueError says so."""
    original = path.read_text()
    edited = with_generation(original, generation)
    if edited is None:
        raise ValueError(
            f"{path}: cannot add {PROJECT_NAMESPACE}:job.{KEY} to this layout; run"
            f" pulumi config set --path {PROJECT_NAMESPACE}:job.{KEY} {generation}, then submit without --fresh"
        )
    path.write_text(edited)
    try:
        found = read_back(path)
    except Exception:
        path.write_text(original)
        raise
    if found != generation:
        path.write_text(original)
        raise ValueError(f"{path}: {PROJECT_NAMESPACE}:job.{KEY} read back as {found}, not {generation}; file restored")
