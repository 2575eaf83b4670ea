"""Stage the model, verl and the data set onto the shared storage, once, before training.

Runs inside the workload image as the staging Job (shipped in a ConfigMap). Each step leaves a
marker file when it has finished, so a rerun skips what is done, and a step without its marker
starts again from an empty directory: a half-finished step never looks finished. Uses only the standard library plus what the
images carry (huggingface_hub, pyarrow, pip). Never prints the token.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

GSM8K_REPO = "openai/gsm8k"
"""Hugging Face data set id of GSM8K; also the rows' data_source, which routes verl's reward."""

GSM8K_FILES = {"train": "main/train-00000-of-00001.parquet", "test": "main/test-00000-of-00001.parquet"}
"""The `main` configuration's parquet file of each split in the data set repository."""

INSTRUCTION = 'Let\'s think step by step and output the final answer after "####".'
"""Appended to every question (verl's documented GSM8K prompt)."""

ANSWER = re.compile(r"#### (-?[0-9.,]+)")
"""The final answer at the end of a GSM8K solution."""


def final_answer(solution: str) -> str:
    """The number after `####` in a GSM8K solution, without thousands separators."""
    match = ANSWER.search(solution)
    if match is None:
        raise ValueError(f"no '#### <number>' in solution: {solution[-80:]!r}")
    return match.group(1).replace(",", "")


def gsm8k_row(split: str, index: int, question: str, solution: str) -> dict:
    """One GSM8K example in verl's row format (data_source, prompt, ability, reward_model, extra_info)."""
    return {
        "data_source": GSM8K_REPO,
        "prompt": [{"role": "user", "content": f"{question} {INSTRUCTION}"}],
        "ability": "math",
        "reward_model": {"style": "rule", "ground_truth": final_answer(solution)},
        "extra_info": {"split": split, "index": index, "answer": solution, "question": question},
    }


def gsm8k_rows(split: str, questions: list[str], solutions: list[str]) -> list[dict]:
    """All rows of one split, indexed from 0 in source order."""
    return [gsm8k_row(split, index, q, s) for index, (q, s) in enumerate(zip(questions, solutions, strict=True))]


def log(message: str) -> None:
    """One progress line on stdout (the Job's log)."""
    print(f"[staging] {message}", flush=True)


def done(markers: Path, key: str) -> bool:
    """Whether the step `key` finished in an earlier run."""
    return (markers / key).exists()


def mark(markers: Path, key: str) -> None:
    """Record that the step `key` finished."""
    markers.mkdir(parents=True, exist_ok=True)
    (markers / key).write_text("done\n")


def marker_key(*parts: str) -> str:
    """A file name for a step, from its parameters."""
    return "--".join(re.sub(r"[^A-Za-z0-9._-]+", "_", part) for part in parts)


def fresh_dir(path: Path) -> Path:
    """`path` as an empty directory: whatever an interrupted run left there (no marker) is removed.
    Nothing is renamed, which a flat bucket under GCS FUSE would refuse for directories."""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path


def stage_model(model: str, target: Path, markers: Path) -> None:
    """Download the model's files into `target` (HF_TOKEN from the environment when set)."""
    key = marker_key("model", model)
    if done(markers, key):
        log(f"model {model}: already staged in {target}")
        return
    from huggingface_hub import snapshot_download

    log(f"model {model}: downloading into {target}")
    snapshot_download(repo_id=model, local_dir=str(target), token=os.environ.get("HF_TOKEN") or None)
    mark(markers, key)
    log(f"model {model}: done")


def stage_verl(version: str, transformers: str, target: Path, markers: Path) -> None:
    """Install verl (and the transformers it needs) without dependencies into `target`."""
    key = marker_key("verl", version, "transformers", transformers)
    if done(markers, key):
        log(f"verl {version}: already installed in {target}")
        return
    log(f"verl {version}: pip install --no-deps verl=={version} transformers=={transformers} into {target}")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-cache-dir", "--target", str(fresh_dir(target)),
         f"verl=={version}", f"transformers=={transformers}"],
        check=True,
    )
    mark(markers, key)
    log(f"verl {version}: done")


def stage_gsm8k(target: Path, markers: Path) -> None:
    """Write `<target>/{train,test}.parquet` in verl's row format from the GSM8K data set."""
    key = marker_key("gsm8k", "v1")
    if done(markers, key):
        log(f"gsm8k: already in {target}")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq
    from huggingface_hub import hf_hub_download

    fresh_dir(target)
    for split, filename in sorted(GSM8K_FILES.items()):
        source = pq.read_table(hf_hub_download(GSM8K_REPO, filename, repo_type="dataset"))
        rows = gsm8k_rows(split, source.column("question").to_pylist(), source.column("answer").to_pylist())
        pq.write_table(pa.Table.from_pylist(rows), target / f"{split}.parquet")
        log(f"gsm8k: {split}: {len(rows)} rows")
    mark(markers, key)


def stage_datasets(repos: list[str], markers: Path) -> None:
    """Fill HF_HOME's hub cache with these data set repositories, so the trainer finds them there."""
    from huggingface_hub import snapshot_download

    for repo in repos:
        key = marker_key("dataset", repo)
        if done(markers, key):
            log(f"data set {repo}: already cached")
            continue
        log(f"data set {repo}: caching into {os.environ.get('HF_HOME', '~/.cache/huggingface')}")
        snapshot_download(repo_id=repo, repo_type="dataset", token=os.environ.get("HF_TOKEN") or None)
        mark(markers, key)


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line the staging Job passes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="Hugging Face model id")
    parser.add_argument("--model-dir", required=True, type=Path, help="where the model's files go")
    parser.add_argument("--markers", required=True, type=Path, help="directory of the marker files")
    parser.add_argument("--verl-version", help="verl release to install (verl)")
    parser.add_argument("--transformers-version", help="transformers to install beside verl (verl)")
    parser.add_argument("--verl-dir", type=Path, help="pip --target directory of verl (verl)")
    parser.add_argument("--gsm8k-dir", type=Path, help="directory of the GSM8K parquet files (verl)")
    parser.add_argument("--dataset", action="append", default=[], help="data set repository to cache in HF_HOME")
    args = parser.parse_args(argv)
    verl = (args.verl_version, args.transformers_version, args.verl_dir)
    if any(verl) and not all(verl):
        parser.error("--verl-version, --transformers-version and --verl-dir go together")
    return args


def main(argv: list[str]) -> int:
    """Run every requested step; any failure exits non-zero so the Job, and `pulumi up`, fail."""
    args = parse_args(argv)
    stage_model(args.model, args.model_dir, args.markers)
    if args.verl_version:
        stage_verl(args.verl_version, args.transformers_version, args.verl_dir, args.markers)
    if args.gsm8k_dir:
        stage_gsm8k(args.gsm8k_dir, args.markers)
    if args.dataset:
        stage_datasets(args.dataset, args.markers)
    log("all staged")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
