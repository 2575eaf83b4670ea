"""Where the pods go: node selectors and tolerations per cluster mode and GPU. Pure."""

from __future__ import annotations

from core import names
from core.config.model import StackConfig
from core.facts.capacity import COMPUTE_CLASS_NODE_KEY
from core.facts.gcp import GPU_TAINT_KEY
from core.facts.platform import GPU_DRIVER_NODE_LABEL


def cpu_node_selector(config: StackConfig) -> dict[str, str]:
    """CPU pods (Ray head, staging): the head's CPU pool on Standard; on Autopilot no selector, which
    gives on-demand general-purpose capacity (Spot only with `cloud.google.com/gke-spot`)."""
    if config.cluster.mode == "standard":
        return {"cloud.google.com/gke-nodepool": names.HEAD_NODE_POOL}
    return {}


def gpu_node_selector(config: StackConfig) -> dict[str, str]:
    """GPU workers: the accelerator in the RDMA profile's zone (the profile is zonal); on Autopilot also
    the count, the GPU driver that runs the image's CUDA, and Spot, as strings (map[string]string)."""
    selector = {
        "cloud.google.com/gke-accelerator": config.gpu_machine.accelerator,
        "topology.kubernetes.io/zone": config.zone,
    }
    if config.gpu.capacity is not None:
        # A ladder: the class picks the capacity (Standard only, core/config/rules.py _ladder_problems).
        selector[COMPUTE_CLASS_NODE_KEY] = names.GPU_COMPUTE_CLASS
    if config.cluster.mode == "autopilot":
        selector["cloud.google.com/gke-accelerator-count"] = str(config.gpus_per_node)
        selector[GPU_DRIVER_NODE_LABEL] = config.gpu_driver.lower()
        if config.gpu.provisioning == "spot":
            selector["cloud.google.com/gke-spot"] = "true"
    return selector


def gpu_tolerations(config: StackConfig) -> list[dict[str, str]]:
    """Tolerate the GPU nodes' taint (KES ray-cluster-*.yaml; infra's GPU pool taint) and, with a ladder, the
    class taint of its pools (core/facts/capacity.py COMPUTE_CLASS_NODE_KEY)."""
    tolerations = [{"effect": "NoSchedule", "key": GPU_TAINT_KEY, "operator": "Exists"}]
    if config.gpu.capacity is not None:
        tolerations.append(
            {
                "effect": "NoSchedule",
                "key": COMPUTE_CLASS_NODE_KEY,
                "operator": "Equal",
                "value": names.GPU_COMPUTE_CLASS,
            }
        )
    return tolerations
