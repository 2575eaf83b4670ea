"""The README's commands and the reference pages under docs/ match the code."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from pydantic import BaseModel

from core.config.model import StackConfig
from core.facts.privilege import DEPLOYER_ROLES
from core.prices import catalog
from plan.harness import run_values
from plan.prices import estimate
from plan.startup import estimate_startup
from tests.conftest import REPO_ROOT, SHIPPED_STACKS, config_of, shipped_stack_file, values_of

README = (REPO_ROOT / "README.md").read_text()


def doc(page: str) -> str:
    """The text of a reference page under docs/."""
    return (REPO_ROOT / "docs" / page).read_text()


INTERNAL = {"stack", "project", "region"}


def config_keys() -> set[str]:
    """Every documented key of the model, as `grpo-gke:<section>.<key>` or `grpo-gke:<key>`."""
    keys = set()
    for name, field in StackConfig.model_fields.items():
        alias = field.alias or name
        if alias in INTERNAL:
            continue
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            keys |= {f"grpo-gke:{alias}.{sub.alias or sub_name}" for sub_name, sub in annotation.model_fields.items()}
        else:
            keys.add(f"grpo-gke:{alias}")
    return keys


def test_the_quick_start_gives_the_two_commands():
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert "make plan" in quick_start and "make test" in quick_start


def test_the_quick_start_shows_what_a_refused_config_really_prints(tmp_path):
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    shown = quick_start.split("```text\n", 1)[1].split("```", 1)[0]
    text = shipped_stack_file("dev").read_text().replace("nodes: 1", "nodes: 0").replace("type: h200", "tpye: h200")
    (tmp_path / "Pulumi.dev.yaml").write_text(text)
    result = subprocess.run(
        [sys.executable, "-m", "plan", "--config", "Pulumi.dev.yaml"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr == shown


def test_every_config_key_is_documented_and_every_documented_key_exists():
    table = doc("configuration.md").split("<!-- config-reference", 1)[1].split("\n## ", 1)[0]
    documented = set(re.findall(r"^\| `(grpo-gke:[A-Za-z.]+)` \|", table, flags=re.M))
    assert documented == config_keys()


def test_every_config_field_has_a_description():
    models = [StackConfig] + [
        field.annotation
        for field in StackConfig.model_fields.values()
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)
    ]
    for model in models:
        for name, field in model.model_fields.items():
            assert field.description, f"{model.__name__}.{name} has no description"


def test_the_versions_table_matches_the_pinned_facts():
    from core.facts.platform import DEFAULT_IMAGES, VERL_VERSION
    from core.facts.pods import GIB_INSTALLER_IMAGE

    versions = doc("configuration.md").split("## Versions", 1)[1].split("\n## ", 1)[0]
    for image in DEFAULT_IMAGES.values():
        assert f"`{image.image}`, Ray {image.ray_version}" in versions
    assert GIB_INSTALLER_IMAGE.rsplit("/", 1)[1] in versions
    assert f"| {VERL_VERSION} |" in versions
    lines = (REPO_ROOT / "requirements.txt").read_text().splitlines()
    pins = dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))
    sdks = ", ".join(pins[package] for package in ("pulumi", "pulumi-gcp", "pulumi-kubernetes"))
    assert f"| Pulumi SDK, pulumi-gcp, pulumi-kubernetes | {sdks} | `requirements.txt` |" in versions
    assert f"| {pins['ray[default]']} | `requirements.txt` |" in versions


def test_the_documented_stack_outputs_are_the_programs(plan_of):
    sentence = doc("cluster.md").split("<!-- stack-outputs", 1)[1].split("\n\n", 1)[0].split("-->", 1)[1]
    documented = set(re.findall(r"`([a-z][A-Za-z]+)`", sentence))
    gcs, lustre = plan_of("dev").outputs, plan_of("nemo-rl-standard-b200").outputs
    assert "bucket" in gcs and "lustreMountPoint" in lustre
    assert documented == set(gcs) | set(lustre)


def test_the_quick_start_lists_every_file_make_plan_writes(plan_of):
    from plan.prices import COST_FILE
    from plan.startup import STARTUP_FILE
    from plan.writer import plan_files

    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    listed = re.findall(r"^\| `([^`]+)` \|", quick_start, flags=re.M)
    written = [*plan_files(plan_of("dev")), COST_FILE, STARTUP_FILE]
    # A row naming `<key>` stands for every file of one ConfigMap (the guardian's code), in the order written.
    expanded = []
    for row in listed:
        pattern = re.escape(row).replace(re.escape("<key>"), r"[^/]+")
        matching = [name for name in written if re.fullmatch(pattern, name)] if "<key>" in row else [row]
        assert matching, f"the row {row} names no file make plan writes"
        expanded += matching
    assert expanded == written


TYPE_TOKEN = r"`((?:gcp|kubernetes|pulumi-python):[A-Za-z0-9/.:]*)`"


def before_up_section() -> str:
    """The page on what a user must know before the first `pulumi up`."""
    return doc("before-first-up.md")


def deployer_role_row(type_: str) -> tuple[tuple[str, ...], str] | None:
    """The DEPLOYER_ROLES row of a resource type: its own, else its package's (`kubernetes:`)."""
    return DEPLOYER_ROLES.get(type_) or DEPLOYER_ROLES.get(type_.split(":", 1)[0] + ":")


