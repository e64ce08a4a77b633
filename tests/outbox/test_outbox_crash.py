"""Crash test: worker processes enqueue and send through a real SMTP server (smtp-sink)
and are SIGKILLed at random moments; after each restart every committed mail has been
delivered (at least once, so exactly once after the receiver's dedup by Message-ID),
nothing foreign was delivered, extra copies are at most one per kill, and nothing is
left under data/. See outbox_crash_child.py for the procedure.

200 runs go on a tmpfs (/dev/shm): SIGKILL loses no page cache, so the file system's
fsync cost adds nothing to what a process crash can break, and the runs stay short on
this shared machine. A further 40 runs go on the disk file system the tests run on, so
that the windows opened by real fsyncs are hit too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from outbox_support import SmtpSink

CHILD = Path(__file__).with_name("outbox_crash_child.py")


@pytest.fixture
def memory_dir(tmp_path: Path) -> Iterator[Path]:
    if not os.path.isdir("/dev/shm") or not os.access("/dev/shm", os.W_OK):
        yield tmp_path  # no tmpfs: the same runs on disk, only slower
        return
    path = Path(tempfile.mkdtemp(prefix="outbox-crash-", dir="/dev/shm"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def crash_runs(directory: Path, log: Path, sink: SmtpSink, runs: int) -> dict:  # type: ignore[type-arg]
    seed = int.from_bytes(os.urandom(4), "big")
    proc = subprocess.run(
        [
            sys.executable,
            str(CHILD),
            *("--dir", str(directory / "outbox")),
            *("--sink-dir", str(sink.dump)),
            *("--port", str(sink.port)),
            *("--log", str(log)),
            *("--runs", str(runs)),
            *("--seed", str(seed)),
        ],
        capture_output=True,
        text=True,
        timeout=100,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict = json.loads(proc.stdout.strip().splitlines()[-1])  # type: ignore[type-arg]
    print(f"seed {seed}: {result}")
    assert result["failures"] == [], f"seed {seed}"
    assert result["kills"] >= runs * 0.9, result  # nearly every run ends in a SIGKILL
    assert result["committed"] > runs  # mail was really flowing
    # Every committed mail was delivered (checked per run by the driver, again here):
    assert result["delivered_unique"] >= result["committed"]
    assert result["delivered_unique"] <= result["intents"]
    assert result["extra_copies"] <= result["kills"]
    assert result["runs_with_recovery"]["set_aside"] == 0, result
    return result


@pytest.mark.slow
def test_200_sigkills_at_random_moments_lose_nothing_and_leave_nothing(
    memory_dir: Path, tmp_path: Path, sink: SmtpSink
) -> None:
    result = crash_runs(memory_dir, tmp_path / "sent.log", sink, 200)
    assert result["kills"] >= 200
    # The kills hit the interesting windows, and recovery had real work to do:
    phases = {k for k in result["last_event_before_kill"] if not k.startswith("restart")}
    assert {"e", "s", "t"} <= phases, result["last_event_before_kill"]
    assert result["runs_with_recovery"]["inflight_requeued"] > 0, result
    assert result["runs_with_recovery"]["cleanups_finished"] > 0, result


@pytest.mark.slow
def test_sigkills_on_the_disk_file_system_lose_nothing(tmp_path: Path, sink: SmtpSink) -> None:
    result = crash_runs(tmp_path, tmp_path / "sent.log", sink, 40)
    assert result["runs_with_recovery"]["inflight_requeued"] > 0, result
