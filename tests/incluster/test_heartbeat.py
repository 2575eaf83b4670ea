"""The in-cluster guardian's heartbeat and its liveness probe: the probe is run as the kubelet runs it (the
Deployment's exec command, jobs/guardian/objects.py liveness_command, its exit status and output); the guardian's
time is a fake clock that ends now, so that the heartbeat file's times are real ones and no test waits."""

from __future__ import annotations

import subprocess
import sys
import time as real_time
from pathlib import Path

import pytest

from incluster import heartbeat, lustre_transfer
from incluster.endpoint import Endpoint
from incluster.guardian.loop import Guardian, Hooks
from incluster.guardian.policy import AttemptView, State
from incluster.guardian.settings import settings_from
from incluster.heartbeat import STALE_AFTER_SECONDS, Heartbeat, staleness
from jobs.guardian.objects import liveness_command
from jobs.guardian.settings import guardian_settings
from tests.conftest import config_of

REPO = Path(__file__).resolve().parents[2]


def probe(path: Path) -> subprocess.CompletedProcess[str]:
    """The Deployment's liveness command, its script and file taken from this checkout and `path`."""
    command = liveness_command()
    assert command[:2] == ["python3", "-I"] and command[2].endswith("/incluster/heartbeat.py")
    assert command[3:] == [heartbeat.HEARTBEAT_FILE, str(STALE_AFTER_SECONDS)]
    local = [sys.executable, "-I", str(REPO / "incluster/heartbeat.py"), str(path), command[4]]
    return subprocess.run(local, capture_output=True, text=True, timeout=30, cwd="/")


class Clock:
    """The guardian's wall clock, started `behind` seconds before now and moved by its fake sleep."""

    def __init__(self, behind: float) -> None:
        self.now = real_time.time() - behind

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class SlowExport:
    """A Managed Lustre export of `hours`, as its Operation reads (google.longrunning.Operation: name, done, metadata;
    the TransferCounters of lustre_transfer.progress_of), polled by lustre_transfer.wait_for."""

    def __init__(self, clock: Clock, hours: float) -> None:
        self.clock, self.ends = clock, clock.now + hours * 3600

    def get_operation(self, name: str) -> dict:
        done = self.clock.now >= self.ends
        counters = {"bytesCopied": "1073741824", "bytesFound": "4294967296"}
        return {"name": name, "done": done, **({"response": {}} if done else {}),
                "metadata": {"operationMetadata": {"counters": counters}}}  # fmt: skip


def test_a_transfer_of_hours_with_its_progress_lines_keeps_the_probe_passing(tmp_path):
    path = tmp_path / "heartbeat"
    clock = Clock(behind=3 * 3600)
    lines: list[str] = []
    beating = Heartbeat(lines.append, str(path), clock=lambda: clock.now)
    export = SlowExport(clock, hours=3)
    looks: list[str | None] = []

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        looks.append(staleness(str(path), clock.now, STALE_AFTER_SECONDS))  # the kubelet's look at that moment

    operation = {"name": "projects/p/locations/us-central1-a/operations/op-1", "done": False}
    lustre_transfer.wait_for(export, operation, "export", 4 * 3600, beating, clock=lambda: clock.now, sleep=sleep)
    assert len(lines) >= 3 * 3600 / lustre_transfer.POLL_SECONDS and set(looks) == {None}
    answered = probe(path)
    assert (answered.returncode, answered.stdout, answered.stderr) == (0, "", "")


def test_a_stuck_loop_fails_the_probe_and_a_missing_heartbeat_too(tmp_path, monkeypatch):
    path = tmp_path / "heartbeat"
    clock = Clock(behind=STALE_AFTER_SECONDS + 120)
    lines: list[str] = []
    monkeypatch.setattr("incluster.job_client.connect", lambda endpoint: None)
    settings = settings_from(guardian_settings(config_of("dev")), "test")
    probed: list[subprocess.CompletedProcess[str]] = []

    class Stuck(Exception):
        """Ends the test once the kubelet has probed the stuck guardian."""

    class StuckGuardian(Guardian):
        looks = 0

        def observe(self) -> State:
            self.looks += 1
            if self.looks == 2:  # a hang no deadline bounds: the clock goes on, no line is printed
                clock.sleep(STALE_AFTER_SECONDS + 100)
                probed.append(probe(path))
                raise Stuck
            running = AttemptView(1, "RUNNING", start=clock.now - 60)
            return State(now=clock.now, settings=settings, newest=running, settle=60)

    guardian = StuckGuardian(settings, Endpoint("http://127.0.0.1:9"), Hooks(), Heartbeat(lines.append, str(path),
                             clock=lambda: clock.now), clock=lambda: clock.now)  # fmt: skip
    with pytest.raises(Stuck):
        guardian.run(sleep=clock.sleep)
    assert len(lines) == 1  # the first look's line beat the heartbeat
    answered = probed[0]
    assert answered.returncode == 1 and answered.stderr == ""
    age = int(answered.stdout.split(" s old")[0].rsplit(" ", 1)[1])
    assert STALE_AFTER_SECONDS + 100 <= age <= STALE_AFTER_SECONDS + 160, answered.stdout
    assert answered.stdout == (
        f"the guardian's last progress line is {age} s old (more than {STALE_AFTER_SECONDS} s): it is stuck\n"
    )
    missing = probe(tmp_path / "never-beaten")
    assert missing.returncode == 1 and missing.stdout == (
        f"no heartbeat at {tmp_path / 'never-beaten'} (No such file or directory): the guardian has printed no"
        " progress line\n"
    )


def test_an_hour_at_the_readiness_gate_with_its_progress_lines_keeps_the_probe_passing(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from incluster import job_client, readiness

    path = tmp_path / "heartbeat"
    clock = Clock(behind=3600)
    lines: list[str] = []
    looks: list[str | None] = []

    def sleep(seconds: float) -> None:
        clock.sleep(seconds)
        looks.append(staleness(str(path), clock.now, STALE_AFTER_SECONDS))  # the kubelet's look at that moment

    # The gate's clock and sleep are the fake ones; Ray's state API lists no GPU node for the whole hour.
    monkeypatch.setattr(readiness, "time", SimpleNamespace(monotonic=lambda: clock.now, sleep=sleep))
    monkeypatch.setattr(readiness, "gpu_nodes", lambda endpoint: [])
    beating = Heartbeat(lines.append, str(path), clock=lambda: clock.now)
    with pytest.raises(job_client.JobError):
        readiness.wait_for_gpus(Endpoint("http://127.0.0.1:9"), 2, 3600, beating, poll=2.0, gpus_per_node=8)
    assert len(lines) >= 3600 / readiness.REPORT_EVERY_SECONDS and looks and set(looks) == {None}
    answered = probe(path)
    assert (answered.returncode, answered.stdout) == (0, "")
