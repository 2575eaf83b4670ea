"""The post-deploy provider survives Pulumi's serialization into a provider process started elsewhere."""

from __future__ import annotations

import base64
import os
import pickletools
import subprocess
import sys
from pathlib import Path

from pulumi.dynamic.dynamic import serialize_provider

from jobs.submit.provider import JobProvider

LOAD_AND_DIFF = """
import base64, sys
import dill
provider = dill.loads(base64.b64decode(open(sys.argv[1]).read()))
olds = {"submission": {"metadata": {"run": "r1"}}, "cluster_uid": "u", "gpu_nodes": 1, "address": ""}
news = {**olds, "cluster_uid": "v"}
print(type(provider).__module__, type(provider).__name__, provider.diff("s", olds, news).changes)
"""


def test_the_pickled_provider_loads_in_a_process_whose_cwd_and_path_lack_the_project(tmp_path: Path):
    pickled = tmp_path / "provider.b64"
    pickled.write_text(serialize_provider(JobProvider()))
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    result = subprocess.run(
        [sys.executable, "-c", LOAD_AND_DIFF, str(pickled)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["jobs.submit.provider", "JobProvider", "True"]


def test_the_pickle_is_deterministic():
    assert serialize_provider(JobProvider()) == serialize_provider(JobProvider())


CODE_OBJECT_NAMES = {"CodeType", "FunctionType", "_create_code", "_create_function", "eval", "exec", "compile"}
"""Globals a pickle names to rebuild code: dill's constructors, `types`' own, or builtins that run source."""


def pickle_globals(data: bytes) -> list[tuple[str, str]]:
    """(module, name) of every global the pickle loads, read from its opcodes (GLOBAL and STACK_GLOBAL)."""
    pushed: list[object] = []
    memo: dict[int, object] = {}
    found = []
    for opcode, arg, _position in pickletools.genops(data):
        if opcode.name == "GLOBAL":
            module, name = str(arg).split(" ", 1)
            found.append((module, name))
            pushed.append(None)
        elif opcode.name == "STACK_GLOBAL":
            found.append((str(pushed[-2]), str(pushed[-1])))
            pushed.append(None)
        elif opcode.name == "MEMOIZE":
            memo[len(memo)] = pushed[-1] if pushed else None
        elif opcode.name in ("BINGET", "LONG_BINGET", "GET"):
            pushed.append(memo.get(int(arg)))
        elif opcode.name.endswith("UNICODE"):
            pushed.append(arg)
        elif opcode.stack_after:
            pushed.append(None)
    return found


def test_pulumis_pickle_of_the_provider_holds_no_code_object():
    data = base64.b64decode(serialize_provider(JobProvider()))
    opcodes = [opcode.name for opcode, _arg, _position in pickletools.genops(data)]
    names = pickle_globals(data)
    assert names, "the pickle loads no global at all: the walk over its opcodes is broken"
    assert not [name for name in opcodes if "BYTES" in name], "a code object carries its bytecode as bytes"
    assert not [(module, name) for module, name in names if name in CODE_OBJECT_NAMES or module == "marshal"]
    assert {module.split(".")[0] for module, _name in names} <= sys.stdlib_module_names, names


def test_a_new_provider_pickle_in_the_inputs_is_a_change():
    olds = {"submission": {"metadata": {"run": "r1"}}, "cluster_uid": "u", "gpu_nodes": 1, "address": ""}
    current = {**olds, "__provider": serialize_provider(JobProvider())}
    assert JobProvider().diff("s", {**olds, "__provider": "an older pickle"}, current).changes
    assert not JobProvider().diff("s", current, dict(current)).changes


def test_importing_the_provider_imports_no_ray():
    """Every provider process imports the module, `diff` on each preview included; only a method that reaches the
    cluster loads Ray."""
    code = (
        "import sys, jobs.submit.provider; print(sorted(name for name in sys.modules if name.split('.')[0] == 'ray'))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout.strip()) == (0, "[]"), result.stderr
