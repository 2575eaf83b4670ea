"""Facts of the run's Cloud Monitoring dashboard: the cluster's metric components, the metric types it charts
and the Dashboard API's layout limits. Every metric type here is one the cited metric list names (read
2026-12-01); the dashboard renderer refuses any other.

Sources are tagged as in core/facts/__init__.py."""

from __future__ import annotations

MONITORING_COMPONENTS = ("SYSTEM_COMPONENTS", "DCGM")
"""`monitoring_config.enable_components` of the cluster: GKE's system metrics (node count) and the managed
DCGM metrics of the GPUs. GKE docs "Collect and view DCGM metrics" (kubernetes-engine/docs/how-to/dcgm-metrics,
read 2026-12-01): enabling DCGM makes GKE install DCGM-Exporter and a ClusterPodMonitoring that sends the
metrics to Managed Service for Prometheus, which must be on; on by default for new clusters from
1.32.1-gke.1357000, on older ones through the console, gcloud or Terraform. pulumi-gcp 10.2.0
`ClusterMonitoringConfigArgs.enable_components` lists `DCGM` among its values (Standard and Autopilot alike)."""

DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
"""DCGM's GPU utilisation in percent, a gauge (NVIDIA DCGM field list; one of GKE's managed DCGM metrics,
kubernetes-engine/docs/how-to/dcgm-metrics; Managed Service for Prometheus stores it as
`prometheus.googleapis.com/DCGM_FI_DEV_GPU_UTIL/gauge`, queried by its PromQL name)."""

DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"
"""DCGM's used GPU framebuffer memory in MiB, a gauge (same sources as DCGM_GPU_UTIL)."""

DCGM_NODE_LABEL = "Hostname"
"""DCGM-Exporter's label naming the node a GPU belongs to (the exporter's default label set beside `gpu`,
`UUID`, `modelName`); not checked against a running GKE cluster's managed exporter."""

PROMQL_METRICS = frozenset({DCGM_GPU_UTIL, DCGM_FB_USED})
"""The PromQL metric names the dashboard may chart."""

NODE_CORES = "kubernetes.io/node/cpu/allocatable_cores"
"""Allocatable CPU cores of a node, one time series per node of resource `k8s_node`: counted, the cluster's
node count (Cloud Monitoring "Kubernetes metrics", monitoring/api/metrics_kubernetes, GKE system metrics)."""

GCS_RECEIVED_BYTES = "storage.googleapis.com/network/received_bytes_count"
"""Bytes a bucket received (writes: checkpoints), DELTA INT64 of resource `gcs_bucket`, label `bucket_name`
(Cloud Monitoring "Google Cloud metrics" P-Z, monitoring/api/metrics_gcp_p_z#storage/network/received_bytes_count)."""

GCS_SENT_BYTES = "storage.googleapis.com/network/sent_bytes_count"
"""Bytes a bucket sent (reads: the model, data, a resume), DELTA INT64 of `gcs_bucket` (same list)."""

LUSTRE_READ_BYTES = "lustre.googleapis.com/instance/read_bytes_total"
"""Data bytes read from a Managed Lustre instance's storage targets (the model, data, a resume), DELTA INT64 in
bytes of resource `lustre.googleapis.com/Instance` (labels `resource_container`, `location`, `instance_id`),
BETA, sampled every 60 s (Cloud Monitoring "Google Cloud metrics: I through O",
monitoring/api/metrics_gcp_i_o, section lustre, list generated 2026-04-10, read 2026-12-01)."""

LUSTRE_WRITE_BYTES = "lustre.googleapis.com/instance/write_bytes_total"
"""Data bytes written to a Managed Lustre instance's storage targets (checkpoints), DELTA INT64 of the same
resource (same list)."""

LUSTRE_INSTANCE = "lustre.googleapis.com/Instance"
"""The monitored resource of a Managed Lustre instance, labelled by `location` (its zone) and `instance_id`
(same list; Cloud Monitoring "Monitored resource types", monitoring/api/resources)."""

METRIC_TYPES = frozenset({NODE_CORES, GCS_RECEIVED_BYTES, GCS_SENT_BYTES, LUSTRE_READ_BYTES, LUSTRE_WRITE_BYTES})
"""The Cloud Monitoring metric types the dashboard's filters may name."""

MOSAIC_COLUMNS = 48
"""Columns of a mosaic layout's grid, at most 48 (Cloud Monitoring API `MosaicLayout.columns`: 1 to 48)."""
