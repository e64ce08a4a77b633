"""The outbox on a real ext4 file system that errors, goes read-only and is repaired
(loop-mounted image, errors=remount-ro, ext4's own error path, e2fsck -fy): mail that
was returned from send() is delivered after the repair, and a read-only mount gets a
clear error. Needs root and a loop device; skips with the reason otherwise."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from disk_faults import Ext4, ext4
from mailbus.errors import TransportError
from mailbus.outbox import OutboxSender, RetryPolicy
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.storage import OutboxError
from outbox_support import RecordingSender, make_email
from waiting import eventually

MAILS = 120


@pytest.fixture
def fs(tmp_path: Path) -> Iterator[Ext4]:
    with ext4(tmp_path) as mounted:
        yield mounted


@pytest.mark.slow
def test_mail_returned_before_the_fs_went_read_only_survives_its_repair(
    fs: Ext4, caplog: pytest.LogCaptureFixture
) -> None:
    root = fs.mount_point / "outbox"
    # Start and close once, so that the journal's own name is durable.
    OutboxSender(RecordingSender(), root, start=False).close()
    down = RecordingSender()
    down.fail_with = TransportError("SMTP server down (test)")
    sender = OutboxSender(down, root, policy=RetryPolicy(max_attempts=1000), start=False)
    ids = []
    for i in range(MAILS):
        ids.append(f"<repair{i}@outbox.test>")
        sender.send(make_email(i, message_id=ids[-1]))
    # The disk fails before the layout was written back: ext4 goes read-only, the
    # operator stops the app, unmounts, repairs and mounts again, all in one boot.
    fs.trigger_error()
    with caplog.at_level(logging.WARNING):
        sender.close()
    fs.unmount()
    fs.repair()
    fs.mount()

    recorder = RecordingSender()
    sender = OutboxSender(recorder, root)
    try:
        assert sender.recovery.set_aside == ()
        assert sender.recovery.queued == MAILS
        eventually(lambda: len(recorder.sent) == MAILS, 60, "every mail delivered")
    finally:
        sender.close()
    delivered = [email.message_id for email in recorder.sent]
    assert sorted(delivered) == sorted(ids)  # each once


def test_recovery_keeps_the_journal_until_what_it_covers_is_durable(fs: Ext4) -> None:
    """Start-up on a read-only fs cannot checkpoint: it fails clearly and the journal
    keeps every record for the next start."""
    root = fs.mount_point / "outbox"
    OutboxSender(RecordingSender(), root, start=False).close()
    down = RecordingSender()
    down.fail_with = TransportError("SMTP server down (test)")
    sender = OutboxSender(down, root, policy=RetryPolicy(max_attempts=1000), start=False)
    for i in range(10):
        sender.send(make_email(i))
    journal = root / "journal"
    size = journal.stat().st_size
    assert size > 0
    fs.trigger_error()
    sender.close()
    with pytest.raises(OutboxError) as info:
        OutboxSender(RecordingSender(), root, start=False)
    message = str(info.value)
    assert "read-only" in message and str(root) in message, message
    assert "\n" not in message
    assert journal.stat().st_size == size


def test_a_read_only_outbox_gets_a_one_line_error_naming_it(fs: Ext4) -> None:
    root = fs.mount_point / "outbox"
    OutboxSender(RecordingSender(), root, start=False).close()
    fs.trigger_error()
    for open_it in (
        lambda: OutboxSender(RecordingSender(), root, start=False),
        lambda: FsStorage(fs.mount_point / "other"),
    ):
        with pytest.raises(OutboxError) as info:
            open_it()
        message = str(info.value)
        assert "read-only" in message, message
        assert "remount" in message, message
        assert "\n" not in message