def registered_types(recording) -> set[str]:
    """Type tokens of the custom resources a mocked run registers, providers left out."""
    return {r.type for r in recording.resources if r.custom and not r.type.startswith("pulumi:providers:")}


def test_the_before_up_section_covers_quotas_roles_timeline_and_recovery():
    section = before_up_section()
    for heading in (
        "## Quotas to request",
        "## IAM roles of the deploying identity",
        "## The first `pulumi up`, and where to watch it",
        "## After a half-failed `up`",
    ):
        assert heading in section, heading
    for command in (
        "gcloud beta quotas info list",
        "gcloud compute regions describe",
        "pulumi refresh",
        "pulumi cancel",
    ):
        assert command in section, command


def test_every_resource_type_the_stacks_register_has_a_deployer_role(plan_of):
    kms_key = "projects/my-grpo-project/locations/us-central1/keyRings/grpo/cryptoKeys/secrets"
    with_kms = run_values(values_of("dev", cluster={"secretsKmsKey": kms_key}), (), "dev")
    types = registered_types(with_kms).union(*(registered_types(plan_of(stack)) for stack in SHIPPED_STACKS))
    assert "gcp:kms/cryptoKeyIAMMember:CryptoKeyIAMMember" in types and "gcp:lustre/instance:Instance" in types
    assert {t for t in types if deployer_role_row(t) is None} == set()
    constructed = set()
    for source in [
        *REPO_ROOT.glob("infra/**/*.py"),
        *REPO_ROOT.glob("workloads/**/*.py"),
        *REPO_ROOT.glob("jobs/**/*.py"),
    ]:
        for module, cls in re.findall(r"\bgcp\.([a-z]+)\.([A-Z][A-Za-z]*)\(", source.read_text()):
            if not cls.endswith("Args"):
                constructed.add(f"gcp:{module}/{cls[0].lower()}{cls[1:]}:{cls}")
    assert {t for t in constructed if deployer_role_row(t) is None} == set()


def test_the_roles_table_is_the_deployer_roles_of_the_facts():
    table = before_up_section().split("<!-- deployer-roles", 1)[1].split("\n## ", 1)[0]
    documented: dict[str, set[str]] = {}
    for row in re.findall(r"^\| (`.+?) \| (`roles/.+?) \|", table, flags=re.M):
        types, roles = row
        for type_ in re.findall(TYPE_TOKEN, types):
            assert type_ not in documented, f"{type_} has two rows"
            documented[type_] = set(re.findall(r"`(roles/[A-Za-z.]+)`", roles))
    assert documented == {type_: set(roles) for type_, (roles, _) in DEPLOYER_ROLES.items()}
    for roles, _ in DEPLOYER_ROLES.values():
        assert all(re.fullmatch(r"roles/[a-z]+\.[A-Za-z]+", role) for role in roles), roles


def test_the_first_up_timeline_states_the_benchmarks_estimates(plan_of):
    timeline = before_up_section().split("## The first `pulumi up`", 1)[1].split("\n## ", 1)[0]
    for stack in SHIPPED_STACKS:
        estimate = estimate_startup(config_of(stack), plan_of(stack).resources)
        to_submission = estimate.from_up.steps[0].seconds
        row = f"| `{stack}` | {to_submission / 60:.0f} min | {estimate.serial_seconds / 60:.0f} min |"
        assert row in timeline, row


IMPORT_IDS = {
    "gcp:storage/bucket:Bucket": lambda inputs: f"{inputs['project']}/{inputs['name']}",
    "gcp:lustre/instance:Instance": lambda inputs: (
        f"projects/{inputs['project']}/locations/{inputs['location']}/instances/{inputs['instanceId']}"
    ),
    "gcp:compute/globalAddress:GlobalAddress": lambda inputs: (
        f"projects/{inputs['project']}/global/addresses/{inputs['name']}"
    ),
    "gcp:compute/network:Network": lambda inputs: f"projects/{inputs['project']}/global/networks/{inputs['name']}",
    "gcp:servicenetworking/connection:Connection": lambda inputs: (
        f"{inputs['network'].rsplit('/', 1)[1]}:{inputs['service']}"
    ),
}
"""The import id of a kept resource from its inputs, in the forms of pulumi-gcp 10.2.0's "Import" sections
(storage.Bucket: the name or `project/name`; the others as `pulumi import` examples in each class's docstring)."""


