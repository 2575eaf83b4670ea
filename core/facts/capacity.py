"""Facts of the capacity ladder: the rungs, GKE's ComputeClass, and what each rung draws on.

Sources, each read 2026-12-01 through the `search` tool's stored copies:
- CC-REF: GKE "ComputeClass" CRD reference, cloud.google.com/kubernetes-engine/docs/reference/crds/computeclass.
- CC-CRD: the ComputeClass CRD's published OpenAPI schema, joomcode/CRDs-catalog
  cloud.google.com/computeclass_v1.json @a2770aa3 (2026-02-26): field names, enums and CEL rules.
- CC-ABOUT: GKE "About custom compute classes", docs/concepts/about-custom-compute-classes
  (#manual-node-pools: the node label and taint a manually created pool carries; the 1.30.3 floor).
- NAP: GKE "About node pool auto-creation", docs/concepts/node-auto-provisioning.
- RES: GKE "Consuming reserved zonal resources", docs/how-to/consuming-reservations.
- DWS: GKE "About flex-start provisioning", docs/concepts/dws.
- CONSUME: GKE "About accelerator consumption options", docs/concepts/consumption-option (quota per option).
- PROV: Compute Engine "Compute Engine instances provisioning models", compute/docs/instances/provisioning-models,
  its comparison table's Quota row, read 2026-12-07 in Google's own copy of the page
  (cloud-dot-devsite-v2-prod.appspot.com/compute/docs/instances/provisioning-models, through `search`): Spot "When you
  create an instance, preemptible quota is consumed. If your project lacks preemptible quota, then standard quota is
  consumed."; Flex-start "When the MIG adds instances to the group, preemptible quota is consumed. If your ..." (the
  stored excerpt ends there). The page's newer wording, "When you create a Flex-start VM, preemptible quota is
  consumed. If your project lacks preemptible quota, then standard quota is consumed.", was read only as quoted in
  public repositories the index does not name. Google Cloud blog "GPUs when you need them: Introducing Flex-start
  VMs" (2025-09-25, cloud.google.com/blog/products/compute/introducing-flex-start-vms-for-the-compute-engine-instance-api):
  "Flex-start VMs can run uninterrupted for a maximum of seven days and consume preemptible quota." Cluster Director
  "Obtain capacity" (cloud.google.com/cluster-director/docs/obtain-capacity, read through a proxy's copy), for
  Flex-start: "You must request preemptible quota for the GPU machine type that you want to use."
"""

from __future__ import annotations

from typing import Literal

Rung = Literal["reservation", "flex-start", "spot", "on-demand"]
"""One kind of GPU capacity the ladder may try."""

RUNGS: tuple[Rung, ...] = ("reservation", "flex-start", "spot", "on-demand")
"""Every rung, in the order a ladder most often lists them (cheapest sure capacity first)."""

COMPUTE_CLASS_API_VERSION = "cloud.google.com/v1"
"""apiVersion of a ComputeClass (CC-REF)."""

COMPUTE_CLASS_KIND = "ComputeClass"
"""kind of a ComputeClass (CC-REF)."""

COMPUTE_CLASS_TYPE = "kubernetes:cloud.google.com/v1:ComputeClass"
"""Pulumi type token of a ComputeClass made as an apiextensions CustomResource."""

COMPUTE_CLASS_NODE_KEY = "cloud.google.com/compute-class"
"""The node label a pod selects its class by, and the key of the NoSchedule taint a manually created pool
carries to join the class: label `cloud.google.com/compute-class=NAME`, taint
`cloud.google.com/compute-class=NAME:NoSchedule` (CC-ABOUT #manual-node-pools; NAP: GKE labels the nodes
it makes for a class with the same key)."""

COMPUTE_CLASS_FLOOR = "1.30.3-gke.1451000"
"""Lowest GKE version with custom compute classes, both modes (CC-ABOUT). Below every RDMA floor of
core/facts/platform.py GPU_MACHINES, so no 8-GPU stack can pin a version this rule would refuse; a machine without an
RDMA floor (the L4) has it checked with a capacity ladder (core/config/rules.py _version_floors)."""

NODEPOOLS_PRIORITY_ALONE = True
"""A `priorities[]` entry with `nodepools` may hold no other field (CC-CRD CEL rule "Nodepool field cannot be
set along with other fields"): each rung's pool goes in its own entry, in the ladder's order."""

WHEN_UNSATISFIABLE = "DoNotScaleUp"
"""With no rung available, wait rather than make nodes outside the ladder (CC-CRD: enum ScaleUpAnyway,
DoNotScaleUp; default DoNotScaleUp). Said explicitly so that a later default change does not move us."""

NEVER_MIGRATE = False
"""`activeMigration.optimizeRulePriority`: false, so GKE never moves running training pods to a higher rung
when it frees up (CC-REF; CC-CRD default false)."""

NO_AUTO_CREATION = False
"""`nodePoolAutoCreation.enabled`: false, so the class uses only our pools (CC-CRD default false)."""

_PREEMPTIBLE_FIRST = (
    "the family's preemptible GPU quota (the same Cloud Quotas filter lists it), or the GPU family quota"
    " (GPUS-PER-GPU-FAMILY-per-project-region) where the project has no preemptible GPU quota"
)

RUNG_QUOTA = {
    "reservation": "the GPU family quota (GPUS-PER-GPU-FAMILY-per-project-region), as on-demand; the reservation"
    " only holds the capacity",
    "flex-start": _PREEMPTIBLE_FIRST,
    "spot": _PREEMPTIBLE_FIRST,
    "on-demand": "the GPU family quota (GPUS-PER-GPU-FAMILY-per-project-region)",
}
"""Which quota a rung's nodes draw on (docs/before-first-up.md "Quotas to request" and its sources): Spot and
flex-start on the family's preemptible GPU quota, and on the standard (family) quota only where the project lacks
preemptible quota (PROV's Quota row, both models; the blog's "consume preemptible quota"); on-demand and reservation
on the family quota (CONSUME: "you must request the quota for each consumption option"; Compute Engine "Consume
reservations": consuming VMs use the reserved resources instead of the zone's available ones)."""

AUTOPILOT_LADDER_REFUSAL = (
    "is only for cluster.mode 'standard': no GKE document read on 2026-12-01 (the ComputeClass CRD reference,"
    " About custom compute classes, Consuming reservations, About flex-start provisioning) shows an Autopilot"
    " ComputeClass priority making A4 or A3 Ultra nodes with their RDMA networks; use one gpu.provisioning on"
    " Autopilot (unset gpu.capacity)"
)
"""Why an Autopilot stack gets no ladder: the class would need `gpu`/`spot`/`flexStart`/`reservations`
priorities (CC-CRD; reservations also need machineType or machineFamily, CC-CRD CEL "Non-TPU reservations can be
used only with machine type or machine family defined"), and none of the sources says those nodes get the
multi-network RDMA interfaces the workers' annotations ask for."""
