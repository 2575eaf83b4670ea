"""The grpo-gke Pulumi program: validate the stack config and its GRPO job, then build the graph."""

import pulumi

from core.config.problems import ConfigError
from infra.stack import build_infra
from jobs.spec.load import load_running_stack
from jobs.spec.training import training_spec
from jobs.stack import build_job, guard_instance, with_restored_run
from workloads.stack import build_workloads

try:
    loaded = load_running_stack()
except ConfigError as error:
    raise pulumi.RunError(f"the stack config was refused:\n{error}") from None
for warning in loaded.warnings:
    pulumi.warn(warning)

config = loaded.config
infra = with_restored_run(config, build_infra(config, training_spec(config).run))
guard_instance(config, infra)
workloads = build_workloads(config, infra)
if workloads is not None:  # None while the Lustre storage is parked: no RayCluster, no guardian, no run
    build_job(config, infra, workloads)
