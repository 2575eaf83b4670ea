"""What reaches the cluster: this package whole, and the two pure modules of `core` it may import.

Every Ray job grpo-gke submits (each attempt's wrapper, the export, the preflight) carries these files as its
runtime_env `py_modules`, and the in-cluster guardian's code ConfigMap holds the same files: no list of modules
to keep by hand. The fence that makes them safe to ship is pyproject.toml's import contracts: `incluster` imports
only the standard library, Ray, requests, PyYAML and `core.names` / `core.facts`, and those two import nothing
but the standard library.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
"""This package's directory."""

PROJECT_DIR = PACKAGE_DIR.parent
"""The checkout (or, in the guardian's pod, the code directory) holding `incluster/` and `core/`."""

PURE_CORE = ("core/names.py", "core/facts")
"""The modules of `core` the package imports, pure by contract (pyproject.toml): shipped with it."""

PACKAGES = ("incluster", "core")
"""The top-level packages the shipped files form, in the order `py_modules` lists them."""


def _python_files(relative: str) -> list[str]:
    path = PROJECT_DIR / relative
    if path.is_file():
        return [relative]
    return sorted(str(file.relative_to(PROJECT_DIR)) for file in path.rglob("*.py") if "__pycache__" not in file.parts)


def shipped_paths() -> tuple[str, ...]:
    """Every shipped file's path relative to PROJECT_DIR, sorted: all of `incluster/` and PURE_CORE."""
    return tuple(sorted({*_python_files("incluster"), *(f for part in PURE_CORE for f in _python_files(part))}))


def shipped_files() -> dict[str, str]:
    """Every shipped file's text by its path relative to PROJECT_DIR (the guardian's code ConfigMap)."""
    return {path: (PROJECT_DIR / path).read_text() for path in shipped_paths()}


@contextlib.contextmanager
def py_modules() -> Iterator[list[str]]:
    """A temporary copy of the shipped files, as the directories of `runtime_env["py_modules"]`: Ray zips and
    uploads each during submit_job (content-addressed, so an unchanged one is uploaded once)."""
    with tempfile.TemporaryDirectory(prefix="grpo-gke-ship-") as scratch:
        for path, text in shipped_files().items():
            target = Path(scratch) / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        yield [str(Path(scratch) / package) for package in PACKAGES]
