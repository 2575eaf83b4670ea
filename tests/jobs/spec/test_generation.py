"""submit --fresh's edit of the stack file: job.runGeneration set or added, read back, else undone."""

from __future__ import annotations

import pytest

from core.config.model import PROJECT_NAMESPACE
from core.stackfile import read_stack_file
from jobs.spec.generation import record_generation, with_generation
from jobs.spec.load import load_config
from tests.conftest import shipped_stack_file


def generation_of(path) -> int:
    values = read_stack_file(path, PROJECT_NAMESPACE)
    return load_config(values.values, values.secret_keys, values.stack).config.job.run_generation


def test_a_stack_without_a_job_section_gets_one_and_keeps_every_other_line(tmp_path):
    path = tmp_path / "Pulumi.dev.yaml"
    original = shipped_stack_file("dev").read_text()
    path.write_text(original)
    record_generation(path, 1, generation_of)
    assert generation_of(path) == 1
    edited = path.read_text().splitlines()
    assert [line for line in edited if line not in original.splitlines()] == ["  grpo-gke:job:", "    runGeneration: 1"]


def test_a_job_section_gets_the_key_added_then_replaced(tmp_path):
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text(
        "# comment kept\nconfig:\n    gcp:project: p\n    grpo-gke:job:\n        submit: false\n"
        "    grpo-gke:hfToken:\n        secure: v1:abc\n"
    )
    added = with_generation(path.read_text(), 2)
    assert added == (
        "# comment kept\nconfig:\n    gcp:project: p\n    grpo-gke:job:\n        runGeneration: 2\n        submit: false\n"
        "    grpo-gke:hfToken:\n        secure: v1:abc\n"
    )
    assert with_generation(added, 3) == added.replace("runGeneration: 2", "runGeneration: 3")


def test_a_layout_the_edit_does_not_know_is_refused_and_a_bad_read_back_restored(tmp_path):
    path = tmp_path / "Pulumi.s.yaml"
    path.write_text("config: {gcp:project: p}\n")
    with pytest.raises(ValueError, match="pulumi config set --path grpo-gke:job.runGeneration 1"):
        record_generation(path, 1, generation_of)
    path.write_text("config:\n  gcp:project: p\n")
    with pytest.raises(ValueError, match="read back as 0, not 1; file restored"):
        record_generation(path, 1, lambda _: 0)
    assert path.read_text() == "config:\n  gcp:project: p\n"
