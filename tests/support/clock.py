"""A clock for tests: seconds that move only when a test moves them or when something sleeps."""

from __future__ import annotations


class Clock:
    """Stands in for `time.time` or `time.monotonic` (call it, or its `monotonic` and `time`) and `time.sleep`, or for
    the `time` module itself where a module reads only those: sleeping advances it at once."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def monotonic(self) -> float:
        """The current second."""
        return self.now

    def time(self) -> float:
        """The current second."""
        return self.now

    def sleep(self, seconds: float) -> None:
        """Advance by `seconds` at once."""
        self.now += seconds
