"""The job layer: Ray job submission, verl's entry point, NeMo-RL's releases and recipes.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

RAY_JOB_START_TIMEOUT_SECONDS = 900
"""Ray keeps a job that cannot be placed PENDING this long, and stop_job does not clear it
(`RAY_JOB_START_TIMEOUT_SECONDS` default; jobs-and-frameworks.md §3, observed on Ray 2.60)."""

VERL_ENTRY_MODULE = "verl.trainer.main_ppo"
"""verl's PPO/GRPO trainer, a Hydra app over `trainer/config/ppo_trainer.yaml` (verl 0.9.1, §1)."""

VERL_CONFIG_NAME = "ppo_trainer"
"""The Hydra config `main_ppo` composes (`@hydra.main(config_name="ppo_trainer")`, verl 0.9.1)."""

NEMO_RL_WORKDIR = "/opt/nemo-rl"
"""Source tree (examples/, configs) in every nvcr.io/nvidia/nemo-rl image, v0.4.0 to main (B.5)."""


@dataclass(frozen=True)
class NemoRlRelease:
    """How one NeMo-RL release is launched and which override keys it has (NRL tags)."""

    entry_script: str
    """GRPO entry script, relative to NEMO_RL_WORKDIR."""
    dataset_layout: Literal["flat", "split"]
    """`flat`: `data.dataset_name`; `split`: `data.train.dataset_name` plus `data.validation`."""
    recipes_carry_converter_type: bool
    """The example recipes still carry `policy.megatron_cfg.converter_type` (removed in #2640)."""


NEMO_RL_RELEASE_FACTS: dict[str, NemoRlRelease] = {
    # run_grpo_math.py and a flat data.dataset_name up to v0.5.0 (v0.5.0 also ships run_grpo.py,
    # but its recipes keep the flat key); run_grpo.py and data.train/data.validation from v0.6.0
    # (commit 4b48248 "unify entrypoint"). converter_type is in every recipe up to v0.6.0 and gone
    # in v0.7.0 (ecf7259 "Remove unused converter type (#2640)"). Read from the tags' examples/.
    "v0.4.0": NemoRlRelease("examples/run_grpo_math.py", "flat", True),
    "v0.5.0": NemoRlRelease("examples/run_grpo_math.py", "flat", True),
    "v0.6.0": NemoRlRelease("examples/run_grpo.py", "split", True),
    "v0.7.0": NemoRlRelease("examples/run_grpo.py", "split", False),
}
"""Launch facts of each release in NEMO_RL_RELEASES."""


@dataclass(frozen=True)
class NemoRlRecipe:
    """One NeMo-RL example GRPO recipe (`--config`) and where its knobs live."""

    config: str
    """Recipe path relative to NEMO_RL_WORKDIR."""
    max_size_b: float
    """Largest model, in billions of parameters, this recipe is chosen for."""
    backend: Literal["dtensor", "megatron"]
    """Training backend the recipe enables."""
    learning_rate_key: str
    """Where the recipe keeps the learning rate."""
    model_parallel_gpus: int
    """GPUs one model replica spans (Megatron TP x PP; 1 for DTensor recipes)."""
    rollout_tensor_parallel: int
    """The recipe's `policy.generation.vllm_cfg.tensor_parallel_size`."""
    train_micro_batch_size: int
    """The recipe's `policy.train_micro_batch_size`."""


NEMO_RL_RECIPES: tuple[NemoRlRecipe, ...] = (
    # examples/configs/grpo_math_{1B,8B,70B_megatron}.yaml exist unchanged in name at v0.4.0 to
    # v0.7.0. 1B and 8B are DTensor recipes with `policy.optimizer.kwargs.lr`; the 70B recipe
    # sets `policy.optimizer: null` and keeps its learning rate under megatron_cfg, with TP4 x PP4.
    # `policy.generation.vllm_cfg.tensor_parallel_size` and `policy.train_micro_batch_size`: 1B 1 and 4,
    # 8B 1 and 1, 70B 8 and 1, the same at the v0.4.0, v0.5.0, v0.6.0 and v0.7.0 tags (read from the
    # tags' examples/configs on 2026-12-01; 1B and 70B also in ../shared/nemo-rl v0.4.0 and main).
    NemoRlRecipe("examples/configs/grpo_math_1B.yaml", 3, "dtensor", "policy.optimizer.kwargs.lr", 1, 1, 4),
    NemoRlRecipe("examples/configs/grpo_math_8B.yaml", 14, "dtensor", "policy.optimizer.kwargs.lr", 1, 1, 1),
    NemoRlRecipe(
        "examples/configs/grpo_math_70B_megatron.yaml", 1000, "megatron", "policy.megatron_cfg.optimizer.lr", 16, 8, 1
    ),
)
"""Recipes in order of size; a model uses the first whose max_size_b it does not exceed."""

