"""Read `Pulumi.<stack>.yaml` into config values the way the Pulumi CLI hands them to a program.

Objects and lists become JSON, booleans `true`/`false`, numbers their decimal text. A
`secure:` value is encrypted and only the CLI can decrypt it, so offline it stays an opaque
secret placeholder and its key is reported as secret.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

OPAQUE_SECRET = "[secret]"
"""Stand-in value of an encrypted `secure:` config value, which cannot be decrypted offline."""


class StackFileError(Exception):
    """The stack file is missing or is not a Pulumi stack config file."""


@dataclass(frozen=True)
class StackValues:
    """Config values of one stack, as the engine would pass them, and which of them are secret."""

    stack: str
    """Stack name."""
    values: dict[str, str]
    """`namespace:key` -> config value as a string."""
    secret_keys: frozenset[str]
    """Keys whose value is a secret."""


def _as_config_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True)


def _contains_secure(value: Any) -> bool:
    if isinstance(value, dict):
        return set(value) == {"secure"} or any(_contains_secure(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_secure(v) for v in value)
    return False


def _redact_secure(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {"secure"}:
            return OPAQUE_SECRET
        return {k: _redact_secure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact_secure(v) for v in value]
    return value


def stack_file(directory: Path, stack: str) -> Path:
    """Path of `Pulumi.<stack>.yaml` in `directory`."""
    return directory / f"Pulumi.{stack}.yaml"


def stack_name_of(path: Path) -> str:
    """The stack name a `Pulumi.<stack>.yaml` path stands for (its file name without them)."""
    name = path.name
    if name.startswith("Pulumi.") and name.endswith((".yaml", ".yml")):
        return name[len("Pulumi.") :].rsplit(".", 1)[0]
    return path.stem


def read_stack_file(path: Path, project: str, stack: str | None = None) -> StackValues:
    """Config values of the stack file at `path`; keys without a namespace get `project`'s."""
    if not path.is_file():
        raise StackFileError(f"{path}: no such stack file")
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as error:
        raise StackFileError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict) or not isinstance(document.get("config") or {}, dict):
        raise StackFileError(f"{path}: expected a mapping with a 'config:' mapping")
    values: dict[str, str] = {}
    secret_keys: set[str] = set()
    for key, value in (document.get("config") or {}).items():
        full_key = key if ":" in key else f"{project}:{key}"
        if _contains_secure(value):
            secret_keys.add(full_key)
            value = _redact_secure(value)
        values[full_key] = _as_config_string(value)
    return StackValues(stack=stack or stack_name_of(path), values=values, secret_keys=frozenset(secret_keys))
