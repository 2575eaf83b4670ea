"""The post-deploy provider survives Pulumi's serialization into a provider process started elsewhere."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pulumi.dynamic.dynamic import serialize_provider

from jobs.provider import JobProvider

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
    assert result.stdout.split() == ["jobs.provider", "JobProvider", "True"]


def test_the_pickle_is_deterministic():
    assert serialize_provider(JobProvider()) == serialize_provider(JobProvider())
