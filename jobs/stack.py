"""The job layer's part of the Pulumi program: the post-deploy submission of the GRPO run."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import pulumi
import pulumi.dynamic

from core import names
from core.config.model import StackConfig
from incluster.shipping import shipped_files
from infra.outputs import GcsStorage, InfraOutputs, LustreStorage
from jobs.guardian.objects import RunGuardian, RunGuardianArgs
from jobs.guardian.settings import guardian_settings
from jobs.preflight.settings import preflight_template
from jobs.runs.export import export_uri
from jobs.runs.park_guard import ParkGuard, ParkGuardArgs
from jobs.runs.restore_provider import RestoredRun, RestoredRunArgs
from jobs.spec.training import submission_for
from jobs.submit.provider import JobProvider
from jobs.submit.target import job_command
from workloads.outputs import WorkloadOutputs


@dataclass(frozen=True)
class GrpoJobArgs:
    """Inputs of the post-deploy step."""

    submission: dict[str, Any]
    """Keyword arguments of JobSubmissionClient.submit_job for attempt 1 (plain, deterministic)."""
    kubeconfig: pulumi.Input[str]
    """The cluster's kubeconfig (secret): reaches the dashboard through the API server's service proxy."""
    gpu_nodes: int
    """Ray nodes with 8 GPUs to wait for before submitting."""
    ready_timeout_seconds: int
    """How long to wait for them before refusing the job."""
    cluster_uid: pulumi.Input[str | None]
    """The RayCluster's uid: a replaced cluster lost its jobs, so the run is submitted again."""
    preflight: dict[str, Any] | None
    """The preflight's settings without their time (jobs/preflight/settings.py preflight_template), None when off: run
    before the first attempt on a fresh RayCluster."""
    cordon_bad_nodes: bool
    """Cordon the nodes a failed preflight names."""
    gpu_instance_groups: pulumi.Input[Mapping[str, str]]
    """The GPU pools' MIGs by name, each to its rung (infra/outputs.py InfraOutputs.gpu_instance_groups): the gate
    names the rung the autoscaler's events name the MIG of."""
    parked_bucket: str | None = None
    """A Lustre stack's parked bucket, whose park marker is marked stale before each submission; None on Cloud
    Storage."""


class PostDeployJob(pulumi.dynamic.Resource):
    """The submitted run; `pulumi up` submits it, `pulumi destroy` stops it."""

    submission: pulumi.Output[dict]
    run: pulumi.Output[str]
    submission_id: pulumi.Output[str]

    def __init__(self, name: str, args: GrpoJobArgs, opts: pulumi.ResourceOptions | None = None):
        props = {
            "submission": args.submission,
            "kubeconfig": pulumi.Output.secret(args.kubeconfig),
            "address": "",
            "gpu_nodes": args.gpu_nodes,
            "ready_timeout_seconds": args.ready_timeout_seconds,
            "cluster_uid": args.cluster_uid,
            "preflight": args.preflight,
            "cordon_bad_nodes": args.cordon_bad_nodes,
            "gpu_instance_groups": args.gpu_instance_groups,
            "parked_bucket": args.parked_bucket,
            "run": None,
            "submission_id": None,
        }
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(additional_secret_outputs=["kubeconfig"]))
        super().__init__(JobProvider(), name, props, opts)


class GrpoJob(pulumi.ComponentResource):
    """The GRPO run of the stack, submitted after the RayCluster is ready and staging has finished."""

    def __init__(
        self,
        name: str,
        args: GrpoJobArgs,
        depends_on: list[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("grpo-gke:jobs:GrpoJob", name, None, opts)
        self.submission = PostDeployJob(
            f"{name}-submission",
            args,
            pulumi.ResourceOptions(parent=self, depends_on=depends_on),
        )
        """The dynamic resource that submits, replaces and stops the run."""
        self.register_outputs({"run": self.submission.run, "submissionId": self.submission.submission_id})


def _uid(metadata: Any) -> str | None:
    return (metadata or {}).get("uid") if isinstance(metadata, dict) else None


def build_guardian(config: StackConfig, infra: InfraOutputs, workloads: WorkloadOutputs) -> RunGuardian:
    """The run guardian (job.recover), after the RayCluster, the data claim and the storage grants."""
    args = RunGuardianArgs(
        config=config,
        settings=guardian_settings(config),
        code_files=shipped_files(),
        cordon_bad_nodes=config.job.cordon_bad_nodes,
        provider=infra.k8s_provider,
        depends_on=[workloads.data_claim],
        deployment_needs=[workloads.ray_cluster, *infra.storage_ready, *infra.guardian_grants],
        google_account=infra.guardian_account,
    )
    return RunGuardian("guardian", args)


def with_restored_run(config: StackConfig, infra: InfraOutputs) -> InfraOutputs:
    """On a Lustre stack, the import of a parked run (jobs/runs/restore_provider.py) after the instance and the Lustre
    agent's grant, and `infra` with it among what a pod mounting the storage waits for; `infra` unchanged otherwise."""
    if not isinstance(infra.storage, LustreStorage):
        return infra
    restored = RestoredRun(
        names.RESTORED_RUN,
        RestoredRunArgs(
            bucket=config.parked_bucket_name,
            instance=infra.storage.instance_name,
            instance_uid=infra.storage.uid,
        ),
        pulumi.ResourceOptions(depends_on=list(infra.storage_ready)),
    )
    return replace(infra, storage_ready=[*infra.storage_ready, restored])


def guard_instance(config: StackConfig, infra: InfraOutputs) -> ParkGuard | None:
    """On a Lustre stack with its instance, the park guard (jobs/runs/park_guard.py): the instance's deletion waits
    on it, and it refuses while the run is not parked. None otherwise (a bucket, or the instance parked away)."""
    if not isinstance(infra.storage, LustreStorage):
        return None
    return ParkGuard(
        names.PARK_GUARD,
        ParkGuardArgs(config=config, instance=infra.storage.instance_name, instance_uid=infra.storage.uid),
        pulumi.ResourceOptions(delete_before_replace=True),
    )


def build_job(config: StackConfig, infra: InfraOutputs, workloads: WorkloadOutputs) -> None:
    """Register the run guardian (job.recover) and the post-deploy submission (unless job.submit is false),
    which waits for the RayCluster and staging.

    The program has already validated the job (jobs.spec.validate.check) with the rest of the config.
    """
    if config.job.recover:
        build_guardian(config, infra, workloads)
    if isinstance(infra.storage, GcsStorage):
        pulumi.export("exportUri", pulumi.Output.from_input(infra.storage.bucket_name).apply(export_uri))
    if not config.job.submit:
        return
    submission = submission_for(config)
    args = GrpoJobArgs(
        submission=submission,
        kubeconfig=infra.kubeconfig,
        gpu_nodes=config.gpu.nodes,
        ready_timeout_seconds=config.job.ready_timeout_seconds,
        cluster_uid=workloads.ray_cluster.metadata.apply(_uid),
        preflight=preflight_template(config),
        cordon_bad_nodes=config.job.cordon_bad_nodes,
        gpu_instance_groups=infra.gpu_instance_groups,
        parked_bucket=config.parked_bucket_name if config.storage.type == "lustre" else None,
    )
    job = GrpoJob("grpo-job", args, depends_on=[workloads.ray_cluster, workloads.staging_job])
    pulumi.export("jobRun", submission["metadata"]["run"])
    pulumi.export("jobSubmissionId", job.submission.submission_id)
    pulumi.export("jobStatusCommand", job_command("status", config.stack))
