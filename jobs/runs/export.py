"""Hand over the model: the export Ray job's submission for a run's checkpoint, which turns it into a Hugging Face
model directory at `/data/exports/<run>/step-<N>/` with a `lineage.json` (incluster/export_run.py runs on the cluster).

verl 0.9.1: `python3 -m verl.model_merger merge --backend fsdp --local_dir <global_step_N>/actor --target_dir
<dir>` (verl/model_merger/base_model_merger.py parse_args). NeMo-RL v0.7.0, per the recipe's backend
(docs/design-docs/checkpointing.md L5-38): a DTensor recipe's checkpoint through `uv run python
examples/converters/convert_dcp_to_hf.py --config <step_N>/config.yaml --dcp-ckpt-path <step_N>/policy/weights
--hf-ckpt-path <dir>`, which reads a torch DCP `.metadata` in the weights or their `model/`
(nemo_rl/utils/native_checkpoint.py L241-253; the run saves `model_save_format: torch_save` for it, jobs/spec/training.py),
and a Megatron recipe's through `uv run --extra mcore python examples/converters/convert_megatron_to_hf.py --config
<step_N>/config.yaml --megatron-ckpt-path <step_N>/policy/weights/iter_0000000 --hf-ckpt-path <dir>` (checkpointing.md
L33-37; the script L71-92 takes the model from the config's policy.model_name). The driver asks for one GPU so Ray
runs it on a GPU worker: the merge holds the whole model in host memory, which the head's 32 GiB may not have.
Pure: no Ray, no I/O.
"""

from __future__ import annotations

import shlex
from dataclasses import replace
from typing import Any

from core import names
from core.config.model import StackConfig
from core.facts.job import NEMO_RL_WORKDIR
from incluster.export_run import STEP_DIR, TARGET_DIR, export_submission_id
from jobs.spec.training import TrainingSpec, nemo_rl_recipe, run_directory

EXPORT_ROOT = f"{names.DATA_MOUNT}/exports"
"""Where every run's exported models live on the shared storage."""


def exports_dir(run: str) -> str:
    """The run's exports directory (one `step-<N>` model directory per export)."""
    return f"{EXPORT_ROOT}/{run}"


def export_uri(bucket: str) -> str:
    """The `gs://` path of the exports directory on a bucket mounted at DATA_MOUNT."""
    return f"gs://{bucket}/{EXPORT_ROOT.removeprefix(names.DATA_MOUNT + '/')}"


MEGATRON_ITERATION_DIR = "iter_0000000"
"""The Megatron checkpoint's directory inside a NeMo-RL step's policy/weights (NeMo-RL v0.7.0
docs/design-docs/checkpointing.md L36, docs/about/evaluation.md L23)."""


def converter_command(framework: str, backend: str = "dtensor") -> list[str]:
    """The converter of the framework (and for NeMo-RL of the recipe's `backend`, dtensor or megatron), with
    @STEP_DIR@ and @TARGET_DIR@ for the checkpoint and the model directory."""
    if framework == "verl":
        return [
            "python3", "-m", "verl.model_merger", "merge", "--backend", "fsdp",
            "--local_dir", f"{STEP_DIR}/actor", "--target_dir", TARGET_DIR,
        ]  # fmt: skip
    if backend == "megatron":
        script = (
            "uv run --extra mcore python examples/converters/convert_megatron_to_hf.py --config"
            f" {STEP_DIR}/config.yaml --megatron-ckpt-path {STEP_DIR}/policy/weights/{MEGATRON_ITERATION_DIR}"
        )
    else:
        script = (
            "uv run python examples/converters/convert_dcp_to_hf.py --config"
            f" {STEP_DIR}/config.yaml --dcp-ckpt-path {STEP_DIR}/policy/weights"
        )
    return ["bash", "-c", f"cd {NEMO_RL_WORKDIR} && {script} --hf-ckpt-path {TARGET_DIR}"]


def for_run(spec: TrainingSpec, run: str) -> TrainingSpec:
    """The stack's run's `spec` made that of `run`, another run of the same stack and framework (an earlier
    generation, an `--entrypoint`'s): its id, its directory and the paths of its environment that name them, all the
    export reads of a spec besides the framework."""
    if run == spec.run:
        return spec
    run_dir = run_directory(run)
    env = {key: value.replace(spec.run_dir, run_dir).replace(spec.run, run) for key, value in spec.env_vars.items()}
    return replace(spec, run=run, run_dir=run_dir, env_vars=env)


EXPORT_OF = "exportOf"
"""The metadata key that makes a job an export and names its run (an attempt's metadata names it under `run`)."""


def export_of(metadata: dict[str, Any] | None) -> str | None:
    """The run a job exports, from its metadata; None when the job is no export."""
    run = (metadata or {}).get(EXPORT_OF)
    return run if isinstance(run, str) and run else None


def export_submission(
    config: StackConfig,
    spec: TrainingSpec,
    step: int | None = None,
    converter: list[str] | None = None,
) -> dict[str, Any]:
    """Keyword arguments of JobSubmissionClient.submit_job for the export of `spec`'s run: `step` (with its
    deterministic submission id, incluster/export_run.py export_submission_id), else its newest complete checkpoint
    (Ray picks the id; the guardian pins the step with for_step); `converter` replaces the framework's (tests). A run
    on this machine places its paths under `--data-root` as an attempt's (jobs/spec/training.py on_data_root)."""
    run = spec.run
    if converter is None:
        backend = nemo_rl_recipe(config).backend if spec.framework == "nemo-rl" else "dtensor"
        converter = converter_command(spec.framework, backend)
    command = [
        "python3", "-m", "incluster.export_run",
        "--framework", spec.framework,
        "--run-dir", spec.run_dir,
        "--world-size", str(config.total_gpus),
        "--exports-root", exports_dir(run),
        "--run", run,
        "--spec-hash", run.rsplit("-", 1)[1],
        *(["--step", str(step)] if step is not None else []),
        "--",
        *converter,
    ]  # fmt: skip
    # No `run` in the metadata, so the export is never taken for an attempt of the run.
    return {
        **({"submission_id": export_submission_id(run, step)} if step is not None else {}),
        "entrypoint": shlex.join(command),
        "entrypoint_num_gpus": 1,
        "runtime_env": {"env_vars": dict(spec.env_vars)},
        "metadata": {
            "stack": config.stack,
            "framework": spec.framework,
            EXPORT_OF: run,
            "step": str(step or "newest"),
        },
    }
