"""The preflight's fabric floor and sweep (issue 14).

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

from core.facts.pods import GIB_NCCL_ENV

FABRIC_FLOOR_BUSBW_GBPS = 100.0
"""Least average bus bandwidth (GB/s, 10^9 bytes) of the fabric preflight's all_gather sweep: Cluster Toolkit's
daily gate on A4 and A3 Ultra (GoogleCloudPlatform/cluster-toolkit @f84bd01,
tools/cloud-build/daily-tests/ansible_playbooks/test-validation/test-gke-a4.yml and test-gke-a3-ultra.yml, "Ensure
average bus bandwidth is >= 100 GB/s" over nccl-tests' `# Avg bus bandwidth` of a 2-node run). Applied unchanged to
any node count and to all_reduce: bus bandwidth "reflects how optimally the hardware is used ... independently of the
number of ranks used" (NVIDIA/nccl-tests doc/PERFORMANCE.md), and the pair search measures exactly the gate's
2-node shape. For scale, Google's 2 x A4 all_gather reaches 376 GB/s bus bandwidth at 8 GiB (DOC-NCCL-VM,
docs.cloud.google.com/ai-hypercomputer/docs/nccl/test-vms, updated 2026-04-06), and dstack's 2 x A4 all_reduce
averaged 165.8 GB/s over 8 B-8 GiB (../shared/reference/day-two-operations.md "Fabric and GPU health")."""

FABRIC_SWEEP_MIN_BYTES = 1 << 10
"""Smallest message of the sweep, 1 KiB: the gate's `all_gather_perf -b 1K -e 8G -f 2`
(cluster-toolkit @c9ec026 examples/gke-a4/nccl-jobset-example.yaml; examples/gke-a3-ultragpu likewise)."""

FABRIC_SWEEP_MAX_BYTES = 8 << 30
"""Largest message of the sweep, 8 GiB (same command); sizes double from the smallest (`-f 2`)."""

FABRIC_WARMUPS = 5
"""Untimed collectives per message size before timing: the gate's `-w 5` (same command)."""

FABRIC_ITERATIONS = 100
"""Timed collectives per message size: the gate's `--iters 100` (same command)."""

FABRIC_EXPECTED_NETWORK = GIB_NCCL_ENV["NCCL_NET"]
"""The network NCCL must name at init ("NCCL INFO Using network gIB", DOC-NCCL-VM "Enable NCCL/gIB"; the line is
NCCL's `INFO(NCCL_INIT, "Using network %s", ...)` in src/init.cc); `Socket` there means NCCL fell back to TCP."""

FABRIC_NIC_MIN_SHARE = 0.8
"""A NIC whose 2-rank rail (its GPU beside the same GPU of a healthy node) averages below this share of the median rail
of the same node fails, named with its node. A3 Ultra and A4 have 8 MRDMA NICs beside 8 GPUs, one rail each
(../shared/reference/gcp-infrastructure.md: "8 GPUs, 8 MRDMA NICs plus gVNIC ... 8 RDMA subnets"), and
NCCL_CROSS_NIC=0 keeps a ring on the same NIC index on both nodes (rail-aligned), so the healthy rails of one node
measure alike; 80% is the
threshold issue 14 sets for a GPU's figures, applied to the rails (a choice of this project, not a vendor figure)."""
