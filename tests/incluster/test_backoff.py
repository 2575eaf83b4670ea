"""The one backoff every retried call uses: Retry-After read as RFC 9110 writes it, which statuses are transient, and
`retrying`'s delays, progress lines and deadline."""

from __future__ import annotations

import pytest

from incluster.backoff import Backoff, Transient, retry_after, retrying, transient_status
from tests.support.clock import Clock


def test_retry_after_is_delay_seconds_or_an_http_date_and_nothing_else():
    assert retry_after("120") == 120.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=lambda: 1445412470.0) == 10.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=lambda: 1445412490.0) == 0.0
    for unreadable in (None, "", "soon", "-5", "1.5"):
        assert retry_after(unreadable) is None


def test_only_unavailable_or_a_429_or_5xx_that_says_when_is_transient():
    assert transient_status(503, None) and transient_status(429, 2.0) and transient_status(500, 0.0)
    for status in (400, 401, 403, 404, 409, 429, 500, 502):
        assert not transient_status(status, None)
    assert not transient_status(404, 5.0)


def test_retrying_backs_off_honours_a_longer_retry_after_reports_each_wait_and_gives_up_at_its_deadline():
    clock, lines = Clock(0.0), []
    answers = [Transient("HTTP 503"), Transient("HTTP 429", retry_after=9.0), Transient("reset"), "done"]

    def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retrying(call, "reading ops/1", 60, lines.append, Backoff(1, 8), clock, clock.sleep) == "done"
    assert clock.now == 1 + 9 + 4
    assert lines[0] == "reading ops/1: HTTP 503; trying again in 1 s (60 s left)"
    assert lines[1] == "reading ops/1: HTTP 429; trying again in 9 s (59 s left)"
    clock, lines = Clock(0.0), []

    def never() -> None:
        raise Transient("HTTP 503")

    with pytest.raises(Transient, match="HTTP 503"):
        retrying(never, "patching", 20, lines.append, Backoff(1, 8), clock, clock.sleep)
    assert clock.now == 1 + 2 + 4 + 8 and len(lines) == 4  # the next 8 s would pass the deadline


def test_a_failure_that_is_not_transient_is_raised_at_once():
    def refused() -> None:
        raise ValueError("HTTP 403")

    with pytest.raises(ValueError):
        retrying(
            refused, "x", 60, lambda line: pytest.fail(line), clock=Clock(0.0), sleep=lambda s: pytest.fail("slept")
        )
