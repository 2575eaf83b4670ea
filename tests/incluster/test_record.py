"""The run's record, attempts.jsonl: lines as plain data, atomic appends, reading past a torn last line,
and the lines `status` and `list` show."""

from __future__ import annotations

import errno
import json
import multiprocessing
import os

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


class ShortDisk:
    """A boundary fault: the disk under the record takes only `room` more bytes of a write to the record, as write(2)
    returns a short count on a nearly full disk (POSIX write: "fewer bytes than requested"), then ENOSPC. Writes to
    other files pass."""

    def __init__(self, room: int) -> None:
        self.room, self.real = room, os.write

    def __call__(self, descriptor: int, data: bytes) -> int:
        if not os.readlink(f"/proc/self/fd/{descriptor}").endswith(record.RECORD_FILE):
            return self.real(descriptor, data)
        if self.room == 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        written = self.real(descriptor, bytes(data[: self.room]))
        self.room -= written
        return written


def test_a_short_write_raises_and_the_next_append_keeps_the_torn_bytes_aside_and_appends_whole(tmp_path, monkeypatch):
    record.append(tmp_path, record.entry(NOON, 1, "submitted"))
    failed = record.entry(NOON + 60, 1, "failed", "GPU capacity went away")
    monkeypatch.setattr(record.os, "write", ShortDisk(room=20))  # the fault: the disk fills in this append
    with pytest.raises(OSError, match="short write: 20 of"):
        record.append(tmp_path, failed)
    monkeypatch.undo()  # room again: the guardian decides again and appends the same decision
    assert record.read(tmp_path) == [record.entry(NOON, 1, "submitted")]
    record.append(tmp_path, failed)
    record.append(tmp_path, record.entry(NOON + 90, 1, "not-retried", "x"))
    assert [item["event"] for item in record.read(tmp_path)] == ["submitted", "failed", "not-retried"]
    torn = (tmp_path / "attempts.jsonl.torn").read_bytes()
    assert torn == (json.dumps(failed, sort_keys=True).encode()[:20] + b"\n")


def test_a_last_line_that_lost_only_its_newline_is_kept_not_cut(tmp_path, monkeypatch):
    first = record.entry(NOON, 1, "submitted")
    size = len(json.dumps(first, sort_keys=True))
    monkeypatch.setattr(record.os, "write", ShortDisk(room=size))  # the fault: all but the newline
    with pytest.raises(OSError, match="short write"):
        record.append(tmp_path, first)
    monkeypatch.undo()
    record.append(tmp_path, record.entry(NOON + 60, 1, "succeeded"))
    assert [item["event"] for item in record.read(tmp_path)] == ["submitted", "succeeded"]
    assert not (tmp_path / "attempts.jsonl.torn").exists()


def test_a_second_writers_line_landing_between_two_writes_of_an_append_cannot_split_a_line(tmp_path, monkeypatch):
    """A boundary fault: another process's append lands right after each write this one issues (O_APPEND puts each
    write at the end); an append of one write keeps both lines whole."""
    real = os.write
    other = json.dumps(record.entry(NOON, 2, "submitted"), sort_keys=True).encode() + b"\n"

    def write_then_another_writer(descriptor: int, data: bytes) -> int:
        written = real(descriptor, data)
        if os.readlink(f"/proc/self/fd/{descriptor}").endswith(record.RECORD_FILE):
            second = os.open(tmp_path / record.RECORD_FILE, os.O_WRONLY | os.O_APPEND)
            real(second, other)
            os.close(second)
        return written

    monkeypatch.setattr(record.os, "write", write_then_another_writer)
    record.append(tmp_path, record.entry(NOON, 1, "failed", "x" * 500))
    monkeypatch.undo()
    assert [(item["attempt"], item["event"]) for item in record.read(tmp_path)] == [(1, "failed"), (2, "submitted")]


def test_an_unreadable_line_in_the_middle_is_skipped_and_reported_and_the_lines_after_it_are_read(tmp_path):
    for seconds, event in ((NOON, "submitted"), (NOON + 60, "failed"), (NOON + 90, "recovering")):
        record.append(tmp_path, record.entry(seconds, 1, event, details={"backoff_s": 30}))
    path = tmp_path / record.RECORD_FILE
    lines = path.read_bytes().split(b"\n")
    lines[1] = lines[1][:10] + b"\xff\xfe" + lines[1][12:]  # the fault: bytes of line 2 damaged on the disk
    path.write_bytes(b"\n".join(lines))
    reported: list[str] = []
    assert [item["event"] for item in record.read(tmp_path, reported.append)] == ["submitted", "recovering"]
    assert reported == [f"{path} line 2: not JSON; skipped"]


