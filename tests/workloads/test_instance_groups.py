"""The ConfigMap of the GPU pools' MIGs (workloads/instance_groups.py): its one file, as the in-cluster readers parse
it (incluster/capacity_events.py groups_from_text)."""

from __future__ import annotations

from core import names
from incluster.capacity_events import groups_from_text
from workloads.instance_groups import groups_text, render_instance_groups

GROUPS = {"gke-grpo-dev-gpu-on-demand-5e6f7a8b-grp": "on-demand", "gke-grpo-dev-gpu-1a2b3c4d-grp": "spot"}


def test_the_file_is_sorted_deterministic_and_read_back_whole():
    text = groups_text(GROUPS)
    assert text == groups_text(dict(reversed(list(GROUPS.items()))))
    assert text.endswith("}\n") and text.index("gpu-1a2b3c4d") < text.index("gpu-on-demand")
    assert groups_from_text(text) == GROUPS
    config_map = render_instance_groups(text)
    assert (config_map.metadata.name, config_map.metadata.namespace) == (names.GPU_INSTANCE_GROUPS_CONFIG_MAP, "grpo")
    assert config_map.data == {names.GPU_INSTANCE_GROUPS_FILE: text}


def test_a_file_that_is_not_an_object_of_strings_names_no_group():
    assert groups_from_text("") == {}
    assert groups_from_text("[1, 2]") == {}
    assert groups_from_text('{"gke-a-grp": "spot", "gke-b-grp": 3}') == {"gke-a-grp": "spot"}
