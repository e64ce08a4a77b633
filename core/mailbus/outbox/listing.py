"""A plain view of an outbox directory, for `mailbus queue` and the workbench's queue
view. Reading needs no lock: entries that move while being listed are skipped or shown
in their new state, never reported as errors.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Any

from mailbus.outbox.fs_storage import CONTENTS, UUID_RE, FsStorage
from mailbus.outbox.storage import CleanupListing, Entry, Listing, State, VanishedError

# The names a user sees for each state.
STATE_LABELS = {
    State.QUEUED: "queued",
    State.INFLIGHT: "inflight",
    State.CLEANUP: "cleanup",
    State.DEAD: "dead",
    State.CORRUPT: "corrupt",
}
_ORDER = (State.INFLIGHT, State.QUEUED, State.DEAD, State.CLEANUP)


@dataclass(frozen=True, slots=True)
class QueueItem:
    """One destination of one mail as the queue view shows it."""

    id: str
    state: str
    destination: str
    attempts: int
    next_attempt_ns: int
    age_s: float
    size: int
    message_id: str = ""
    subject: str = ""
    last_error: str = ""
    mail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _item(entry: Entry, now_ns: int) -> QueueItem:
    return QueueItem(
        id=entry.id,
        state=STATE_LABELS[entry.state],
        destination=", ".join(entry.metadata.recipients),
        attempts=entry.schedule.attempts,
        next_attempt_ns=entry.schedule.next_attempt_ns,
        age_s=max(0.0, (now_ns - entry.metadata.created_ns) / 1e9),
        size=entry.metadata.size,
        message_id=entry.metadata.message_id,
        subject=entry.metadata.subject,
        last_error=entry.schedule.last_error,
        mail=entry.mail,
    )


def open_outbox(directory: str | os.PathLike[str]) -> FsStorage:
    """An existing outbox, read only (nothing is created)."""
    return FsStorage(directory, create=False)


def list_outbox(directory: str | os.PathLike[str], now_ns: int | None = None) -> list[QueueItem]:
    """Every entry: in flight, queued, dead, pending cleanup, then corrupt ones."""
    storage = open_outbox(directory)
    now = time.time_ns() if now_ns is None else now_ns
    items: list[QueueItem] = []
    corrupt: list[QueueItem] = []
    for state in _ORDER:
        listing: Listing | CleanupListing
        if state is State.CLEANUP:
            listing = storage.find_pending_cleanup()
            items.extend(
                QueueItem(c.id, "cleanup", "", 0, 0, 0.0, 0, mail=c.mail) for c in listing.entries
            )
        else:
            found = storage.list_state(state)
            items.extend(_item(entry, now) for entry in found.entries)
            listing = found
        corrupt.extend(
            QueueItem(
                c.name, "corrupt", "", 0, 0, 0.0, 0, last_error=f"{c.state.value}/: {c.reason}"
            )
            for c in listing.corrupt
        )
    corrupt.extend(
        QueueItem(name, "corrupt", "", 0, 0, 0.0, 0, last_error="set aside")
        for name in storage.list_corrupt()
    )
    return items + corrupt


def find_entry(storage: FsStorage, entry_id: str) -> Entry:
    """The entry with this id in whichever state holds it; VanishedError if none (or if
    `entry_id` is not an outbox id: it becomes a path)."""
    if not UUID_RE.fullmatch(entry_id):
        raise VanishedError(f"no queued, in-flight or dead entry {entry_id!r} (not an outbox id)")
    for state in (State.QUEUED, State.INFLIGHT, State.DEAD):
        if os.path.lexists(storage.root / state / entry_id):
            return storage.read(state, entry_id)
    raise VanishedError(f"no queued, in-flight or dead entry {entry_id!r}")


def show_entry(directory: str | os.PathLike[str], entry_id: str) -> tuple[QueueItem, bytes]:
    """One entry and its stored bytes."""
    storage = open_outbox(directory)
    entry = find_entry(storage, entry_id)
    contents = (storage.data / entry.mail / CONTENTS).read_bytes()
    return _item(entry, time.time_ns()), contents
