"""The GPU zones fact (core/facts/zones.py): one list per machine type of this project, dated, and the lookups."""

from __future__ import annotations

from core.facts import zones
from core.facts.platform import GPU_MACHINES
from core.facts.zones import GPU_MACHINE_ZONES, region_of, zones_with
from tests.conftest import SHIPPED_STACKS, config_of


def test_every_machine_of_the_project_has_its_zones_sorted_and_dated():
    assert set(GPU_MACHINE_ZONES) == {machine.machine_type for machine in GPU_MACHINES.values()}
    assert all(list(listed) == sorted(set(listed)) for listed in GPU_MACHINE_ZONES.values())
    assert zones.GPU_ZONES_DATE == "2026-12-01" and "gpu-regions-zones" in zones.__doc__


def test_the_lookups():
    assert region_of("us-central1-b") == "us-central1"
    assert zones_with("a3-ultragpu-8g", "us-central1") == ("us-central1-b",)
    assert zones_with("a4-highgpu-8g", "us-central1") == ("us-central1-a", "us-central1-b")
    assert zones_with("a2-highgpu-8g") == ()


def test_every_shipped_stack_places_its_gpus_in_a_zone_that_has_them():
    for stack in SHIPPED_STACKS:
        config = config_of(stack)
        assert config.zone in zones_with(config.gpu_machine.machine_type, config.region), stack
