"""The directory tree after each primitive, compared with the queue design
(shared/seeds/filesystem-queue.md and its ERRATA): data/<mail>/contents,
data/<mail>/<dest>/{metadata,schedule}, relative links named by their own UUID in
queue/, inflight/, cleanup/ (dead/ and corrupt/ are ours); dirs 0700, files 0600."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from mailbus.outbox import fs_storage
from mailbus.outbox.fs_storage import UUID_RE, FsStorage
from mailbus.outbox.storage import (
    Destination,
    Metadata,
    RetryLaterError,
    Schedule,
    State,
    StorageFullError,
    VanishedError,
)
from outbox_support import tree

STATE_DIRS = {"data", "queue", "inflight", "cleanup", "dead", "corrupt"}


def meta(n: int = 0, size: int = 5) -> Metadata:
    return Metadata(f"<m{n}@x>", "s@x.org", (f"r{n}@y.org",), "topic/a", size, 1_000 + n)


def empty_tree() -> dict[str, str]:
    # The write-ahead journal (outbox/journal.py) is the one file beside the directories.
    return {**{name: "dir 700" for name in STATE_DIRS}, "journal": "file 600"}


def mail_tree(mail: str, dests: list[str]) -> dict[str, str]:
    expected = {f"data/{mail}": "dir 700", f"data/{mail}/contents": "file 600"}
    for dest in dests:
        expected[f"data/{mail}/{dest}"] = "dir 700"
        expected[f"data/{mail}/{dest}/metadata"] = "file 600"
        expected[f"data/{mail}/{dest}/schedule"] = "file 600"
    return expected


def enqueue(storage: FsStorage, n_dests: int = 1, data: bytes = b"hello"):  # type: ignore[no-untyped-def]
    enq = storage.enqueue()
    enq.write(data)
    return enq.commit([Destination(meta(i), Schedule(0, 5, 0, "")) for i in range(n_dests)])


def test_a_new_outbox_has_six_directories_a_journal_and_nothing_else(outbox_dir: Path) -> None:
    old = os.umask(0o002)  # a permissive umask must not widen the modes
    try:
        FsStorage(outbox_dir)
        (entry,) = enqueue(FsStorage(outbox_dir))
        storage = FsStorage(outbox_dir)
        storage.cleanup(storage.drop(entry))
    finally:
        os.umask(old)
    assert tree(outbox_dir) == empty_tree()
    assert oct(outbox_dir.stat().st_mode & 0o777) == "0o700"


def test_enqueue_before_commit_is_contents_only_and_no_link(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    enq = storage.enqueue()
    enq.write(b"part one, ")
    enq.write(b"part two")
    mail = enq.mail  # type: ignore[attr-defined]
    assert UUID_RE.fullmatch(mail)
    assert tree(outbox_dir) == {**empty_tree(), **mail_tree(mail, [])}
    assert storage.list_queue().entries == ()
    enq.abort()
    assert tree(outbox_dir) == empty_tree()


def test_commit_makes_one_dest_dir_and_one_relative_queue_link_per_destination(
    outbox_dir: Path,
) -> None:
    storage = FsStorage(outbox_dir)
    entries = enqueue(storage, n_dests=2)
    mail = entries[0].mail
    assert {e.mail for e in entries} == {mail}
    dests = [e.dest for e in entries]
    expected = {**empty_tree(), **mail_tree(mail, dests)}
    for entry in entries:
        assert UUID_RE.fullmatch(entry.id) and UUID_RE.fullmatch(entry.dest)
        assert entry.id not in (entry.dest, entry.mail)  # a link is named by its own UUID
        expected[f"queue/{entry.id}"] = f"link -> ../data/{mail}/{entry.dest}"
    assert tree(outbox_dir) == expected
    assert (outbox_dir / "data" / mail / "contents").read_bytes() == b"hello"
    first = outbox_dir / "data" / mail / dests[0]
    assert json.loads((first / "metadata").read_text()) == {
        "message_id": "<m0@x>",
        "sender": "s@x.org",
        "recipients": ["r0@y.org"],
        "subject": "topic/a",
        "size": 5,
        "created_ns": 1000,
    }
    assert json.loads((first / "schedule").read_text()) == {
        "attempts": 0,
        "next_attempt_ns": 5,
        "last_attempt_ns": 0,
        "last_error": "",
    }
    assert sorted(e.id for e in storage.list_queue().entries) == sorted(e.id for e in entries)


def test_each_state_change_moves_only_the_link(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    (entry,) = enqueue(storage)
    target = f"link -> ../data/{entry.mail}/{entry.dest}"
    data_part = mail_tree(entry.mail, [entry.dest])

    def expect(state: str) -> None:
        assert tree(outbox_dir) == {**empty_tree(), **data_part, f"{state}/{entry.id}": target}

    inflight = storage.send_start(entry)
    assert inflight.state is State.INFLIGHT
    expect("inflight")
    assert storage.find_inflight().entries == (inflight,)
    assert storage.read_inflight(inflight) == b"hello"

    rescheduled = storage.reschedule(inflight, Schedule(1, 99, 50, "boom"))
    expect("inflight")  # no temporary file is left behind
    assert storage.find_inflight().entries[0].schedule == Schedule(1, 99, 50, "boom")

    queued = storage.send_cancel(rescheduled)
    expect("queue")
    assert storage.list_queue().entries[0].schedule.attempts == 1

    dead = storage.dead_letter(storage.send_start(queued))
    expect("dead")
    assert storage.list_dead().entries == (dead,)

    revived = storage.revive(dead)
    expect("queue")

    cleanup = storage.send_done(storage.send_start(revived))
    expect("cleanup")
    assert storage.find_pending_cleanup().entries == (cleanup,)

    storage.cleanup(cleanup)
    assert tree(outbox_dir) == empty_tree()


def test_cleanup_keeps_contents_while_another_destination_remains(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    first, second = enqueue(storage, n_dests=2)
    storage.cleanup(storage.send_done(storage.send_start(first)))
    assert tree(outbox_dir) == {
        **empty_tree(),
        **mail_tree(first.mail, [second.dest]),
        f"queue/{second.id}": f"link -> ../data/{second.mail}/{second.dest}",
    }
    storage.cleanup(storage.drop(second))
    assert tree(outbox_dir) == empty_tree()


def test_a_cleanup_interrupted_at_any_step_finishes_on_the_next_run(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    (entry,) = enqueue(storage)
    cleanup = storage.send_done(storage.send_start(entry))
    dest_dir = outbox_dir / "data" / entry.mail / entry.dest
    # As if the process died after removing the dest's files and directory:
    for name in ("metadata", "schedule"):
        (dest_dir / name).unlink()
    dest_dir.rmdir()
    (listed,) = storage.find_pending_cleanup().entries  # a dangling link is still listed
    assert listed == cleanup
    storage.cleanup(listed)
    storage.cleanup(listed)  # idempotent
    assert tree(outbox_dir) == empty_tree()


def test_a_moved_or_purged_entry_is_reported_as_vanished(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    (entry,) = enqueue(storage)
    storage.send_start(entry)
    with pytest.raises(VanishedError):
        storage.send_start(entry)
    (outbox_dir / "inflight" / entry.id).unlink()
    with pytest.raises(VanishedError):
        storage.reschedule(entry, Schedule())


def test_a_failed_commit_removes_everything_it_made(
    outbox_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = FsStorage(outbox_dir)
    (kept,) = enqueue(storage)
    before = tree(outbox_dir)
    real_symlink = os.symlink
    calls = []

    def failing_symlink(src: str, dst: os.PathLike[str]) -> None:
        calls.append(src)
        if len(calls) == 2:  # the second destination's link fails
            raise OSError(errno.EIO, "injected I/O error", str(dst))
        real_symlink(src, dst)

    monkeypatch.setattr(fs_storage.os, "symlink", failing_symlink)
    with pytest.raises(RetryLaterError, match="injected I/O error") as info:
        enqueue(storage, n_dests=3)
    assert not isinstance(info.value, StorageFullError)
    monkeypatch.undo()
    assert tree(outbox_dir) == before  # the first link made is gone too
    assert storage.list_queue().entries == (kept,)


def test_disk_full_errors_are_storage_full_errors(
    outbox_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = FsStorage(outbox_dir)
    real_fsync = os.fsync

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(fs_storage.os, "fsync", full)
    with pytest.raises(StorageFullError, match="outbox full"):
        enqueue(storage)
    monkeypatch.setattr(fs_storage.os, "fsync", real_fsync)
    assert tree(outbox_dir) == empty_tree()


def test_remove_uncommitted_keeps_committed_mail_and_removes_the_rest(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    (entry,) = enqueue(storage)
    committed = tree(outbox_dir)
    # An enqueue that never committed (its process died), with a destination written:
    orphan = storage.enqueue()
    orphan.write(b"never committed")
    orphan_dir = outbox_dir / "data" / orphan.mail  # type: ignore[attr-defined]
    (orphan_dir / "0f0e0d0c-0b0a-4908-8706-050403020100").mkdir()
    # A temporary schedule left by a reschedule that died before its rename:
    dest_dir = outbox_dir / "data" / entry.mail / entry.dest
    (dest_dir / "schedule.0f0e0d0c-0b0a-4908-8706-050403020100.tmp").write_bytes(b'{"att')
    # A destination of the committed mail whose link was never made (partial commit):
    (outbox_dir / "data" / entry.mail / "1f0e0d0c-0b0a-4908-8706-050403020100").mkdir()
    removed = storage.remove_uncommitted()
    assert removed == [orphan.mail]  # type: ignore[attr-defined]
    assert tree(outbox_dir) == committed


def test_foreign_things_in_data_are_set_aside_not_deleted(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    (outbox_dir / "data" / "notes.txt").write_text("someone's file")
    storage.remove_uncommitted()
    (kept,) = os.listdir(outbox_dir / "corrupt")
    assert kept.startswith("data.notes.txt.")
    assert (outbox_dir / "corrupt" / kept).read_text() == "someone's file"
    assert os.listdir(outbox_dir / "data") == []


def test_an_existing_directory_that_is_not_an_outbox_is_refused(tmp_path: Path) -> None:
    with pytest.raises(VanishedError, match="not an outbox"):
        FsStorage(tmp_path, create=False)
