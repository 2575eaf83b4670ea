"""The shared-storage layout that the staging Job writes and the job layer reads."""

from core import names
from core.facts.platform import VERL_VERSION
from jobs.spec.load import load_config
from workloads import paths


def _config(model: str):
    values = {
        "gcp:project": "my-grpo-project",
        "gcp:region": "us-central1",
        "grpo-gke:zone": "us-central1-b",
        "grpo-gke:gpu": '{"type": "h200", "nodes": 1}',
        "grpo-gke:storage": '{"type": "gcs"}',
        "grpo-gke:workload": f'{{"framework": "verl", "model": "{model}", "dataset": "gsm8k"}}',
        "grpo-gke:grpo": '{"promptsPerStep": 64, "miniBatchSize": 32}',
    }
    return load_config(values, (), "test").config


def test_every_path_is_under_the_mount():
    config = _config("Qwen/Qwen2.5-0.5B-Instruct")
    every = [
        paths.model_dir(config),
        paths.verl_site_dir(),
        *paths.gsm8k_files(),
        paths.hf_home(),
        paths.checkpoint_root(),
        paths.staging_markers_dir(),
    ]
    assert all(path.startswith(names.DATA_MOUNT + "/") for path in every)
    assert len(set(every)) == len(every)


def test_model_dir_follows_the_model_id():
    assert paths.model_dir(_config("Qwen/Qwen2.5-0.5B-Instruct")) == "/data/models/Qwen/Qwen2.5-0.5B-Instruct"
    assert paths.model_dir(_config("meta-llama/Llama-3.1-8B")) == "/data/models/meta-llama/Llama-3.1-8B"


def test_verl_dir_is_versioned_and_gsm8k_files_are_verl_parquet():
    assert paths.verl_site_dir().endswith(f"/verl/{VERL_VERSION}")
    assert paths.gsm8k_files() == ("/data/gsm8k/train.parquet", "/data/gsm8k/test.parquet")
    assert paths.gsm8k_files().train.endswith("train.parquet")
