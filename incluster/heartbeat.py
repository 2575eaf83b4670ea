"""The in-cluster guardian's heartbeat, and the liveness probe that reads it.

The guardian sets the modification time of HEARTBEAT_FILE at every progress line it prints (Heartbeat wraps its
reporter). Every wait of the guardian prints one at least every 30 s: the loop repeats its line every
readiness.REPORT_EVERY_SECONDS, the readiness gate likewise, a Lustre transfer of hours once per poll
(lustre_transfer.wait_for, 10 s); every request between two lines has a deadline (job_client.DEADLINES, 40 s). A loop
that is stuck (a hang no deadline bounds, a thread waiting on itself) prints nothing, and so does a guardian that held
the Lease and can no longer renew it (lease.Lease.failure: Heartbeat then stops beating, as client-go's
healthzadaptor.go L25-31 turns /healthz unhealthy "and rely on the kubelet to take down the process").

The kubelet runs this file as the Deployment's exec liveness probe (jobs/guardian/objects.py): `python3 -I <this
file> <heartbeat file> <seconds>` exits 1, with one line saying why, when the file is missing or older than
`seconds`, and the kubelet restarts the container (k8s.io/api v0.36.3 core/v1 types.go L2703-2711 ExecAction: "Exit
status of 0 is treated as live/healthy and non-zero is unhealthy", run from '/' and not in a shell; L3037-3042
LivenessProbe: "Container will be restarted if the probe fails").

Run by path with `-I`, it imports the standard library alone: no PYTHONPATH, no package of the guardian, a probe of a
few milliseconds.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

HEARTBEAT_FILE = "/tmp/grpo-guardian-heartbeat"
"""The file whose modification time is the guardian's last progress line (the container's own writable layer: a
restarted container starts without it)."""

STALE_AFTER_SECONDS = 600
"""The probe fails once the heartbeat is older than this: well over the longest gap between two progress lines of a
guardian at work (30 s, plus an observation whose every request waits its whole 40 s deadline)."""


def beat(path: str, at: float) -> None:
    """Set `path`'s modification time to `at`, creating it; best effort (an unwritable file fails the probe, which
    says so)."""
    try:
        with open(path, "a"):
            pass
        os.utime(path, (at, at))
    except OSError:
        pass


def staleness(path: str, now: float, stale_after: float) -> str | None:
    """Why the heartbeat `path` says the guardian is stuck at `now`, or None while it is fresh."""
    try:
        age = now - os.stat(path).st_mtime
    except OSError as error:
        return f"no heartbeat at {path} ({error.strerror or error}): the guardian has printed no progress line"
    if age > stale_after:
        return f"the guardian's last progress line is {age:.0f} s old (more than {stale_after:g} s): it is stuck"
    return None


class Heartbeat:
    """The in-cluster guardian's reporter: each line is reported and beats the heartbeat, unless `failure` names why
    this guardian must exit (lease.Lease.failure)."""

    def __init__(
        self,
        report: Callable[[str], None],
        path: str = HEARTBEAT_FILE,
        failure: Callable[[], str | None] = lambda: None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.report, self.path, self.failure, self.clock = report, path, failure, clock

    def beat(self) -> None:
        """Beat now, unless `failure` says this guardian must exit."""
        if self.failure() is None:
            beat(self.path, self.clock())

    def __call__(self, line: str) -> None:
        """Report `line`, then beat."""
        self.report(line)
        self.beat()


def main(argv: list[str]) -> int:
    """The liveness probe: `<heartbeat file> <stale after seconds>`; 0 while fresh, else 1 with one line."""
    why = staleness(argv[0], time.time(), float(argv[1]))
    if why is not None:
        print(why)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
