"""Reading a run directory's small files: the head-side reader script run as the job would run it, the local
variant, the path mapping of --data-root, the timestamped log lines, and one read through a real local Ray head
(the reading job is deleted after it is read)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from incluster.attempt import AttemptLog
from incluster.job_client import JobError
from incluster.run_files import (
    MARKER,
    READER_METADATA,
    attempt_log,
    parse_reader_log,
    read_local_run_files,
    read_run_files,
    reader_entrypoint,
    timed_lines,
)

RECORD = '{"attempt": 1, "event": "submitted", "reason": "", "resumed_from_step": null, "time": "2026-12-01T10:00:00.000Z"}\n'
LOG = (
    "2026-12-01T10:05:00.250Z\t(TaskRunner pid=1) step:1 - critic/score/mean:0.25 - timing_s/step:80.0\n"
    "2026-12-01T10:05:01.000Z\tsome console line\n"
    "a line the wrapper did not write\n"
)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    (tmp_path / "logs").mkdir()
    (tmp_path / "attempts.jsonl").write_text(RECORD)
    (tmp_path / attempt_log(1)).write_text(LOG)
    return tmp_path


def test_the_reader_script_prints_each_file_and_none_for_a_missing_one(run_dir):
    entrypoint = reader_entrypoint(str(run_dir), ["attempts.jsonl", attempt_log(1), attempt_log(2)])
    result = subprocess.run(entrypoint, shell=True, capture_output=True, text=True, timeout=60, check=True)
    assert parse_reader_log("other driver output\n" + result.stdout) == {
        "attempts.jsonl": RECORD,
        "logs/attempt-1.log": LOG,
        "logs/attempt-2.log": None,
    }


def test_the_reader_script_keeps_only_the_matching_lines(run_dir):
    entrypoint = reader_entrypoint(str(run_dir), [attempt_log(1)], r"step:\d+ - ")
    result = subprocess.run(entrypoint, shell=True, capture_output=True, text=True, timeout=60, check=True)
    assert parse_reader_log(result.stdout) == {"logs/attempt-1.log": LOG.splitlines(True)[0]}


def test_the_local_reader_reads_the_same(run_dir):
    assert read_local_run_files(run_dir, ["attempts.jsonl", attempt_log(3)]) == {
        "attempts.jsonl": RECORD,
        attempt_log(3): None,
    }
    assert read_local_run_files(run_dir, [attempt_log(1)], "console") == {attempt_log(1): LOG.splitlines(True)[1]}


def test_a_name_ending_in_a_slash_reads_the_directorys_entries_and_none_for_a_missing_one(run_dir):
    """What a submitter reads to number the next attempt: the attempt logs' names (incluster/run_submission.py)."""
    (run_dir / attempt_log(10)).write_text("")
    entrypoint = reader_entrypoint(str(run_dir), ["logs/", "preflight/"])
    result = subprocess.run(entrypoint, shell=True, capture_output=True, text=True, timeout=60, check=True)
    listed = {"logs/": "attempt-1.log\nattempt-10.log\n", "preflight/": None}
    assert parse_reader_log(result.stdout) == listed
    assert read_local_run_files(run_dir, ["logs/", "preflight/"]) == listed


@pytest.mark.parametrize("name", ["/etc/passwd", "../other-run/attempts.jsonl", ""])
def test_a_name_outside_the_run_directory_is_refused(run_dir, name):
    with pytest.raises(ValueError, match="relative to the run directory"):
        reader_entrypoint(str(run_dir), [name])
    with pytest.raises(ValueError, match="relative to the run directory"):
        read_local_run_files(run_dir, [name])


def test_a_log_without_the_marker_is_a_job_error():
    with pytest.raises(JobError, match="printed none: Traceback"):
        parse_reader_log("Traceback (most recent call last)\n")
    assert parse_reader_log(f"{MARKER}{{}}\n") == {}


def test_timed_lines_reads_the_wrappers_utc_times_and_skips_other_lines():
    assert timed_lines(LOG) == [
        (1796119500.25, "(TaskRunner pid=1) step:1 - critic/score/mean:0.25 - timing_s/step:80.0"),
        (1796119501.0, "some console line"),
    ]


