"""The demo's GPU node: a second Ray node on this machine, on 127.0.0.1, that declares one node's 8 GPUs.

`python -m jobs.demo.gpu_node GCS_ADDRESS TEMP_DIR` joins the head at GCS_ADDRESS and blocks; the demo starts it
in a process group of its own and loses it the way a preempted spot VM is lost: SIGKILL to the whole group, so
the head's health checks fail and Ray marks the node DEAD, and the actors on it die with it.

Why not `ray start --address=...`: with `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` (what keeps Ray on loopback,
jobs/submit/local_head.py) `ray start` refuses any worker node (ray 2.60.0 python/ray/scripts/scripts.py L1169-1182),
and with it at 1 Ray replaces 127.0.0.1 with the machine's routable address, both the GCS address and the node's
own (python/ray/_private/services.py L786-803 `resolve_ip_for_localhost`, L811-821 `get_node_ip_address`).
So this starts the node as `ray start` does once past those checks (scripts.py L1239-1245:
`ray._private.node.Node(ray_params, head=False, shutdown_at_exit=True, spawn_reaper=True)`), which is also how
Ray's own python/ray/cluster_utils.py `Cluster.add_node` (L208-240) puts several nodes on one machine. On
127.0.0.1 its dashboard agent listens on loopback only (python/ray/dashboard/agent.py L165). Every port is 0
(the kernel picks it) as in jobs/submit/local_head.py.
"""

from __future__ import annotations

import sys
import time

import ray._private.node
import ray._private.parameter

GPUS = 8
"""GPUs the node declares: one a3-ultragpu-8g node, the demo stack's (core/facts/platform.py GPU_MACHINES["h200"].gpus;
this module imports nothing of the project's; tests/jobs/test_demo.py holds the two equal)."""

CPUS = 1
"""CPUs it declares: the stand-in trainer's GPU actor takes none (jobs/demo/stand_in_trainer.py)."""

OBJECT_STORE_BYTES = 100 * 1024**2
"""Its object store (Ray's minimum is 75 MiB; the stand-in passes only small values)."""

HOST = "127.0.0.1"
"""The node's address: loopback, like the head's."""


def main(argv: list[str]) -> int:
    """Start the node and block until one of its processes ends (or the process group is killed)."""
    if len(argv) != 2:
        print("usage: python -m jobs.demo.gpu_node GCS_ADDRESS TEMP_DIR", file=sys.stderr)
        return 2
    gcs_address, temp_dir = argv
    params = ray._private.parameter.RayParams(
        gcs_address=gcs_address,
        node_ip_address=HOST,
        num_cpus=CPUS,
        num_gpus=GPUS,
        object_store_memory=OBJECT_STORE_BYTES,
        temp_dir=temp_dir,
        min_worker_port=0,
        max_worker_port=0,
        node_manager_port=0,
        object_manager_port=0,
        dashboard_agent_listen_port=0,
        metrics_agent_port=0,
        metrics_export_port=0,
        runtime_env_agent_port=0,
    )
    node = ray._private.node.Node(params, head=False, shutdown_at_exit=True, spawn_reaper=True)
    print(f"GPU node {node.node_id} up on {HOST} with {GPUS} GPUs", flush=True)
    while not node.dead_processes():
        time.sleep(1)
    print(f"GPU node {node.node_id}: a Ray process ended: {node.dead_processes()}", flush=True)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
