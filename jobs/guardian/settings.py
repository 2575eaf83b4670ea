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
from core.facts.platform import GPUS_PER_NODE
from core.prices import catalog, idle_bill
from incluster.lustre_transfer import TRANSFER_DEADLINE_SECONDS, instance_name
from incluster.park import lustre_path
from jobs.preflight.settings import preflight_template
from jobs.runs.export import export_submission, exports_dir
from jobs.spec.training import model_size_b, submission_for, training_spec
from workloads.raycluster import WORKER_GROUP


def guardian_settings(config: StackConfig) -> dict[str, Any]:
    """The guardian's settings for `config`'s run: plain data, the same for the same config."""
    submission = submission_for(config)
    return {
        "stack": config.stack,
        "run": submission["metadata"]["run"],
        "submission": submission,
        "gpuNodes": config.gpu.nodes,
        "maxRecoveries": config.job.max_recoveries,
        "idleMinutes": config.job.idle_minutes,
        "readyTimeoutSeconds": config.job.ready_timeout_seconds,
        "framework": config.workload.framework,
        "worldSize": GPUS_PER_NODE * config.gpu.nodes,
        "namespace": names.NAMESPACE,
        "rayCluster": names.RAY_CLUSTER,
        "gpuWorkerGroup": WORKER_GROUP,
        "preflight": preflight_template(config),
        "export": export_submission(config, training_spec(config)),
        "provisioning": config.gpu.provisioning,
        "ladder": config.gpu.capacity is not None,
        "cordonBadNodes": config.job.cordon_bad_nodes,
        "idleBill": idle_bill_setting(config),
        "park": park_setting(config),
    }


def park_setting(config: StackConfig) -> dict[str, Any] | None:
    """What the guardian parks once the GPU workers are at zero (storage.parkWhenIdle), as `python -m jobs park`
    does (jobs/cli/park.py): the instance as the API names it, the parked bucket, the run's directory and its exports
    directory as instance paths, and how long it waits for each transfer; None without parking."""
    if not config.storage.park_when_idle or config.storage.type != "lustre":
        return None
    spec = training_spec(config)
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
