"""What the in-cluster run guardian needs: its settings (plain, deterministic JSON); its code is the shipped files
(incluster/shipping.py), under /opt/grpo-gke.

The stack renders both into ConfigMaps (settings at /etc/grpo-gke/guardian/settings.json, code under
/opt/grpo-gke) and runs `python3 -m incluster.guardian --settings /etc/grpo-gke/guardian/settings.json --address
http://<head service>:8265` with PYTHONPATH=/opt/grpo-gke, in an image that ships Ray, requests and PyYAML
(the Ray images do), without Pulumi or the typed config.
"""

from __future__ import annotations

from typing import Any

from core import names
from core.config.model import StackConfig
from core.facts.capacity import RUNGS
from core.prices import catalog, gpu_node_ceiling, idle_bill
from incluster.lustre_transfer import TRANSFER_DEADLINE_SECONDS, instance_name
from incluster.park import lustre_path
from jobs.preflight.settings import preflight_template
from jobs.runs.export import export_submission, exports_dir
from jobs.spec.training import TrainingSpec, model_size_b, submission_of, training_spec
from workloads.raycluster import WORKER_GROUP


def guardian_settings(config: StackConfig, entrypoint: str | None = None) -> dict[str, Any]:
    """The guardian's settings for `config`'s run: plain data, the same for the same config; `entrypoint` names the
    run `python -m jobs submit --entrypoint` made (jobs/spec/training.py training_spec)."""
    spec = training_spec(config, entrypoint)
    submission = submission_of(config, spec, 1)
    return {
        "stack": config.stack,
        "run": submission["metadata"]["run"],
        "submission": submission,
        "gpuNodes": config.gpu.nodes,
        "maxRecoveries": config.job.max_recoveries,
        "idleMinutes": config.job.idle_minutes,
        "readyTimeoutSeconds": config.job.ready_timeout_seconds,
        "framework": config.workload.framework,
        "worldSize": config.total_gpus,
        "namespace": names.NAMESPACE,
        "rayCluster": names.RAY_CLUSTER,
        "gpuWorkerGroup": WORKER_GROUP,
        "preflight": preflight_template(config),
        "export": export_submission(config, spec),
        "provisioning": config.gpu.provisioning,
        "ladder": config.gpu.capacity is not None,
        "cordonBadNodes": config.job.cordon_bad_nodes,
        "idleBill": idle_bill_setting(config),
        "park": park_setting(config, spec),
        **gpu_prices_setting(config),
    }


def gpu_prices_setting(config: StackConfig) -> dict[str, Any]:
    """For a run with a budget (job.maxCost or job.maxGpuHours, in the submission's metadata): `gpuPrices`, what the
    guardian prices the attempts' GPU nodes at (the cluster has no price catalog): one node's $/h on each rung as
    `python -m jobs status` prices it (core/prices.py gpu_node_ceiling: flex-start at the on-demand rate, at most;
    null: no price), the stack's nodes per rung where the record has none, the GPUs of one node, and the catalog's
    date. Nothing without a budget, so that such a stack's settings stay as they were."""
    if config.job.max_cost is None and config.job.max_gpu_hours is None:
        return {}
    prices = catalog()
    node_hourly = {rung: gpu_node_ceiling(config, prices, rung) for rung in RUNGS}
    return {
        "gpuPrices": {
            "nodeHourly": {rung: None if rate is None else round(rate, 8) for rung, rate in node_hourly.items()},
            "stackRungs": {config.gpu.provisioning: config.gpu.nodes},
            "gpusPerNode": config.gpus_per_node,
            "catalogDate": prices.date,
        }
    }


def park_setting(config: StackConfig, spec: TrainingSpec) -> dict[str, Any] | None:
    """What the guardian parks once the GPU workers are at zero (storage.parkWhenIdle), as `python -m jobs park`
    does (jobs/cli/park.py): the instance as the API names it, the parked bucket, the run's directory and its exports
    directory as instance paths, and how long it waits for each transfer; None without parking."""
    if not config.storage.park_when_idle or config.storage.type != "lustre":
        return None
    return {
        "instance": instance_name(config.project, config.zone, names.lustre_names(config.cluster_name).instance_id),
        "bucket": config.parked_bucket_name,
        "runPath": lustre_path(spec.run_dir),
        "exportsPath": lustre_path(exports_dir(spec.run)),
        "deadlineSeconds": TRANSFER_DEADLINE_SECONDS,
    }


def idle_bill_setting(config: StackConfig) -> dict[str, Any]:
    """What bills on once the guardian has scaled the GPUs to zero, for it to record (the cluster has no price
    catalog): the figure of cost.json's `idleHourly` (core/prices.py idle_bill), the parts it covers, those
    without a price, and the catalog's date. A new catalog or a change of what stays updates the settings, so it
    rolls the guardian's pod on the next `pulumi up` (jobs/guardian/objects.py SETTINGS_CHECKSUM)."""
    prices = catalog()
    bill = idle_bill(config, prices, model_size_b(config.workload))
    return {
        "hourly": round(bill.hourly, 8),
        "parts": list(bill.parts),
        "unpriced": list(bill.unpriced),
        "catalogDate": prices.date,
    }
