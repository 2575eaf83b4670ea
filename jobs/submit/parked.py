"""Before a submission on a Managed Lustre stack, the parked bucket's marker is marked stale (incluster/park.py
mark_stale): an attempt submitted after a park writes to the instance what the bucket lacks, so `storage.parked: true`
must refuse until the run is parked again (infra/storage.py park_refusal). `python -m jobs submit` and the post-deploy
step call it with the user's Google token; the guardian with its own (incluster/guardian/command.py)."""

from __future__ import annotations

from collections.abc import Callable

from incluster.google_token import FreshBearer
from incluster.lustre_transfer import RestObjects
from incluster.park import mark_stale
from jobs.submit.access import user_credential


def mark_parked_stale(bucket: str | None, submitter: str, report: Callable[[str], None]) -> None:
    """Mark the marker in the parked bucket `bucket` stale, reporting it when there was one to mark; nothing without
    a parked bucket (a Cloud Storage stack). TransferError (or the token's error) when it cannot: do not submit."""
    if not bucket:
        return
    marked = mark_stale(RestObjects(bucket, FreshBearer(lambda: user_credential({}))), submitter)
    if marked:
        report(marked)
