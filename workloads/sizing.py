"""What a Ray GPU worker can request on its node: GKE's allocatable minus headroom. Pure."""

from __future__ import annotations

import math
from dataclasses import dataclass

from core.facts.platform import NODE_BOOT_DISK_GB, GpuMachine
from core.facts.pods import (
    EPHEMERAL_SHARE_OF_BOOT_DISK,
    EPHEMERAL_SHARE_OF_LOCAL_SSD,
    GKE_CPU_RESERVATION,
    GKE_EVICTION_MIB,
    GKE_MEMORY_RESERVATION,
    LOCAL_SSD_GIB,
    NODE_MEMORY_MARGIN,
)


def _banded(total: float, bands: tuple[tuple[float, float], ...]) -> float:
    """Sum of share x amount over consecutive bands, from the first unit up."""
    reserved, left = 0.0, total
    for size, share in bands:
        part = min(left, size)
        reserved += part * share
        left -= part
        if left <= 0:
            break
    return reserved


def gke_reserved_memory_gib(memory_gib: float) -> float:
    """Memory GKE keeps from pods on a node of `memory_gib`: the banded reservation plus eviction."""
    return _banded(memory_gib, GKE_MEMORY_RESERVATION) + GKE_EVICTION_MIB / 1024


def gke_reserved_cpu(vcpus: float) -> float:
    """CPU GKE keeps from pods on a node of `vcpus`."""
    return _banded(vcpus, GKE_CPU_RESERVATION)


@dataclass(frozen=True)
class WorkerRequests:
    """Requests of one Ray GPU worker container (the whole node: all its GPUs)."""

    cpu: int
    """Whole CPUs; also Ray's num-cpus."""
    memory_gib: int
    """Memory in GiB, /dev/shm included (a memory emptyDir counts against the pod)."""
    ephemeral_gib: int
    """Local-SSD ephemeral storage in GiB."""
    gpus: int
    """GPUs: every GPU of the node (GpuMachine.gpus)."""

    def quantities(self) -> dict[str, str]:
        """The requests as Kubernetes quantities, GPUs included."""
        return {
            "cpu": str(self.cpu),
            "ephemeral-storage": f"{self.ephemeral_gib}Gi",
            "memory": f"{self.memory_gib}Gi",
            "nvidia.com/gpu": str(self.gpus),
        }


def worker_requests(machine: GpuMachine) -> WorkerRequests:
    """Requests that fit `machine` after GKE's reservation, the kernel margin and DaemonSet headroom; its disk is the
    local SSDs where it has them, else the boot disk."""
    memory = machine.memory_gib
    memory -= gke_reserved_memory_gib(machine.memory_gib)
    memory -= machine.memory_gib * NODE_MEMORY_MARGIN
    memory -= machine.daemon_headroom_gib
    cpu = machine.vcpus - gke_reserved_cpu(machine.vcpus) - machine.daemon_headroom_cpu
    if machine.local_ssd_count:
        ephemeral = machine.local_ssd_count * LOCAL_SSD_GIB * EPHEMERAL_SHARE_OF_LOCAL_SSD
    else:
        ephemeral = NODE_BOOT_DISK_GB * EPHEMERAL_SHARE_OF_BOOT_DISK
    return WorkerRequests(
        cpu=math.floor(cpu),
        memory_gib=math.floor(memory / 8) * 8,
        ephemeral_gib=math.floor(ephemeral),
        gpus=machine.gpus,
    )
