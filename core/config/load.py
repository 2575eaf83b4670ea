"""Loading: a stack's values decoded, every field validated, the defaults derived (by the job layer's
derivation, passed in) and every cross-rule run, every problem reported together."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import (
    BaseModel,
    TypeAdapter,
    ValidationError,
)

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.config.problems import (
    INTERNAL_FIELDS,
    PROVIDER_FIELDS,
    SECRET_KEYS,
    ConfigError,
    Problem,
    pydantic_problems,
    section_model,
    unknown_key_message,
)
from core.config.rules import CrossRule, control_plane_warnings, cross_check, gated_model_warnings, storage_warnings
from core.stackfile import OPAQUE_SECRET


@dataclass(frozen=True)
class DerivedValue:
    """A default the config derived from the model, the GPU and the node count, and why."""

    key: str
    """Dotted key under `grpo-gke:`, such as `grpo.rolloutTensorParallel`."""
    value: int
    """The value the config holds for it."""
    reason: str
    """What it was derived from, for the plan summary."""

    def __str__(self) -> str:
        return f"{self.key}={self.value} ({self.reason})"


@dataclass(frozen=True)
class LoadedConfig:
    """A validated config and the warnings to show the user."""

    config: StackConfig
    """The validated config, derived defaults filled in."""
    warnings: tuple[str, ...]
    """Lines to show the user (e.g. a plaintext token)."""
    derived: tuple[DerivedValue, ...] = ()
    """The defaults derived into `config`, in key order."""


def _opaque_leaves(value: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Paths of the values that the offline stack reader stands in for with OPAQUE_SECRET."""
    if isinstance(value, dict):
        return [leaf for key, item in sorted(value.items()) for leaf in _opaque_leaves(item, (*path, str(key)))]
    if isinstance(value, list):
        return [leaf for index, item in enumerate(value) for leaf in _opaque_leaves(item, (*path, str(index)))]
    return [path] if value == OPAQUE_SECRET else []


def _misplaced_secrets(full_key: str, value: Any) -> list[Problem]:
    """A secret under a key other than hfToken and secretEnv would land in clear in the manifests and the
    state; each problem says how to move it. Offline the secret leaves are known; under the engine only
    the key is (the whole key is secret once one leaf is)."""
    ns = PROJECT_NAMESPACE
    why = f"is a secret, but only {ns}:hfToken, {ns}:wandbApiKey and {ns}:secretEnv keep secrets out of the manifests and the state"
    problems = []
    for leaf in _opaque_leaves(value) or [()]:
        path = ".".join((full_key, *leaf))
        if full_key == f"{ns}:workload" and leaf == ("ngcApiKeySecretVersion",):
            move = (
                "an NGC API key belongs in Secret Manager, not in the stack config: store it there, then"
                f" pulumi config set --path '{path}' projects/P/secrets/S/versions/N (its version's resource"
                " name, in plaintext)"
            )
        elif full_key == f"{ns}:workload" and len(leaf) == 2 and leaf[0] == "extraEnv":
            move = (
                f"pulumi config rm --path '{path}', then"
                f" pulumi config set --secret --path '{ns}:secretEnv.{leaf[1]}' <value>"
            )
        elif leaf:
            move = f"pulumi config set --path '{path}' <value> (in plaintext)"
        elif not isinstance(value, (dict, list)):
            move = f"pulumi config set {full_key} <value> (in plaintext)"
        else:
            move = (
                f"for an environment variable, pulumi config rm --path '{full_key}.extraEnv.<NAME>', then"
                f" pulumi config set --secret --path '{ns}:secretEnv.<NAME>' <value>; set any other field of"
                f" {full_key} in plaintext"
            )
        problems.append(Problem(path, f"{why}: {move}"))
    return problems


KNOWN_NAMESPACES = (PROJECT_NAMESPACE, "gcp")
"""The config namespaces the program reads: its own and the Google Cloud provider's (gcp:project, gcp:region)."""


def _misspelt_namespace(full_key: str) -> list[Problem]:
    """A key whose namespace is close to one the program reads (`grpo_gke:zone`) would be ignored silently;
    other namespaces (another provider's, `pulumi:`) are left alone."""
    namespace, _, key = full_key.partition(":")
    close = difflib.get_close_matches(namespace, KNOWN_NAMESPACES, n=1, cutoff=0.6)
    if not close or namespace in KNOWN_NAMESPACES:
        return []
    return [Problem(full_key, f"unknown namespace '{namespace}'; did you mean '{close[0]}:{key}'?")]


def _flat_key_problem(full_key: str, section: str, dotted: str) -> Problem:
    """A flat key named like a field (`grpo-gke:gpu.nodes`, which `pulumi config set` without --path stores):
    the advice to set it with --path when that field exists, else the field's "did you mean"."""
    if section != "secretEnv":
        model, path = section_model((section,)), f"{PROJECT_NAMESPACE}:{section}."
        for part in dotted.split("."):
            fields = {field.alias or name: field for name, field in model.model_fields.items()}
            if part not in fields:
                hint = unknown_key_message(part, fields, path).removeprefix("unknown key")
                return Problem(full_key, f"is a flat key naming no field of {path.rstrip('.')}{hint}")
            annotation = fields[part].annotation
            if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
                break
            model, path = annotation, f"{path}{part}."
    secret = "--secret " if section == "secretEnv" else ""
    return Problem(
        full_key,
        f"is a flat key, not a field of {PROJECT_NAMESPACE}:{section}: pulumi config rm {full_key}, then"
        f" pulumi config set {secret}--path {full_key} <value>",
    )


def _decode(raw: Any) -> Any:
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw


