"""Disk full, on a real 64 KiB tmpfs: enqueue fails with a clear error, nothing half
made stays behind, every mail committed before is intact and is delivered once space
is back."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mailbus.email_message import Email
from mailbus.errors import TransportError
from mailbus.outbox import OutboxSender, RetryPolicy, StorageFullError
from mailbus.outbox.fs_storage import TARGET_RE, FsStorage
from mailbus.outbox.listing import list_outbox
from mailbus.trace import TraceEvent, Tracer
from outbox_support import RecordingSender, tree
from waiting import eventually


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def consistent(root: Path) -> list[str]:
    """Every link resolves to a complete entry and every data dir is referenced."""
    storage = FsStorage(root, create=False)
    problems: list[str] = []
    referenced: set[tuple[str, str]] = set()
    for state in ("queue", "inflight", "cleanup", "dead"):
        for name in os.listdir(root / state):
            match = TARGET_RE.fullmatch(os.readlink(root / state / name))
            assert match is not None
            referenced.add((match.group(1), match.group(2)))
    listing = storage.list_queue()
    problems += [f"corrupt {c}" for c in listing.corrupt]
    for mail in os.listdir(root / "data"):
        dests = {d for d in os.listdir(root / "data" / mail) if d != "contents"}
        problems += [f"unreferenced {mail}/{d}" for d in dests if (mail, d) not in referenced]
        if not dests:
            problems.append(f"mail without destination {mail}")
    return problems


def test_enqueue_on_a_full_disk_fails_clearly_and_the_queue_stays_consistent(
    small_fs: Path,
) -> None:
    root = small_fs / "outbox"
    recorder = RecordingSender()
    # Not delivering yet (start=False): the mail stays in the queue and fills the disk.
    sender = OutboxSender(recorder, root, start=False)
    accepted: list[str] = []
    body = "x" * 3000
    try:
        with pytest.raises(StorageFullError) as info:
            for i in range(1000):
                message_id = f"<full{i}@outbox.test>"
                sender.send(
                    Email("outbox/full", body, to=("r@example.org",), message_id=message_id)
                )
                accepted.append(message_id)
        # A clear error that says what happened; it is a TransportError for the engine.
        assert isinstance(info.value, TransportError)
        assert "outbox full" in str(info.value)
        assert "No space left on device" in str(info.value)
        assert 3 <= len(accepted) < 1000
        assert consistent(root) == []
        queued = sorted(i.message_id for i in list_outbox(root))
        assert queued == sorted(accepted)
        # Still full: a second try fails the same way and changes nothing.
        before = tree(root)
        with pytest.raises(StorageFullError):
            sender.send(Email("outbox/full", body, to=("r@example.org",)))
        assert tree(root) == before
        # Delivery frees the space: everything accepted goes out, then new mail is
        # accepted again.
        sender.start()
        eventually(lambda: len(recorder.sent) == len(accepted), 10.0)
        sender.send(Email("outbox/full", "after", to=("r@example.org",), message_id="<after@x>"))
        assert sender.wait_idle(10.0)
    finally:
        sender.close()
    assert sorted(e.message_id for e in recorder.sent) == sorted([*accepted, "<after@x>"])
    assert os.listdir(root / "data") == []


def test_a_full_disk_at_start_up_still_recovers(small_fs: Path) -> None:
    root = small_fs / "outbox"
    storage = FsStorage(root)
    enq = storage.enqueue()  # an enqueue that never committed
    enq.write(b"y" * 10_000)
    filler = small_fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        with pytest.raises(OSError, match="No space left"):
            while True:
                os.write(fd, b"z" * 4096)
    finally:
        os.close(fd)
    recorder = RecordingSender()
    sender = OutboxSender(recorder, root)
    try:
        assert sender.recovery.uncommitted_removed == 1
    finally:
        sender.close()
    assert os.listdir(root / "data") == []


def test_a_full_disk_while_delivering_loses_nothing(small_fs: Path) -> None:
    """Retry bookkeeping that cannot be written (the schedule's temporary file) is
    reported and the mail stays queued; it goes out when delivery works."""
    root = small_fs / "outbox"
    recorder = RecordingSender()
    recorder.failures = 1
    tracer = Tracer()
    events: list[TraceEvent] = []
    tracer.add_listener(events.append)
    policy = RetryPolicy(first_delay_s=0.01, max_delay_s=0.01)
    sender = OutboxSender(recorder, root, policy=policy, tracer=tracer, start=False)
    try:
        sender.send(Email("outbox/full", "first", to=("r@example.org",), message_id="<d1@x>"))
        fd = os.open(small_fs / "filler", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            with pytest.raises(OSError, match="No space left"):
                while True:
                    os.write(fd, b"z" * 4096)
        finally:
            os.close(fd)
        sender.start()
        eventually(lambda: len(recorder.sent) == 1, 10.0)
        assert sender.wait_idle(5.0)
    finally:
        sender.close()
    assert [e.message_id for e in recorder.sent] == ["<d1@x>"]
    errors = [e.detail for e in events if e.kind == "outbox.storage_error"]
    assert errors and "outbox full" in errors[0]
    assert os.listdir(root / "data") == []
