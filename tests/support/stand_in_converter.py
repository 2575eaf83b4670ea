"""Stands in for the frameworks' checkpoint converters in the export tests: `python stand_in_converter.py SCRIPT ARGS`,
with SCRIPT the converter it plays and ARGS that converter's own arguments. Each checks what its source checks about
the target and the checkpoint, then writes a `config.json` naming the checkpoint it read.

- `convert_dcp_to_hf.py --config C --dcp-ckpt-path D --hf-ckpt-path H` (NeMo-RL v0.7.0
  examples/converters/convert_dcp_to_hf.py L23-43, L69-75: no `overwrite`): FileExistsError when H exists
  (nemo_rl/utils/native_checkpoint.py L235-238), then makes H (L239); reads the torch DCP `.metadata` in D or, for
  DTensor v2, in D/model, else FileNotFoundError (L241-253).
- `convert_megatron_to_hf.py --config C --megatron-ckpt-path M --hf-ckpt-path H` (NeMo-RL v0.7.0
  examples/converters/convert_megatron_to_hf.py L34-92, no `overwrite`): FileExistsError when H exists
  (nemo_rl/models/megatron/community_import.py L213-215); M must be the Megatron iteration directory.
- `verl.model_merger merge --backend fsdp --local_dir A --target_dir H` (verl 0.9.1
  verl/model_merger/base_model_merger.py L63, L162): makes H whether or not it exists; A holds the actor shards.

Both NeMo-RL scripts read C first (`yaml.safe_load(open(config))`, L50-51 and L75-76): a missing one fails.
`--fail` (ours) writes part of the model, then exits 1, as a converter cut short would.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def _parse(argv: list[str]) -> tuple[str, argparse.Namespace]:
    script, rest = argv[0], argv[1:]
    parser = argparse.ArgumentParser(prog=f"stand-in {script}")
    parser.add_argument("--fail", action="store_true")
    if script == "merge":
        parser.add_argument("--backend", required=True)
        parser.add_argument("--local_dir", required=True)
        parser.add_argument("--target_dir", required=True)
    else:
        parser.add_argument("--config", required=True)
        parser.add_argument("--hf-ckpt-path", required=True)
        parser.add_argument("--dcp-ckpt-path" if script == "convert_dcp_to_hf.py" else "--megatron-ckpt-path")
    return script, parser.parse_args(rest)


def main(argv: list[str]) -> int:
    """Convert as the named converter would; its exit code."""
    script, args = _parse(argv)
    if script == "merge":
        source, target = Path(args.local_dir), Path(args.target_dir)
        if not (source / "fsdp_config.json").is_file():
            raise FileNotFoundError(f"no FSDP checkpoint in {source}")
        os.makedirs(target, exist_ok=True)
    else:
        Path(args.config).read_text()
        target = Path(args.hf_ckpt_path)
        if target.exists():
            raise FileExistsError(f"HF checkpoint already exists at {target}. Delete it to run or set overwrite=True.")
        if script == "convert_dcp_to_hf.py":
            source = Path(args.dcp_ckpt_path)
            if not (source / ".metadata").exists():
                if not (source / "model" / ".metadata").exists():
                    raise FileNotFoundError(f"No metadata file found in {source} or {source / 'model'}.")
                source = source / "model"
        else:
            source = Path(args.megatron_ckpt_path)
            if not source.is_dir():
                raise FileNotFoundError(f"no Megatron checkpoint at {source}")
        os.makedirs(target)
    if args.fail:
        (target / "model-00001-of-00002.safetensors").write_text("part")
        print(f"stand-in {script}: cut short", flush=True)
        return 1
    (target / "config.json").write_text(json.dumps({"source": str(source)}))
    print(f"Saved HF checkpoint to: {target}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