def test_bytes_that_are_not_utf8_inside_a_line_do_not_stop_the_read(tmp_path):
    record.append(tmp_path, record.entry(NOON, 1, "submitted"))
    with (tmp_path / record.RECORD_FILE).open("ab") as handle:  # the fault: a reason written in Latin-1
        handle.write(
            b'{"attempt": 1, "event": "failed", "reason": "caf\xe9", "resumed_from_step": null, "time": "t"}\n'
        )
    record.append(tmp_path, record.entry(NOON + 90, 1, "not-retried"))
    events = record.read(tmp_path)
    assert [item["event"] for item in events] == ["submitted", "failed", "not-retried"]
    assert events[1]["reason"] == "caf\ufffd"


@pytest.mark.parametrize(
    ("line", "read_as"),
    [
        ({"time": "t", "attempt": 1, "event": "failed"}, {"reason": "", "resumed_from_step": None}),
        ({"time": "t", "attempt": 1, "event": "failed", "reason": None, "details": None, "last_lines": None},
         {"reason": "", "resumed_from_step": None}),
        ({"time": "t", "attempt": 1, "event": "recovering", "reason": "r", "details": {"backoff_s": 2.5}},
         {"resumed_from_step": None}),
        ({"time": "t", "attempt": 2, "event": "budget-stop", "reason": "r", "details": {"step": 6, "limit": "maxCost",
          "maxCost": 40, "maxGpuHours": None, "spent": 31.5, "gpuHours": 2.1}}, {"resumed_from_step": None}),
        ({"time": "t", "attempt": 1, "event": "budget-stop", "reason": "r", "details": {"step": None,
          "limit": "maxGpuHours", "maxGpuHours": 0.5}}, {"resumed_from_step": None}),
    ],
)  # fmt: skip
def test_lines_of_another_shape_that_can_be_used_are_read_as_entry_writes_them(tmp_path, line, read_as):
    (tmp_path / record.RECORD_FILE).write_text(json.dumps(line) + "\n")
    reported: list[str] = []
    assert record.read(tmp_path, reported.append) == [{**{k: v for k, v in line.items() if v is not None}, **read_as}]
    assert reported == []


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ([1, 2], "not a JSON object"),
        ({"attempt": 1, "event": "failed"}, "no time"),
        ({"time": "t", "attempt": None, "event": "failed"}, "no attempt number"),
        ({"time": "t", "attempt": True, "event": "failed"}, "no attempt number"),
        ({"time": "t", "attempt": 1, "event": "rebooted"}, "unknown event 'rebooted'"),
        ({"time": "t", "attempt": 1, "event": "failed", "details": []}, "details that are not an object"),
        ({"time": "t", "attempt": 1, "event": "failed", "resumed_from_step": "4"}, "not a step"),
        ({"time": "t", "attempt": 1, "event": "failed", "last_lines": "x"}, "last_lines that are not lines"),
        ({"time": "t", "attempt": 1, "event": "deadline-stop", "details": {"step": None}}, "details.step"),
        ({"time": "t", "attempt": 1, "event": "recovering", "details": {}}, "details.backoff_s"),
        (
            {"time": "t", "attempt": 1, "event": "budget-stop", "details": {"step": "6", "limit": "maxCost"}},
            "details.step that is not a step",
        ),
        ({"time": "t", "attempt": 1, "event": "budget-stop", "details": {"step": 6}}, "details.limit"),
        (
            {
                "time": "t",
                "attempt": 1,
                "event": "budget-stop",
                "details": {"step": 6, "limit": "maxCost", "spent": "31.5"},
            },
            "details.spent that is not a number",
        ),
    ],
)
def test_lines_that_cannot_be_used_are_skipped_and_reported_once_each(tmp_path, line, why):
    good = record.entry(NOON, 1, "submitted")
    (tmp_path / record.RECORD_FILE).write_text(json.dumps(line) + "\n" + json.dumps(good) + "\n")
    reported: list[str] = []
    assert record.read(tmp_path, reported.append) == [good]
    assert len(reported) == 1 and reported[0].startswith(f"{tmp_path / record.RECORD_FILE} line 1: ")
    assert why in reported[0] and reported[0].endswith("; skipped")
