"""What a log's lines say: the line that tells why a job failed, without terminal colour codes or Ray's prefixes.

`python -m jobs status` (jobs/cli/runs.py) shows it for a FAILED attempt, and the run guardian records it as the reason of
a failure it does not retry (incluster/guardian/cluster.py failure_error): one rule for both. Stdlib only.
"""

from __future__ import annotations

import re

ERROR_SCAN_LINES = 200
"""Lines at the end of a FAILED job's log searched for its error line."""

ANSI_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""A terminal escape sequence (colour codes: CSI, OSC and two-byte escapes). Ray colours the `(TaskRunner pid=..)`
prefix of every actor line it relays unless RAY_COLOR_PREFIX=0 (ray 2.60.0 ray/_private/worker.py L2388-2404)."""

RAY_WORKER_PREFIX = re.compile(r"^\([^()\s]+ pid=\d+(?:, ip=[^)]*)?\) ")
"""The `(TaskRunner pid=12, ip=10.0.0.3) ` prefix Ray puts before lines that actors print."""

ERROR_WORDS = re.compile(r"\b(error|exception|failed|fatal)\b", re.IGNORECASE)
"""A log line that looks like an error."""


def plain(line: str) -> str:
    """`line` without terminal escape sequences."""
    return ANSI_ESCAPE.sub("", line)


def error_line(log: str) -> str | None:
    """The line that says why a job failed, without colour codes: the last Traceback's final line, else the last
    error-looking line."""
    lines = [RAY_WORKER_PREFIX.sub("", plain(line)).rstrip() for line in log.splitlines()]
    starts = [index for index, line in enumerate(lines) if line.startswith("Traceback (most recent call last)")]
    if starts:
        after = lines[starts[-1] + 1 :]
        final = next((line for line in after if line and not line[0].isspace()), None)
        if final:
            return final[:300]
    found = next((line for line in reversed(lines) if ERROR_WORDS.search(line)), None)
    return found.strip()[:300] if found else None
