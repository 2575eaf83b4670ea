"""Every bad input to `.venv/bin/python -m plan` is refused the way the user meets it: exit 2, one clean
line per problem on stderr naming the file or key and what to do, no traceback, nothing written."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from core.config.model import PROJECT_NAMESPACE
from core.stackfile import StackFileError, read_stack_file
from jobs.spec.load import load_stack
from plan.cli import EXIT_BAD_INPUT, main
from tests.conftest import REPO_ROOT, SHIPPED_STACKS, shipped_stack_file


def plan_in(directory: Path, *args: str) -> subprocess.CompletedProcess:
    """`.venv/bin/python -m plan ARGS` as the user runs it from `directory`."""
    return subprocess.run(
        [sys.executable, "-m", "plan", *args],
        cwd=directory, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def refused(result: subprocess.CompletedProcess) -> str:
    """The whole stderr of a refused run, after checking it is a clean refusal."""
    assert result.returncode == EXIT_BAD_INPUT, result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    return result.stderr


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"config:\n  gcp:region: [unclosed\n",
         "Pulumi.x.yaml:3:1: not valid YAML: expected ',' or ']', but got '<stream end>'"
         " (while parsing a flow sequence from line 2)"),
        (b"config:\n  gcp:project: a\n    b: c\n", "Pulumi.x.yaml:3:6: not valid YAML: mapping values are not allowed here"),
        (b"config:\n  gcp:project: caf\xe9\n", "Pulumi.x.yaml: is not UTF-8 text (byte 0xe9 at offset 26); save it as UTF-8"),
        (b"config:\n  1: 2\n", "Pulumi.x.yaml: config key 1 is not a string; keys are names such as grpo-gke:gpu"),
        (b"config:\n  grpo-gke:gpu:\n    type: h200\n    8: nodes\n",
         "Pulumi.x.yaml: config key grpo-gke:gpu.8 is not a string; keys are names such as grpo-gke:gpu"),
        (b"gcp:project: my-grpo-project\ngcp:region: us-central1\n",
         "Pulumi.x.yaml: gcp:project, gcp:region must sit under a top-level 'config:' mapping"
         " (indent them below a line 'config:')"),
        (b"config:\n  grpo-gke:zone: !!binary aGVsbG8=\n",
         "Pulumi.x.yaml: grpo-gke:zone holds a YAML bytes value; write it as a string, number, boolean, list or mapping"),
    ],
    ids=["yaml-unclosed", "yaml-indent", "not-utf8", "number-key", "nested-number-key", "no-config-wrapper", "binary"],
)  # fmt: skip
def test_an_unreadable_stack_file_is_one_line_naming_the_file(tmp_path, content, expected):
    (tmp_path / "Pulumi.x.yaml").write_bytes(content)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.x.yaml")) == f"error: {expected}\n"
    assert not (tmp_path / "build").exists()


def test_a_directory_or_a_fifo_named_as_the_stack_file_is_said_to_be_one(tmp_path):
    (tmp_path / "Pulumi.dir.yaml").mkdir()
    os.mkfifo(tmp_path / "Pulumi.fifo.yaml")
    assert refused(plan_in(tmp_path, "--config", "Pulumi.dir.yaml")) == (
        "error: Pulumi.dir.yaml: is a directory, not a stack file; name a Pulumi.<stack>.yaml file\n"
    )
    assert refused(plan_in(tmp_path, "--config", "Pulumi.fifo.yaml")) == (
        "error: Pulumi.fifo.yaml: is not a regular file; name a Pulumi.<stack>.yaml file\n"
    )


def test_a_stack_file_without_read_permission_is_one_line(tmp_path, monkeypatch, capsys):
    # The tests run as root, who reads any file whatever its mode: the refusal is simulated.
    path = tmp_path / "Pulumi.locked.yaml"
    path.write_text(shipped_stack_file("dev").read_text())

    def read_bytes(self: Path) -> bytes:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert main(["--config", str(path), "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: {path}: cannot be read: Permission denied\n")
    assert not (tmp_path / "out").exists()


def test_an_unknown_stack_lists_the_stacks_that_exist(tmp_path):
    stderr = refused(plan_in(REPO_ROOT, "--stack", "no-such-stack", "--out", str(tmp_path / "out")))
    first, _, listed = stderr.partition(" (stacks here: ")
    assert first == "error: Pulumi.no-such-stack.yaml: no such stack file"
    assert set(listed.removesuffix(")\n").split(", ")) >= set(SHIPPED_STACKS)
    assert stderr.endswith(")\n") and stderr.count("\n") == 1


def test_out_naming_an_existing_file_is_one_line_and_leaves_it(tmp_path):
    (tmp_path / "taken").write_text("mine\n")
    stderr = refused(plan_in(tmp_path, "--config", str(shipped_stack_file("dev")), "--out", "taken"))
    assert stderr == "error: --out taken: is a file, not a directory; name a directory\n"
    assert (tmp_path / "taken").read_text() == "mine\n"


def test_field_errors_and_cross_checks_are_reported_together(tmp_path):
    text = (
        shipped_stack_file("dev").read_text()
        .replace("type: h200", "type: a100")
        .replace("grpo-gke:zone: us-central1-b", "grpo-gke:zone: europe-west4-a")
        .replace("dataset: gsm8k", "dataset: deepscaler")
        .replace("type: gcs", 'type: gcs\n    keepOnDestroy: "yes"')
    )  # fmt: skip
    (tmp_path / "Pulumi.mixed.yaml").write_text(text)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.mixed.yaml")) == (
        "error: the config of stack 'mixed' (Pulumi.mixed.yaml) was refused:\n"
        "  grpo-gke:gpu.type: must be one of 'b200', 'h200' or 'l4', got 'a100'\n"
        "  grpo-gke:storage.keepOnDestroy: must be true or false, got 'yes'\n"
        "  grpo-gke:workload.dataset: workload.framework 'verl' with dataset 'deepscaler' has no staging or job"
        " mapping; use one of 'gsm8k'\n"
        "  grpo-gke:zone: must be a zone of gcp:region us-central1 (such as us-central1-b), got 'europe-west4-a'\n"
    )


def test_batch_rules_judge_derived_sizes_beside_a_refused_field(tmp_path):
    """A refused field in a stack that leaves the batch sizes to be derived: the batch rules still run, on the
    derived sizes (not on unset ones, which once raised a TypeError traceback)."""
    text = (
        shipped_stack_file("dev").read_text()
        .replace("    rolloutTensorParallel: 1\n", "")
        .replace("    microBatchSizePerGpu: 4\n", "")
        .replace("promptsPerStep: 64", "promptsPerStep: 63")
        .replace("generationsPerPrompt: 8", "generationsPerPrompt: 5")
        .replace("type: gcs", 'type: gcs\n    keepOnDestroy: "yes"')
    )  # fmt: skip
    (tmp_path / "Pulumi.mixed.yaml").write_text(text)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.mixed.yaml")) == (
        "error: the config of stack 'mixed' (Pulumi.mixed.yaml) was refused:\n"
        "  grpo-gke:grpo.miniBatchSize: must divide grpo.promptsPerStep (63), got 32\n"
        "  grpo-gke:grpo.promptsPerStep: promptsPerStep x generationsPerPrompt (63 x 5 = 315) must be divisible by"
        " the 8 GPUs of gpu.nodes=1\n"
        "  grpo-gke:storage.keepOnDestroy: must be true or false, got 'yes'\n"
    )


def test_control_plane_and_key_settings_are_refused_one_line_each(tmp_path):
    """A malformed authorized network, a key that is not a full resource name, and a key in another region
    (beside a field error): each one line naming the key, exit 2, nothing written."""
    cluster = (
        "  grpo-gke:cluster:\n"
        "    authorizedNetworks: [203.0.113.0/24, 203.0.113.7/24]\n"
        "    secretsKmsKey: {key}\n"
        "    dnsEndpoint: maybe\n"
    )
    dev = shipped_stack_file("dev").read_text()
    bad_name = dev.replace("  grpo-gke:cluster:\n", cluster.format(key="keyRings/gke/cryptoKeys/secrets"), 1)
    (tmp_path / "Pulumi.name.yaml").write_text(bad_name)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.name.yaml")) == (
        "error: the config of stack 'name' (Pulumi.name.yaml) was refused:\n"
        "  grpo-gke:cluster.authorizedNetworks: each entry must be an IPv4 CIDR range such as 203.0.113.0/24,"
        " got '203.0.113.7/24'\n"
        "  grpo-gke:cluster.dnsEndpoint: must be true or false, got 'maybe'\n"
        "  grpo-gke:cluster.secretsKmsKey: must be a key's full resource name"
        " projects/P/locations/L/keyRings/R/cryptoKeys/K, got 'keyRings/gke/cryptoKeys/secrets'\n"
    )
    other_region = dev.replace(
        "  grpo-gke:cluster:\n",
        "  grpo-gke:cluster:\n    secretsKmsKey: projects/my-keys-1/locations/europe-west4/keyRings/gke/cryptoKeys/s\n",
        1,
    )
    (tmp_path / "Pulumi.region.yaml").write_text(other_region)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.region.yaml")) == (
        "error: the config of stack 'region' (Pulumi.region.yaml) was refused:\n"
        "  grpo-gke:cluster.secretsKmsKey: must be a key in the cluster's region gcp:region us-central1"
        " (locations/us-central1), got one in 'europe-west4'\n"
    )
    assert not (tmp_path / "build").exists()


def test_an_ngc_key_pasted_in_place_of_its_secret_version_is_refused_and_never_printed(tmp_path):
    """The NGC API key itself in workload.ngcApiKeySecretVersion (a made-up key of NGC's personal-key shape): exit
    2, one line naming the key and what to do, the value nowhere in the output, nothing written; the same stack
    with the version's resource name plans."""
    pasted = "nvapi-Zx9Qm2Lw7Rt4Yp1Kc8Vb3Nd6Hf0Js5Ga2Xe7Uo4Ti1Wr9Qy3Pl6Mk8Zs"
    nemo = shipped_stack_file("nemo-rl-standard-b200").read_text()
    workload = "    dataset: deepscaler\n    imageSource: registry\n    ngcApiKeySecretVersion: {value}\n"
    (tmp_path / "Pulumi.ngc.yaml").write_text(
        nemo.replace("    dataset: deepscaler\n", workload.format(value=pasted), 1)
    )
    result = plan_in(tmp_path, "--config", "Pulumi.ngc.yaml")
    assert refused(result) == (
        "error: the config of stack 'ngc' (Pulumi.ngc.yaml) was refused:\n"
        "  grpo-gke:workload.ngcApiKeySecretVersion: looks like the key itself, not a resource name (the value is"
        " not shown): keep the key out of the stack config; store it in Secret Manager and set this to the"
        " version's resource name projects/P/secrets/S/versions/N (docs/configuration.md, Images)\n"
    )
    assert pasted not in result.stderr + result.stdout
    assert not (tmp_path / "build").exists()
    version = "projects/my-grpo-project/secrets/ngc-api-key/versions/1"
    (tmp_path / "Pulumi.ngc.yaml").write_text(
        nemo.replace("    dataset: deepscaler\n", workload.format(value=version), 1)
    )
    planned = plan_in(tmp_path, "--config", "Pulumi.ngc.yaml", "--out", str(tmp_path / "out"))
    assert planned.returncode == 0, planned.stderr
    assert version in (tmp_path / "out" / "plan.json").read_text()


DEV = shipped_stack_file("dev").read_text()
"""The dev stack's file: each case below changes one thing in it."""

NAMED_MISTAKES = [
    ("gpu-zone", DEV.replace("zone: us-central1-b", "zone: us-central1-c"),
     "grpo-gke:zone: us-central1-c has no a3-ultragpu-8g (H200); zones of us-central1 that have it: us-central1-b"
     " (Compute Engine's GPU regions and zones, core/facts/zones.py, read 2026-12-01)"),
    ("gpu-region", DEV.replace("type: h200", "type: b200").replace("us-central1", "europe-west1"),
     "gcp:region: has no zone with a4-highgpu-8g (B200); regions that have it: asia-northeast1, asia-southeast1,"
     " europe-north1, europe-west4, us-central1, us-east1, us-east4, us-south1, us-west2, us-west3"
     " (Compute Engine's GPU regions and zones, core/facts/zones.py, read 2026-12-01), got 'europe-west1'"),
    ("unknown-region", DEV.replace("us-central1", "us-central9"),
     "gcp:region: has no zone with a B200, H200 or L4 machine; regions that have one: asia-northeast1, asia-south1,"
     " asia-south2, asia-southeast1, europe-north1, europe-west1, europe-west2, europe-west3, europe-west4,"
     " europe-west6, me-central2, northamerica-northeast1, northamerica-northeast2, us-central1, us-east1, us-east4,"
     " us-east5, us-south1, us-west1, us-west2, us-west3, us-west4 (Compute Engine's GPU regions and zones,"
     " core/facts/zones.py, read 2026-12-01), got 'us-central9'"),
    ("namespace", DEV.replace("grpo-gke:zone:", "grpo_gke:zone:"),
     "grpo-gke:zone: is required\n  grpo_gke:zone: unknown namespace 'grpo_gke'; did you mean 'grpo-gke:zone'?"),
    ("flat-key-no-field", DEV + "  grpo-gke:gpu.nodez: 2\n",
     "grpo-gke:gpu.nodez: is a flat key naming no field of grpo-gke:gpu; did you mean 'grpo-gke:gpu.nodes'?"
     " (known: capacity, imageCacheDisk, nodes, provisioning, reservation, type)"),
    ("flat-key-field", DEV + "  grpo-gke:gpu.nodes: 2\n",
     "grpo-gke:gpu.nodes: is a flat key, not a field of grpo-gke:gpu: pulumi config rm grpo-gke:gpu.nodes, then"
     " pulumi config set --path grpo-gke:gpu.nodes <value>"),
    ("model-size", DEV.replace("model: Qwen/Qwen2.5-0.5B-Instruct", "model: my-org/house-model"),
     "grpo-gke:workload.modelSizeB: is required: the model id 'my-org/house-model' names no size such as 7B; set"
     " the parameters in billions (pulumi config set --path grpo-gke:workload.modelSizeB <N>)"),
]  # fmt: skip
"""Issue 21 items 2 and 4: each mistake, as the stack file holds it, and the one line that names it."""


@pytest.mark.parametrize(
    ("text", "line"), [case[1:] for case in NAMED_MISTAKES], ids=[case[0] for case in NAMED_MISTAKES]
)
def test_each_config_mistake_is_named_in_one_line(tmp_path, text, line):
    (tmp_path / "Pulumi.x.yaml").write_text(text)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.x.yaml")) == (
        f"error: the config of stack 'x' (Pulumi.x.yaml) was refused:\n  {line}\n"
    )
    assert not (tmp_path / "build").exists()


