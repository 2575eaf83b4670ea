"""The preflight before the first attempt on a fresh RayCluster (one created, or whose uid changed), never before a
resume: what the post-deploy step (jobs/submit/provider.py) calls, and the guardian's one call for the same moment.

A failed preflight refuses the training job: PreflightRefused says why, one line per bad node or NIC; with
`job.cordonBadNodes` the nodes it names are cordoned first (incluster/preflight/cordon.py). It takes the plain template
of jobs/preflight/settings.py preflight_template and imports neither the typed config nor Pulumi.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from incluster.endpoint import Endpoint
from incluster.job_client import JobError
from incluster.preflight import run
from incluster.preflight.cordon import cordon_pods_nodes

if TYPE_CHECKING:
    from ray.job_submission import JobSubmissionClient


class PreflightRefused(JobError):
    """The preflight failed, so the training job is refused; the message is a line, then one per bad node or NIC."""

    def __init__(self, outcome: run.PreflightReport):
        lines = [f"refused: the {outcome.mode} preflight failed (results {outcome.path}):"]
        lines += [f"  {line}" for line in outcome.failure_lines()]
        super().__init__("\n".join(lines))
        self.outcome = outcome
        """The judged preflight."""


def before_first_attempt(
    client: JobSubmissionClient,
    template: dict[str, Any] | None,
    report: Callable[[str], None],
    api: Endpoint | None = None,
) -> run.PreflightReport | None:
    """Run the preflight of `template` (None: off, nothing runs) now, reporting progress; the judged result when it
    passed. When it failed: with `api` (the API server; job.cordonBadNodes) cordon the nodes it names, then raise
    PreflightRefused. PreflightError (a JobError) when it could not run."""
    if template is None:
        return None
    outcome = run.run_preflight(client, {**template, "stamp": run.stamp_now()}, report)
    if outcome.passed:
        report(f"grpo-gke preflight: PASS ({outcome.mode}, {len(outcome.nodes)} nodes; results {outcome.path})")
        return outcome
    if api is not None:
        cordon_pods_nodes(api, outcome.bad_nodes(), report)
    raise PreflightRefused(outcome)
