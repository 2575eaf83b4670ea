"""One backoff for every call the project retries: capped exponential delays, a server's Retry-After honoured, a
deadline, and a progress line before each wait.

What is retried is the caller's to say, by raising a Transient: Google's APIs retry UNAVAILABLE (HTTP 503) alone
(AIP-194 "Retryable codes", google.aip.dev/194, read 2026-12-07 at aip-dev/google.aip.dev 016c47f aip/general/0194.md);
a 429 or another 5xx is retried only when it says when (Retry-After), which is when client-go retries the Kubernetes
API server (kubernetes/client-go rest/request.go `checkWait`: 429 and 5xx with a Retry-After; assumed from its
documented behaviour, not re-read here). Retry-After is delay-seconds or an HTTP-date (RFC 9110 section 10.2.3).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Any


@dataclass(frozen=True)
class Backoff:
    """Delays before each retry: `first` seconds, times `factor` per retry, at most `most`."""

    first: float = 1.0
    """Seconds before the first retry."""
    most: float = 60.0
    """The longest delay the backoff itself picks (a Retry-After may ask for longer, and is honoured)."""
    factor: float = 2.0
    """Growth of the delay per retry."""

    def delay(self, retries_before: int) -> float:
        """Seconds before the retry that follows `retries_before` retries."""
        return min(self.first * self.factor**retries_before, self.most)


BACKOFF = Backoff()
"""The project's backoff: 1 s doubling to a minute."""


class Transient(Exception):
    """A failure worth another try (UNAVAILABLE, no connection, a cut answer, or one that says when to come back);
    `retry_after` is the server's Retry-After in seconds, or None."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds a Retry-After header asks to wait (delay-seconds, or an HTTP-date less `now`, never below 0); None when
    absent or unreadable (RFC 9110 section 10.2.3)."""
    if not value:
        return None
    text = value.strip()
    if text.isdigit():
        return float(text)
    try:
        return max(parsedate_to_datetime(text).timestamp() - now(), 0.0)
    except (TypeError, ValueError):
        return None


def transient_status(status: int, retry_after_s: float | None) -> bool:
    """Whether an HTTP status is worth another try: 503 always (UNAVAILABLE), a 429 or another 5xx only with a
    Retry-After (the server says when)."""
    return status == 503 or (retry_after_s is not None and (status == 429 or status >= 500))


def retrying(
    call: Callable[[], Any],
    what: str,
    deadline_seconds: float,
    report: Callable[[str], None],
    backoff: Backoff = BACKOFF,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    since: float | None = None,
) -> Any:
    """`call()`'s result, calling it again after each Transient with the backoff's delay (or the Retry-After, when
    longer) and a progress line, until `deadline_seconds` after `since` (default: the first failure); then the last
    Transient is raised. The clock is read only after a failure."""
    end = None if since is None else since + deadline_seconds
    retries = 0
    while True:
        try:
            return call()
        except Transient as error:
            now = clock()
            end = now + deadline_seconds if end is None else end
            delay = max(backoff.delay(retries), error.retry_after or 0.0)
            if delay > end - now:
                raise
            report(f"{what}: {error}; trying again in {delay:.3g} s ({end - now:.0f} s left)")
            sleep(delay)
            retries += 1
