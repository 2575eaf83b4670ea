"""Stands in for verl's trainer on a real Ray cluster: a driver plus one Ray actor per GPU node that
holds the node's 8 GPUs and writes verl-layout checkpoints to `$GRPO_RUN_DIR`.

The layout is verl 0.9.1's (verl/utils/checkpoint/fsdp_checkpoint_manager.py `save_checkpoint`,
verl/trainer/ppo/ray_trainer.py `_save_checkpoint`): `global_step_<N>/actor/` holds
`model_world_size_<W>_rank_<r>.pt`, `optim_world_size_<W>_rank_<r>.pt` and
`extra_state_world_size_<W>_rank_<r>.pt` for every rank r < W, rank 0 adds `huggingface/` and
`fsdp_config.json`; then `global_step_<N>/data.pt` (the dataloader) and, last and only without
async_save (verl-project/verl#7952), `latest_checkpointed_iteration.txt`. It saves every
`--save-every` steps and at the last one, and prints the step's metric line after its save and weight sync, with
verl 0.9.1's names at its cadence (`metric_line`): `timing_s/<stage>` of the stages it pauses for (PHASES), of the
save on save steps only and of the weight sync, `timing_s/step` around them all, and `perf/throughput` per GPU.
It resumes as `trainer.resume_mode=auto` does (verl/utils/checkpoint/checkpoint_manager.py
`find_latest_ckpt_path`): from the step the tracker file names when that directory exists, reading every
shard of its ranks (a missing one fails the attempt, as torch.load would), else from scratch.

With `--keep K` it rotates as `trainer.max_actor_ckpt_to_keep=K` does (verl/trainer/ppo/v1/trainer_base.py
L964-979 hands the checkpoint manager `global_step_<N>/actor`; verl/utils/checkpoint/checkpoint_manager.py L59 starts
its list of saved paths empty in every attempt, L166-179 trims it to K-1 before a save when K >= 2, L181-194 to K
after it, and L156-164 rmtree only those actor directories): what it removes is a step's `actor/`, its `data.pt`
stays, and the steps of earlier attempts are never removed.

Faults, for the recovery tests and the demo (jobs/demo/lifecycle.py): `--hold-after N` (after step N the GPU actors wait for a node loss) and
`--half-save-at N` (step N's save writes half of the ranks' shards and no data.pt, then waits) happen
once per run, like a preemption; a wait ends after `--hold-seconds` with the GPU worker dying on its own.
`--cut-shard-at N` and `--damage-shard-at N` (once per run) are a node lost right after step N's save, before
all its bytes reached the shared storage (verl writes each shard straight to its name: verl v0.9.0
fsdp_checkpoint_manager.py L347-361): one shard cut short, or one whose first bytes are zero; the attempt then fails.
Shards and data.pt are zip archives laid out as torch.save writes them (`write_archive`), read back as torch.load
would, failing with torch's message (`read_archive`).
`--fail-at N` fails every attempt at step N with `--exit-code`, like a bug; `--evicted-samples K` logs verl's
evicted-samples metric on every step, as verl's V1 trainer does with a stale replay buffer.

`--deadline-stop-after N` (once per run, like the end of a node's capacity) stops the way NeMo-RL v0.7.0 stops at
its `checkpointing.checkpoint_must_save_by` (nemo_rl/algorithms/grpo.py): it saves step N whatever the save period
(L2880-2884: `should_save_by_timeout` saves, only when `checkpointing.enabled`; `--checkpointing-off` stands for it
off), prints NeMo-RL's exact "Timeout has been reached, stopping training early" (L3125) and returns (L3126), and
examples/run_grpo.py's main ends (L231-232), so the job exits 0 before the schedule's end. The checkpoint layout
stays verl's (the wrapper recognises NeMo-RL's line whatever the framework; verl 0.9.1 never prints it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import ray

from core.facts.platform import GPUS_PER_NODE

TRACKER = "latest_checkpointed_iteration.txt"
"""verl's tracker file of the newest checkpointed step, in the run directory."""

SHARD_KINDS = ("model", "optim", "extra_state")
"""The per-rank files of verl's FSDP checkpoint, in the order verl writes them."""