MODEL_CONTEXT_TOKENS: dict[str, tuple[int, str]] = {
    # config.json `max_position_embeddings`, which vLLM takes as max_model_len when none is given. Qwen2.5-0.5B-Instruct:
    # 32768 (a copy of Qwen/Qwen2.5-0.5B-Instruct's config.json, huggingface.co/unsloth/Qwen2.5-0.5B-Instruct blame
    # 00bafb7, `_name_or_path` Qwen/Qwen2.5-0.5B-Instruct; Qwen's Qwen2.5-1.5B-Instruct-GGUF README, commit 9a67271:
    # "Context Length: Full 32,768 tokens and generation 8192 tokens"; read 2026-12-07). Qwen2.5-32B-Instruct and
    # Qwen2.5-72B-Instruct, the other shipped stacks' models: their cards say "The current `config.json` is set for
    # context length up to 32,768 tokens" and name 131,072 only with YaRN's rope_scaling added to it (Qwen's cards as
    # copied in github.com/ZHUI/paddlenlp_model_readme Qwen/Qwen2.5-32B-Instruct/index.md and
    # Qwen/Qwen2.5-72B-Instruct/index.md at 10d0a05, "Processing Long Texts"; read 2026-12-07).
    "Qwen/Qwen2.5-": (32768, "Qwen2.5's config.json max_position_embeddings, vLLM's max_model_len"),
    # Meta Llama 3 (8B and 70B): "Context length 8k" in the card's table (meta-llama/Meta-Llama-3-8B-Instruct's card as
    # copied in github.com/ZHUI/paddlenlp_model_readme meta-llama/Meta-Llama-3-8B-Instruct/index.md at 0abc042, read
    # 2026-12-07); 8k as 8192 tokens, its config.json's max_position_embeddings, is assumed (the file was not read).
    # Llama 3.1 and later (`Llama-3.1-`, `Meta-Llama-3.1-`) have no entry: their context was not read here.
    "meta-llama/Meta-Llama-3-": (8192, "the Meta Llama 3 card's 8k context"),
}
"""Model id prefix -> (context in tokens, where it comes from): prompt plus response must fit it."""

GATED_MODEL_OWNERS: dict[str, str] = {
    # The Hub's "Gated models" page (huggingface.co/docs/hub/models-gated, read 2026-12-07): a model with access
    # requests enabled is gated; its files need the token of a user whose request was granted. Meta's Llama 3 cards
    # turn it on with `extra_gated_prompt` and `extra_gated_fields` in their metadata
    # (huggingface.co/meta-llama/Meta-Llama-3-8B-Instruct README.md; the same front matter in the copy named above).
    "meta-llama/": "meta-llama's repositories on the Hugging Face Hub are gated (access requests, "
    "huggingface.co/docs/hub/models-gated)",
    # Google's Gemma cards: `extra_gated_heading: Access Gemma on Hugging Face` and "you're required to review and
    # agree to Google's usage license" in their front matter (read 2026-12-07 as copied, unchanged, into the README
    # front matter of repositories derived from google/gemma-2-27b-it and later Gemma models; Google's own files
    # were not read). No shipped stack or recipe uses Gemma.
    "google/gemma-": "Google's Gemma repositories on the Hugging Face Hub are gated (its usage license is accepted on "
    "the model's page, huggingface.co/docs/hub/models-gated)",
    # Qwen's repositories (every shipped stack's model) have no entry: not gated, assumed (no gating metadata of
    # theirs was read: the card copies above carry no front matter). Mistral's were not read either.
}
"""Hub owner or model prefix -> why its models are gated: the staging Job downloads them only with grpo-gke:hfToken.
Without it the staging Job learns it only from the Hub's answer to its download, minutes into `up`: the Hub answers a
gated repository's file request 401 or 403 with the header `X-Error-Code: GatedRepo`, which huggingface_hub's
hf_raise_for_status turns into GatedRepoError, "Cannot access gated repo for url ..." (huggingface/huggingface_hub
src/huggingface_hub/utils/_http.py, read at 01dd37b and in the 1.x httpx form, 2026-12-07; the version in the images
is not pinned here, the same header check assumed), raised by snapshot_download in workloads/staging_script.py."""

HF_ARCHITECTURES: dict[str, str] = {
    # `architectures[0]` of each family's Hugging Face config.json (Qwen2.5 models are Qwen2).
    "Qwen/Qwen2": "Qwen2ForCausalLM",
    "Qwen/Qwen3": "Qwen3ForCausalLM",
    "meta-llama/Llama-3": "LlamaForCausalLM",
    "meta-llama/Meta-Llama-3": "LlamaForCausalLM",
}
"""Model id prefix -> architecture, the value of NeMo-RL's `converter_type` (recipes up to v0.6.0)."""

