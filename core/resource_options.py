"""Resource options shared by every component (Pulumi-side; core/names.py, which ships into the cluster, stays pure)."""

from __future__ import annotations

from typing import Any

import pulumi


def fixed_name_options(**options: Any) -> pulumi.ResourceOptions:
    """ResourceOptions of a resource the stack names itself: a replacement deletes the old one first.

    Two objects cannot hold one name, so the engine's default order (create the new, then delete the
    old) fails with 409 "already exists" for a fixed name; the GCP bridge orders it right only for
    auto-named resources (real-engine-semantics.md, "Replacement order").
    """
    return pulumi.ResourceOptions(delete_before_replace=True, **options)
