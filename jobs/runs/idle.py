"""The idle bill as `status` shows it: once the run is over, when the GPU workers scale to zero (job.idleMinutes
counting down from the newest attempt's end, as the guardian's policy does: incluster/guardian/policy.py `_idle`),
and after the guardian's `scaled-to-zero` entry, since when the parts that stay bill and about how much so far, and
whether the guardian then parked the run (storage.parkWhenIdle).

Pure: the run's record, Ray's attempts, job.idleMinutes, the plan's idle bill (for the countdown: the record holds
the guardian's own figure only from the scale to zero on) and the time in; an IdleView out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from core.prices import IdleBill, listed
from jobs.runs.goodput import duration
from jobs.runs.observed import RayAttempt

RUN_OVER_EVENTS = ("succeeded", "not-retried", "gave-up", "budget-stop")
"""Record events after which the guardian's policy lets the GPU workers go (incluster/guardian/policy.py `_idle`);
a schedule that asks for more, or a budget raised after a `budget-stop`, goes on at once into a newer attempt, which
is not over."""


@dataclass(frozen=True)
class IdleView:
    """The newest attempt's idle state: over since when, when the scale to zero is due or was recorded, and the
    $/h that bills on (with the parts it covers and those without a price)."""

    attempt: int
    """The newest attempt."""
    over_since: float
    """When it ended (seconds since the epoch)."""
    idle_minutes: float
    """job.idleMinutes (0: the GPU workers stay)."""
    hourly: float
    """$/h of the parts that stay, at their list prices."""
    parts: tuple[str, ...]
    """The parts that stay."""
    unpriced: tuple[str, ...]
    """Those among them without a price."""
    now: float
    """When it was looked at."""
    idle_since: float | None = None
    """When the guardian scaled the GPU workers to zero (its `scaled-to-zero` entry); None before."""
    recorded_rate: bool = True
    """Whether the rate is the one the guardian recorded (else the plan's: a record from before it kept one)."""
    park: Mapping[str, Any] | None = None
    """The guardian's `parked` or `park-failed` entry after the scale to zero (storage.parkWhenIdle); None: none."""

    @property
    def due(self) -> float | None:
        """When the scale to zero is due (None with idleMinutes 0: never)."""
        return None if self.idle_minutes <= 0 else self.over_since + self.idle_minutes * 60

    @property
    def dollars(self) -> float | None:
        """Dollars the parts that stay have cost since the scale to zero; None before it."""
        return None if self.idle_since is None else self.hourly * max(0.0, self.now - self.idle_since) / 3600

    def lines(self) -> list[str]:
        """The lines `status` prints."""
        if self.idle_since is not None:
            assert self.dollars is not None
            about = "at least" if self.unpriced else "about"
            shown = (
                f"idle since {_utc(self.idle_since)} ({duration(self.now - self.idle_since)}),"
                f" {about} ${self.dollars:.2f} at ${self.hourly:.2f}/h for the {self._parts()}"
            )
            if not self.recorded_rate:
                shown += " (the plan's rate: the guardian's entry keeps none)"
            return [shown, *self._park_lines()]
        over = f"run over since {_utc(self.over_since)} (attempt {self.attempt} ended)"
        if self.due is None:
            return [f"{over}: job.idleMinutes is 0, so the GPU workers stay"]
        then = f"then ${self.hourly:.2f}/h bills on for the {self._parts()}"
        if self.due > self.now:
            left = duration(self.due - self.now)
            return [
                f"{over}: the GPU workers scale to zero at {_utc(self.due)} (in {left}, job.idleMinutes="
                f"{self.idle_minutes:g}); {then}"
            ]
        return [
            f"{over}: the GPU workers were due to scale to zero at {_utc(self.due)} ({duration(self.now - self.due)}"
            f" ago, job.idleMinutes={self.idle_minutes:g}) and have not: a job is live on the cluster, or no guardian"
            f" with the API server runs; {then}"
        ]

    def as_json(self) -> dict[str, Any]:
        """The same as plain data for `status --json`."""
        return {
            "attempt": self.attempt,
            "overSince": _utc(self.over_since),
            "scaleToZeroDue": None if self.due is None else _utc(self.due),
            "idleSince": None if self.idle_since is None else _utc(self.idle_since),
            "idleHourly": self.hourly,
            "idleParts": list(self.parts),
            "idleUnpriced": list(self.unpriced),
            "dollarsSoFar": None if self.dollars is None else round(self.dollars, 2),
            "park": None if self.park is None else {"event": self.park.get("event"), "time": self.park.get("time"),
                                                     "reason": self.park.get("reason", "")},
        }  # fmt: skip

    def _park_lines(self) -> list[str]:
        """What the guardian's park did: parked (what stops the Lustre bill then) or failed (and parking by hand)."""
        if self.park is None:
            return []
        at = _utc(_seconds(self.park["time"]))
        if self.park.get("event") == "parked":
            details = self.park.get("details") or {}
            step = "no checkpoint" if details.get("step") is None else f"step {details['step']}"
            return [
                f"parked at {at} in gs://{details.get('bucket', '')}/ ({step}): set grpo-gke:storage.parked true and"
                " run pulumi up to delete the Lustre instance and stop its bill"
            ]
        return [f"parking failed at {at}: {self.park.get('reason', '')}"]

    def _parts(self) -> str:
        stays = listed(self.parts)
        if self.unpriced:
            return f"{stays} (without the {listed(self.unpriced)}: no price)"
        return stays


def idle_view(
    record: Sequence[Mapping[str, Any]],
    attempts: Sequence[RayAttempt],
    idle_minutes: float,
    planned: IdleBill,
    now: float,
) -> IdleView | None:
    """The idle state of the run's newest attempt, or None while it is not over (live, or no record says it is
    over: a run no guardian follows). The $/h is the guardian's `scaled-to-zero` entry's, else `planned` (the
    plan's idle bill, core/prices.py idle_bill, which the guardian's settings carry)."""
    numbers = [item.number for item in attempts] + [
        int(e["attempt"]) for e in record if isinstance(e.get("attempt"), int)
    ]
    if not numbers:
        return None
    newest = max(numbers)
    ray = next((item for item in attempts if item.number == newest), None)
    if ray is not None and ray.end is None:
        return None
    own = {entry.get("event"): entry for entry in record if entry.get("attempt") == newest}
    over = [own[event] for event in RUN_OVER_EVENTS if event in own]
    if not over:
        return None
    # An attempt Ray no longer lists (a new head): it ended by the time the guardian first judged it.
    judged = [own[event] for event in ("failed", *RUN_OVER_EVENTS) if event in own]
    over_since = ray.end if ray is not None and ray.end is not None else min(_seconds(e["time"]) for e in judged)
    base = IdleView(
        attempt=newest,
        over_since=over_since,
        idle_minutes=idle_minutes,
        hourly=planned.hourly,
        parts=planned.parts,
        unpriced=planned.unpriced,
        now=now,
    )
    scaled = own.get("scaled-to-zero")
    if scaled is None:
        return base
    base = replace(base, park=own.get("parked") or own.get("park-failed"))
    since = _seconds(scaled["time"])
    details = scaled.get("details") or {}
    if not isinstance(details.get("idleHourly"), (int, float)):
        return replace(base, idle_since=since, recorded_rate=False)
    return replace(
        base,
        idle_since=since,
        hourly=float(details["idleHourly"]),
        parts=tuple(details.get("idleParts") or planned.parts),
        unpriced=tuple(details.get("idleUnpriced") or ()),
    )


def _utc(seconds: float) -> str:
    """`2026-12-01 10:45:00Z`, as `status` shows a job's start (jobs/cli/stack_jobs.py job_line)."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _seconds(stamp: str) -> float:
    """A record entry's `time` (incluster/record.py utc_stamp) as seconds since the epoch."""
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