def _without_invalid(model: type[BaseModel], data: Mapping[str, Any], invalid: set[tuple[Any, ...]]) -> BaseModel:
    """`model` built from `data` without the fields at the `invalid` locations: reading one of them
    raises AttributeError, so a rule that needs a refused key cannot run on a stand-in value."""
    values: dict[str, Any] = {}
    left_out = set()
    for name, field in model.model_fields.items():
        alias = field.alias or name
        inner = {loc[1:] for loc in invalid if loc[:1] == (alias,) and len(loc) > 1}
        if (alias,) in invalid:
            left_out.add(name)
        elif alias not in data:
            continue
        elif isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            values[name] = _without_invalid(field.annotation, data[alias], inner)
        elif inner:
            left_out.add(name)
        else:
            values[name] = TypeAdapter(field.annotation).validate_python(data[alias])
    partial = model.model_construct(**values)
    for name in left_out:
        partial.__dict__.pop(name, None)
    return partial


def _cross_check_what_validated(
    data: Mapping[str, Any], error: ValidationError, derive: Derivation, rules: tuple[CrossRule, ...]
) -> list[Problem]:
    """The cross rules whose keys all validated, run on the config without the refused keys."""
    partial = _without_invalid(StackConfig, data, {tuple(item["loc"]) for item in error.errors()})
    try:
        partial, _ = derive(partial)
    except AttributeError:
        # Derivation read a refused key: the batch rules would judge underived (None) sizes, so they wait.
        rules = tuple(rule for rule in rules if not rule.reads_derived)
    problems = []
    for rule in rules:
        try:
            problems.extend(rule.check(partial))
        except AttributeError:
            continue  # the rule reads a key refused above
    return problems


Derivation = Callable[[StackConfig], tuple[StackConfig, tuple[DerivedValue, ...]]]
"""Fills the defaults derived from other keys, returning the config and what it derived (jobs.spec.defaults)."""


def parse_config(
    values: Mapping[str, Any],
    secret_keys: Iterable[str],
    stack: str,
    derive: Derivation,
    rules: tuple[CrossRule, ...],
) -> LoadedConfig:
    """Validate Pulumi config values (`ns:key` -> raw string as the engine passes them).

    Raises ConfigError with one problem per refused key.
    """
    secret_keys = set(secret_keys)
    secret_sections: set[str] = set()
    problems: list[Problem] = []
    warnings: list[str] = []
    data: dict[str, Any] = {"stack": stack}
    structured = {"cluster", "gpu", "storage", "network", "workload", "grpo", "job", "pricing", "tracking"}

    if "gcp:project" in values:
        data["project"] = values["gcp:project"]
    if "gcp:region" in values:
        data["region"] = values["gcp:region"]

    prefix = f"{PROJECT_NAMESPACE}:"
    known = {field.alias or name for name, field in StackConfig.model_fields.items()}
    known -= INTERNAL_FIELDS | set(PROVIDER_FIELDS)
    for full_key in sorted(values):
        if not full_key.startswith(prefix):
            problems.extend(_misspelt_namespace(full_key))
            continue
        key = full_key[len(prefix) :]
        section, dotted, field_path = key.partition(".")
        if dotted and section in (*structured, "secretEnv"):
            problems.append(_flat_key_problem(full_key, section, field_path))
            continue
        if key not in known:
            problems.append(Problem(full_key, unknown_key_message(key, known, prefix)))
            continue
        raw = values[full_key]
        if key not in SECRET_KEYS and full_key in secret_keys:
            secret_sections.add(key)
            problems.extend(_misplaced_secrets(full_key, _decode(raw) if key in structured else raw))
        if key == "secretEnv":
            data["secretEnv"] = _decode(raw)
            if full_key not in secret_keys:
                warnings.append(
                    f"{full_key} is set in plaintext; store each value as a secret:"
                    f" pulumi config set --secret --path '{full_key}.<NAME>' <value>"
                )
            continue
        if key in ("hfToken", "wandbApiKey"):
            data[key] = raw
            if full_key not in secret_keys:
                warnings.append(
                    f"{full_key} is set in plaintext; store it as a secret:"
                    f" pulumi config set --secret {full_key} <{'token' if key == 'hfToken' else 'key'}>"
                )
            continue
        data[key] = _decode(raw) if key in structured else raw

    try:
        config = StackConfig.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as error:
        problems.extend(pydantic_problems(error, secret_sections))
        if not secret_sections:
            problems.extend(_cross_check_what_validated(data, error, derive, rules))
        raise ConfigError(problems) from None
    if secret_sections:
        # The cross-key messages quote values; none of a misplaced secret may be shown.
        raise ConfigError(problems)
    # Derived once, here, so that every reader (program, plan, job CLI) sees the same values and the
    # cross checks hold them to the rules an explicit value meets. The job layer supplies `derive`
    # (jobs/spec/load.py): the derivation needs its recipes and capacity formula, and core never imports jobs.
    config, derived = derive(config)
    problems.extend(cross_check(config, rules))
    if problems:
        raise ConfigError(problems)
    warnings.extend(control_plane_warnings(config))
    warnings.extend(storage_warnings(config))
    warnings.extend(gated_model_warnings(config))
    return LoadedConfig(config=config, warnings=tuple(warnings), derived=derived)


def pulumi_values() -> tuple[dict[str, Any], set[str], str]:
    """The running Pulumi program's config values, its secret keys and the stack's name (engine or mocks)."""
    # pulumi: +0.2-0.4 s on every `python -m jobs` command, which reads the stack file instead (python -X importtime)
    import pulumi
    from pulumi.runtime import config as runtime_config

    values = dict(runtime_config.get_config_env())
    values.update(runtime_config.CONFIG.get())
    secret_keys = set(runtime_config.get_config_secret_keys_env())
    secret_keys |= {key for key in values if runtime_config.is_config_secret(key)}
    return values, secret_keys, pulumi.get_stack()
