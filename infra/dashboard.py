"""The run's Cloud Monitoring dashboard: typed charts rendered to the Dashboard API's JSON (a mosaic layout of
xyChart tiles, each data set a PromQL query or a time-series filter), checked offline against the API's
structure and the metric types of core/facts/monitoring.py, and a thin component around
`gcp.monitoring.Dashboard`.

GPU utilisation and memory per node come from GKE's managed DCGM metrics (the cluster turns them on,
infra/cluster.py monitoring_config), the node count from GKE's system metrics, and the checkpoint and read
traffic from the bucket's or the Managed Lustre instance's metrics. The run's reward and step time are not Cloud
Monitoring metrics (the frameworks log them to their console, W&B and TensorBoard), so they are not charted.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from core.config.model import StackConfig
from core.facts.monitoring import (
    DCGM_FB_USED,
    DCGM_GPU_UTIL,
    DCGM_NODE_LABEL,
    GCS_RECEIVED_BYTES,
    GCS_SENT_BYTES,
    LUSTRE_INSTANCE,
    LUSTRE_READ_BYTES,
    LUSTRE_WRITE_BYTES,
    METRIC_TYPES,
    MOSAIC_COLUMNS,
    NODE_CORES,
    PROMQL_METRICS,
)
from core.names import lustre_names


@dataclass(frozen=True)
class PromQuery:
    """A data set read with PromQL (Managed Service for Prometheus metrics)."""

    query: str
    """The PromQL expression."""
    legend: str
    """How a series is named in the legend (a template such as `{{Hostname}}`)."""


@dataclass(frozen=True)
class FilterQuery:
    """A data set read with a Cloud Monitoring time-series filter."""

    metric_type: str
    """The metric type."""
    resource_type: str
    """The monitored resource type."""
    labels: tuple[tuple[str, str], ...]
    """`resource.label.<key>="<value>"` conditions."""
    aligner: str
    """The per-series aligner (ALIGN_MEAN, ALIGN_RATE, ...)."""
    reducer: str
    """The cross-series reducer (REDUCE_SUM, REDUCE_COUNT, ...)."""
    group_by: tuple[str, ...] = ()
    """Fields the reducer keeps apart."""


@dataclass(frozen=True)
class Chart:
    """One xyChart tile."""

    title: str
    """The tile's title."""
    unit: str
    """The y axis' label."""
    data: tuple[PromQuery | FilterQuery, ...]
    """Its data sets, one line each."""


@dataclass(frozen=True)
class DashboardSpec:
    """A dashboard: charts laid out two a row."""

    display_name: str
    """The dashboard's name in the console."""
    charts: tuple[Chart, ...]
    """Its charts, in reading order."""


TILE_WIDTH = MOSAIC_COLUMNS // 2
"""Two charts a row."""

TILE_HEIGHT = 16
"""Rows a chart takes."""

ALIGNMENT = "60s"
"""The alignment period of every filter query."""


def run_dashboard_spec(config: StackConfig) -> DashboardSpec:
    """The stack's dashboard: GPU utilisation and memory per node, the node count and the storage traffic."""
    cluster = config.cluster_name
    gpu = f'{{cluster="{cluster}"}}'
    charts = [
        Chart(
            "GPU utilisation per node",
            "%",
            (PromQuery(f"avg by ({DCGM_NODE_LABEL}) ({DCGM_GPU_UTIL}{gpu})", f"{{{{{DCGM_NODE_LABEL}}}}}"),),
        ),
        Chart(
            "GPU memory used per node",
            "MiB",
            (PromQuery(f"sum by ({DCGM_NODE_LABEL}) ({DCGM_FB_USED}{gpu})", f"{{{{{DCGM_NODE_LABEL}}}}}"),),
        ),
        Chart(
            "Nodes",
            "nodes",
            (FilterQuery(NODE_CORES, "k8s_node", (("cluster_name", cluster),), "ALIGN_MEAN", "REDUCE_COUNT"),),
        ),
    ]
    if config.storage.type == "gcs":
        where = f"Bucket {config.bucket_name}"
        traffic = _traffic("gcs_bucket", (("bucket_name", config.bucket_name),), GCS_RECEIVED_BYTES, GCS_SENT_BYTES)
    else:
        instance_id = lustre_names(config.cluster_name).instance_id
        where = f"Managed Lustre {instance_id}"
        instance = (("location", config.zone), ("instance_id", instance_id))
        traffic = _traffic(LUSTRE_INSTANCE, instance, LUSTRE_WRITE_BYTES, LUSTRE_READ_BYTES)
    charts.append(Chart(f"{where}: bytes written and read per second", "B/s", traffic))
    return DashboardSpec(display_name=f"grpo-gke {config.stack}", charts=tuple(charts))


