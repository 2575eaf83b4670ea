"""Without Go the tests on the real control plane are skipped with the reason, as the user sees it in pytest's
summary; with GRPO_GKE_REQUIRE_CONTROL_PLANE set (`.ci/run`) the same run fails instead."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT
from tests.conftest import REQUIRE_CONTROL_PLANE as REQUIRE

ONE_TEST = "tests/controlplane/test_guardian_calls.py::test_two_guardians_contend_for_one_real_lease"
"""A test that needs the control plane."""


def run_without_go(required: bool) -> subprocess.CompletedProcess[str]:
    """pytest on ONE_TEST with a PATH that holds no `go`, GRPO_GKE_REQUIRE_CONTROL_PLANE set or not."""
    path = os.pathsep.join(item for item in os.environ["PATH"].split(os.pathsep) if not os.path.exists(f"{item}/go"))
    env = {key: value for key, value in os.environ.items() if key != REQUIRE}
    env.update({"PATH": path, "PYTHONPATH": str(REPO_ROOT), **({REQUIRE: "1"} if required else {})})
    return subprocess.run(
        [sys.executable, "-m", "pytest", ONE_TEST], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def test_without_go_the_tests_are_skipped_with_the_reason_and_ci_fails_them():
    skipped = run_without_go(required=False)
    assert skipped.returncode == 0, skipped.stdout + skipped.stderr
    assert "SKIPPED" in skipped.stdout and "go is not on PATH: install Go 1.26" in skipped.stdout, skipped.stdout
    required = run_without_go(required=True)
    assert required.returncode == 1, required.stdout + required.stderr
    assert f"the real control plane is required ({REQUIRE} is set)" in required.stdout, required.stdout
