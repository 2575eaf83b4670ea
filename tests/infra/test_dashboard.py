"""The run's Cloud Monitoring dashboard: the JSON rendered from typed charts for every shipped stack passes the
offline check of the Dashboard API's structure and names only metric types of core/facts/monitoring.py; the
check refuses what breaks either."""

from __future__ import annotations

import copy
import json

import pytest

from core.facts.monitoring import (
    GCS_RECEIVED_BYTES,
    GCS_SENT_BYTES,
    LUSTRE_READ_BYTES,
    LUSTRE_WRITE_BYTES,
    METRIC_TYPES,
    NODE_CORES,
    PROMQL_METRICS,
)
from infra.dashboard import (
    Chart,
    DashboardSpec,
    FilterQuery,
    PromQuery,
    console_url,
    dashboard_json,
    dashboard_problems,
    render_dashboard,
    run_dashboard_spec,
)
from tests.conftest import SHIPPED_STACKS, config_of


@pytest.mark.parametrize("stack", SHIPPED_STACKS)
def test_every_shipped_stacks_dashboard_passes_the_check(stack):
    document = render_dashboard(run_dashboard_spec(config_of(stack)))
    assert dashboard_problems(document) == []
    assert json.loads(dashboard_json(run_dashboard_spec(config_of(stack)))) == document


def named_metrics(document) -> set[str]:
    text = json.dumps(document)
    return {name for name in METRIC_TYPES | PROMQL_METRICS if name in text}


