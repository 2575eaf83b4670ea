"""The autoscaler's events on pending GPU workers read into "which rung, since when, why the last failed":
the texts are built the way their sources print them (incluster/capacity_events.py names each source line)."""

from __future__ import annotations

from incluster.capacity_events import (
    DETAIL_IN_LOGS,
    LadderState,
    group_rungs,
    ladder_state,
    rung_of_node,
    rungs_of_nodes,
    rungs_scaled,
)

MIG = "https://www.googleapis.com/compute/v1/projects/my-grpo-project/zones/us-central1-b/instanceGroups/gke-grpo-dev-{pool}-1a2b3c4d-grp"
"""A pool's MIG URL as the autoscaler prints a node group (cloudprovider/gce/gce_url.go GenerateMigUrl)."""

MANAGER = (
    "https://www.googleapis.com/compute/v1/projects/my-grpo-project/zones/us-central1-b/instanceGroupManagers/{name}"
)
"""A node pool's `instanceGroupUrls` entry: its MIG's manager (incluster/capacity_events.py names the sources)."""

GROUPS = group_rungs(
    {rung: [MANAGER.format(name=f"gke-grpo-dev-{pool}-1a2b3c4d-grp")]
     for rung, pool in (("spot", "gpu"), ("on-demand", "gpu-on-demand"), ("flex-start", "gpu-flex-start"),
                        ("reservation", "gpu-reservation"))}
)  # fmt: skip
"""The GPU pools' MIGs of a spot stack of cluster grpo-dev with all four rungs, from their instanceGroupUrls."""


def triggered(pool: str, first: str, last: str | None = None, before: int = 0, after: int = 2) -> dict:
    """A TriggeredScaleUp event: `pod triggered scale-up: %v` of []ScaleUpInfo, each `{%v %v->%v (max: %v)}`."""
    message = f"pod triggered scale-up: [{{{MIG.format(pool=pool)} {before}->{after} (max: 2)}}]"
    return {"reason": "TriggeredScaleUp", "type": "Normal", "message": message,
            "firstTimestamp": first, "lastTimestamp": last or first}  # fmt: skip


def failed(reasons: str, at: str) -> dict:
    """A FailedScaleUp event: GKE's `Node scale up in zones %v associated with this pod failed: %v. Pod is at
    risk of not being scheduled.`"""
    message = f"Node scale up in zones us-central1-b associated with this pod failed: {reasons}. Pod is at risk of not being scheduled."
    return {"reason": "FailedScaleUp", "type": "Warning", "message": message, "firstTimestamp": at, "lastTimestamp": at}


def test_a_stockout_names_the_rung_since_when_and_gce_out_of_resources():
    events = [
        triggered("gpu", "2026-12-01T10:00:00Z"),
        failed("GCE out of resources", "2026-12-01T10:02:00Z"),
        {"reason": "FailedScheduling", "message": "0/3 nodes are available", "lastTimestamp": "2026-12-01T10:03:00Z"},
    ]
    assert ladder_state(events, GROUPS) == LadderState(
        rung="spot", since="2026-12-01T10:00:00Z", last_failure="GCE out of resources in us-central1-b"
    )


def test_a_quota_failure_on_the_on_demand_rung_names_the_quota():
    events = [triggered("gpu-on-demand", "2026-12-01T11:00:00Z"), failed("GCE quota exceeded", "2026-12-01T11:01:00Z")]
    assert ladder_state(events, GROUPS) == LadderState(
        rung="on-demand", since="2026-12-01T11:00:00Z", last_failure="GCE quota exceeded in us-central1-b"
    )


def test_a_successful_scale_up_on_the_second_rung_clears_the_failure():
    events = [
        triggered("gpu", "2026-12-01T10:00:00Z"),
        failed("GCE out of resources", "2026-12-01T10:02:00Z"),
        triggered("gpu-on-demand", "2026-12-01T10:05:00Z"),
    ]
    assert ladder_state(events, GROUPS) == LadderState(
        rung="on-demand", since="2026-12-01T10:05:00Z", last_failure=None
    )