GOOD_CASES = [
    ("gpu-zone-elsewhere", DEV.replace("us-central1-b", "us-east4-b").replace("us-central1", "us-east4")),
    ("b200-zone", DEV.replace("type: h200", "type: b200").replace("us-central1-b", "us-central1-a")),
    ("other-namespace", DEV + "  kubernetes:context: mine\n  pulumi:tags: {team: rl}\n"),
    ("model-size-given", DEV.replace("model: Qwen/Qwen2.5-0.5B-Instruct", "model: my-org/house-model\n    modelSizeB: 0.5")),
]  # fmt: skip
"""The same rules' good cases: each loads (the full plan of shipped stacks runs in tests/plan/test_prices.py)."""


@pytest.mark.parametrize("text", [case[1] for case in GOOD_CASES], ids=[case[0] for case in GOOD_CASES])
def test_the_same_rules_accept_a_good_config(tmp_path, text):
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text(text)
    values = read_stack_file(path, PROJECT_NAMESPACE, "x")
    assert load_stack(values.values, values.secret_keys, "x").config.stack == "x"


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (DEV.replace("config:", "confg:"),
         "Pulumi.x.yaml: unknown top-level key 'confg'; did you mean 'config'? (a stack file holds config,"
         " encryptedkey, encryptionsalt, environment, secretsprovider)"),
        (DEV.replace("    nodes: 1\n", "    nodes: 1\n    type: b200\n"),
         "Pulumi.x.yaml:11: grpo-gke:gpu.type is given twice in one mapping (lines 9 and 11); keep one"),
        (DEV + "  gcp:region: us-east4\n",
         "Pulumi.x.yaml:27: gcp:region is given twice in one mapping (lines 4 and 27); keep one"),
    ],
    ids=["top-level", "duplicate-nested", "duplicate-top"],
)  # fmt: skip
def test_a_misspelt_top_level_or_a_key_given_twice_is_one_line_naming_the_lines(tmp_path, content, expected):
    (tmp_path / "Pulumi.x.yaml").write_text(content)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.x.yaml")) == f"error: {expected}\n"


