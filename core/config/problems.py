"""The problem type of a refused config, ConfigError, and the messages of pydantic's errors: each names
the key (`grpo-gke:gpu.nodes`) and what to do."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    ValidationError,
)

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.stackfile import OPAQUE_SECRET


@dataclass(frozen=True)
class Problem:
    """One refused config value: its full key path and what was expected."""

    path: str
    """Full key, such as `grpo-gke:gpu.nodes`."""
    message: str
    """What is wrong and what was expected."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class ConfigError(Exception):
    """The stack config was refused; `problems` holds one line per problem."""

    def __init__(self, problems: Iterable[Problem]):
        self.problems = sorted(set(problems), key=lambda p: (p.path, p.message))
        super().__init__("\n".join(str(problem) for problem in self.problems))


SECRET_KEYS = ("hfToken", "wandbApiKey", "secretEnv")
"""The only `grpo-gke:` keys that may hold secrets: their values reach the pods through Kubernetes Secrets."""

PROVIDER_FIELDS = {"project": "gcp:project", "region": "gcp:region"}
"""StackConfig fields that are the provider's own keys, by the key the user writes."""

INTERNAL_FIELDS = {"stack"}
"""StackConfig fields the loader fills, never the user."""


def key_path(loc: Iterable[Any]) -> str:
    """The user-facing key of a pydantic error location: `grpo-gke:gpu.nodes`."""
    parts = [str(part) for part in loc]
    if not parts:
        return f"{PROJECT_NAMESPACE}:"
    head, rest = parts[0], parts[1:]
    if head in PROVIDER_FIELDS:
        return PROVIDER_FIELDS[head]
    return f"{PROJECT_NAMESPACE}:{'.'.join([head, *rest])}"


def _allowed_keys(model: type[BaseModel]) -> list[str]:
    return sorted(field.alias or name for name, field in model.model_fields.items())


def section_model(loc: tuple[Any, ...]) -> type[BaseModel]:
    """The model of the section at `loc` (the deepest model along it), StackConfig for an empty one."""
    model: type[BaseModel] = StackConfig
    for part in loc:
        field = next((f for n, f in model.model_fields.items() if (f.alias or n) == part), None)
        annotation = getattr(field, "annotation", None)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            model = annotation
        else:
            break
    return model


def unknown_key_message(key: str, known: Iterable[str], prefix: str = "") -> str:
    """The message of an unknown key: the closest known one (written with `prefix`), then every known key."""
    known = sorted(known)
    close = difflib.get_close_matches(key, known, n=1)
    hint = f"; did you mean '{prefix}{close[0]}'?" if close else ""
    return f"unknown key{hint} (known: {', '.join(known)})"


def yaml_boolean_hint(value: Any) -> str:
    """For a boolean where a word is expected: YAML 1.1 (PyYAML, the offline plan's reader) reads an unquoted
    on/yes/true as true and off/no/false as false (https://yaml.org/type/bool.html), so say to quote the word."""
    if not isinstance(value, bool):
        return ""
    words = "on, yes or true" if value else "off, no or false"
    return f' (YAML reads an unquoted {words} as {str(value).lower()}: quote the word, e.g. "{words.split(",")[0]}")'


def _describe(error: Mapping[str, Any]) -> str:
    kind, ctx, value = error["type"], error.get("ctx") or {}, error.get("input")
    if kind == "extra_forbidden":
        loc = tuple(error["loc"])
        allowed = [k for k in _allowed_keys(section_model(loc[:-1])) if k not in INTERNAL_FIELDS]
        return unknown_key_message(str(loc[-1]), allowed)
    if kind == "missing":
        loc = tuple(error["loc"])
        if len(loc) == 1 and loc[0] in PROVIDER_FIELDS:
            return f"is required (pulumi config set {PROVIDER_FIELDS[loc[0]]} ...)"
        return "is required"
    if kind == "greater_than_equal":
        return f"must be at least {ctx['ge']}, got {value!r}"
    if kind == "less_than_equal":
        return f"must be at most {ctx['le']}, got {value!r}"
    if kind == "greater_than":
        return f"must be greater than {ctx['gt']}, got {value!r}"
    if kind == "less_than":
        return f"must be less than {ctx['lt']}, got {value!r}"
    if kind == "literal_error":
        return f"must be one of {ctx['expected']}, got {value!r}{yaml_boolean_hint(value)}"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"must be a whole number, got {value!r}"
    if kind in ("float_type", "float_parsing"):
        return f"must be a number, got {value!r}"
    if kind in ("bool_type", "bool_parsing"):
        return f"must be true or false, got {value!r}"
    if kind == "list_type":
        return f"must be a list, got {value!r}"
    if kind in ("string_type",):
        return f"must be a string, got {value!r}{yaml_boolean_hint(value)}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be an object of keys, got {value!r}"
    if kind == "value_error":
        return str(ctx.get("error", error["msg"]))
    return str(error["msg"])


def pydantic_problems(error: ValidationError, secret_sections: Iterable[str] = ()) -> list[Problem]:
    """One problem per pydantic error, none quoting a value under a secret section."""
    hidden = {*SECRET_KEYS, *secret_sections}
    problems = []
    for item in error.errors(include_url=False):
        loc = tuple(item["loc"])
        if loc[:1] and loc[0] in hidden:
            # Secret values stay out of the message, also where a validator's own text quotes them ({value!r}).
            value = item.get("input")
            message = _describe({**item, "input": OPAQUE_SECRET})
            if isinstance(value, str) and value:
                message = message.replace(repr(value), repr(OPAQUE_SECRET))
        else:
            # A value error on a dict key (extraEnv) names the dict.
            message = _describe(item)
        problems.append(Problem(key_path(loc), message))
    return problems
