"""The staging Job's renderer and the staging program's pure parts (no network)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from core import names
from core.facts.platform import DEFAULT_IMAGES, VERL_VERSION
from core.facts.pods import HUB_DATASETS, STAGING_DEADLINE_SECONDS, VERL_TRANSFORMERS
from tests.conftest import combination_config
from tests.workloads.conftest import TEST_TOKEN
from workloads import paths, staging, staging_script

SAMPLE = [
    ("Tom has 3 apples and buys 2. How many?", "He has 3+2=<<3+2=5>>5 apples.\n#### 5"),
    ("A farm earns $1,250 a day. Weekly?", "1,250*7=<<1250*7=8750>>8,750\n#### 8,750"),
    ("Temperature drops 4 from 1. Now?", "1-4=-3\n#### -3"),
]


def test_gsm8k_rows_follow_verls_row_format():
    rows = staging_script.gsm8k_rows("train", [q for q, _ in SAMPLE], [a for _, a in SAMPLE])
    assert [row["reward_model"]["ground_truth"] for row in rows] == ["5", "8750", "-3"]
    first = rows[0]
    assert set(first) == {"data_source", "prompt", "ability", "reward_model", "extra_info"}
    assert first["data_source"] == "openai/gsm8k" and first["ability"] == "math"
    assert first["prompt"] == [
        {
            "role": "user",
            "content": SAMPLE[0][0] + ' Let\'s think step by step and output the final answer after "####".',
        }
    ]
    assert first["reward_model"] == {"style": "rule", "ground_truth": "5"}
    assert first["extra_info"] == {"split": "train", "index": 0, "answer": SAMPLE[0][1], "question": SAMPLE[0][0]}
    assert [row["extra_info"]["index"] for row in rows] == [0, 1, 2]


def test_a_solution_without_a_final_answer_is_refused():
    with pytest.raises(ValueError, match="####"):
        staging_script.final_answer("no answer here")
    with pytest.raises(ValueError):
        staging_script.gsm8k_rows("test", ["q1", "q2"], ["#### 1"])


def test_finished_steps_are_skipped_on_a_rerun(tmp_path, capsys):
    markers = tmp_path / "markers"
    staging_script.mark(markers, staging_script.marker_key("gsm8k", "v1"))
    staging_script.mark(markers, staging_script.marker_key("model", "Qwen/Qwen2.5-0.5B-Instruct"))
    staging_script.stage_gsm8k(tmp_path / "gsm8k", markers)
    staging_script.stage_model("Qwen/Qwen2.5-0.5B-Instruct", tmp_path / "model", markers)
    out = capsys.readouterr().out
    assert "gsm8k: already in" in out and "already staged" in out
    assert not (tmp_path / "gsm8k").exists() and not (tmp_path / "model").exists()
    assert not staging_script.done(markers, staging_script.marker_key("model", "Qwen/Other"))


def test_an_unfinished_step_starts_from_an_empty_directory(tmp_path):
    leftover = tmp_path / "gsm8k"
    (leftover / "sub").mkdir(parents=True)
    (leftover / "train.parquet").write_text("half")
    assert staging_script.fresh_dir(leftover) == leftover
    assert list(leftover.iterdir()) == []
    assert staging_script.fresh_dir(tmp_path / "new" / "dir").is_dir()


def test_verl_options_go_together():
    with pytest.raises(SystemExit):
        staging_script.parse_args(["--model", "a/b", "--model-dir", "/d", "--markers", "/m", "--verl-version", "0.9.1"])


def test_command_stages_verl_and_gsm8k_for_verl():
    config = combination_config(framework="verl")
    command = staging.staging_command(config)
    args = staging_script.parse_args(command[2:])
    assert str(args.model_dir) == paths.model_dir(config) and args.model == config.workload.model
    assert args.verl_version == VERL_VERSION and args.transformers_version == VERL_TRANSFORMERS
    assert str(args.verl_dir) == paths.verl_site_dir() and str(args.gsm8k_dir) == paths.gsm8k_dir()
    assert args.dataset == []


def test_command_caches_the_hub_data_sets_for_nemo_rl():
    args = staging_script.parse_args(staging.staging_command(combination_config(framework="nemo-rl"))[2:])
    assert args.verl_version is None and args.gsm8k_dir is None
    assert args.dataset == list(HUB_DATASETS["deepscaler"])


def test_job_waits_fails_fast_and_is_kept_for_pulumi():
    job = staging.render_job(combination_config())
    annotations = job.metadata.annotations
    assert "pulumi.com/skipAwait" not in annotations
    assert int(annotations["pulumi.com/timeoutSeconds"]) > job.spec.active_deadline_seconds
    assert job.spec.backoff_limit <= 3 and job.spec.ttl_seconds_after_finished is None
    assert job.spec.active_deadline_seconds == STAGING_DEADLINE_SECONDS
    pod = job.spec.template.spec
    assert pod.restart_policy == "Never" and pod.service_account_name == names.RAY_SERVICE_ACCOUNT
    # streamed by default (issue 33 item 4): verl's image through the stack's Docker Hub remote repository
    pulled = names.registry_image(DEFAULT_IMAGES["verl"].image, "us-central1", "my-grpo-project", "grpo-test")
    assert pod.containers[0].image == pulled
    assert [m.mount_path for m in pod.containers[0].volume_mounts] == [names.DATA_MOUNT, staging.SCRIPT_DIR]


def test_job_reads_the_token_from_the_secret_only_when_set():
    with_token = staging.render_job(combination_config(token=TEST_TOKEN)).spec.template.spec.containers[0].env
    token = [e for e in with_token if e.name == "HF_TOKEN"]
    assert len(token) == 1 and token[0].value is None
    assert token[0].value_from.secret_key_ref.name == names.HF_TOKEN_SECRET
    without = staging.render_job(combination_config()).spec.template.spec.containers[0].env
    assert [e.name for e in without] == ["HF_HOME"] and without[0].value == paths.hf_home()


@pytest.mark.parametrize(
    ("mode", "selector"), [("standard", {"cloud.google.com/gke-nodepool": names.HEAD_NODE_POOL}), ("autopilot", None)]
)
def test_job_runs_on_cpu_capacity(mode, selector):
    assert staging.render_job(combination_config(mode)).spec.template.spec.node_selector == selector


def test_the_script_ships_in_the_config_map_and_its_digest_marks_the_pod():
    config_map = staging.render_script_config_map()
    assert config_map.data == {"staging_script.py": staging.SCRIPT.read_text()}
    gcs = staging.render_job(combination_config(storage_type="gcs")).spec.template.metadata.annotations
    lustre = staging.render_job(combination_config(storage_type="lustre")).spec.template.metadata.annotations
    assert gcs["gke-gcsfuse/volumes"] == "true" and "gke-gcsfuse/volumes" not in lustre
    assert len(gcs[staging.SCRIPT_DIGEST_ANNOTATION]) == 64


STAND_INS = Path(__file__).with_name("staging_stand_ins")
"""huggingface_hub, pyarrow and pip stand-ins for running the staging program offline."""

HUB_GSM8K_FILES = {"train": "main/train-00000-of-00001.parquet", "test": "main/test-00000-of-00001.parquet"}
"""The parquet files of openai/gsm8k's `main` configuration on the Hub (huggingface.co/datasets/openai/gsm8k)."""


