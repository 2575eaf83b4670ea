"""Record what NCCL logs about its network on a real GPU, with the fabric preflight's logging settings.

Run on a GPU machine: `OUT=DIR python3 benchmarks/fabric_nccl_log_device.py`. One process makes a one-rank NCCL
process group (one rank is what a one-GPU machine allows; NCCL chooses its network at init for any communicator)
with the environment `fabric_measure._nccl_logging()` sets (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and a
log file, set before NCCL starts), runs an all_reduce and writes DIR/nccl-rank0.log (NCCL's log, raw) and
DIR/nccl-log.json (torch's and NCCL's versions, the GPU, whether the sum was right). Standalone, so that it runs
under the GPU machine's own Python without this repository's packages.

Run on 2026-12-01 on a lent one-GPU H200 (no RDMA NIC, NCCL_NET unset): NCCL 2.28.9 logged "Using network Socket";
the log is tests/incluster/preflight/data/h200-nccl-socket.log, the summary benchmarks/results/fabric-nccl-log/.
"""

import json
import os

import torch
import torch.distributed as dist

out = os.environ["OUT"]
os.environ.update({"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": f"{out}/nccl-rank0.log"})
torch.cuda.set_device(0)
dist.init_process_group("nccl", init_method="file:///tmp/rdv", rank=0, world_size=1)
b = torch.ones(1 << 20, device="cuda")
dist.all_reduce(b)
torch.cuda.synchronize()
ok = bool(torch.all(b == 1))
dist.destroy_process_group()
info = {
    "torch": torch.__version__,
    "nccl": ".".join(map(str, torch.cuda.nccl.version())),
    "gpu": torch.cuda.get_device_name(0),
    "all_reduce_correct": ok,
}
open(f"{out}/nccl-log.json", "w").write(json.dumps(info, indent=2) + "\n")
print(info)
