"""Shared fixtures: mocked runs of the real program, and config values built from stack files."""

from __future__ import annotations

import copy
import fcntl
import gc
import itertools
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.config.model import PROJECT_NAMESPACE, StackConfig
from core.stackfile import StackValues, read_stack_file, stack_file
from jobs.spec.load import load_config
from plan.cli import EXIT_BAD_INPUT
from plan.harness import REPO_ROOT, Recording, run_values

pytest_plugins = ["tests.ray_fixtures"]
"""The Ray clusters and stand-in stack files the in-cluster and the job-layer tests share."""

# The mocked runs allocate millions of short-lived objects beside the SDKs' millions of long-lived ones;
# at the default thresholds (700, 10, 10) the collector spent a quarter of a mocked-run file's CPU time
# walking them (tests/infra/test_nodepools.py: 5.0 of 20.2 s CPU, 1.4 of 14.8 s at these thresholds, peak
# memory 216 -> 226 MB). plan/cli.py pauses it for the same reason; the tests keep it on, collecting rarer.
gc.set_threshold(50_000, 20, 100)

SHARED = REPO_ROOT.parent / "shared"
"""The steering repo's shared/ folder (reference sheets, KubeRay schemas, NeMo-RL configs)."""

STACKS_DIR = Path(__file__).with_name("stacks")
"""The tests' own copies of the shipped stack files: a user's edits to `Pulumi.<stack>.yaml` in the
repository root, or a stack file of their own there, never change what the tests read (.ci/run checks
that the root copies are still these)."""

SHIPPED_STACKS = ("dev", "first-run", "nemo-rl-standard-b200", "verl-autopilot-b200", "verl-standard-h200")
"""Every stack file shipped in the repository."""


def shipped_stack_file(stack: str) -> Path:
    """The tests' copy of the shipped `Pulumi.<stack>.yaml`."""
    return stack_file(STACKS_DIR, stack)


def stack_values(stack: str) -> StackValues:
    """The raw config values of a shipped stack."""
    return read_stack_file(shipped_stack_file(stack), PROJECT_NAMESPACE, stack)


def values_of(stack: str, **sections: dict) -> dict[str, str]:
    """Config values of a shipped stack with sections merged in: values_of("dev", gpu={"type": "b200"}).

    A section value of None removes that key from the section.
    """
    values = dict(stack_values(stack).values)
    for section, changes in sections.items():
        key = f"{PROJECT_NAMESPACE}:{section}"
        current = json.loads(values.get(key, "{}"))
        for name, value in changes.items():
            if value is None:
                current.pop(name, None)
            else:
                current[name] = value
        values[key] = json.dumps(current)
    return values