def test_a_merge_key_is_no_duplicate(tmp_path):
    """A YAML merge (`<<:`) that a later key overrides is no key given twice."""
    path = tmp_path / "Pulumi.x.yaml"
    path.write_text("gpu: &gpu {type: h200, nodes: 1}\nconfig:\n  grpo-gke:gpu:\n    <<: *gpu\n    nodes: 2\n")
    with pytest.raises(StackFileError, match="unknown top-level key 'gpu'"):
        read_stack_file(path, PROJECT_NAMESPACE, "x")
    path.write_text("config:\n  grpo-gke:gpu:\n    <<: {type: h200, nodes: 1}\n    nodes: 2\n")
    assert read_stack_file(path, PROJECT_NAMESPACE, "x").values["grpo-gke:gpu"] == '{"nodes": 2, "type": "h200"}'


def test_a_stack_named_with_stack_is_refused_the_same_way(tmp_path):
    """`make plan STACK=NAME` runs `--stack NAME`: the stack file beside Pulumi.yaml, refused the same way."""
    checkout = tmp_path / "checkout"
    shutil.copytree(
        REPO_ROOT, checkout, symlinks=True, ignore=shutil.ignore_patterns(".git", ".venv", "build", "__pycache__", ".pytest_cache")
    )  # fmt: skip
    (checkout / "Pulumi.wrongzone.yaml").write_text(NAMED_MISTAKES[0][1])
    result = subprocess.run(
        [sys.executable, "-m", "plan", "--stack", "wrongzone"],
        cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert refused(result) == (
        f"error: the config of stack 'wrongzone' (Pulumi.wrongzone.yaml) was refused:\n  {NAMED_MISTAKES[0][2]}\n"
    )
    assert not (checkout / "build" / "wrongzone").exists()


def test_a_yaml_boolean_word_where_a_word_is_expected_is_told_to_be_quoted(tmp_path):
    """Issue 34 item 4: YAML 1.1 reads an unquoted `off` (or `on`, `no`, `yes`) as a boolean; where a word is expected
    the refusal says to quote it; quoted, the same stack is accepted (`jobs validate` loads it as the plan does)."""
    dev = shipped_stack_file("dev").read_text()
    bad = (
        dev.replace("  grpo-gke:cluster:\n", "  grpo-gke:cluster:\n    name: on\n", 1)
        + "  grpo-gke:job:\n    preflight: off\n"
    )
    (tmp_path / "Pulumi.bools.yaml").write_text(bad)
    assert refused(plan_in(tmp_path, "--config", "Pulumi.bools.yaml")) == (
        "error: the config of stack 'bools' (Pulumi.bools.yaml) was refused:\n"
        "  grpo-gke:cluster.name: must be a string, got True (YAML reads an unquoted on, yes or true as true: quote"
        ' the word, e.g. "on")\n'
        "  grpo-gke:job.preflight: must be one of 'full', 'gpu' or 'off', got False (YAML reads an unquoted off, no or"
        ' false as false: quote the word, e.g. "off")\n'
    )
    (tmp_path / "Pulumi.quoted.yaml").write_text(bad.replace("name: on", 'name: "on"').replace("off\n", '"off"\n'))
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "validate", "--stack", "quoted"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout.startswith("quoted: run quoted-")


def test_a_sample_longer_than_a_gpus_token_budget_is_refused_not_derived_as_one_sample(tmp_path):
    """Issue 34 item 4: with microBatchSizePerGpu left to derive, a full-length sample above the 16384 tokens a GPU
    takes per pass (core/facts/platform.py MICRO_BATCH_TOKENS_PER_GPU) is refused in one line, not derived as "hold 1
    samples of 65512 tokens" (max(1, ...) hid it); one that fits derives and validates."""
    dev = shipped_stack_file("dev").read_text().replace("    microBatchSizePerGpu: 4\n", "")
    (tmp_path / "Pulumi.long.yaml").write_text(dev.replace("maxResponseLength: 1024", "maxResponseLength: 65000"))
    assert refused(plan_in(tmp_path, "--config", "Pulumi.long.yaml")) == (
        "error: the config of stack 'long' (Pulumi.long.yaml) was refused:\n"
        "  grpo-gke:grpo.maxResponseLength: maxPromptLength + maxResponseLength (512 + 65000 = 65512 tokens) is more"
        " than the 16384 tokens a GPU takes per pass, so no microBatchSizePerGpu can be derived; shorten them, or set"
        " grpo.microBatchSizePerGpu: 1 to run one such sample per pass (the memory check then judges it)\n"
    )
    (tmp_path / "Pulumi.fits.yaml").write_text(dev.replace("maxResponseLength: 1024", "maxResponseLength: 15000"))
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "validate", "--stack", "fits"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "") and result.stdout.startswith("fits: run fits-")


