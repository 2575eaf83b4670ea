"""Stand-in for huggingface_hub: downloads come from $STAND_IN_HUB/<repo>/<filename>; each call is logged."""

import json
import os
from pathlib import Path


def _record(call: dict) -> None:
    with open(Path(os.environ["STAND_IN_HUB"]) / "calls.jsonl", "a") as calls:
        calls.write(json.dumps(call) + "\n")


def hf_hub_download(repo_id: str, filename: str, repo_type: str | None = None) -> str:
    """The local copy of `filename` of `repo_id`."""
    _record({"call": "hf_hub_download", "repo_id": repo_id, "filename": filename, "repo_type": repo_type})
    path = Path(os.environ["STAND_IN_HUB"]) / repo_id / filename
    if not path.exists():
        raise FileNotFoundError(f"no {filename} in {repo_id}")
    return str(path)


def snapshot_download(
    repo_id: str, local_dir: str | None = None, token: str | None = None, repo_type: str | None = None
) -> str:
    """Creates `local_dir` (the model's files are not needed offline)."""
    _record({"call": "snapshot_download", "repo_id": repo_id, "local_dir": local_dir, "repo_type": repo_type})
    if local_dir:
        Path(local_dir).mkdir(parents=True, exist_ok=True)
    return local_dir or ""
