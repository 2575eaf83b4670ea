"""Where things live on the shared storage: the one layout the staging Job writes and the job layer reads.

Every pod mounts the shared storage (GCS FUSE or Managed Lustre) at `core.names.DATA_MOUNT`.
The staging Job fills it once before training; the job layer points the trainer at the same
paths (model, data files, PYTHONPATH, HF_HOME, checkpoints). Pure: no Pulumi, no I/O.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from core import names
from core.facts.platform import VERL_VERSION

if TYPE_CHECKING:
    from core.config.model import StackConfig

MOUNT = names.DATA_MOUNT
"""Mount path of the shared storage in every pod."""


class DataFiles(NamedTuple):
    """The training and validation files of a staged data set."""

    train: str
    """Training split."""
    test: str
    """Validation split."""


def model_dir(config: StackConfig) -> str:
    """Directory holding the configured Hugging Face model's files (`<mount>/models/<org>/<name>`)."""
    return f"{MOUNT}/models/{config.workload.model}"


def verl_site_dir() -> str:
    """`pip install --target` directory of the pinned verl release; put it first on PYTHONPATH."""
    return f"{MOUNT}/verl/{VERL_VERSION}"


def gsm8k_dir() -> str:
    """Directory of the GSM8K parquet files in verl's row format."""
    return f"{MOUNT}/gsm8k"


def gsm8k_files() -> DataFiles:
    """GSM8K train and test parquet files in verl's row format."""
    return DataFiles(train=f"{gsm8k_dir()}/train.parquet", test=f"{gsm8k_dir()}/test.parquet")


def hf_home() -> str:
    """Shared HF_HOME (Hub and datasets caches), filled once by the staging Job."""
    return f"{MOUNT}/hf-home"


def checkpoint_root() -> str:
    """Parent of every experiment's checkpoint directory."""
    return f"{MOUNT}/checkpoints"


def staging_markers_dir() -> str:
    """Marker files of finished staging steps, so a rerun skips them."""
    return f"{MOUNT}/.staged"