def plan_of_edited_stack(
    directory: Path, name: str, *edits: tuple[str, str], base: str = "dev"
) -> subprocess.CompletedProcess:
    """`python -m plan --config Pulumi.<name>.yaml --out out`, run from `directory` as the user runs it, on the tests'
    copy of the shipped `base` stack file with each (old, new) text edit made; an edit whose old text the file lacks
    fails the test instead of planning the stack unchanged."""
    text = shipped_stack_file(base).read_text()
    for old, new in edits:
        assert old in text, f"the {base} stack file has no {old!r} to edit"
        text = text.replace(old, new)
    (directory / f"Pulumi.{name}.yaml").write_text(text)
    return subprocess.run(
        [sys.executable, "-m", "plan", "--config", f"Pulumi.{name}.yaml", "--out", "out"],
        cwd=directory, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def clean_refusal(result: subprocess.CompletedProcess, directory: Path) -> str:
    """The whole stderr of a plan command's clean refusal: exit 2, nothing on stdout, no traceback, nothing written
    under `directory`/out."""
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    assert not (directory / "out").exists()
    return result.stderr


MODES = ("standard", "autopilot")
GPUS = ("b200", "h200")
STORAGES = ("gcs", "lustre")
FRAMEWORKS = ("verl", "nemo-rl")
COMBINATIONS = list(itertools.product(MODES, GPUS, STORAGES))
"""All eight mode x GPU x storage combinations."""

LUSTRE = {"type": "lustre", "capacityGib": 18000, "throughput": 1000}
"""A valid Lustre storage section (two steps of the 1000 MB/s/TiB tier)."""

WORKLOADS = {
    "verl": {"framework": "verl", "model": "Qwen/Qwen2.5-0.5B-Instruct", "dataset": "gsm8k"},
    "nemo-rl": {"framework": "nemo-rl", "model": "Qwen/Qwen2.5-1.5B", "dataset": "deepscaler"},
}
"""A valid workload section per framework."""

SECRET_TOKEN = "hf_do_not_leak_0123456789"
"""A recognisable fake Hugging Face token of a shipped stack's config (`config_of(..., secret_token=True)`)."""


def combination_values(mode: str, gpu: str, storage: str, /, **sections: dict) -> dict[str, str]:
    """The dev stack's values turned into one mode x GPU x storage combination, further sections merged in."""
    storage_section = dict(LUSTRE) if storage == "lustre" else {"type": "gcs"}
    storage_section |= sections.pop("storage", {})
    return values_of(
        "dev",
        cluster={"mode": mode} | sections.pop("cluster", {}),
        gpu={"type": gpu} | sections.pop("gpu", {}),
        storage=storage_section,
        **sections,
    )


def with_secrets(
    values: dict[str, str],
    token: str | None = None,
    secret_env: dict[str, str] | None = None,
    wandb_key: str | None = None,
) -> tuple[dict[str, str], tuple[str, ...]]:
    """`values` with `token`, `secret_env` and `wandb_key` set as secrets, as the engine hands them over, and
    the secret keys."""
    values, secret_keys = dict(values), ()
    if token is not None:
        values[f"{PROJECT_NAMESPACE}:hfToken"] = token
        secret_keys += (f"{PROJECT_NAMESPACE}:hfToken",)
    if wandb_key is not None:
        values[f"{PROJECT_NAMESPACE}:wandbApiKey"] = wandb_key
        secret_keys += (f"{PROJECT_NAMESPACE}:wandbApiKey",)
    if secret_env is not None:
        values[f"{PROJECT_NAMESPACE}:secretEnv"] = json.dumps(secret_env)
        secret_keys += (f"{PROJECT_NAMESPACE}:secretEnv",)
    return values, secret_keys


def config_of(
    base: str, stack: str | None = None, secret_token: bool = False, wandb_key: str | None = None, **sections: dict
) -> StackConfig:
    """A validated config from a shipped stack with sections changed, under another stack name if given, with
    the fake token (`secret_token`) and a W&B key (`wandb_key`) as secrets when asked."""
    values, secret_keys = with_secrets(
        values_of(base, **sections), SECRET_TOKEN if secret_token else None, wandb_key=wandb_key
    )
    return load_config(values, {*stack_values(base).secret_keys, *secret_keys}, stack or base).config


def combination_config(
    mode: str = "standard",
    gpu_type: str = "h200",
    storage_type: str = "gcs",
    framework: str = "verl",
    token: str | None = None,
    secret_env: dict[str, str] | None = None,
    **sections: dict,
) -> StackConfig:
    """A validated config of one combination and framework (stack `test`), sections merged in."""
    workload = WORKLOADS[framework] | sections.pop("workload", {})
    values = combination_values(mode, gpu_type, storage_type, workload=workload, **sections)
    return load_config(*with_secrets(values, token, secret_env), "test").config


_RECORDINGS: dict[str, Recording] = {}


def recorded_run(
    values: dict[str, str], secret_keys: tuple[str, ...] | list[str] = (), stack: str = "test"
) -> Recording:
    """run_values, once per distinct (values, secret keys, stack) in a session: the fixtures below, the
    workloads tests' mocked_run and the blast-radius tests asked for several of the same runs each."""
    key = json.dumps([values, sorted(secret_keys), stack], sort_keys=True)
    if key not in _RECORDINGS:
        _RECORDINGS[key] = run_values(values, secret_keys, stack)
    return _RECORDINGS[key]


@pytest.fixture(scope="session")
def plan_of() -> Callable[[str], Recording]:
    """A function from a shipped stack's name to its recorded mocked run (cached per session)."""

    def plan(stack: str) -> Recording:
        values = stack_values(stack)
        return recorded_run(values.values, values.secret_keys, stack)

    return plan


@pytest.fixture(scope="session")
def infra_run() -> Callable[..., Recording]:
    """A function (mode, gpu, storage, **sections) -> the recorded mocked run (cached per session)."""

    def run(mode: str, gpu: str, storage: str, /, **sections: dict) -> Recording:
        return recorded_run(combination_values(mode, gpu, storage, **sections))

    return run


TWO_NODE_CLUSTER_FILES = ("tests/incluster/test_two_node_ray.py", "tests/incluster/test_guardian_on_ray.py")
"""The test files that use the two-node Ray cluster (tests/ray_fixtures.py `two_node_cluster`): one worker runs
them all, so the session starts that cluster once instead of once per worker."""

LONG_FILES = ("tests/jobs/test_demo.py", "tests/test_user_stacks.py")
"""Test files that take long without either Ray session fixture (`make demo` twice: 57 s; a pytest and a plan in a copy
of the checkout: 19 s; --durations of `make test` on 2026-12-02): handed out right after the two-node cluster's, so
that neither is the last unit of work while the other test process has nothing left."""

CONTROL_PLANE_FILES = ("tests/controlplane/test_guardian_calls.py", "tests/controlplane/test_stack_objects.py")
"""The test files that deploy the shipped stacks on the real control plane (tests/controlplane/conftest.py `deploy`):
one unit of work, so one test process deploys each stack once; handed out with the long files."""

RAY_SESSION_FIXTURES = ("two_node_cluster", "ray_head", "pending_ray_head")
"""Session fixtures that keep Ray nodes running (an idle Ray node takes about 9% of a core): the files that use
them run first, and each is stopped after its last test in the test process (stop_after_last_use)."""

EARLY_STOP_FIXTURES = (*RAY_SESSION_FIXTURES, "deploy")
"""Session fixtures given back after their last test in the test process (stop_after_last_use): the Ray nodes, and the
shipped stacks deployed on the shared control plane (tests/controlplane/conftest.py `deploy`), whose namespace and
nodes other tests wait for."""

_LAST_USE: dict[str, int] = {}
_POSITION: dict[str, int] = {}
_STOPS: dict[str, Callable[[], None]] = {}


def _file_rank(items: list[pytest.Item]) -> dict[str, int]:
    ranks: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        if path in TWO_NODE_CLUSTER_FILES:
            rank = 0
        elif path in LONG_FILES or path in CONTROL_PLANE_FILES:
            rank = 1
        else:
            rank = 2 if "ray_head" in item.fixturenames else 3
        ranks[path] = min(rank, ranks.get(path, 3))
    return ranks


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files of the two-node cluster first, then the other long ones, then those of the local Ray head, then the
    rest, each file whole and in its order: the longest units of work start first, and the Ray nodes are done with
    early."""
    ranks = _file_rank(items)
    items.sort(key=lambda item: ranks[item.nodeid.split("::", 1)[0]])


def pytest_collection_finish(session: pytest.Session) -> None:
    """Where each test sits in the run, and for each early-stopped session fixture the last test of the last file that
    uses it: a module fixture built on it (tests/incluster/test_fault_matrix.py `ray_side`) is torn down at its file's
    end, after later tests of that file that do not use it, and still needs it then."""
    _POSITION.update({item.nodeid: index for index, item in enumerate(session.items)})
    users: dict[str, set[str]] = {}
    for item in session.items:
        for name in EARLY_STOP_FIXTURES:
            if name in item.fixturenames:
                users.setdefault(name, set()).add(item.nodeid.split("::", 1)[0])
    for index, item in enumerate(session.items):
        for name, files in users.items():
            if item.nodeid.split("::", 1)[0] in files:
                _LAST_USE[name] = index


def stop_after_last_use(request: pytest.FixtureRequest, stop: Callable[[], None]) -> Callable[[], None]:
    """`stop`, run at most once: after the last test that uses the fixture of `request`, or by the caller.

    Under `-n N` the early stop relies on the file scheduling below (files handed out in run order): once the
    next test of this process comes after the fixture's last user, no later test here can need it."""
    stopped = False

    def once() -> None:
        nonlocal stopped
        if not stopped:
            stopped = True
            stop()

    if request.config.getoption("dist", "no") in ("no", "load"):
        _STOPS[request.fixturename] = once
    return once


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stop each Ray session fixture after its last test (the test's own fixtures are torn down by now)."""
    if nextitem is None:
        return
    for name, stop in list(_STOPS.items()):
        if _POSITION.get(nextitem.nodeid, 0) > _LAST_USE.get(name, len(_POSITION)):
            del _STOPS[name]
            stop()


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Under `-n N` with the default `--dist load`: each test file is one unit of work, and the files of the
    two-node cluster are one unit together, as are those of the real control plane (a file's module fixtures then also start once), handed out in
    collection order."""
    if config.getoption("dist") != "load":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False

    class FileScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            if path in CONTROL_PLANE_FILES:
                return "control-plane"
            return "two-node-cluster" if path in TWO_NODE_CLUSTER_FILES else path

    return FileScheduling(config, log)


@dataclass(frozen=True)
class PlanCommand:
    """One `python -m <module> ... --config <a shipped stack> --out OUT` as the user runs it from the repository."""

    result: subprocess.CompletedProcess[str]
    """Its exit status and whole output."""
    out: Path
    """The directory it wrote the plan to: read it, never write into it (other tests read the same run)."""


def session_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's temp dir, one for all its test processes (under xdist, each worker's base temp dir sits in it)."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@pytest.fixture(scope="session")
def shipped_plan_command(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., PlanCommand]:
    """A function (stack, command=("plan",)) -> that command's run on the shipped stack, run once per session:
    several tests, in either test process, check different parts of the same command's output and files (a full
    plan takes about 4 s of CPU). The first process to ask runs it and keeps its result beside its files, under a
    lock; the others read that."""
    runs: dict[tuple[str, tuple[str, ...]], PlanCommand] = {}
    shared = session_dir(tmp_path_factory) / "shipped-plans"

    def run(stack: str, command: tuple[str, ...] = ("plan",)) -> PlanCommand:
        key = (stack, command)
        if key not in runs:
            folder = shared / f"{'-'.join(command)}-{stack}"
            folder.mkdir(parents=True, exist_ok=True)
            out = folder / "out"
            argv = [sys.executable, "-m", *command, "--config", str(shipped_stack_file(stack)), "--out", str(out)]
            with open(folder / "lock", "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                kept = folder / "result.json"
                if not kept.exists():
                    result = subprocess.run(
                        argv, cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True,
                        text=True, timeout=300,
                    )  # fmt: skip
                    kept.write_text(json.dumps([result.returncode, result.stdout, result.stderr]))
                returncode, stdout, stderr = json.loads(kept.read_text())
            runs[key] = PlanCommand(subprocess.CompletedProcess(argv, returncode, stdout, stderr), out)
        return runs[key]

    return run


REQUIRE_CONTROL_PLANE = "GRPO_GKE_REQUIRE_CONTROL_PLANE"
"""Set (as `.ci/run` does): a control plane that cannot start fails the tests that use it instead of skipping them."""

COMPUTECLASS_SCHEMA = Path(__file__).parent / "workloads" / "schemas" / "computeclass.v1.schema.json"
"""The tests' strict schema of GKE's ComputeClass (its CRD on the control plane is made from it)."""

CONTROL_PLANE_FOLDER = "control-plane"
"""The shared control plane's folder in the session's temp dir: its lock, its record, its logs and etcd's data."""


def _control_plane_unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_CONTROL_PLANE):
        pytest.fail(f"the real control plane is required ({REQUIRE_CONTROL_PLANE} is set): {reason}", pytrace=False)
    pytest.skip(f"the real control plane is unavailable: {reason}")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory):
    """The test run's one real control plane (tests/support/control_plane.py: etcd, kube-apiserver, kube-scheduler,
    kube-controller-manager, KubeRay's operator, kwok), its CRDs installed: started by the first test process that
    asks, used by every one (tests keep apart by namespace: `kube_namespace`), ended with the run
    (pytest_sessionfinish). Skipped, with the reason, where Go or the built binaries are absent (failed under
    REQUIRE_CONTROL_PLANE)."""
    from tests.support import control_plane as cp

    try:
        cp.binaries()
    except cp.NotBuilt as error:
        _control_plane_unavailable(str(error))
    if not SHARED.is_dir():
        _control_plane_unavailable(f"{SHARED} is absent: GKE's networking CRDs live there")
    return cp.shared(
        session_dir(tmp_path_factory) / CONTROL_PLANE_FOLDER,
        lambda workdir: cp.start_with_crds(workdir, SHARED, COMPUTECLASS_SCHEMA),
    )