NEMO_RL_DEEPSCALER = ("DeepScaler", "AIME2024", 16)
"""NeMo-RL's DeepScaler train set and its validation: AIME 2024 repeated 16 times (v0.7.0
examples/configs/distillation_math.yaml; the codelab's dataset)."""

TRAIN_ROWS: dict[str, int] = {
    # openai/gsm8k's dataset card (huggingface.co/datasets/openai/gsm8k README.md, dataset_info, config `main`: train
    # num_examples 7473, test 1319; read 2026-12-07). The staging Job converts every row of main's train file
    # (workloads/staging_script.py gsm8k_rows), and verl 0.9.1 drops none: data.filter_overlong_prompts is False
    # (verl/trainer/config/data/legacy_data.yaml L83) and train_max_samples -1 (L19).
    "gsm8k": 7473,
    # agentica-org/DeepScaleR-Preview-Dataset, the one split NeMo-RL v0.7.0 loads (nemo_rl/data/datasets/
    # response_datasets/deepscaler.py L29-31, split="train", whole: the class never calls split_train_validation, so the
    # recipe's data.train.split_validation_size is not applied). Its own card says "approximately 40,000" problems and
    # the Hub's viewer "train · 40.3k rows" (read 2026-12-07); the exact 40315 is assumed from a copy with the same
    # columns (huggingface.co/datasets/WaltonFuture/DeepScaleR README.md, train num_examples 40315, read 2026-12-07):
    # 40.3k rows are 1257 to 1260 steps of 32 prompts an epoch, so the figure is good to a few steps an epoch.
    "deepscaler": 40315,
}
"""`workload.dataset` -> rows of the training split the trainer reads: with the prompts of a step, the steps of an
epoch (incluster/budget.py last_step). A data set missing here has no projected end without grpo.maxSteps."""

# ---------------------------------------------------------------- deadline save (issue 12 item 5)

SCHEDULED_MAINTENANCE_LABEL = "cloud.google.com/scheduled-maintenance-time"
"""Node label GKE sets on a node with coming host maintenance; its value is the start as Unix seconds
(day-two-operations.md, "Preemption and recovery", from the AI Hypercomputer GKE docs; read 2026-12-01)."""

FLEX_START_MAX_SECONDS = 7 * 24 * 3600
"""Flex-start (Dynamic Workload Scheduler) capacity runs at most 7 days from when the node came up (GKE
concepts/dws, "up to 7 days"; day-two-operations.md; read 2026-12-01). Counted from the node's creation."""

VERL_DEADLINE_READER = "nothing"
"""What of verl 0.9.1's default trainer reads a deadline: nothing. `trainer.use_v1: true` (verl/trainer/config/
ppo_trainer.yaml L232) runs TaskRunnerV1 (verl/trainer/main_ppo.py L183-184), whose loop saves only at the last step
or every save_freq steps (verl/trainer/ppo/v1/trainer_base.py L481-482); `should_save_ckpt_esi` and its
MLP_CURRENT_CAPACITY_BLOCK_EXPIRATION_TIMESTAMP (verl/utils/checkpoint/checkpoint_manager.py L262-282) are called
only by the legacy trainer (verl/trainer/ppo/ray_trainer.py L1693, reached with the deprecated
`trainer.use_v1=false`, main_ppo.py L186-191) and the experimental fully_async and separation trainers. So verl is
told nothing: the run guardian stops a verl attempt after the last checkpoint that completes before the deadline."""

NEMO_RL_SAVE_BY_KEY = "checkpointing.checkpoint_must_save_by"
"""NeMo-RL v0.7.0's save-by setting: a duration `DD:HH:MM:SS` (nemo_rl/utils/timer.py convert_to_seconds L251-261)
counted from the TimeoutChecker's creation (timer.py L278 `self.start_time = time.time()`), which grpo_train makes
at its start (nemo_rl/algorithms/grpo.py L2147-2151), after Ray setup, model load and vLLM start; it saves once
elapsed time plus the mean step time reaches it (timer.py L296-306, `fit_last_save_time=True`), then stops
("Timeout has been reached, stopping training early", grpo.py L3123-3126). No absolute time is accepted."""

NEMO_RL_SETUP_BOUND_SECONDS = 45 * 60
"""The longest NeMo-RL setup allowed for, from the attempt's submission to grpo_train's TimeoutChecker (the
wrapper's resume check, Ray actors, the model and optimizer load from the shared storage, vLLM start): the
save-by duration is counted from the submission less this, so a shorter setup saves early by the difference,
never late (a project choice: a 70B DTensor or Megatron recipe on 2-8 nodes loads in well under it; a setup that
takes longer saves late by the excess, inside DEADLINE_SAVE_MARGIN_SECONDS)."""

DEADLINE_SAVE_MARGIN_SECONDS = 15 * 60
"""How long before a known end the framework is told to save: verl's own margin is only 60 s of saving plus
one step, and a large model's checkpoint on shared storage takes minutes (a project choice)."""