def test_the_staging_program_writes_the_gsm8k_files_the_job_reads(tmp_path):
    """The staging Job's own command, run for real on a stand-in download, writes paths.gsm8k_files()."""
    hub = tmp_path / "hub"
    for split, filename in HUB_GSM8K_FILES.items():
        source = hub / "openai" / "gsm8k" / filename
        source.parent.mkdir(parents=True, exist_ok=True)
        source.write_text(json.dumps([{"question": f"{split} {q}", "answer": a} for q, a in SAMPLE]))
    data = tmp_path / "data"
    command = staging.staging_command(combination_config(framework="verl"))
    on_disk = [arg.replace(names.DATA_MOUNT, str(data), 1) if arg.startswith(f"{names.DATA_MOUNT}/") else arg
               for arg in command[2:]]  # fmt: skip
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(STAND_INS), "STAND_IN_HUB": str(hub)}
    result = subprocess.run(
        [sys.executable, str(staging.SCRIPT), *on_disk], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.endswith("[staging] all staged\n")
    written = {f"{names.DATA_MOUNT}/{path.relative_to(data)}" for path in data.rglob("*.parquet")}
    assert written == set(paths.gsm8k_files())
    train = json.loads((data / Path(paths.gsm8k_files().train).relative_to(names.DATA_MOUNT)).read_text())
    assert [row["reward_model"]["ground_truth"] for row in train] == ["5", "8750", "-3"]
    assert train[0]["extra_info"]["question"] == f"train {SAMPLE[0][0]}"