def test_the_import_commands_name_resources_the_program_registers(plan_of):
    section = before_up_section().split("## After a half-failed `up`", 1)[1]
    text = re.sub(r"\s*\\\n\s*", " ", section)
    shell_variables = dict(re.findall(r"^\s*(\w+)='([^']+)'$", text, flags=re.M))
    commands = re.findall(r"pulumi import (\S+) (\S+) (\S+) --parent (\S+)", text)
    assert len(commands) == 5
    for type_, name, import_id, parent in commands:
        parent = shell_variables.get(parent.strip('"').removeprefix("$"), parent.strip("'"))
        parent_urn = parent.split("=", 1)[1]
        stack = parent_urn.split("::", 1)[0].removeprefix("urn:pulumi:")
        matching = [r for r in plan_of(stack).resources if r.type == type_ and r.name == name]
        assert len(matching) == 1, (type_, name)
        assert matching[0].parent == parent_urn and matching[0].retain_on_delete, (type_, name)
        assert import_id == IMPORT_IDS[type_](matching[0].inputs), (type_, name)


PLAN_SPELLINGS = re.compile(r"[\w./-]*python3? -m (?:infra )?plan\b")
"""Any spelling of the plan command that runs Python: the one allowed is `.venv/bin/python -m plan`."""


def _other_spellings(text: str) -> list[str]:
    return [found for found in PLAN_SPELLINGS.findall(text) if found != ".venv/bin/python -m plan"]