def test_an_internal_error_says_the_cause_is_only_in_the_visibility_logs():
    events = [triggered("gpu-reservation", "2026-12-01T09:00:00Z"), failed("Internal error", "2026-12-01T09:01:00Z")]
    assert ladder_state(events, GROUPS).last_failure == DETAIL_IN_LOGS


def test_a_scale_up_that_was_not_triggered_quotes_the_autoscalers_reasons():
    event = {"reason": "NotTriggerScaleUp", "message": "pod didn't trigger scale-up: 4 max node group size reached",
             "lastTimestamp": "2026-12-01T12:00:00Z"}  # fmt: skip
    assert ladder_state([event], GROUPS) == LadderState(None, None, "4 max node group size reached")


def test_only_this_stacks_gpu_pools_migs_give_a_rung():
    other_cluster = MIG.format(pool="gpu-on-demand").replace("gke-grpo-dev-", "gke-grpo-prod-")
    other_pool = MIG.format(pool="l4-pool")
    message = f"pod triggered scale-up: [{{{other_cluster} 0->1 (max: 2)}} {{{other_pool} 0->1 (max: 2)}}]"
    assert rungs_scaled(message, GROUPS) == []
    both = f"pod triggered scale-up: [{{{MIG.format(pool='gpu-flex-start')} 0->1 (max: 2)}} {{{MIG.format(pool='gpu')} 0->1 (max: 2)}}]"
    assert rungs_scaled(both, GROUPS) == ["flex-start", "spot"]
    assert rungs_scaled(both, {}) == []  # settings that name no MIG name no rung


def test_a_long_cluster_names_shortened_mig_names_its_rung_from_the_pools_instance_group_urls():
    """GKE shortens a long cluster name in its MIG names (`gke-data-analysis-cl-n1-standard-4-no-86ad6e2d-grp`, seen
    in stored `kubectl describe` output; the rule of the cut is not published): here `grpo-nemo-rl-standard-b200` as
    `grpo-nemo-rl-sta`. The name in the event is read only against the node pools' own instanceGroupUrls."""
    pools = {"spot": [MANAGER.format(name="gke-grpo-nemo-rl-sta-gpu-5f3c9a1e-grp")],
             "on-demand": [MANAGER.format(name="gke-grpo-nemo-rl-sta-gpu-on-demand-0b7d2c44-grp")]}  # fmt: skip
    groups = group_rungs(pools)
    assert groups == {"gke-grpo-nemo-rl-sta-gpu-5f3c9a1e-grp": "spot",
                      "gke-grpo-nemo-rl-sta-gpu-on-demand-0b7d2c44-grp": "on-demand"}  # fmt: skip
    on_demand = MIG.replace("gke-grpo-dev-{pool}-1a2b3c4d-grp", "gke-grpo-nemo-rl-sta-gpu-on-demand-0b7d2c44-grp")
    events = [
        triggered("gpu", "2026-12-01T10:00:00Z"),  # cluster grpo-dev's spot MIG: not this stack's
        {**triggered("gpu", "2026-12-01T10:05:00Z"),
         "message": f"pod triggered scale-up: [{{{on_demand} 0->2 (max: 2)}}]"},
        failed("GCE quota exceeded", "2026-12-01T10:06:00Z"),
    ]  # fmt: skip
    assert ladder_state(events, groups) == LadderState(
        rung="on-demand", since="2026-12-01T10:05:00Z", last_failure="GCE quota exceeded in us-central1-b"
    )


def test_each_gpu_nodes_rung_is_read_from_its_pool_label_and_an_attempt_may_mix_rungs():
    pool = "cloud.google.com/gke-nodepool"
    assert rung_of_node({pool: "gpu"}, "spot") == "spot"
    assert rung_of_node({pool: "gpu"}, "on-demand") == "on-demand"
    assert rung_of_node({pool: "ray-head"}, "spot") is None
    nodes = [{pool: "gpu-on-demand"}, {pool: "gpu"}, {pool: "gpu-on-demand"}, {pool: "ray-head"}]
    assert rungs_of_nodes(nodes, "spot") == {"spot": 1, "on-demand": 2}
