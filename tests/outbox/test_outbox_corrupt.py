"""Corrupt state: each kind is reported, set aside into corrupt/, never crashes the
scheduler and never costs another mail its delivery."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from mailbus.outbox import OutboxSender
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.listing import list_outbox
from mailbus.outbox.storage import Destination, Entry, Metadata, Schedule
from mailbus.trace import TraceEvent, Tracer
from outbox_support import RecordingSender, make_email
from waiting import eventually


def committed(storage: FsStorage, n: int) -> Entry:
    data = f"Message-ID: <c{n}@x>\r\nSubject: s\r\n\r\nbody {n}\r\n".encode()
    enq = storage.enqueue()
    enq.write(data)
    meta = Metadata(f"<c{n}@x>", "s@x.org", ("r@y.org",), "s", len(data), 1)
    (entry,) = enq.commit([Destination(meta, Schedule())])
    return entry


def break_symlink(root: Path, e: Entry) -> None:
    target = root / "data" / e.mail / e.dest
    for name in os.listdir(target):
        (target / name).unlink()
    target.rmdir()


def half_written_schedule(root: Path, e: Entry) -> None:
    (root / "data" / e.mail / e.dest / "schedule").write_bytes(b'{"attempts": 1, "next_att')


def missing_contents(root: Path, e: Entry) -> None:
    (root / "data" / e.mail / "contents").unlink()


def missing_metadata(root: Path, e: Entry) -> None:
    (root / "data" / e.mail / e.dest / "metadata").unlink()


def wrong_types_in_metadata(root: Path, e: Entry) -> None:
    (root / "data" / e.mail / e.dest / "metadata").write_bytes(b'{"message_id": 5}')


CASES: dict[str, tuple[Callable[[Path, Entry], None], str]] = {
    "broken symlink": (break_symlink, "broken symlink"),
    "half-written schedule": (half_written_schedule, "unreadable schedule"),
    "missing contents": (missing_contents, "missing contents"),
    "missing metadata": (missing_metadata, "missing metadata"),
    "wrong types in metadata": (wrong_types_in_metadata, "unreadable metadata"),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("state", ["queue", "inflight"])
def test_a_damaged_entry_is_set_aside_and_the_others_are_delivered(
    outbox_dir: Path, case: str, state: str
) -> None:
    storage = FsStorage(outbox_dir)
    good_before = committed(storage, 1)
    bad = committed(storage, 2)
    good_after = committed(storage, 3)
    if state == "inflight":
        bad = storage.send_start(bad)
    storage.checkpoint()  # else the journal would restore the damaged entry
    damage, reason = CASES[case]
    damage(outbox_dir, bad)
    tracer = Tracer()
    events: list[TraceEvent] = []
    tracer.add_listener(events.append)
    recorder = RecordingSender()
    sender = OutboxSender(recorder, outbox_dir, tracer=tracer)
    try:
        eventually(lambda: len(recorder.sent) == 2, 5.0)
        assert sender.wait_idle(5.0)
    finally:
        sender.close()
    assert sorted(e.message_id for e in recorder.sent) == [
        good_before.metadata.message_id,
        good_after.metadata.message_id,
    ]
    (corrupt,) = sender.recovery.set_aside
    assert corrupt.name == bad.id and reason in corrupt.reason
    (aside,) = [e for e in events if e.kind == "outbox.set_aside"]
    assert reason in aside.detail
    # Kept for inspection, out of the way; a restart does not report it again.
    assert os.listdir(outbox_dir / "corrupt") == [f"{state}.{bad.id}"]
    assert [(i.state, i.id) for i in list_outbox(outbox_dir)] == [("corrupt", f"{state}.{bad.id}")]
    again = OutboxSender(RecordingSender(), outbox_dir)
    again.close()
    assert again.recovery.set_aside == ()


def test_foreign_files_in_queue_are_set_aside_and_never_followed(outbox_dir: Path) -> None:
    storage = FsStorage(outbox_dir)
    good = committed(storage, 1)
    queue = outbox_dir / "queue"
    (queue / "README").write_text("not a mail")
    (queue / "0f0e0d0c-0b0a-4908-8706-050403020100").write_text("a file named like an id")
    victim = outbox_dir.parent / "victim"
    victim.mkdir()
    (victim / "metadata").write_text("precious")
    # A link that escapes data/: the outbox must never read or delete through it.
    os.symlink(str(victim), queue / "1f0e0d0c-0b0a-4908-8706-050403020100")
    os.symlink("../data/../../victim", queue / "2f0e0d0c-0b0a-4908-8706-050403020100")
    recorder = RecordingSender()
    sender = OutboxSender(recorder, outbox_dir)
    try:
        eventually(lambda: len(recorder.sent) == 1, 5.0)
    finally:
        sender.close()
    assert [e.message_id for e in recorder.sent] == [good.metadata.message_id]
    reasons = sorted(c.reason for c in sender.recovery.set_aside)
    assert reasons == [
        "foreign file (name is not an outbox id)",
        "foreign file (not a symlink)",
        "link points outside data/: '../data/../../victim'",
        f"link points outside data/: {str(victim)!r}",
    ]
    assert os.listdir(queue) == []
    assert len(os.listdir(outbox_dir / "corrupt")) == 4
    assert (victim / "metadata").read_text() == "precious"
    assert (outbox_dir / "corrupt" / "queue.README").read_text() == "not a mail"


def test_contents_lost_while_in_flight_is_set_aside_by_the_running_scheduler(
    outbox_dir: Path,
) -> None:
    """Damage that appears while the sender runs (not at start-up) is handled too."""
    tracer = Tracer()
    events: list[TraceEvent] = []
    tracer.add_listener(events.append)

    class RemovingSender(RecordingSender):
        """Deletes the next mail's contents while the first is being sent."""

        def deliver(self, email):  # type: ignore[no-untyped-def]
            if not self.sent:
                for mail in os.listdir(outbox_dir / "data"):
                    contents = outbox_dir / "data" / mail / "contents"
                    if b"<second@x>" in contents.read_bytes():
                        contents.unlink()
            super().deliver(email)

    recorder = RemovingSender()
    sender = OutboxSender(recorder, outbox_dir, tracer=tracer, start=False)
    try:
        sender.send(make_email(1, message_id="<first@x>"))
        sender.send(make_email(2, message_id="<second@x>"))
        sender.send(make_email(3, message_id="<third@x>"))
        sender.start()
        eventually(lambda: len(recorder.sent) == 2, 5.0)
        assert sender.wait_idle(5.0)
    finally:
        sender.close()
    assert [e.message_id for e in recorder.sent] == ["<first@x>", "<third@x>"]
    assert [e.detail for e in events if e.kind == "outbox.set_aside"] == ["missing contents"]
    assert [i.state for i in list_outbox(outbox_dir)] == ["corrupt"]
