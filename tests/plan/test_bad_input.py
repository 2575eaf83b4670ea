"""Every bad input to `python -m infra plan` is refused the way the user meets it: exit 2, one clean
line per problem on stderr naming the file or key and what to do, no traceback, nothing written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from plan.cli import EXIT_BAD_INPUT, main
from tests.conftest import REPO_ROOT, SHIPPED_STACKS, shipped_stack_file


def plan_in(directory: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m infra plan ARGS` as the user runs it from `directory`."""
    return subprocess.run(
        [sys.executable, "-m", "infra", "plan", *args],
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
        "  grpo-gke:gpu.type: must be one of 'b200' or 'h200', got 'a100'\n"
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
