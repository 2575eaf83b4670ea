"""The test suite. Importing it (pytest does so before tests/conftest.py) keeps compiled modules for the session.

With PYTHONDONTWRITEBYTECODE set (as on this project's shared machines) and packages installed by uv, which writes no
`.pyc` files (docs/relies-on.md, the test suite's speed), every Python process of the suite compiled
every module it imported that had none: each test process, each `python -m plan` or `python -m jobs` it starts, each
Ray node's and job's process (they inherit the environment): pulumi_gcp and pulumi_kubernetes alone are hundreds of
modules. Measured in a cpuacct cgroup with the compiled modules kept: a `python -m plan` of the dev stack 7.7 -> 3.9 s
of CPU, a local Ray head's start 12.8 -> 9.3 s, collecting the suite 6.5 -> 4.8 s per test process. They are kept
under build/.cache/pycache (Python's PYTHONPYCACHEPREFIX), so the checkout and the venv gain no `__pycache__`, and the
incluster package that Ray's py_modules zips stays as it is.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

PYCACHE = Path(__file__).resolve().parents[1] / "build" / ".cache" / "pycache"
"""Where the suite's processes keep compiled modules (unless PYTHONPYCACHEPREFIX names another place); `make clean`
removes it with build/."""

os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
# One already set is kept: tests/test_user_stacks.py's pytest in a copy of the checkout then reuses this one's cache.
os.environ.setdefault("PYTHONPYCACHEPREFIX", str(PYCACHE))
sys.dont_write_bytecode = False
sys.pycache_prefix = os.environ["PYTHONPYCACHEPREFIX"]
