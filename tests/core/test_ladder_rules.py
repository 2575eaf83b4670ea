"""`gpu.capacity`, the ladder of GPU capacity: each rule refused the way the user meets it (`python -m plan
--config FILE`: exit 2 and the whole output, nothing written) beside a case it lets through."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import clean_refusal, plan_of_edited_stack

REFUSED = "error: the config of stack 'ladder' (Pulumi.ladder.yaml) was refused:\n"
"""The first line of every refusal below."""


def plan_with(tmp_path: Path, gpu_lines: str, cluster_lines: str = "") -> subprocess.CompletedProcess:
    """The plan command on the dev stack as `Pulumi.ladder.yaml`, with lines added under `grpo-gke:gpu` (and
    `grpo-gke:cluster`)."""
    return plan_of_edited_stack(
        tmp_path,
        "ladder",
        ("    provisioning: spot\n", f"    provisioning: spot\n{gpu_lines}"),
        ("    mode: standard\n", f"    mode: standard\n{cluster_lines}"),
    )


@pytest.mark.parametrize(
    ("gpu_lines", "cluster_lines", "expected"),
    [
        ("    capacity: [spot, spot]\n", "",
         "  grpo-gke:gpu.capacity: lists 'spot' 2 times; list each rung once, got ['spot', 'spot']\n"),
        ("    capacity: []\n", "",
         "  grpo-gke:gpu.capacity: must list at least one of reservation, flex-start, spot, on-demand, or be unset"
         " for gpu.provisioning alone\n"),
        ("    capacity: [preemptible]\n", "",
         "  grpo-gke:gpu.capacity.0: must be one of 'reservation', 'flex-start', 'spot' or 'on-demand', got 'preemptible'\n"),
        ("    capacity: [reservation, spot]\n", "",
         "  grpo-gke:gpu.reservation: is required when gpu.capacity has the rung 'reservation'\n"),
        ("    capacity: [spot, on-demand]\n    reservation: res-h200\n", "",
         "  grpo-gke:gpu.reservation: is only allowed when gpu.provisioning is 'reservation' or gpu.capacity has the"
         " rung 'reservation', not 'spot'\n"),
        ("    capacity: [on-demand, flex-start]\n", "",
         "  grpo-gke:gpu.provisioning: must be one of gpu.capacity's rungs ['on-demand', 'flex-start'] (its pool keeps"
         " the name it has today), got 'spot'\n"),
        ("    capacity: [flex-start, spot]\n", "    minVersion: 1.32.2-gke.1475000\n",
         "  grpo-gke:cluster.minVersion: must be at least 1.32.2-gke.1652000 for flex-start node pools, got"
         " 1.32.2-gke.1475000\n"),
    ],
    ids=["rung-twice", "no-rung", "unknown-rung", "reservation-without-name", "reservation-without-its-rung",
         "provisioning-off-the-ladder",
         "flex-start-below-its-version"],
)  # fmt: skip
def test_a_ladder_that_cannot_work_is_refused_naming_the_key(tmp_path, gpu_lines, cluster_lines, expected):
    assert clean_refusal(plan_with(tmp_path, gpu_lines, cluster_lines), tmp_path) == REFUSED + expected


def test_a_ladder_on_autopilot_is_refused_with_the_reason(tmp_path):
    result = plan_of_edited_stack(
        tmp_path,
        "ladder",
        ("mode: standard", "mode: autopilot"),
        ("    provisioning: spot\n", "    provisioning: spot\n    capacity: [spot, on-demand]\n"),
    )
    assert clean_refusal(result, tmp_path) == REFUSED + (
        "  grpo-gke:gpu.capacity: is only for cluster.mode 'standard': no GKE document read on 2026-12-01 (the"
        " ComputeClass CRD reference, About custom compute classes, Consuming reservations, About flex-start"
        " provisioning) shows an Autopilot ComputeClass priority making A4 or A3 Ultra nodes with their RDMA"
        " networks; use one gpu.provisioning on Autopilot (unset gpu.capacity)\n"
    )


def test_a_ladder_of_all_four_rungs_with_its_reservation_plans(tmp_path):
    """The good case of every rule above: four distinct rungs, the reservation named, gpu.provisioning on the
    ladder, Standard, no version pinned below flex-start's."""
    result = plan_with(
        tmp_path, "    capacity: [reservation, flex-start, spot, on-demand]\n    reservation: res-h200\n"
    )
    assert result.returncode == 0, result.stderr
    plan = json.loads((tmp_path / "out" / "plan.json").read_text())
    pools = sorted(r["inputs"]["name"] for r in plan["resources"] if r["type"] == "gcp:container/nodePool:NodePool")
    assert pools == ["gpu", "gpu-flex-start", "gpu-on-demand", "gpu-reservation", "ray-head"]


def test_flex_start_on_the_ladder_plans_at_its_version(tmp_path):
    result = plan_with(tmp_path, "    capacity: [flex-start, spot]\n", "    minVersion: 1.32.2-gke.1652000\n")
    assert result.returncode == 0, result.stderr
