"""The run's record, attempts.jsonl: lines as plain data, atomic appends, reading past a torn last line,
and the lines `status` and `list` show."""

from __future__ import annotations

import json
import multiprocessing

import pytest

from incluster import record

NOON = 1796126400.0
"""2026-12-01T12:00:00Z."""


def test_an_entry_has_the_contract_keys_and_drops_empty_optional_ones():
    line = record.entry(NOON + 0.042, 2, "recovering", "GPU capacity went away", 4, ["a", "b"], {"backoff_s": 30})
    assert line == {
        "time": "2026-12-01T12:00:00.042Z", "attempt": 2, "event": "recovering", "reason": "GPU capacity went away",
        "resumed_from_step": 4, "last_lines": ["a", "b"], "details": {"backoff_s": 30},
    }  # fmt: skip
    assert set(record.entry(NOON, 1, "submitted")) == {"time", "attempt", "event", "reason", "resumed_from_step"}


@pytest.mark.parametrize(("event", "reason"), [("rebooted", ""), ("failed", "two\nlines")])
def test_an_unknown_event_or_a_reason_of_two_lines_is_refused(event, reason):
    with pytest.raises(ValueError):
        record.entry(NOON, 1, event, reason)


def test_lines_are_appended_with_sorted_keys_and_read_back_in_order(tmp_path):
    run_dir = tmp_path / "run"
    first, second = record.entry(NOON, 1, "submitted"), record.entry(NOON + 60, 1, "failed", "exit code 7")
    record.append(run_dir, first)
    record.append(run_dir, second)
    text = (run_dir / "attempts.jsonl").read_text()
    assert text.splitlines()[0] == json.dumps(first, sort_keys=True)
    assert record.read(run_dir) == [first, second]
    assert record.read(tmp_path / "none") == []


def test_a_torn_last_line_is_left_out(tmp_path):
    record.append(tmp_path, record.entry(NOON, 1, "submitted"))
    with (tmp_path / "attempts.jsonl").open("a") as handle:
        handle.write('{"attempt": 1, "event": "fai')
    assert [item["event"] for item in record.read(tmp_path)] == ["submitted"]


def _append_many(run_dir: str, writer: int) -> None:
    from pathlib import Path

    for number in range(200):
        record.append(Path(run_dir), record.entry(NOON, writer, "failed", "x" * 3000 + str(number)))


def test_appends_of_two_processes_never_interleave_within_a_line(tmp_path):
    context = multiprocessing.get_context("spawn")
    writers = [context.Process(target=_append_many, args=(str(tmp_path), writer)) for writer in (1, 2)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(60)
    lines = (tmp_path / "attempts.jsonl").read_text().splitlines()
    assert len(lines) == 400 and all(json.loads(line)["reason"].startswith("x" * 3000) for line in lines)


def test_record_lines_show_time_attempt_event_resumed_step_and_reason():
    events = [
        record.entry(NOON, 1, "submitted"),
        record.entry(NOON + 90, 1, "failed", "GPU capacity went away: node abc died", last_lines=["x"]),
        record.entry(NOON + 95, 2, "submitted", resumed_from_step=4),
    ]
    assert record.record_lines(events) == [
        "2026-12-01T12:00:00.000Z  attempt 1  submitted",
        "2026-12-01T12:01:30.000Z  attempt 1  failed: GPU capacity went away: node abc died",
        "2026-12-01T12:01:35.000Z  attempt 2  submitted  from step 4",
    ]