def test_the_plan_command_has_one_spelling_in_the_readme_the_makefile_and_the_cli_messages(tmp_path):
    """Issue 21 item 7: `make plan [STACK=...] [AGAINST=DIR]` or `.venv/bin/python -m plan`, never
    `python -m infra plan` nor a bare `python -m plan`, in what the user reads: the README, the Makefile, the
    plan command's help and its messages (an --against directory without a plan names the command to write one)."""
    help_text = subprocess.run(
        [sys.executable, "-m", "plan", "--help"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    ).stdout
    (tmp_path / "empty").mkdir()
    refusal = subprocess.run(
        [sys.executable, "-m", "plan", "--stack", "dev", "--against", str(tmp_path / "empty")],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
    ).stderr  # fmt: skip
    assert refusal == (
        f"error: --against {tmp_path / 'empty'}: holds no plan.json (write one with make plan, or"
        " .venv/bin/python -m plan --out DIR)\n"
    )
    for name, text in [
        ("README.md", README),
        *((f"docs/{page.name}", page.read_text()) for page in sorted((REPO_ROOT / "docs").glob("*.md"))),
        ("Makefile", (REPO_ROOT / "Makefile").read_text()),
        ("--help", help_text),
        ("--against refusal", refusal),
    ]:
        assert _other_spellings(text) == [], name
    assert help_text.startswith("usage: .venv/bin/python -m plan ")
    assert (
        "$(PY) -m plan --stack $(STACK) $(if $(AGAINST),--against $(AGAINST))" in (REPO_ROOT / "Makefile").read_text()
    )


def test_the_one_spelling_check_finds_the_other_spellings():
    assert _other_spellings(
        "run `python -m infra plan --stack dev` or python3 -m plan or .venv/bin/python -m plan"
    ) == [
        "python -m infra plan",
        "python3 -m plan",
    ]


def test_the_readme_names_the_skipped_tests_and_says_ci_has_shared():
    """Issue 21 item 7: the tests skipped without ../shared are named (tests/test_skips.py runs them) and CI has it."""
    development = doc("development.md")
    for test_id in __import__("tests.test_skips", fromlist=["SHARED_TESTS"]).SHARED_TESTS:
        assert f"`{test_id.split('::')[0]}`" in development, test_id
    assert "CI has `../shared`" in development
    assert "test -d ../shared ||" in (REPO_ROOT / ".ci" / "run").read_text()


def test_the_readme_is_a_front_door_under_250_lines_linking_every_page_under_docs():
    """Issue 20 item 4: what a newcomer needs first stays in the README; every reference page is one link away."""
    assert len(README.splitlines()) < 250
    pages = sorted(page.name for page in (REPO_ROOT / "docs").glob("*.md"))
    assert pages and all(f"](docs/{page})" in README for page in pages)
    for section in ("## Quick start", "## Real use", "## Shipped stacks", "## Where to read on"):
        assert section in README


def test_the_configuration_page_says_one_wandb_run_per_attempt_as_the_code_sets_it():
    """Issue 34 item 5: each attempt gets its own WANDB_RUN_ID (incluster/runs.py for_attempt), so the key's row says
    one W&B run per attempt, never one run that every attempt resumes."""
    from jobs.spec.training import for_attempt, submission_for

    submission = submission_for(config_of("dev", wandb_key="wandb-ReadmeTestKey-0123456789abcdef"))
    ids = {for_attempt(submission, attempt)["runtime_env"]["env_vars"]["WANDB_RUN_ID"] for attempt in (1, 2)}
    assert len(ids) == 2
    row = next(line for line in doc("configuration.md").splitlines() if line.startswith("| `grpo-gke:wandbApiKey` |"))
    assert "one W&B run per attempt" in row and "resume" not in row.split("|")[3]


def test_the_runs_page_lists_every_subcommand_of_the_cli():
    """Issue 34 item 5: the CLI line of docs/runs.md names every subcommand jobs/cli/main.py has, `park` included."""
    from jobs.cli.main import COMMANDS

    listed = re.search(r"python -m jobs ([a-z|]+) --stack NAME", doc("runs.md")).group(1).split("|")
    assert listed == [*COMMANDS, "guard"]


def test_the_readme_says_which_torch_make_test_installs():
    """Issue 34 item 5: requirements-test.txt pins PyPI's torch with no CPU index, whose Linux x86_64 wheel is the CUDA
    build; the quick start names that pin and says so (should the file gain a CPU index, this fails)."""
    pins = (REPO_ROOT / "requirements-test.txt").read_text()
    torch = next(line for line in pins.splitlines() if line.startswith("torch"))
    assert "index-url" not in pins and "+cpu" not in torch
    quick_start = README.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    assert f"`{torch}` from PyPI" in quick_start and "CUDA 13 build" in quick_start
    assert "torch (CPU" not in quick_start


def test_real_use_says_what_was_proven_the_passphrase_and_the_rewritten_stack_file():
    """Issue 34 item 5: no Pulumi CLI ran here (the tests use the SDK's mocks, at requirements.txt's pin); the local
    backend's passphrase; `pulumi config set` rewrites the tracked stack file."""
    real_use = README.split("## Real use", 1)[1].split("\n## ", 1)[0]
    pulumi = next(
        line for line in (REPO_ROOT / "requirements.txt").read_text().splitlines() if line.startswith("pulumi==")
    )
    assert "No Pulumi CLI ran" in real_use and f"`{pulumi}`" in real_use
    assert "PULUMI_CONFIG_PASSPHRASE" in real_use and "pulumi login --local" in real_use
    assert "`pulumi config set`" in real_use and "rewrites the tracked" in real_use


def test_real_use_prices_the_first_run_stack_with_its_plans_own_figures(plan_of):
    """The first-run paragraph's $/h, idle $/h, time from `up` to the first step, its cost and the first run's cap
    (job.maxGpuHours at the stack's $/h) are those `python -m plan --stack first-run` computes (plan/prices.py estimate, plan/startup.py estimate_startup)."""
    config = config_of("first-run")
    cost = estimate(config, catalog())
    assert cost.unpriced == ()
    to_first_step = estimate_startup(config, plan_of("first-run").resources).from_up.seconds
    gpu = next(line.hourly for line in cost.lines if line.part == "gpu nodes")
    paragraph = " ".join(README.split("## Real use", 1)[1].split("```", 1)[0].split())
    assert f"prices it at ${cost.total:.2f}/h while the L4 runs (${gpu:.2f} of it the spot node)" in paragraph
    assert f"${cost.idle.hourly:.2f}/h idle with the GPU at zero" in paragraph
    assert f"models about {to_first_step / 60:.0f} min from `pulumi up` to the first step" in paragraph
    assert f"about ${cost.total * to_first_step / 3600:.2f} to reach it, then ${cost.total:.2f}" in paragraph
    cap = config.job.max_gpu_hours / config.total_gpus * cost.total
    first = cost.total * to_first_step / 3600
    assert f"`job.maxGpuHours: {config.job.max_gpu_hours:g}` is the first run's cap" in paragraph
    assert f"costs at most about ${first + cap:.2f} (${first:.2f}, then 4 h for ${cap:.2f})" in paragraph
    assert "first-run" in README.split("## Shipped stacks", 1)[1] and "small and cheap" not in README