@pytest.fixture
def kube_namespace(control_plane, request: pytest.FixtureRequest) -> str:
    """A namespace of the test's own on the shared control plane (deleted after it, not waited for): tests in either
    test process then never see each other's namespaced objects."""
    name = f"t-{uuid.uuid4().hex[:12]}"
    control_plane.ok(
        "POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    yield name
    control_plane.request("DELETE", f"/api/v1/namespaces/{name}")


CLUSTER_LOCK_DEADLINE_SECONDS = 600.0
"""The longest a test waits for the control plane's cluster-wide objects (cluster_lock) before it fails."""


@contextmanager
def cluster_lock(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Hold, across the run's test processes, what no namespace of a test's own keeps apart on the shared control
    plane: the nodes (the guardian lists every GPU node of the cluster) and the stack's own namespace (names.NAMESPACE,
    which some code under test cannot be given another of). Waits for another holder up to
    CLUSTER_LOCK_DEADLINE_SECONDS, then fails naming the lock."""
    folder = session_dir(tmp_path_factory) / CONTROL_PLANE_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    ends = time.monotonic() + CLUSTER_LOCK_DEADLINE_SECONDS
    with open(folder / "cluster.lock", "w") as lock:
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > ends:
                    pytest.fail(
                        f"{folder / 'cluster.lock'} held by another test for {CLUSTER_LOCK_DEADLINE_SECONDS:g} s"
                    )
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


STACK_NAMESPACE_KINDS = (
    "/api/v1/namespaces/{namespace}/pods",
    "/api/v1/namespaces/{namespace}/events",
    "/api/v1/namespaces/{namespace}/configmaps",
    "/api/v1/namespaces/{namespace}/serviceaccounts",
    "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/roles",
    "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings",
    "/apis/ray.io/v1/namespaces/{namespace}/rayclusters",
)
"""What a test may make in the stack's namespace, deleted after it (stack_namespace)."""


@pytest.fixture
def stack_namespace(control_plane, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The stack's namespace (names.NAMESPACE) on the shared control plane, for code under test that always uses it,
    and the cluster's nodes, held for the test (cluster_lock); made if absent, and emptied of STACK_NAMESPACE_KINDS
    after the test (at once: no grace period), so the next holder finds nothing of it."""
    from core import names

    path = f"/api/v1/namespaces/{names.NAMESPACE}"
    with cluster_lock(tmp_path_factory):
        if control_plane.get(path) is None:
            namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": names.NAMESPACE}}
            control_plane.ok("POST", "/api/v1/namespaces", namespace)
        try:
            yield names.NAMESPACE
        finally:
            for kind in STACK_NAMESPACE_KINDS:
                control_plane.ok("DELETE", kind.format(namespace=names.NAMESPACE), params={"gracePeriodSeconds": "0"})


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """The process that owns the session (the xdist controller, once every worker has finished its session, or a lone
    pytest; never a worker) ends the shared control plane, if one was started, by its process group's id: first, while
    the session's temp dir is still locked as this run's (pytest's own sessionfinish unlocks it, and another run's
    clean-up may then remove it)."""
    config = session.config
    factory = getattr(config, "_tmp_path_factory", None)
    if hasattr(config, "workerinput") or factory is None:
        return
    from tests.support.control_plane import stop_shared

    stop_shared(factory.getbasetemp() / CONTROL_PLANE_FOLDER)


@pytest.fixture(scope="session", autouse=True)
def fresh_verl_check_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every session composes verl overrides for real: the composition cache starts empty in the session's
    temp dir, one for all its test processes (under xdist, each worker's base temp dir sits in the session's),
    so overrides one worker composed are not composed again by another."""
    import jobs.spec.validate

    jobs.spec.validate.VERL_CHECK_CACHE = session_dir(tmp_path_factory) / "verl-overrides"
    jobs.spec.validate.verl_problems.cache_clear()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """../shared, or a skip when this checkout has none beside it."""
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent: the KubeRay schemas and NeMo-RL configs live there")
    return SHARED


__all__ = [
    "SHIPPED_STACKS",
    "STACKS_DIR",
    "recorded_run",
    "run_values",
    "shipped_stack_file",
    "stack_values",
    "values_of",
]


GUARDIAN_CODE_MARK = "<the guardian's code: tests/jobs/guardian/test_objects.py checks it>"
"""What the golden files hold in place of the guardian's code and its checksum, which change with every edit of a
module the guardian runs (its file list and everything else stay in the goldens)."""

_GUARDIAN_CODE_REFERENCE = re.compile(r"sha256:[0-9a-f]{64}( \(file grpo-guardian-code\.)")
_GUARDIAN_CODE_CHECKSUM = re.compile(r'("grpo-gke/code-sha256": )"[0-9a-f]+"')


def plan_json_without_guardian_code(text: str) -> str:
    """plan.json with the guardian code files' hashes and the Deployment's code checksum replaced by a mark."""
    text = _GUARDIAN_CODE_REFERENCE.sub(lambda match: f"sha256:{GUARDIAN_CODE_MARK}{match.group(1)}", text)
    return _GUARDIAN_CODE_CHECKSUM.sub(lambda match: f'{match.group(1)}"{GUARDIAN_CODE_MARK}"', text)


def manifests_without_guardian_code(documents: list[dict]) -> list[dict]:
    """k8s.yaml's objects with the guardian code ConfigMap's files and the Deployment's code checksum marked."""
    from core import names
    from jobs.guardian.objects import CODE_CHECKSUM

    masked = copy.deepcopy(documents)
    for document in masked:
        metadata = document.get("metadata", {})
        if document.get("kind") == "ConfigMap" and metadata.get("name") == names.GUARDIAN_CODE_CONFIG_MAP:
            document["data"] = dict.fromkeys(document.get("data", {}), GUARDIAN_CODE_MARK)
        template = document.get("spec", {}).get("template", {}).get("metadata", {})
        if CODE_CHECKSUM in template.get("annotations", {}):
            template["annotations"][CODE_CHECKSUM] = GUARDIAN_CODE_MARK
    return masked


def guardian_code_names() -> list[str]:
    """The files the plan writes beside plan.json for the guardian's code ConfigMap, sorted."""
    from core import names
    from incluster.shipping import shipped_files
    from jobs.guardian.objects import code_key

    return sorted(f"{names.GUARDIAN_CODE_CONFIG_MAP}.{code_key(path)}" for path in shipped_files())