def test_a_read_through_a_real_ray_head_returns_the_files_and_deletes_its_job(ray_head, run_dir):
    from incluster.job_client import connect, endpoint_for_address

    client = connect(endpoint_for_address(ray_head))
    before = {job.submission_id for job in client.list_jobs()}
    lines: list[str] = []
    found = read_run_files(client, str(run_dir), ["attempts.jsonl", attempt_log(2)], report=lines.append)
    assert found == {"attempts.jsonl": RECORD, attempt_log(2): None}
    assert len(lines) == 1 and lines[0].startswith(f"reading 2 files of {run_dir} through the Ray head")
    after = client.list_jobs()
    assert {job.submission_id for job in after} == before
    assert not [job for job in after if job.metadata == READER_METADATA]


def test_both_readers_return_every_rolled_part_of_an_attempts_log_in_order(tmp_path):
    """Issue 30 item 7: `status`, `plot` and goodput read an attempt's log through these readers; the wrapper rolls it
    into parts (incluster/attempt.py AttemptLog, here with a 0.2 s roll), and every part is read, in order."""
    log = AttemptLog(tmp_path, "1", roll_seconds=0.2)
    for step in range(1, 4):
        log.write(f"(TaskRunner pid=1) step:{step} - critic/score/mean:0.25".encode())
        time.sleep(0.45)
    log.close()
    assert len(list((tmp_path / "logs").iterdir())) == 3
    local = read_local_run_files(tmp_path, [attempt_log(1)], r"step:\d+ - ")[attempt_log(1)]
    entrypoint = reader_entrypoint(str(tmp_path), [attempt_log(1)], r"step:\d+ - ")
    result = subprocess.run(entrypoint, shell=True, capture_output=True, text=True, timeout=60, check=True)
    assert parse_reader_log(result.stdout)[attempt_log(1)] == local
    assert [line.split(" ")[2] for _, line in timed_lines(local)] == ["step:1", "step:2", "step:3"]


def test_the_holdings_job_lists_what_park_run_reads_from_a_mounted_instance(tmp_path):
    """The holdings job's driver, run here as the head runs it (python3 -c, stdlib only) over the Lustre stand-in's
    file system, prints what incluster/park.py holdings_of reads from the guardian's mount."""
    import shlex
    import shutil
    import subprocess

    from incluster.park import Holdings, holdings_of
    from incluster.run_files import holdings_entrypoint, printed
    from tests.support.lustre_stand_in import RUN, a_run

    a_run(tmp_path)
    (tmp_path / "checkpoints" / "other-run").mkdir()
    command = shlex.split(holdings_entrypoint(str(tmp_path), "/checkpoints", "/exports", RUN))
    found = printed(subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout)
    listed = Holdings(
        "/checkpoints", "/exports", tuple(found["runs"]), tuple(found["exports"]), tuple(found["runFiles"])
    )
    assert listed == holdings_of(tmp_path, "/checkpoints", "/exports", RUN)
    assert listed.runs == tuple(sorted((RUN, "other-run")))
    shutil.rmtree(tmp_path / "exports")
    command = shlex.split(holdings_entrypoint(str(tmp_path), "/checkpoints", "/exports", RUN))
    assert (
        printed(subprocess.run(command, capture_output=True, text=True, check=True, timeout=60).stdout)["exports"]
        is None
    )


class RefusingClient:
    """A Jobs API client whose submission fails as Ray's SDK fails when nothing turned the answer into a JobError: a
    RuntimeError carrying the dashboard's traceback (ray 2.60.0 dashboard/modules/dashboard_sdk.py `_raise_error`,
    `f"Request failed with status code {r.status_code}: {r.text}."`; job_head.py submit_job answers the traceback)."""

    def submit_job(self, **_: object) -> str:
        raise RuntimeError(
            "Request failed with status code 500: Traceback (most recent call last):\n"
            '  File "job_head.py", line 418, in submit_job\nValueError: no agent\n.'
        )


def test_a_refused_reading_job_is_one_line_naming_the_status(run_dir):
    with pytest.raises(JobError) as refused:
        read_run_files(RefusingClient(), str(run_dir), ["attempts.jsonl"])
    assert str(refused.value) == (
        "Ray refused to start the job reading the run's files: Request failed with status code 500:"
        " Traceback (most recent call last):"
    )
