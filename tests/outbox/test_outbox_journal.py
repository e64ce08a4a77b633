"""The write-ahead journal: one fsync commits an enqueue and one a send_done, in the
right order, and after a (simulated) power cut the journal puts back what the layout
lost, without bringing back what was sent or purged.

A power cut (or a repair that emptied files) is simulated by removing or damaging
what the layout wrote without fsync. Replay runs at every start, whatever the boot:
within one boot a file system that went read-only loses its unsynced writes too (see
test_outbox_disk_faults.py for the real one)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mailbus.outbox import OutboxSender, fs_storage, journal
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.journal import Enqueued, Gone, JournaledEntry
from mailbus.outbox.storage import Destination, Entry, Metadata, Schedule
from outbox_support import RecordingSender


def enqueue(storage: FsStorage, n: int) -> Entry:
    data = f"Message-ID: <j{n}@x>\r\nSubject: s\r\n\r\nbody {n}\r\n".encode()
    enq = storage.enqueue()
    enq.write(data)
    meta = Metadata(f"<j{n}@x>", "s@x.org", ("r@y.org",), "s", len(data), 1)
    (entry,) = enq.commit([Destination(meta, Schedule())])
    return entry


def records(root: Path) -> list[journal.Record]:
    return journal.decode((root / "journal").read_bytes())


def test_an_enqueue_is_one_fsync_of_the_journal_before_its_queue_link(
    outbox_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = FsStorage(outbox_dir)
    calls: list[str] = []
    real_fsync, real_symlink = os.fsync, os.symlink

    def fsync(fd: int) -> None:
        calls.append(f"fsync {os.path.basename(os.readlink(f'/proc/self/fd/{fd}'))}")
        real_fsync(fd)

    def symlink(src: str, dst: str) -> None:
        calls.append(f"link {Path(dst).parent.name}")
        real_symlink(src, dst)

    monkeypatch.setattr(fs_storage.os, "fsync", fsync)
    monkeypatch.setattr(fs_storage.os, "symlink", symlink)
    entry = enqueue(storage, 1)
    assert calls == ["fsync journal", "link queue"]
    calls.clear()
    cleanup = storage.send_done(storage.send_start(entry))
    storage.cleanup(cleanup)
    assert calls == ["fsync journal"]  # the move to cleanup, recorded
    monkeypatch.undo()
    kinds = [type(r) for r in records(outbox_dir)]
    assert kinds == [Enqueued, Gone]


def test_a_checkpoint_empties_the_journal_and_close_leaves_it_empty(outbox_dir: Path) -> None:
    sender = OutboxSender(RecordingSender(), outbox_dir, start=False)
    storage = sender.storage
    enqueue(storage, 1)
    assert (outbox_dir / "journal").stat().st_size > 0
    sender.close()
    assert (outbox_dir / "journal").stat().st_size == 0
    assert len(storage.list_queue().entries) == 1  # the layout holds it on its own now


def test_the_journal_is_checkpointed_every_checkpoint_records(
    outbox_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("mailbus.outbox.journaled.CHECKPOINT_RECORDS", 4)
    storage = FsStorage(outbox_dir)
    for n in range(3):
        enqueue(storage, n)
    assert len(records(outbox_dir)) == 3
    enqueue(storage, 3)
    assert records(outbox_dir) == []
    assert len(storage.list_queue().entries) == 4


def test_after_a_power_cut_the_journal_puts_back_what_the_layout_lost(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    lost_link = enqueue(storage, 1)
    lost_files = enqueue(storage, 2)
    sent = enqueue(storage, 3)
    storage.cleanup(storage.send_done(storage.send_start(sent)))
    # What never reached the disk: a queue link, a mail's contents and a half-written
    # metadata file; and the cleanup of the sent mail (its link is back in flight).
    (outbox_dir / "queue" / lost_link.id).unlink()
    (outbox_dir / "data" / lost_files.mail / "contents").unlink()
    (outbox_dir / "data" / lost_files.mail / lost_files.dest / "metadata").write_bytes(b'{"mess')
    os.symlink(f"../data/{sent.mail}/{sent.dest}", outbox_dir / "inflight" / sent.id)
    recorder = RecordingSender()
    sender = OutboxSender(recorder, outbox_dir)
    try:
        assert sender.recovery.replayed == 1  # the lost link
        assert sender.recovery.set_aside == ()
        assert sender.wait_idle(10.0)
    finally:
        sender.close()
    assert sorted(e.message_id for e in recorder.sent) == ["<j1@x>", "<j2@x>"]
    assert [e.body for e in recorder.sent if e.message_id == "<j2@x>"] == ["body 2"]
    assert os.listdir(outbox_dir / "data") == []
    assert records(outbox_dir) == []


def test_a_replay_never_brings_back_a_purged_or_set_aside_entry(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    purged = enqueue(storage, 1)
    damaged = enqueue(storage, 2)
    storage.cleanup(storage.drop(purged))
    (outbox_dir / "data" / damaged.mail / damaged.dest / "schedule").write_bytes(b"{")
    set_aside = storage.list_queue().corrupt
    assert len(set_aside) == 1
    storage.set_aside(set_aside[0])
    recorder = RecordingSender()
    sender = OutboxSender(recorder, outbox_dir)
    try:
        assert sender.recovery.replayed == 0
        assert sender.wait_idle(10.0)
    finally:
        sender.close()
    assert recorder.sent == []
    assert os.listdir(outbox_dir / "queue") == []
    assert os.listdir(outbox_dir / "corrupt") == [f"queue.{damaged.id}"]


def test_within_one_boot_the_journal_restores_what_it_covers_and_only_that(
    outbox_dir: Path,
) -> None:
    """Same boot, no power cut: an entry the journal still covers is put back from it
    (a repaired file system empties files within one boot); one a checkpoint made the
    layout hold on its own, damaged since, is set aside."""
    storage = FsStorage(outbox_dir)
    old = enqueue(storage, 1)
    storage.checkpoint()  # the layout holds it on its own, the journal no longer
    covered = enqueue(storage, 2)
    (outbox_dir / "data" / old.mail / "contents").unlink()
    (outbox_dir / "data" / covered.mail / "contents").write_bytes(b"")
    (outbox_dir / "data" / covered.mail / covered.dest / "metadata").write_bytes(b"")
    recorder = RecordingSender()
    sender = OutboxSender(recorder, outbox_dir)
    try:
        assert [c.name for c in sender.recovery.set_aside] == [old.id]
        assert sender.recovery.queued == 1
        assert sender.wait_idle(10.0)
    finally:
        sender.close()
    assert [(e.message_id, e.body) for e in recorder.sent] == [("<j2@x>", "body 2")]


def test_a_record_cut_short_ends_the_journal() -> None:
    entry = JournaledEntry("i", "d", b"{}", b"{}")
    first = journal.encode(Enqueued("m", (entry,), b"contents"))
    second = journal.encode(Gone(("i",)))
    assert journal.decode(first + second) == [
        Enqueued("m", (entry,), b"contents", journal.boot_id()),
        Gone(("i",), journal.boot_id()),
    ]
    assert len(journal.decode(first + second[:-1])) == 1
    damaged = first[:-1] + bytes([first[-1] ^ 1]) + second
    assert journal.decode(damaged) == []  # nothing after a damaged record is trusted
