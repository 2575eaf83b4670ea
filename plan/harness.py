"""Run the real Pulumi program of `__main__.py` in-process under mocks and record it."""

from __future__ import annotations

import logging
import re
import runpy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
import yaml
from pulumi.runtime import settings
from pulumi.runtime.sync_await import _sync_await

from core.config.model import PROJECT_NAMESPACE
from core.stackfile import StackFileError, read_stack_file, stack_file
from jobs.spec.load import load_config
from jobs.spec.training import training_spec
from plan.mocks import FAKE_PARK_MARKER, OfflineMocks, fake_park_marker
from plan.monitor import SECRET_PLACEHOLDER, Recorded, RecordingMonitor, wire_value

REPO_ROOT = Path(__file__).resolve().parents[1]
"""The directory holding Pulumi.yaml, __main__.py and the stack files."""

PROJECT_FILE = REPO_ROOT / "Pulumi.yaml"
"""The Pulumi project file `pulumi up` reads: the project's name (in every URN) and its runtime."""

PROJECT_NAME_FORM = re.compile(r"[A-Za-z0-9_.-]+")
"""A project name: alphanumerics, hyphens, underscores and periods (Pulumi's project file reference,
pulumi.com/docs/iac/concepts/projects/project-file/, `name`, read 2026-12-07)."""


def project_name(path: Path | None = None) -> str:
    """The project's name as `pulumi up` reads it from Pulumi.yaml (`name`, required); StackFileError, naming the file
    and the key, for what `pulumi up` would not run: no file, no mapping, a missing or malformed name, a runtime other
    than python (`runtime`, required: a name or `{name: ..., options: ...}`; the same reference)."""
    path = path or PROJECT_FILE
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise StackFileError(
            f"{path}: cannot read the Pulumi project file ({type(error).__name__}); restore it"
        ) from None
    if not isinstance(document, dict):
        raise StackFileError(f"{path}: not a Pulumi project file (a mapping with name and runtime); restore it")
    name = document.get("name")
    if not isinstance(name, str) or not PROJECT_NAME_FORM.fullmatch(name):
        raise StackFileError(
            f"{path}: name must be the project's name (letters, digits, hyphens, underscores, periods), got {name!r}"
        )
    runtime = document.get("runtime")
    runtime_name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if runtime_name != "python":
        raise StackFileError(f"{path}: runtime must be python (this program is __main__.py), got {runtime_name!r}")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    refused = runtime_options_problem(path, options)
    if refused:
        raise StackFileError(f"{path}: {refused}")
    return name


RUNTIME_OPTION_VALUES = {"toolchain": ("pip", "poetry", "uv"), "typechecker": ("mypy", "pyright")}
"""The words the Python language host takes for these runtime options; any other is refused before the program runs
(pulumi/pulumi sdk/python/cmd/pulumi-language-python/main.go parseOptions, L233-285 at v3.259.0, the newest tag in the
mirror read 2026-12-07; the CLI of the pinned SDK, 3.272.0, assumed the same)."""


def runtime_options_problem(path: Path, options: Any) -> str | None:
    """What the Python language host refuses in Pulumi.yaml's `runtime.options` (None: nothing): not a mapping, a
    `virtualenv` that is not a string (parseOptions), a toolchain or typechecker it does not know, and with pip
    (`toolchain: pip`, or none and no uv.lock or poetry.lock beside or above the project: toolchain.go ResolveToolchain
    L140-170) a `virtualenv` that resolves, relative to Pulumi.yaml's directory (pip.go resolveVirtualEnvironmentPath
    L583), to a file (pip.go EnsureVenv L268-270: "not a directory") or to a directory with files and no bin/python
    (EnsureVenv leaves it, then Run's ValidateVenv, main.go L1046 and pip.go L241-245, refuses it: "doesn't appear to
    be a virtual environment"). A missing or empty one pulumi up makes itself (virtualenv_note)."""
    if not isinstance(options, dict):
        return f"runtime.options must be a mapping (virtualenv, toolchain, typechecker), got {options!r}"
    for key, words in RUNTIME_OPTION_VALUES.items():
        if key in options and options[key] not in words:
            return (
                f"runtime.options.{key} must be one of {', '.join(words)} (Pulumi's Python host), got {options[key]!r}"
            )
    virtualenv = options.get("virtualenv")
    if "virtualenv" in options and not isinstance(virtualenv, str):
        return f"runtime.options.virtualenv must be a directory's path (a string), got {virtualenv!r}"
    directory = pip_virtualenv(path, options)
    if directory is None or not directory.exists():
        return None
    if not directory.is_dir():
        return f"runtime.options.virtualenv is {directory}, a file: name the virtual environment's directory"
    if any(directory.iterdir()) and not (directory / "bin" / "python").is_file():
        return (
            f"runtime.options.virtualenv is {directory}, which has no bin/python, so pulumi up would refuse it: name"
            " the virtual environment (python3 -m venv DIR makes one)"
        )
    return None


def pip_virtualenv(path: Path, options: dict[str, Any]) -> Path | None:
    """The virtual environment pip runs the program in (`runtime.options.virtualenv`, relative to Pulumi.yaml's
    directory); None without one, or with another toolchain (poetry and uv keep their own)."""
    virtualenv = options.get("virtualenv")
    if not isinstance(virtualenv, str) or not virtualenv:
        return None
    toolchain = options.get("toolchain")
    root = path.parent.resolve()
    locks = ("uv.lock", "poetry.lock")
    found = any((folder / lock).exists() for folder in (root, *root.parents) for lock in locks)
    if toolchain not in (None, "pip") or (toolchain is None and found):
        return None
    return root / virtualenv