def test_a_bucket_stack_charts_gpu_utilisation_memory_nodes_and_the_buckets_traffic():
    config = config_of("dev")
    document = render_dashboard(run_dashboard_spec(config))
    tiles = document["mosaicLayout"]["tiles"]
    assert [tile["widget"]["title"] for tile in tiles] == [
        "GPU utilisation per node",
        "GPU memory used per node",
        "Nodes",
        f"Bucket {config.bucket_name}: bytes written and read per second",
    ]
    assert [(tile["xPos"], tile["yPos"], tile["width"], tile["height"]) for tile in tiles] == [
        (0, 0, 24, 16), (24, 0, 24, 16), (0, 16, 24, 16), (24, 16, 24, 16),
    ]  # fmt: skip
    gpu = tiles[0]["widget"]["xyChart"]["dataSets"][0]
    assert gpu["timeSeriesQuery"] == {
        "prometheusQuery": f'avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL{{cluster="{config.cluster_name}"}})'
    }
    bucket = tiles[3]["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]["timeSeriesFilter"]
    assert bucket["filter"] == (
        f'metric.type="{GCS_RECEIVED_BYTES}" resource.type="gcs_bucket" resource.label."bucket_name"="{config.bucket_name}"'
    )
    assert bucket["aggregation"] == {
        "alignmentPeriod": "60s",
        "perSeriesAligner": "ALIGN_RATE",
        "crossSeriesReducer": "REDUCE_SUM",
    }
    assert named_metrics(document) == {NODE_CORES, GCS_RECEIVED_BYTES, GCS_SENT_BYTES} | PROMQL_METRICS


def test_a_lustre_stack_charts_the_instances_bytes_written_and_read():
    config = config_of("nemo-rl-standard-b200")
    document = render_dashboard(run_dashboard_spec(config))
    tiles = document["mosaicLayout"]["tiles"]
    instance = f"{config.cluster_name}-lustre"
    assert tiles[3]["widget"]["title"] == f"Managed Lustre {instance}: bytes written and read per second"
    filters = [data["timeSeriesQuery"]["timeSeriesFilter"] for data in tiles[3]["widget"]["xyChart"]["dataSets"]]
    assert [selector["filter"] for selector in filters] == [
        f'metric.type="{metric}" resource.type="lustre.googleapis.com/Instance"'
        f' resource.label."location"="{config.zone}" resource.label."instance_id"="{instance}"'
        for metric in (LUSTRE_WRITE_BYTES, LUSTRE_READ_BYTES)
    ]
    assert {selector["aggregation"]["perSeriesAligner"] for selector in filters} == {"ALIGN_RATE"}
    assert named_metrics(document) == {NODE_CORES, LUSTRE_READ_BYTES, LUSTRE_WRITE_BYTES} | PROMQL_METRICS
    assert GCS_SENT_BYTES not in json.dumps(document)


GOOD = render_dashboard(run_dashboard_spec(config_of("dev")))


def broken(change) -> dict:
    document = copy.deepcopy(GOOD)
    change(document)
    return document


def _tile(document, index=0):
    return document["mosaicLayout"]["tiles"][index]


def _query(document, index=0):
    return _tile(document, index)["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda d: d.update(displayName=""), "displayName: a non-empty string is required"),
        (lambda d: d["mosaicLayout"].update(columns=49), "mosaicLayout.columns: 1 to 48, got 49"),
        (lambda d: _tile(d, 1).update(xPos=12), "mosaicLayout.tiles[1]: overlaps an earlier tile"),
        (
            lambda d: _tile(d).update(width=60),
            "mosaicLayout.tiles[0]: must lie inside the 48 columns, got x=0 width=60",
        ),
        (lambda d: _tile(d)["widget"].update(text={"content": "x"}), "mosaicLayout.tiles[0].widget: exactly one of"),
        (
            lambda d: _query(d).update(timeSeriesQueryLanguage="fetch k8s_node"),
            "mosaicLayout.tiles[0].widget.xyChart.dataSets[0].timeSeriesQuery: exactly one of",
        ),
        (
            lambda d: _query(d).update(prometheusQuery="avg(DCGM_FI_DEV_GPU_TEMP)"),
            "DCGM_FI_DEV_GPU_TEMP is not a metric of core/facts/monitoring.py",
        ),
        (
            lambda d: _query(d, 2)["timeSeriesFilter"].update(filter='metric.type="kubernetes.io/node/gpu/made_up"'),
            "kubernetes.io/node/gpu/made_up is not a metric type of core/facts/monitoring.py",
        ),
        (
            lambda d: _query(d, 2)["timeSeriesFilter"]["aggregation"].update(perSeriesAligner="ALIGN_AVERAGE"),
            "perSeriesAligner 'ALIGN_AVERAGE' is not one of",
        ),
        (
            lambda d: _query(d, 2)["timeSeriesFilter"]["aggregation"].update(alignmentPeriod="1m"),
            "alignmentPeriod must be a duration in seconds",
        ),
        (lambda d: d.pop("mosaicLayout"), "mosaicLayout: an object of columns and tiles is required"),
    ],
)
def test_the_check_refuses_what_breaks_the_api_or_names_an_unknown_metric(change, problem):
    problems = dashboard_problems(broken(change))
    assert any(problem in line for line in problems), problems


def test_typed_charts_render_both_query_kinds():
    spec = DashboardSpec(
        "d",
        (
            Chart("a", "%", (PromQuery("avg(DCGM_FI_DEV_GPU_UTIL)", "{{Hostname}}"),)),
            Chart(
                "b",
                "n",
                (FilterQuery(NODE_CORES, "k8s_node", (), "ALIGN_MEAN", "REDUCE_SUM", ("resource.label.node_name",)),),
            ),
        ),
    )
    document = render_dashboard(spec)
    assert dashboard_problems(document) == []
    aggregation = _query(document, 1)["timeSeriesFilter"]["aggregation"]
    assert aggregation["groupByFields"] == ["resource.label.node_name"]
    assert _tile(document, 0)["widget"]["xyChart"]["dataSets"][0]["legendTemplate"] == "{{Hostname}}"


def test_the_console_url_takes_the_dashboards_own_id():
    assert console_url("my-grpo-project", "projects/123456/dashboards/abc-def") == (
        "https://console.cloud.google.com/monitoring/dashboards/builder/abc-def?project=my-grpo-project"
    )
