"""The stack-file loader reads `Pulumi.<stack>.yaml` into config values the way the Pulumi CLI does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from core.stackfile import OPAQUE_SECRET, StackFileError, read_stack_file, stack_file, stack_name_of
from jobs.spec.load import load_config
from tests.core.test_config import OPEN_CONTROL_PLANE

PROJECT = "grpo-gke"


def write(tmp_path: Path, text: str, name: str = "Pulumi.test.yaml") -> Path:
    """A stack file holding `text`."""
    path = tmp_path / name
    path.write_text(text)
    return path


def test_namespaced_keys_kept_and_bare_keys_get_the_project_namespace(tmp_path: Path) -> None:
    """`gcp:region` stays as is; `zone` becomes `grpo-gke:zone` (the CLI's default namespace)."""
    path = write(tmp_path, "config:\n  gcp:region: us-central1\n  zone: us-central1-b\n")
    loaded = read_stack_file(path, PROJECT)
    assert loaded.values == {"gcp:region": "us-central1", "grpo-gke:zone": "us-central1-b"}
    assert loaded.secret_keys == frozenset()


@pytest.mark.parametrize(
    ("yaml_value", "expected"),
    [
        ("true", "true"),
        ("false", "false"),
        ("3", "3"),
        ("1.5", "1.5"),
        ("'true'", "true"),
        ("'007'", "007"),
        ("plain text", "plain text"),
    ],
    ids=["bool-true", "bool-false", "int", "float", "quoted-bool", "quoted-digits", "string"],
)
def test_top_level_scalars_become_strings(tmp_path: Path, yaml_value: str, expected: str) -> None:
    """Top-level booleans and numbers reach the program as their text, as the CLI passes them."""
    loaded = read_stack_file(write(tmp_path, f"config:\n  grpo-gke:value: {yaml_value}\n"), PROJECT)
    assert loaded.values == {"grpo-gke:value": expected}


def test_objects_and_lists_become_json(tmp_path: Path) -> None:
    """Objects and lists are JSON text (keys sorted) whose numbers and booleans keep their type."""
    text = (
        "config:\n"
        "  grpo-gke:grpo:\n"
        "    promptsPerStep: 32\n"
        "    learningRate: 3.0e-7\n"
        "  grpo-gke:storage:\n"
        "    type: lustre\n"
        "    keepOnDestroy: false\n"
        "  grpo-gke:list:\n"
        "    - 1\n"
        "    - two\n"
    )
    values = read_stack_file(write(tmp_path, text), PROJECT).values
    assert values["grpo-gke:grpo"] == '{"learningRate": 3e-07, "promptsPerStep": 32}'
    assert json.loads(values["grpo-gke:grpo"]) == {"learningRate": 3e-7, "promptsPerStep": 32}
    assert json.loads(values["grpo-gke:storage"]) == {"keepOnDestroy": False, "type": "lustre"}
    assert json.loads(values["grpo-gke:list"]) == [1, "two"]


def test_top_level_secure_value_is_an_opaque_secret(tmp_path: Path) -> None:
    """A `secure:` value cannot be decrypted offline: an opaque placeholder, its key marked secret."""
    path = write(
        tmp_path, "config:\n  grpo-gke:hfToken:\n    secure: AAABAHVzZXJzZWNyZXQ=\n  gcp:region: us-central1\n"
    )
    loaded = read_stack_file(path, PROJECT)
    assert loaded.values["grpo-gke:hfToken"] == OPAQUE_SECRET
    assert loaded.secret_keys == frozenset({"grpo-gke:hfToken"})
    assert "AAABAHVzZXJzZWNyZXQ=" not in repr(loaded)


def test_nested_secure_values_make_the_whole_key_secret(tmp_path: Path) -> None:
    """A `secure:` value inside an object or list is replaced in place and the key is secret."""
    text = (
        "config:\n"
        "  grpo-gke:workload:\n"
        "    model: Qwen/Qwen2.5-0.5B-Instruct\n"
        "    extraEnv:\n"
        "      WANDB_API_KEY:\n"
        "        secure: AAABAGNpcGhlcg==\n"
        "  grpo-gke:tokens:\n"
        "    - plain\n"
        "    - secure: AAABAGxpc3Q=\n"
        "  grpo-gke:zone: us-central1-b\n"
    )
    loaded = read_stack_file(write(tmp_path, text), PROJECT)
    assert json.loads(loaded.values["grpo-gke:workload"]) == {
        "extraEnv": {"WANDB_API_KEY": OPAQUE_SECRET},
        "model": "Qwen/Qwen2.5-0.5B-Instruct",
    }
    assert json.loads(loaded.values["grpo-gke:tokens"]) == ["plain", OPAQUE_SECRET]
    assert loaded.secret_keys == frozenset({"grpo-gke:workload", "grpo-gke:tokens"})
    assert "AAAB" not in repr(loaded)


def test_object_with_secure_and_other_keys_is_not_a_secret(tmp_path: Path) -> None:
    """Only an object whose single key is `secure` is an encrypted value."""
    path = write(tmp_path, "config:\n  grpo-gke:thing:\n    secure: x\n    other: y\n")
    loaded = read_stack_file(path, PROJECT)
    assert json.loads(loaded.values["grpo-gke:thing"]) == {"other": "y", "secure": "x"}
    assert loaded.secret_keys == frozenset()


@pytest.mark.parametrize(
    ("name", "stack"),
    [("Pulumi.dev.yaml", "dev"), ("Pulumi.verl-standard-h200.yaml", "verl-standard-h200"), ("Pulumi.a.b.yml", "a.b")],
)
def test_stack_name_from_file_name(tmp_path: Path, name: str, stack: str) -> None:
    """The stack name is the file name between `Pulumi.` and `.yaml`/`.yml`."""
    assert stack_name_of(Path(name)) == stack
    assert read_stack_file(write(tmp_path, "config: {}\n", name), PROJECT).stack == stack


def test_stack_name_of_other_file_is_its_stem() -> None:
    """A file not named `Pulumi.<stack>.yaml` is named by its stem."""
    assert stack_name_of(Path("custom.yaml")) == "custom"


def test_explicit_stack_name_wins(tmp_path: Path) -> None:
    """A stack name passed in overrides the one in the file name."""
    assert read_stack_file(write(tmp_path, "config: {}\n"), PROJECT, stack="other").stack == "other"


def test_stack_file_path(tmp_path: Path) -> None:
    """`stack_file` names `Pulumi.<stack>.yaml` in the directory, and round-trips through stack_name_of."""
    path = stack_file(tmp_path, "dev")
    assert path == tmp_path / "Pulumi.dev.yaml"
    assert stack_name_of(path) == "dev"


@pytest.mark.parametrize("text", ["", "config:\n", "encryptionsalt: abc\n"], ids=["empty", "null-config", "no-config"])
def test_file_without_config_has_no_values(tmp_path: Path, text: str) -> None:
    """An empty file, an empty `config:` or none at all give no values (as the CLI does)."""
    loaded = read_stack_file(write(tmp_path, text), PROJECT)
    assert (loaded.values, loaded.secret_keys) == ({}, frozenset())


def test_a_date_is_the_text_it_was_written_as(tmp_path: Path) -> None:
    """YAML reads 2024-01-01 as a date; the value is the text, alone or inside an object."""
    values = read_stack_file(
        write(tmp_path, "config:\n  grpo-gke:a: 2024-01-01\n  grpo-gke:b:\n    day: 2024-01-02\n"), PROJECT
    ).values
    assert values == {"grpo-gke:a": "2024-01-01", "grpo-gke:b": '{"day": "2024-01-02"}'}


def test_missing_file(tmp_path: Path) -> None:
    """A missing stack file is one clear error naming the path."""
    path = tmp_path / "Pulumi.nope.yaml"
    with pytest.raises(StackFileError) as caught:
        read_stack_file(path, PROJECT)
    assert str(caught.value) == f"{path}: no such stack file"


def test_directory_is_not_a_stack_file(tmp_path: Path) -> None:
    """A directory of that name is said to be one, not a missing file."""
    path = tmp_path / "Pulumi.dir.yaml"
    path.mkdir()
    with pytest.raises(StackFileError) as caught:
        read_stack_file(path, PROJECT)
    assert str(caught.value) == f"{path}: is a directory, not a stack file; name a Pulumi.<stack>.yaml file"


def test_a_missing_file_lists_the_stacks_beside_it(tmp_path: Path) -> None:
    """A missing stack file names the stacks that do exist in its directory."""
    write(tmp_path, "config: {}\n", "Pulumi.b.yaml")
    write(tmp_path, "config: {}\n", "Pulumi.a.yaml")
    (tmp_path / "Pulumi.dir.yaml").mkdir()
    with pytest.raises(StackFileError) as caught:
        read_stack_file(tmp_path / "Pulumi.c.yaml", PROJECT)
    assert str(caught.value) == f"{tmp_path / 'Pulumi.c.yaml'}: no such stack file (stacks here: a, b)"


def test_bad_yaml(tmp_path: Path) -> None:
    """Unparsable YAML is one error naming the file, without a traceback chain."""
    path = write(tmp_path, "config:\n  gcp:region: [unclosed\n")
    with pytest.raises(StackFileError) as caught:
        read_stack_file(path, PROJECT)
    assert str(caught.value).startswith(f"{path}:3:1: not valid YAML: "), "the file, line and column"
    assert caught.value.__suppress_context__


@pytest.mark.parametrize(
    "text",
    ["- a\n- b\n", "just text\n", "config:\n  - gcp:region\n", "config: text\n"],
    ids=["document-list", "document-scalar", "config-list", "config-scalar"],
)
def test_not_a_stack_config(tmp_path: Path, text: str) -> None:
    """A document that is not a mapping with a `config:` mapping is refused, naming the file."""
    path = write(tmp_path, text)
    with pytest.raises(StackFileError) as caught:
        read_stack_file(path, PROJECT)
    assert str(caught.value) == f"{path}: expected a mapping with a 'config:' mapping"


STACK = """\
config:
  gcp:project: my-grpo-project
  gcp:region: us-central1
  grpo-gke:zone: us-central1-b
  grpo-gke:gpu:
    type: h200
    nodes: 1
  grpo-gke:storage:
    type: gcs
    keepOnDestroy: false
  grpo-gke:workload:
    framework: verl
    model: Qwen/Qwen2.5-0.5B-Instruct
    dataset: gsm8k
  grpo-gke:grpo:
    learningRate: 3.0e-7
"""


def test_secure_token_through_the_config_model(tmp_path: Path) -> None:
    """A `secure:` hfToken loads as a secret, without the plaintext warning."""
    path = write(tmp_path, STACK + "  grpo-gke:hfToken:\n    secure: AAABAHRva2Vu\n")
    stack = read_stack_file(path, PROJECT)
    loaded = load_config(stack.values, stack.secret_keys, stack.stack)
    assert loaded.warnings == (OPEN_CONTROL_PLANE,)
    assert loaded.config.hf_token is not None
    assert loaded.config.storage.keep_on_destroy is False
    assert loaded.config.grpo.learning_rate == 3e-7


def test_plaintext_token_through_the_config_model(tmp_path: Path) -> None:
    """A plaintext hfToken in the stack file loads with the warning."""
    path = write(tmp_path, STACK + "  grpo-gke:hfToken: hf_plain\n")
    stack = read_stack_file(path, PROJECT)
    loaded = load_config(stack.values, stack.secret_keys, stack.stack)
    assert len(loaded.warnings) == 2 and loaded.warnings[1] == OPEN_CONTROL_PLANE
    assert "pulumi config set --secret grpo-gke:hfToken" in loaded.warnings[0]