FAULTS_DIR = "stand-in"
"""Marker files of the once-per-run faults already injected, in the run directory."""

STEPS_ENV = "STAND_IN_STEPS"
"""The environment variable that gives the steps when `--steps` does not (the entrypoint is the run's identity,
the environment added after the spec is not, as verl's trainer.total_training_steps is a schedule override)."""

MAX_STEP_SECONDS = 5.0
"""Longest pause per step: the stand-in's runs stay short."""

NEMO_RL_DEADLINE_LINE = "Timeout has been reached, stopping training early"
"""NeMo-RL v0.7.0 nemo_rl/algorithms/grpo.py L3125, printed before grpo_train returns at its deadline."""

MAX_HOLD_SECONDS = 120.0
"""Longest wait for a node loss."""


TORCH_READ_FAILED = "PytorchStreamReader failed reading"
"""The start of torch's error for an archive torch.load cannot read (torch 2.13.0; a cut file: "... zip archive: failed
finding central directory"; a damaged member header: "... file data/0: invalid header or archive is corrupted")."""


def write_archive(path: Path, payload: dict) -> None:
    """Write `payload` as torch.save lays out a file: a zip archive whose members sit under the file's stem (`data.pkl`,
    `version`, ... `.data/serialization_id` last) and whose central directory comes last (torch 2.13.0
    torch/serialization.py L810-834, caffe2/serialize/inline_container.h L89-90); the stand-in pickles nothing, its
    `data.pkl` is JSON."""
    stem = path.name.removesuffix(".pt")
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{stem}/data.pkl", json.dumps(payload))
        archive.writestr(f"{stem}/version", "3\n")
        archive.writestr(f"{stem}/.data/serialization_id", "0" * 20)


def read_archive(path: Path) -> dict:
    """What `write_archive` wrote, read as torch.load would: RuntimeError with torch's message when it cannot."""
    try:
        with zipfile.ZipFile(path) as archive:
            try:
                return json.loads(archive.read(f"{path.name.removesuffix('.pt')}/data.pkl"))
            except (zipfile.BadZipFile, KeyError, ValueError) as error:
                raise RuntimeError(
                    f"{TORCH_READ_FAILED} file data.pkl: invalid header or archive is corrupted"
                ) from error
    except zipfile.BadZipFile as error:
        raise RuntimeError(f"{TORCH_READ_FAILED} zip archive: failed finding central directory") from error


def shard_name(kind: str, world_size: int, rank: int) -> str:
    """verl's file name of one rank's shard of `kind` (model, optim or extra_state)."""
    return f"{kind}_world_size_{world_size}_rank_{rank}.pt"


def step_dir(run_dir: Path, step: int) -> Path:
    """verl's directory of the checkpoint of `step`."""
    return run_dir / f"global_step_{step}"


