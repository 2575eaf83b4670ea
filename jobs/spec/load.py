"""The one validation entry point: read a stack's values, validate every field, derive the defaults and run
every cross-rule, the config's (core.config.rules.CONFIG_RULES) and the job's (jobs/spec/validate.py JOB_RULES). The program, the
plan CLI and the job CLI call it instead of repeating the sequence. It sits at the jobs layer because the
derived defaults need the job's recipes and capacity formula; core never imports jobs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from core.config.load import LoadedConfig, parse_config, pulumi_values
from core.config.rules import CONFIG_RULES
from jobs.spec.defaults import derive_defaults
from jobs.spec.validate import JOB_RULES, check


def load_config(values: Mapping[str, Any], secret_keys: Iterable[str], stack: str) -> LoadedConfig:
    """The stack's config: every field validated, the defaults derived, the config's cross-rules run;
    ConfigError with every problem."""
    return parse_config(values, secret_keys, stack, derive_defaults, CONFIG_RULES + JOB_RULES)


def load_stack(values: Mapping[str, Any], secret_keys: Iterable[str], stack: str) -> LoadedConfig:
    """`load_config`, then the job's checks (jobs/spec/validate.py); ConfigError with every problem of the first
    that refuses it."""
    loaded = load_config(values, secret_keys, stack)
    check(loaded.config)
    return loaded


def load_running_stack() -> LoadedConfig:
    """`load_stack` of the running Pulumi program's config (engine or mocks)."""
    return load_stack(*pulumi_values())