def test_prompt_and_response_longer_than_the_models_context_are_refused(tmp_path):
    """Issue 34 item 4: Qwen2.5's context (core/facts/job.py MODEL_CONTEXT_TOKENS, 32768) bounds maxPromptLength +
    maxResponseLength, which the memory model (sizes only) never read; 32768 exactly is accepted."""
    dev = shipped_stack_file("dev").read_text()
    (tmp_path / "Pulumi.ctx.yaml").write_text(dev.replace("maxResponseLength: 1024", "maxResponseLength: 40000"))
    assert refused(plan_in(tmp_path, "--config", "Pulumi.ctx.yaml")) == (
        "error: the config of stack 'ctx' (Pulumi.ctx.yaml) was refused:\n"
        "  grpo-gke:grpo.maxResponseLength: maxPromptLength + maxResponseLength (512 + 40000 = 40512 tokens) is more"
        " than the 32768 tokens of Qwen/Qwen2.5-0.5B-Instruct's context (Qwen2.5's config.json"
        " max_position_embeddings, vLLM's max_model_len); shorten them\n"
    )
    (tmp_path / "Pulumi.fits.yaml").write_text(dev.replace("maxResponseLength: 1024", "maxResponseLength: 32256"))
    result = subprocess.run(
        [sys.executable, "-m", "jobs", "validate", "--stack", "fits"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert (result.returncode, result.stderr) == (0, "") and result.stdout.startswith("fits: run fits-")


@pytest.mark.parametrize(
    ("project", "line"),
    [
        ("name: my grpo\nruntime: python\n", "name must be the project's name (letters, digits, hyphens, underscores,"
         " periods), got 'my grpo'"),
        ("runtime: python\n", "name must be the project's name (letters, digits, hyphens, underscores, periods), got"
         " None"),
        ("name: grpo-gke\nruntime:\n  name: nodejs\n", "runtime must be python (this program is __main__.py), got"
         " 'nodejs'"),
        ("- name\n", "not a Pulumi project file (a mapping with name and runtime); restore it"),
    ],
)  # fmt: skip
def test_the_plan_refuses_a_project_file_pulumi_up_would_not_run(tmp_path, monkeypatch, capsys, project, line):
    """Issue 34 item 4: the offline plan reads Pulumi.yaml as `pulumi up` does (Pulumi's project file reference:
    `name` and `runtime` required); what it would not run is one line naming the file, exit 2, nothing written."""
    from plan import harness

    (tmp_path / "Pulumi.yaml").write_text(project)
    monkeypatch.setattr(harness, "PROJECT_FILE", tmp_path / "Pulumi.yaml")
    assert main(["--stack", "dev", "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"error: {tmp_path / 'Pulumi.yaml'}: {line}\n")
    assert not (tmp_path / "out").exists()


def test_the_plans_urns_carry_the_project_name_of_pulumi_yaml(tmp_path):
    """Issue 34 item 4: the shipped Pulumi.yaml's name is the plan's project; another name is in every URN, as
    `pulumi up` writes them (urn:pulumi:<stack>::<project>::...)."""
    from plan.harness import project_name, run_values
    from tests.conftest import values_of

    assert project_name() == "grpo-gke"
    (tmp_path / "Pulumi.yaml").write_text(
        "name: my-grpo\nruntime:\n  name: python\n  options:\n    virtualenv: .venv\n"
    )
    assert project_name(tmp_path / "Pulumi.yaml") == "my-grpo"
    recording = run_values(values_of("dev"), (), "dev", project="my-grpo")
    assert recording.resources and all(r.urn.startswith("urn:pulumi:dev::my-grpo::") for r in recording.resources)


def python_project(options: str) -> str:
    """A Pulumi.yaml of this program with `options` (YAML lines) under runtime.options."""
    return f"name: grpo-gke\nruntime:\n  name: python\n  options:\n{options}"


@pytest.mark.parametrize(
    ("options", "made", "line"),
    [
        ("    toolchain: conda\n", None, "runtime.options.toolchain must be one of pip, poetry, uv (Pulumi's Python"
         " host), got 'conda'"),
        ("    typechecker: ruff\n", None, "runtime.options.typechecker must be one of mypy, pyright (Pulumi's Python"
         " host), got 'ruff'"),
        ("    virtualenv: 3\n", None, "runtime.options.virtualenv must be a directory's path (a string), got 3"),
        ("    - virtualenv\n", None, "runtime.options must be a mapping (virtualenv, toolchain, typechecker), got"
         " ['virtualenv']"),
        ("    virtualenv: venv\n", "file", "runtime.options.virtualenv is {root}/venv, a file: name the virtual"
         " environment's directory"),
        ("    toolchain: pip\n    virtualenv: venv\n", "not-a-venv", "runtime.options.virtualenv is {root}/venv,"
         " which has no bin/python, so pulumi up would refuse it: name the virtual environment (python3 -m venv DIR"
         " makes one)"),
    ],
)  # fmt: skip
def test_the_plan_refuses_runtime_options_pulumis_python_host_would_not_run(
    tmp_path, monkeypatch, capsys, options, made, line
):
    """Issue 34 item 4: Pulumi.yaml's runtime options as the Python language host reads them (plan/harness.py
    runtime_options_problem: pulumi/pulumi v3.259.0 parseOptions, pip.go EnsureVenv and ValidateVenv): one line naming
    the file and the key, exit 2, nothing written."""
    from plan import harness

    project = tmp_path / "project"
    project.mkdir()
    if made == "file":
        (project / "venv").write_text("")
    elif made == "not-a-venv":
        (project / "venv" / "lib").mkdir(parents=True)
    (project / "Pulumi.yaml").write_text(python_project(options))
    monkeypatch.setattr(harness, "PROJECT_FILE", project / "Pulumi.yaml")
    assert main(["--stack", "dev", "--out", str(tmp_path / "out")]) == EXIT_BAD_INPUT
    captured = capsys.readouterr()
    expected = f"error: {project / 'Pulumi.yaml'}: {line.format(root=project.resolve())}\n"
    assert (captured.out, captured.err) == ("", expected)
    assert not (tmp_path / "out").exists()


def test_a_missing_virtualenv_is_a_warning_pulumi_up_makes_it_and_a_real_one_none(tmp_path, monkeypatch, capsys):
    """Issue 34 item 4: pulumi up makes a missing or empty pip virtualenv itself and installs requirements.txt into it
    (pip.go EnsureVenv through the host's GetRequiredPackages, pulumi/pulumi v3.259.0), so the plan goes on and says
    so; a virtual environment (bin/python) says nothing, nor does the shipped Pulumi.yaml beside this checkout's .venv."""
    from plan import harness

    project = tmp_path / "project"
    project.mkdir()
    (project / "Pulumi.yaml").write_text(python_project("    toolchain: pip\n    virtualenv: venv\n"))
    monkeypatch.setattr(harness, "PROJECT_FILE", project / "Pulumi.yaml")
    assert main(["--stack", "dev", "--out", str(tmp_path / "out")]) == 0
    warning = (
        f"warning: {project / 'Pulumi.yaml'}: runtime.options.virtualenv {project.resolve()}/venv is missing or empty:"
        " pulumi up makes it (python -m venv) and installs requirements.txt into it before it runs the program\n"
    )
    assert capsys.readouterr().err == warning
    assert (tmp_path / "out" / "plan.json").is_file()

    (project / "venv" / "bin").mkdir(parents=True)
    (project / "venv" / "bin" / "python").write_text("")
    assert harness.project_name(project / "Pulumi.yaml") == "grpo-gke"
    assert harness.virtualenv_note(project / "Pulumi.yaml") is None
    assert harness.virtualenv_note() is None