def _traffic(resource: str, labels: tuple[tuple[str, str], ...], *metrics: str) -> tuple[FilterQuery, ...]:
    return tuple(FilterQuery(metric, resource, labels, "ALIGN_RATE", "REDUCE_SUM") for metric in metrics)


def _data_set(data: PromQuery | FilterQuery) -> dict[str, Any]:
    if isinstance(data, PromQuery):
        return {"plotType": "LINE", "legendTemplate": data.legend, "timeSeriesQuery": {"prometheusQuery": data.query}}
    conditions = [f'metric.type="{data.metric_type}"', f'resource.type="{data.resource_type}"']
    conditions += [f'resource.label."{key}"="{value}"' for key, value in data.labels]
    aggregation: dict[str, Any] = {
        "alignmentPeriod": ALIGNMENT,
        "perSeriesAligner": data.aligner,
        "crossSeriesReducer": data.reducer,
    }
    if data.group_by:
        aggregation["groupByFields"] = list(data.group_by)
    return {
        "plotType": "LINE",
        "timeSeriesQuery": {"timeSeriesFilter": {"filter": " ".join(conditions), "aggregation": aggregation}},
    }


def render_dashboard(spec: DashboardSpec) -> dict[str, Any]:
    """The Dashboard API document of `spec` (projects.dashboards: displayName, mosaicLayout of tiles)."""
    tiles = []
    for index, chart in enumerate(spec.charts):
        tiles.append(
            {
                "xPos": (index % 2) * TILE_WIDTH,
                "yPos": (index // 2) * TILE_HEIGHT,
                "width": TILE_WIDTH,
                "height": TILE_HEIGHT,
                "widget": {
                    "title": chart.title,
                    "xyChart": {
                        "dataSets": [_data_set(data) for data in chart.data],
                        "yAxis": {"label": chart.unit, "scale": "LINEAR"},
                    },
                },
            }
        )
    return {"displayName": spec.display_name, "mosaicLayout": {"columns": MOSAIC_COLUMNS, "tiles": tiles}}


def dashboard_json(spec: DashboardSpec) -> str:
    """`render_dashboard` as the deterministic JSON text the Dashboard resource takes."""
    return json.dumps(render_dashboard(spec), sort_keys=True, separators=(",", ":"))


WIDGET_KINDS = ("xyChart", "scorecard", "text", "timeSeriesTable", "pieChart", "collapsibleGroup")
"""Widget kinds of the Dashboard API a tile may hold exactly one of (the ones this renderer could emit and
their siblings in `Widget`'s union field `content`)."""

QUERY_KINDS = ("timeSeriesFilter", "timeSeriesFilterRatio", "timeSeriesQueryLanguage", "prometheusQuery")
"""`TimeSeriesQuery`'s union field `source`: exactly one of these."""

ALIGNERS = ("ALIGN_MEAN", "ALIGN_RATE", "ALIGN_SUM", "ALIGN_MAX", "ALIGN_MIN", "ALIGN_DELTA")
"""The per-series aligners the dashboard may use (Cloud Monitoring API `Aggregation.Aligner`)."""

REDUCERS = ("REDUCE_SUM", "REDUCE_COUNT", "REDUCE_MEAN", "REDUCE_MAX", "REDUCE_MIN")
"""The cross-series reducers the dashboard may use (`Aggregation.Reducer`)."""

_METRIC_IN_FILTER = re.compile(r'metric\.type="([^"]+)"')
_PROMQL_NAMES = re.compile(r"\b(DCGM_[A-Z0-9_]+)\b")


def dashboard_problems(document: dict[str, Any]) -> list[str]:
    """What in a Dashboard API document breaks the API's structure or names a metric the facts do not list."""
    problems = []
    if not isinstance(document.get("displayName"), str) or not document["displayName"]:
        problems.append("displayName: a non-empty string is required")
    layout = document.get("mosaicLayout")
    if not isinstance(layout, dict) or set(layout) != {"columns", "tiles"}:
        return [*problems, "mosaicLayout: an object of columns and tiles is required"]
    columns = layout["columns"]
    if not isinstance(columns, int) or not 1 <= columns <= MOSAIC_COLUMNS:
        problems.append(f"mosaicLayout.columns: 1 to {MOSAIC_COLUMNS}, got {columns!r}")
        columns = MOSAIC_COLUMNS
    taken: set[tuple[int, int]] = set()
    for index, tile in enumerate(layout["tiles"]):
        where = f"mosaicLayout.tiles[{index}]"
        x, y, width, height = (tile.get(key, 0) for key in ("xPos", "yPos", "width", "height"))
        if width < 1 or height < 1 or x < 0 or y < 0 or x + width > columns:
            problems.append(f"{where}: must lie inside the {columns} columns, got x={x} width={width}")
        cells = {(cx, cy) for cx in range(x, x + width) for cy in range(y, y + height)}
        if cells & taken:
            problems.append(f"{where}: overlaps an earlier tile")
        taken |= cells
        widget = tile.get("widget", {})
        kinds = [kind for kind in WIDGET_KINDS if kind in widget]
        if len(kinds) != 1:
            problems.append(f"{where}.widget: exactly one of {', '.join(WIDGET_KINDS)}, got {kinds}")
            continue
        for number, data_set in enumerate(widget.get("xyChart", {}).get("dataSets", [])):
            problems += _data_set_problems(data_set, f"{where}.widget.xyChart.dataSets[{number}]")
    return problems


def _data_set_problems(data_set: dict[str, Any], where: str) -> list[str]:
    query = data_set.get("timeSeriesQuery", {})
    sources = [kind for kind in QUERY_KINDS if kind in query]
    if len(sources) != 1:
        return [f"{where}.timeSeriesQuery: exactly one of {', '.join(QUERY_KINDS)}, got {sources}"]
    problems = []
    if "prometheusQuery" in query:
        names = set(_PROMQL_NAMES.findall(query["prometheusQuery"]))
        if not names:
            problems.append(f"{where}: the PromQL query names no metric of the facts")
        problems += [
            f"{where}: {name} is not a metric of core/facts/monitoring.py" for name in sorted(names - PROMQL_METRICS)
        ]
    if "timeSeriesFilter" in query:
        selector = query["timeSeriesFilter"]
        metrics = _METRIC_IN_FILTER.findall(selector.get("filter", ""))
        if len(metrics) != 1:
            problems.append(f"{where}: the filter names {len(metrics)} metric types, not one")
        problems += [
            f"{where}: {name} is not a metric type of core/facts/monitoring.py"
            for name in metrics
            if name not in METRIC_TYPES
        ]
        aggregation = selector.get("aggregation", {})
        if aggregation.get("perSeriesAligner") not in ALIGNERS:
            problems.append(
                f"{where}: perSeriesAligner {aggregation.get('perSeriesAligner')!r} is not one of {ALIGNERS}"
            )
        if aggregation.get("crossSeriesReducer") not in REDUCERS:
            problems.append(
                f"{where}: crossSeriesReducer {aggregation.get('crossSeriesReducer')!r} is not one of {REDUCERS}"
            )
        if not re.fullmatch(r"\d+s", str(aggregation.get("alignmentPeriod", ""))):
            problems.append(f"{where}: alignmentPeriod must be a duration in seconds such as 60s")
    return problems


def console_url(project: str, dashboard_id: str) -> str:
    """The dashboard in the Cloud console, from its resource id `projects/<number>/dashboards/<id>`."""
    return f"https://console.cloud.google.com/monitoring/dashboards/builder/{dashboard_id.rsplit('/', 1)[-1]}?project={project}"


@dataclass(frozen=True)
class RunDashboardArgs:
    """Inputs of the RunDashboard component."""

    config: StackConfig
    """The stack's config."""
    monitoring_api: pulumi.Resource
    """The Cloud Monitoring API's enablement."""


class RunDashboard(pulumi.ComponentResource):
    """The run's Cloud Monitoring dashboard."""

    dashboard: gcp.monitoring.Dashboard
    url: pulumi.Output[str]

    def __init__(self, name: str, args: RunDashboardArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:infra:RunDashboard", name, None, opts)
        spec = run_dashboard_spec(args.config)
        problems = dashboard_problems(render_dashboard(spec))
        if problems:
            raise ValueError(f"the run's dashboard is malformed: {'; '.join(problems)}")
        self.dashboard = gcp.monitoring.Dashboard(
            f"{args.config.cluster_name}-dashboard",
            gcp.monitoring.DashboardArgs(dashboard_json=dashboard_json(spec), project=args.config.project),
            opts=pulumi.ResourceOptions(parent=self, depends_on=[args.monitoring_api]),
        )
        project = args.config.project
        self.url = self.dashboard.id.apply(lambda identifier: console_url(project, identifier))
        self.register_outputs({"url": self.url})