def virtualenv_note(path: Path | None = None) -> str | None:
    """A warning when Pulumi.yaml's pip virtualenv is missing or empty: pulumi up makes it and installs
    requirements.txt into it before it runs the program (pip.go EnsureVenv L248-290, called by the host's
    GetRequiredPackages, main.go L343, which pulumi up calls through pkg/engine/update.go installPlugins L726, at
    v3.259.0); None otherwise. Call after project_name accepted the file."""
    path = path or PROJECT_FILE
    runtime = yaml.safe_load(path.read_text()).get("runtime")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    directory = pip_virtualenv(path, options)
    if directory is None or (directory.is_dir() and any(directory.iterdir())):
        return None
    return (
        f"{path}: runtime.options.virtualenv {directory} is missing or empty: pulumi up makes it (python -m venv) and"
        " installs requirements.txt into it before it runs the program"
    )


PROGRAM = REPO_ROOT / "__main__.py"
"""The Pulumi program the harness runs under mocks."""


@dataclass
class Recording:
    """Every resource a program run registered, and the stack's outputs."""

    project: str
    """Pulumi project name."""
    stack: str
    """Stack name."""
    resources: list[Recorded]
    """Every registered resource, in registration order."""
    outputs: dict[str, Any] = field(default_factory=dict)
    """Stack outputs in wire form (secrets as SECRET_PLACEHOLDER)."""
    warnings: list[str] = field(default_factory=list)
    """Warnings the program logged (pulumi.warn), in order."""
    invokes: list[str] = field(default_factory=list)
    """Tokens of the provider functions the program called, sorted."""

    def by_type(self, type_: str) -> list[Recorded]:
        """Resources of one type token, in URN order."""
        return [resource for resource in self.resources if resource.type == type_]

    def one(self, type_: str, name: str | None = None) -> Recorded:
        """The single resource of `type_` (and `name`); fails loudly when not exactly one."""
        found = [r for r in self.by_type(type_) if name is None or r.name == name]
        if len(found) != 1:
            names = sorted(r.name for r in self.by_type(type_))
            raise LookupError(f"expected one {type_} named {name!r}, found {len(found)} among {names}")
        return found[0]

    def by_urn(self, urn: str) -> Recorded:
        """The resource with this URN."""
        for resource in self.resources:
            if resource.urn == urn:
                return resource
        raise LookupError(urn)


def _resolve_output(value: Any) -> Any:
    if isinstance(value, pulumi.Output):
        if _sync_await(value.is_secret()):
            return SECRET_PLACEHOLDER
        return _resolve_output(_sync_await(value.future()))
    if isinstance(value, dict):
        return {key: _resolve_output(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_resolve_output(item) for item in value]
    return value


class _EngineLog(logging.Handler):
    """Collects what the program logs through the mock engine."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def planned_run(values: Mapping[str, str], secret_keys: Iterable[str], stack: str) -> str:
    """The run id of the config of `values` (jobs/spec/training.py training_spec), which a parked marker names."""
    return training_spec(load_config(values, secret_keys, stack).config).run


def run_values(
    values: Mapping[str, str],
    secret_keys: Iterable[str] = (),
    stack: str = "test",
    park_marker: str | None = FAKE_PARK_MARKER,
    project: str = PROJECT_NAMESPACE,
) -> Recording:
    """Run `__main__.py` for raw config values (`ns:key` -> string) and return what it registered; `park_marker`
    is the parked bucket's marker as the mocked provider reads it (None: there is none; FAKE_PARK_MARKER: a parked
    marker of the config's run, planned_run).

    A refused config raises `pulumi.RunError` from the program, before any resource.
    """
    if park_marker == FAKE_PARK_MARKER:
        mocks = OfflineMocks(lambda: fake_park_marker(stack, planned_run(values, secret_keys, stack)))
    else:
        mocks = OfflineMocks(park_marker)
    monitor = RecordingMonitor(mocks, project=project, stack=stack)
    engine_log = _EngineLog()
    logger = logging.getLogger(f"grpo-gke.plan.{stack}")
    logger.propagate = False
    logger.handlers = [engine_log]
    settings.ROOT.set(None)
    pulumi.runtime.set_mocks(mocks, project=project, stack=stack, preview=False, monitor=monitor, logger=logger)
    pulumi.runtime.set_all_config(dict(values), secret_keys=list(secret_keys))

    @pulumi.runtime.test
    def program() -> None:
        runpy.run_path(str(PROGRAM), run_name="__main__")

    program()
    root = settings.get_root_resource()
    outputs = {key: _resolve_output(value) for key, value in sorted(getattr(root, "outputs", {}).items())}
    resources = sorted(monitor.records.values(), key=lambda record: record.urn)
    return Recording(
        project=project,
        stack=stack,
        resources=resources,
        outputs=wire_value(outputs),
        warnings=engine_log.messages,
        invokes=sorted(mocks.invoked),
    )


def run_stack(stack: str) -> Recording:
    """Run the program for the shipped `Pulumi.<stack>.yaml`."""
    values = read_stack_file(stack_file(REPO_ROOT, stack), PROJECT_NAMESPACE, stack)
    return run_values(values.values, values.secret_keys, stack)
