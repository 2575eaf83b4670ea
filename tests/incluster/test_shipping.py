"""What ships into the cluster: the whole in-cluster package and core's two pure modules, nothing else, in the
syntax of the oldest image's Python, importing only what the images carry."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

from core.facts.platform import OLDEST_IMAGE_PYTHON
from incluster import shipping
from plan.harness import REPO_ROOT

IMAGE_PACKAGES = {"ray", "requests", "yaml", "torch"}
"""Third-party packages the framework images carry and the in-cluster code may import (Ray's images ship Ray,
requests and PyYAML; the preflight's GPU tasks use the images' torch)."""


def _imported(tree: ast.Module) -> set[str]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "core":
            found.update(f"core.{alias.name}" for alias in node.names)  # `from core import names`
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module)
    return found


def test_the_shipped_files_are_the_whole_package_and_cores_pure_modules_only():
    package = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "incluster").rglob("*.py")}
    facts = {str(p.relative_to(REPO_ROOT)) for p in (REPO_ROOT / "core" / "facts").rglob("*.py")}
    assert set(shipping.shipped_paths()) == package | facts | {"core/names.py"}
    assert list(shipping.shipped_paths()) == sorted(shipping.shipped_paths())


@pytest.mark.parametrize("path", shipping.shipped_paths())
def test_each_shipped_file_is_the_oldest_images_python_and_imports_only_what_the_images_carry(path):
    tree = ast.parse((REPO_ROOT / path).read_text(), filename=path, feature_version=OLDEST_IMAGE_PYTHON)
    for module in _imported(tree):
        root = module.split(".")[0]
        if root in ("incluster", "core"):
            assert module == "core.names" or module.startswith(("incluster", "core.facts")), f"{path} imports {module}"
        else:
            assert root in sys.stdlib_module_names or root in IMAGE_PACKAGES, f"{path} imports {module}"


def test_ruff_checks_the_package_at_the_oldest_images_python():
    settings = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["per-file-target-version"]
    version = "py{}{}".format(*OLDEST_IMAGE_PYTHON)
    assert settings == {"incluster/**": version, "core/names.py": version, "core/facts/**": version}


def test_py_modules_lay_out_the_shipped_files_as_two_packages():
    with shipping.py_modules() as modules:
        assert [Path(module).name for module in modules] == ["incluster", "core"]
        root = Path(modules[0]).parent
        laid = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
        assert laid == sorted(shipping.shipped_paths())
    assert not root.exists()