@ray.remote(num_cpus=0, num_gpus=GPUS_PER_NODE, max_restarts=0)
class GpuWorker:
    """Holds one node's GPUs and that node's ranks of the world, like verl's FSDP workers."""

    def __init__(self, ranks: list[int], world_size: int) -> None:
        self.ranks, self.world_size = ranks, world_size

    def where(self) -> str:
        """The node and GPUs this worker holds."""
        node = ray.get_runtime_context().get_node_id()
        return f"node {node} GPUs {','.join(map(str, ray.get_gpu_ids()))}"

    def train(self, step: int, seconds: float) -> int:
        """One step's share of the work: a bounded pause."""
        time.sleep(seconds)
        return step

    def save(self, actor_dir: str, step: int, half: bool) -> list[str]:
        """Write this node's ranks' shards of `step` (only the first half of them when `half`)."""
        folder = Path(actor_dir)
        folder.mkdir(parents=True, exist_ok=True)
        ranks = self.ranks[: len(self.ranks) // 2] if half else self.ranks
        written = []
        for rank in ranks:
            for kind in SHARD_KINDS:
                path = folder / shard_name(kind, self.world_size, rank)
                write_archive(path, {"step": step, "rank": rank, "kind": kind})
                written.append(path.name)
            if rank == 0:
                (folder / "huggingface").mkdir(exist_ok=True)
                (folder / "huggingface" / "config.json").write_text(json.dumps({"architectures": ["StandIn"]}))
                (folder / "fsdp_config.json").write_text(json.dumps({"FSDP_version": 2, "world_size": self.world_size}))
        return written

    def load(self, actor_dir: str, step: int) -> None:
        """Read this node's ranks' shards of `step`; FileNotFoundError names the first one missing."""
        for rank in self.ranks:
            for kind in SHARD_KINDS:
                shard = read_archive(Path(actor_dir) / shard_name(kind, self.world_size, rank))
                if shard["step"] != step:
                    raise ValueError(f"{kind} shard of rank {rank} holds step {shard['step']}, not {step}")

    def hold(self, seconds: float) -> None:
        """Wait for the node to be lost; if it is not, die after `seconds` as a lost worker would."""
        time.sleep(seconds)
        print(f"stand-in: no node loss within {seconds:.0f} s; the GPU worker dies", flush=True)
        os._exit(1)


class Rotation:
    """verl's rotation of the actor checkpoints this attempt saved (checkpoint_manager.py L59, L156-194)."""

    def __init__(self, keep: int | None) -> None:
        self.keep, self.saved = keep, []  # previous_saved_paths: empty in every attempt

    def _remove(self, count: int) -> None:
        for actor_dir in self.saved[:count]:
            print(f"Checkpoint manager remove previous save local path: {actor_dir}", flush=True)
            shutil.rmtree(actor_dir, ignore_errors=True)
        self.saved = self.saved[count:]

    def before_save(self) -> None:
        """ensure_checkpoint_capacity: with K >= 2, keep K - 1 before the save."""
        if self.keep and self.keep > 1 and len(self.saved) >= self.keep:
            self._remove(len(self.saved) - self.keep + 1)

    def after_save(self, actor_dir: Path) -> None:
        """register_checkpoint: the saved actor directory joins the list, trimmed to K."""
        self.saved.append(actor_dir)
        if self.keep and self.keep > 0 and len(self.saved) > self.keep:
            self._remove(len(self.saved) - self.keep)


def once(run_dir: Path, fault: str) -> bool:
    """True the first time `fault` is asked for in this run (a marker file records it)."""
    markers = run_dir / FAULTS_DIR
    markers.mkdir(parents=True, exist_ok=True)
    try:
        (markers / fault).open("x").close()
    except FileExistsError:
        return False
    return True


def resume_step(run_dir: Path) -> int:
    """The step `resume_mode=auto` resumes from: the tracker's, when its directory exists; else 0."""
    tracker = run_dir / TRACKER
    if not tracker.exists():
        print(f"Checkpoint tracker file does not exist: {tracker}", flush=True)
        print("Training from scratch", flush=True)
        return 0
    step = int(tracker.read_text())
    if not step_dir(run_dir, step).exists():
        print(f"Checkpoint does not exist: {step_dir(run_dir, step)}", flush=True)
        print("Training from scratch", flush=True)
        return 0
    print(f"Resuming from {step_dir(run_dir, step)}", flush=True)
    return step


EVICTED_SAMPLES = "training/off_policy/evicted_samples"
"""verl 0.9.1's metric of the stale samples its V1 replay buffer evicted in a step (verl/trainer/ppo/v1/replay_buffer.py
L357-367: `f"{prefix}/off_policy/evicted_samples"`, prefix "training" for the train partition, L238-239)."""


TOKENS_PER_STEP = 65536
"""The prompt and response tokens the stand-in counts in every step (verl's `perf/total_num_tokens`)."""

PHASES = (("gen", 0.5), ("old_log_prob", 0.2), ("update_actor", 0.3))
"""The stages of a step the GPU workers pause for, with their shares of `--step-seconds`, in the order verl 0.9.1's V1
trainer runs them (verl/trainer/ppo/v1/trainer_base.py L565 `gen`, L585 `old_log_prob`, L609 `update_actor`)."""


def metric_line(step: int, evicted: int = 0, timing: dict[str, float] | None = None, world_size: int = 8) -> str:
    """verl's console line of one step (verl/utils/logger/aggregate_logger.py L51: `step:N - key:value - ...`, numbers
    through pprint): the score depends on the step only; `evicted` stale samples when any; `timing`, the seconds of
    each stage by verl's timer name (`step` the whole step), as `timing_s/<name>` (verl/trainer/ppo/metric_utils.py
    L645), then `perf/total_num_tokens`, `perf/time_per_step` and `perf/throughput`, tokens per second per GPU of the
    `world_size` (L685-687), in the order verl 0.9.1's V1 trainer adds them (trainer_base.py L1945-1947)."""
    score = step / (step + 1)
    stale = f" - {EVICTED_SAMPLES}:{evicted}" if evicted else ""
    line = f"step:{step} - actor/pg_loss:0.125{stale} - training/global_step:{step} - critic/score/mean:np.float64({score})"
    if timing:
        line += "".join(f" - timing_s/{name}:{seconds!r}" for name, seconds in timing.items())
        if timing.get("step"):
            throughput = TOKENS_PER_STEP / (timing["step"] * world_size)
            line += f" - perf/total_num_tokens:{TOKENS_PER_STEP} - perf/time_per_step:{timing['step']!r}"
            line += f" - perf/throughput:{throughput!r}"
    return line


def bounded(limit: float):
    """An argparse type: a number of seconds from 0 to `limit`."""

    def parse(text: str) -> float:
        value = float(text)
        if not 0 <= value <= limit:
            raise argparse.ArgumentTypeError(f"must be between 0 and {limit:.0f} seconds")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    """The stand-in's command line."""
    top = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    top.add_argument(
        "--steps",
        type=int,
        default=int(os.environ.get(STEPS_ENV, "0")) or None,
        required=STEPS_ENV not in os.environ,
        help=f"total training steps (trainer.total_training_steps); default ${STEPS_ENV}, a schedule outside the run's hash",
    )
    top.add_argument("--save-every", type=int, required=True, help="checkpoint every N steps (trainer.save_freq)")
    top.add_argument("--nodes", type=int, default=1, help="GPU nodes (trainer.nnodes); world size 8 x nodes")
    top.add_argument("--step-seconds", type=bounded(MAX_STEP_SECONDS), default=0.05, help="pause per step")
    top.add_argument("--async-save", action="store_true", help="never write the tracker file (verl#7952)")
    top.add_argument("--hold-after", type=int, help="once per run: after this step, wait for a node loss")
    top.add_argument("--half-save-at", type=int, help="once per run: half-write this step's checkpoint, then wait")
    top.add_argument("--cut-shard-at", type=int, help="once per run: a shard of this step's save cut short, then fail")
    top.add_argument("--damage-shard-at", type=int, help="once per run: a shard of this step's save damaged, then fail")
    top.add_argument("--hold-seconds", type=bounded(MAX_HOLD_SECONDS), default=60.0, help="longest wait")
    top.add_argument(
        "--keep", type=int, help="rotate this attempt's actor checkpoints (trainer.max_actor_ckpt_to_keep)"
    )
    top.add_argument("--fail-at", type=int, help="every attempt: fail at this step")
    top.add_argument("--exit-code", type=int, default=1, help="exit code of --fail-at")
    top.add_argument("--deadline-stop-after", type=int, help="once per run: save this step, stop as NeMo-RL does")
    top.add_argument("--checkpointing-off", action="store_true", help="save nothing (checkpointing.enabled false)")
    top.add_argument("--evicted-samples", type=int, default=0, help="stale samples verl's V1 trainer logs per step")
    return top


def lost_after_save(run_dir: Path, folder: Path, step: int, args: argparse.Namespace, world_size: int) -> bool:
    """The faults of a node lost right after a save whose bytes it had not yet flushed to the shared storage (once per
    run each): `--cut-shard-at` leaves the last rank's optimizer shard cut to half its length (no end of central
    directory), `--damage-shard-at` leaves its first bytes zero (its central directory whole, its first member's
    header gone: only a load finds it). True when one happened: the attempt then fails."""
    shard = folder / "actor" / shard_name("optim", world_size, world_size - 1)
    if step == args.cut_shard_at and once(run_dir, f"cut-shard-at-{step}"):
        with shard.open("r+b") as handle:
            handle.truncate(shard.stat().st_size // 2)
    elif step == args.damage_shard_at and once(run_dir, f"damage-shard-at-{step}"):
        with shard.open("r+b") as handle:
            handle.write(bytes(64))
    else:
        return False
    print(f"stand-in: the node was lost after saving step {step} before {shard.name} reached the storage", flush=True)
    return True


def main() -> int:
    """Train the stand-in run; the exit code is the attempt's."""
    args = parser().parse_args()
    if not os.environ.get("GRPO_RUN_DIR"):
        print("stand-in trainer: GRPO_RUN_DIR is not set", flush=True)
        return 2
    run_dir = Path(os.environ["GRPO_RUN_DIR"])
    world_size = GPUS_PER_NODE * args.nodes
    ray.init()
    workers = [
        GpuWorker.remote(list(range(node * GPUS_PER_NODE, (node + 1) * GPUS_PER_NODE)), world_size)
        for node in range(args.nodes)
    ]
    for place in ray.get([worker.where.remote() for worker in workers]):
        print(f"stand-in: GPU worker on {place}", flush=True)
    start = resume_step(run_dir)
    if start:
        actor_dir = str(step_dir(run_dir, start) / "actor")
        ray.get([worker.load.remote(actor_dir, start) for worker in workers])
        data = step_dir(run_dir, start) / "data.pt"
        if not data.exists():
            print(f"Warning: No dataloader state found at {data}, will start from scratch", flush=True)
        else:
            read_archive(data)
    rotation = Rotation(args.keep)
    for step in range(start + 1, args.steps + 1):
        if step == args.fail_at:
            print(f"stand-in trainer: deterministic failure at step {step} (exit code {args.exit_code})", flush=True)
            return args.exit_code
        timing: dict[str, float] = {}
        began = time.perf_counter()
        for name, share in PHASES:
            with timed(name, timing):
                ray.get([worker.train.remote(step, args.step_seconds * share) for worker in workers])
        deadline = step == args.deadline_stop_after and once(run_dir, f"deadline-stop-after-{step}")
        saving = not args.checkpointing_off and (step % args.save_every == 0 or step == args.steps or deadline)
        with timed("save_checkpoint", timing) if saving else contextlib.nullcontext():
            if saving and not save(run_dir, step, args, workers, rotation, world_size):
                return 1
        with timed("update_weights", timing):  # verl/trainer/ppo/v1/trainer_sync.py L36, after the save
            ray.get([worker.where.remote() for worker in workers])
        timing["step"] = time.perf_counter() - began
        print(metric_line(step, args.evicted_samples, timing, world_size), flush=True)
        if deadline:
            print(NEMO_RL_DEADLINE_LINE, flush=True)
            return 0
        if step == args.hold_after and once(run_dir, f"hold-after-{step}"):
            print(f"stand-in: holding after step {step}; waiting for a node loss", flush=True)
            ray.get([worker.hold.remote(args.hold_seconds) for worker in workers])
    return 0


@contextlib.contextmanager
def timed(name: str, timing: dict[str, float]) -> Iterator[None]:
    """Add the seconds of the block to `timing[name]`, as verl's marked_timer does (verl/utils/profiler/performance.py
    L172-195)."""
    began = time.perf_counter()
    try:
        yield
    finally:
        timing[name] = timing.get(name, 0.0) + time.perf_counter() - began


def save(
    run_dir: Path, step: int, args: argparse.Namespace, workers: list, rotation: Rotation, world_size: int
) -> bool:
    """Save `step` as verl does (its faults injected when asked); False when the attempt then fails."""
    folder = step_dir(run_dir, step)
    half = step == args.half_save_at and once(run_dir, f"half-save-at-{step}")
    rotation.before_save()
    ray.get([worker.save.remote(str(folder / "actor"), step, half) for worker in workers])
    if half:
        print(f"stand-in: wrote half of {folder}; waiting for a node loss", flush=True)
        ray.get([worker.hold.remote(args.hold_seconds) for worker in workers])
    rotation.after_save(folder / "actor")
    write_archive(folder / "data.pt", {"step": step})
    if not args.async_save:
        (run_dir / TRACKER).write_text(str(step))
    return not lost_after_save(run_dir, folder, step, args, world_size)


if __name__ == "__main__":
    sys.exit(main())
