"""The staging Job: model, verl and data onto the shared storage once, before training.

One pod downloads the model (so N nodes never race on one Hugging Face cache), installs the pinned
verl release with the transformers it needs (the verl images carry no verl), converts GSM8K into
verl's parquet rows, or, for NeMo-RL, caches the Hub data sets in the shared HF_HOME. The script is
workloads/staging_script.py, shipped in a ConfigMap. pulumi-kubernetes waits for a Job to complete
and fails `up` when it fails (Job await logic: `Complete` condition, immediate failure on `Failed`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pulumi
import pulumi_kubernetes as k8s
from pulumi_kubernetes.batch.v1.Job import JobInitArgs
from pulumi_kubernetes.core.v1.ConfigMap import ConfigMapInitArgs

from core import names
from core.config.model import StackConfig
from core.facts.platform import VERL_VERSION
from core.facts.pods import (
    HUB_DATASETS,
    STAGING_BACKOFF_LIMIT,
    STAGING_DEADLINE_SECONDS,
    STAGING_REQUESTS,
    VERL_TRANSFORMERS,
)
from core.resource_options import fixed_name_options
from workloads import paths, placement, pods, storage
from workloads.identity import LABELS

NAME = "grpo-staging"
"""Name of the Job and of the ConfigMap holding its script."""

SCRIPT = Path(__file__).with_name("staging_script.py")
"""The staging program, a real module with its own tests."""

SCRIPT_DIR = "/opt/grpo-staging"
"""Where the ConfigMap is mounted in the staging pod."""

SCRIPT_DIGEST_ANNOTATION = "grpo-gke/staging-script-sha256"
"""Pod annotation carrying the script's digest, so an edited script replaces the Job."""

TIMEOUT_MARGIN_SECONDS = 900
"""How much longer Pulumi waits than the Job's own deadline (image pull, scheduling)."""


def staging_command(config: StackConfig) -> list[str]:
    """The staging program's command line for this stack."""
    command = [
        "python3",
        f"{SCRIPT_DIR}/{SCRIPT.name}",
        "--model",
        config.workload.model,
        "--model-dir",
        paths.model_dir(config),
        "--markers",
        paths.staging_markers_dir(),
    ]
    if config.workload.framework == "verl":
        command += [
            "--verl-version",
            VERL_VERSION,
            "--transformers-version",
            VERL_TRANSFORMERS,
            "--verl-dir",
            paths.verl_site_dir(),
            "--gsm8k-dir",
            paths.gsm8k_dir(),
        ]
    for repo in HUB_DATASETS.get(config.workload.dataset, ()):
        command += ["--dataset", repo]
    return command


def render_script_config_map() -> ConfigMapInitArgs:
    """The ConfigMap carrying the staging program."""
    return ConfigMapInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(name=NAME, namespace=names.NAMESPACE, labels=dict(LABELS)),
        data={SCRIPT.name: SCRIPT.read_text()},
    )


def render_job(config: StackConfig) -> JobInitArgs:
    """The staging Job: one pod, few retries, a bounded deadline, kept after it finishes."""
    env = [pods.env_var_args(entry) for entry in [pods.hf_home_env(), *pods.secret_env(config, with_secret_env=False)]]
    container = k8s.core.v1.ContainerArgs(
        name="stage",
        image=config.pulled_image(),
        command=staging_command(config),
        env=env,
        resources=k8s.core.v1.ResourceRequirementsArgs(
            requests=dict(STAGING_REQUESTS), limits={"memory": STAGING_REQUESTS["memory"]}
        ),
        # The Job runs as root like the Ray pods that share its files: its image is the workload image, built
        # to run as root, and a new Lustre file system's root directory belongs to root, so another uid could
        # not create the model and HF_HOME directories there (pods.container_security_context says what is
        # checked).
        security_context=pods.security_context_args(pods.container_security_context()),
        volume_mounts=[
            pods.volume_mount_args(pods.data_mount()),
            k8s.core.v1.VolumeMountArgs(name="script", mount_path=SCRIPT_DIR, read_only=True),
        ],
    )
    pod = k8s.core.v1.PodSpecArgs(
        service_account_name=names.RAY_SERVICE_ACCOUNT,
        restart_policy="Never",
        node_selector=placement.cpu_node_selector(config) or None,
        containers=[container],
        volumes=[
            pods.claim_volume_args(pods.data_volume()),
            k8s.core.v1.VolumeArgs(name="script", config_map=k8s.core.v1.ConfigMapVolumeSourceArgs(name=NAME)),
        ],
    )
    return JobInitArgs(
        metadata=k8s.meta.v1.ObjectMetaArgs(
            name=NAME,
            namespace=names.NAMESPACE,
            labels=dict(LABELS),
            annotations={
                "pulumi.com/timeoutSeconds": str(STAGING_DEADLINE_SECONDS + TIMEOUT_MARGIN_SECONDS),
            },
        ),
        spec=k8s.batch.v1.JobSpecArgs(
            backoff_limit=STAGING_BACKOFF_LIMIT,
            active_deadline_seconds=STAGING_DEADLINE_SECONDS,
            completions=1,
            parallelism=1,
            template=k8s.core.v1.PodTemplateSpecArgs(
                metadata=k8s.meta.v1.ObjectMetaArgs(
                    labels={**LABELS, "app.kubernetes.io/component": "staging"},
                    annotations={
                        **storage.pod_annotations(config),
                        SCRIPT_DIGEST_ANNOTATION: hashlib.sha256(SCRIPT.read_bytes()).hexdigest(),
                    },
                ),
                spec=pod,
            ),
        ),
    )


@dataclass(frozen=True)
class StagingArgs:
    """Inputs of the Staging component."""

    config: StackConfig
    """The stack config."""
    provider: k8s.Provider
    """Kubernetes provider of the cluster."""
    namespace: pulumi.Resource
    """The namespace of the Job and its ConfigMap."""
    depends_on: Sequence[pulumi.Resource]
    """What the Job's pod needs first: the claim, the service account and the token Secret."""


class Staging(pulumi.ComponentResource):
    """The staging program's ConfigMap and the Job that runs it; `up` waits for the Job."""

    config_map: k8s.core.v1.ConfigMap
    job: k8s.batch.v1.Job

    def __init__(self, name: str, args: StagingArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("grpo-gke:workloads:Staging", name, None, opts)
        self.config_map = k8s.core.v1.ConfigMap(
            f"{NAME}-script",
            render_script_config_map(),
            opts=fixed_name_options(parent=self, provider=args.provider, depends_on=[args.namespace]),
        )
        pulumi.log.info(
            f"staging: `up` waits for Job {names.NAMESPACE}/{NAME} (model, data; at most"
            f" {STAGING_DEADLINE_SECONDS // 3600} h); follow it with kubectl -n {names.NAMESPACE} logs -f job/{NAME}",
            resource=self,
        )
        self.job = k8s.batch.v1.Job(
            NAME,
            render_job(args.config),
            opts=fixed_name_options(
                parent=self, provider=args.provider, depends_on=[self.config_map, *args.depends_on]
            ),
        )
        self.register_outputs({"job": NAME})
