"""Two processes on one outbox directory never send the same mail twice: the outbox
lock (flock) lets one at a time use it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mailbus.outbox import OutboxLockedError, OutboxSender
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.storage import Destination, Metadata
from outbox_support import RecordingSender, SmtpSink
from waiting import eventually

CHILD = Path(__file__).with_name("outbox_lock_child.py")


def prefill(directory: Path, count: int) -> list[str]:
    storage = FsStorage(directory)
    ids = []
    for i in range(count):
        message_id = f"<pre.{i}@lock.test>"
        data = (
            f"Message-ID: {message_id}\r\nFrom: s@x.org\r\nTo: r@y.org\r\nSubject: pre\r\n"
            f"\r\nmail {i}\r\nEND-OF-TEST-MAIL\r\n"
        ).encode()
        enq = storage.enqueue()
        enq.write(data)
        enq.commit(
            [Destination(Metadata(message_id, "s@x.org", ("r@y.org",), "pre", len(data), 1))]
        )
        ids.append(message_id)
    return ids


def test_two_processes_on_one_directory_never_send_a_mail_twice(
    outbox_dir: Path, sink: SmtpSink
) -> None:
    prefilled = prefill(outbox_dir, 60)
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), str(outbox_dir), str(sink.port), name, "20"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    expected = {*prefilled, *(f"<{n}.{i}@lock.test>" for n in "ab" for i in range(20))}
    eventually(lambda: set(sink.message_ids()) == expected, 10.0)
    counts = sink.message_ids()
    assert {m: c for m, c in counts.items() if c > 1} == {}  # no mail sent twice
    assert sum(r["sent"] for r in results) == 100
    assert all(r["idle"] for r in results)
    # Whoever came first found the 60 waiting mails; the other found none left.
    assert sorted(r["recovered"] for r in results) == [0, 60]
    assert list((outbox_dir / "data").iterdir()) == []


def test_a_second_opener_is_refused_while_the_first_holds_the_outbox(outbox_dir: Path) -> None:
    first = OutboxSender(RecordingSender(), outbox_dir)
    try:
        with pytest.raises(OutboxLockedError, match=f"in use by process {os.getpid()}"):
            OutboxSender(RecordingSender(), outbox_dir, lock_timeout=0.05)
    finally:
        first.close()
    second = OutboxSender(RecordingSender(), outbox_dir)  # free again after close
    second.close()


def test_the_lock_is_released_when_the_holder_is_killed(outbox_dir: Path) -> None:
    FsStorage(outbox_dir)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\n"
            "from mailbus.outbox.lock import OutboxLock\n"
            f"OutboxLock({str(outbox_dir / 'lock')!r}).acquire()\n"
            "print('held', flush=True)\n"
            "sys.stdin.read()\n",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        with pytest.raises(OutboxLockedError, match=f"process {holder.pid}"):
            OutboxSender(RecordingSender(), outbox_dir)
        holder.kill()
        holder.wait(10)
        sender = OutboxSender(RecordingSender(), outbox_dir, lock_timeout=5.0)
        sender.close()
    finally:
        holder.kill()
        holder.wait(10)
