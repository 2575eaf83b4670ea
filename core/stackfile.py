"""Read `Pulumi.<stack>.yaml` into config values the way the Pulumi CLI hands them to a program.

Objects and lists become JSON, booleans `true`/`false`, numbers their decimal text. A
`secure:` value is encrypted and only the CLI can decrypt it, so offline it stays an opaque
secret placeholder and its key is reported as secret.
"""

from __future__ import annotations

import datetime
import difflib
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


def _as_text(value: Any) -> str:
    """A YAML value JSON has no type for: a date as the text it was written as; anything else
    (a !!binary or !!set value) is refused."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    raise TypeError(f"a YAML {type(value).__name__} value; write it as a string, number, boolean, list or mapping")


def _as_config_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True, default=_as_text)
    return _as_text(value)


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


def stack_names(directory: Path) -> list[str]:
    """Names of the stacks whose `Pulumi.<stack>.yaml` lies in `directory`, sorted."""
    return sorted(stack_name_of(path) for path in directory.glob("Pulumi.*.yaml") if path.is_file())


def _missing(path: Path) -> StackFileError:
    """A missing stack file, with the stacks that do exist beside it."""
    existing = stack_names(path.parent) if path.parent.is_dir() else []
    known = f" (stacks here: {', '.join(existing)})" if existing else ""
    return StackFileError(f"{path}: no such stack file{known}")


def _text_of(path: Path) -> str:
    """The file's text, or a StackFileError saying why it cannot be read."""
    if path.is_dir():
        raise StackFileError(f"{path}: is a directory, not a stack file; name a Pulumi.<stack>.yaml file")
    if not path.exists():
        raise _missing(path)
    if not path.is_file():
        raise StackFileError(f"{path}: is not a regular file; name a Pulumi.<stack>.yaml file")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise StackFileError(
            f"{path}: is not UTF-8 text (byte 0x{error.object[error.start]:02x} at offset {error.start}); save it as UTF-8"
        ) from None
    except OSError as error:
        raise StackFileError(f"{path}: cannot be read: {error.strerror or error}") from None


STACK_FILE_KEYS = ("config", "encryptedkey", "encryptionsalt", "environment", "secretsprovider")
"""The top-level keys of a stack file: the YAML fields of pulumi/pulumi sdk/go/common/workspace/project.go
`type ProjectStack` (stored copy with `environment`; the pinned v3.272.0's own copy was not read)."""


class _DuplicateKey(Exception):
    """A key given twice in one YAML mapping, at two lines (1-based)."""

    def __init__(self, key: Any, first: int, second: int):
        super().__init__(key, first, second)
        self.key, self.first, self.second = key, first, second


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, except that a key given twice in one mapping is an error (the safe loader
    keeps the last value silently)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        try:
            first = seen.setdefault(key, key_node.start_mark.line + 1)
        except TypeError:
            continue  # an unhashable key: _non_string_key names it
        if first != key_node.start_mark.line + 1:
            raise _DuplicateKey(key, first, key_node.start_mark.line + 1)
    return yaml.SafeLoader.construct_mapping(loader, node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _key_path_at(node: yaml.Node | None, line: int, parents: tuple[str, ...] = ()) -> str | None:
    """The dotted path of the mapping key on `line` (1-based), the stack file's `config:` left out
    (`grpo-gke:gpu.type`), or None when no scalar key lies on that line."""
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                continue
            path = (*parents, key_node.value) if parents or key_node.value != "config" else ()
            if key_node.start_mark.line + 1 == line:
                return ".".join((*parents, key_node.value))
            found = _key_path_at(value_node, line, path)
            if found:
                return found
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found = _key_path_at(item, line, parents)
            if found:
                return found
    return None


def _document_of(path: Path, text: str) -> Any:
    """The parsed YAML, or a StackFileError naming the file, line and column."""
    try:
        return yaml.load(text, Loader=_StrictLoader)
    except _DuplicateKey as error:
        key = _key_path_at(yaml.compose(text, Loader=yaml.SafeLoader), error.second) or str(error.key)
        raise StackFileError(
            f"{path}:{error.second}: {key} is given twice in one mapping (lines {error.first} and"
            f" {error.second}); keep one"
        ) from None
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        what = error.problem or error.context or "unreadable"
        if error.problem and error.context and error.context_mark and error.context_mark is not mark:
            what += f" ({error.context} from line {error.context_mark.line + 1})"
        raise StackFileError(f"{where}: not valid YAML: {what}") from None
    except yaml.YAMLError as error:
        raise StackFileError(f"{path}: not valid YAML: {error}") from None


def _non_string_key(value: Any, path: str) -> str | None:
    """The dotted path of the first key in `value` that is not a string, or None."""
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}.{key!r}" if path else repr(key)
            found = _non_string_key(item, f"{path}.{key}" if path else key)
            if found:
                return found
    if isinstance(value, list):
        for index, item in enumerate(value):
            found = _non_string_key(item, f"{path}[{index}]")
            if found:
                return found
    return None


def _config_of(path: Path, document: Any) -> dict[str, Any]:
    """The `config:` mapping of a parsed stack file, or a StackFileError saying what is wrong."""
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise StackFileError(f"{path}: expected a mapping with a 'config:' mapping")
    unwrapped = sorted(str(key) for key in document if ":" in str(key))
    if unwrapped:
        raise StackFileError(
            f"{path}: {', '.join(unwrapped)} must sit under a top-level 'config:' mapping"
            " (indent them below a line 'config:')"
        )
    unknown = sorted(str(key) for key in document if key not in STACK_FILE_KEYS)
    if unknown:
        close = difflib.get_close_matches(unknown[0], STACK_FILE_KEYS, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise StackFileError(
            f"{path}: unknown top-level key '{unknown[0]}'{hint} (a stack file holds {', '.join(STACK_FILE_KEYS)})"
        )
    config = document.get("config") or {}
    if not isinstance(config, dict):
        raise StackFileError(f"{path}: expected a mapping with a 'config:' mapping")
    bad_key = _non_string_key(config, "")
    if bad_key:
        raise StackFileError(f"{path}: config key {bad_key} is not a string; keys are names such as grpo-gke:gpu")
    return config


def read_stack_file(path: Path, project: str, stack: str | None = None) -> StackValues:
    """Config values of the stack file at `path`; keys without a namespace get `project`'s.

    Raises StackFileError, naming the file, for anything that keeps it from being read as one.
    """
    config = _config_of(path, _document_of(path, _text_of(path)))
    values: dict[str, str] = {}
    secret_keys: set[str] = set()
    for key, value in config.items():
        full_key = key if ":" in key else f"{project}:{key}"
        if _contains_secure(value):
            secret_keys.add(full_key)
            value = _redact_secure(value)
        try:
            values[full_key] = _as_config_string(value)
        except TypeError as error:
            raise StackFileError(f"{path}: {full_key} holds {error}") from None
    return StackValues(stack=stack or stack_name_of(path), values=values, secret_keys=frozenset(secret_keys))
