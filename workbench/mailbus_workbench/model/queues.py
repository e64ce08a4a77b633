"""The durable outbox as the queue view sees it: list, retry and purge.

Listing reads without the lock (`mailbus.outbox.listing`); retry and purge take the
outbox lock like `mailbus queue retry/purge` and fail with a clear message while a
sender process holds it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.listing import QueueItem, find_entry, list_outbox
from mailbus.outbox.scheduler import OutboxLock
from mailbus.outbox.storage import Schedule, State


def outbox_dir(sections: Mapping[str, Mapping[str, Any]]) -> Path | None:
    """$MAILBUS_OUTBOX_DIR, else `[outbox] dir` of the options file, else None."""
    env = os.environ.get("MAILBUS_OUTBOX_DIR")
    if env:
        return Path(env)
    value = sections.get("outbox", {}).get("dir")
    if isinstance(value, str) and value:
        return Path(value).expanduser()
    return None


def load(directory: Path, now_ns: int | None = None) -> list[QueueItem]:
    """Every entry of the outbox at `directory` (OSError/MailbusError when it is none);
    ages are counted to `now_ns` (default: now)."""
    return list_outbox(directory, now_ns)


def _locked(directory: Path) -> tuple[FsStorage, OutboxLock]:
    storage = FsStorage(directory, create=False)
    lock = OutboxLock(storage.lock_path)
    lock.acquire(0.0)
    return storage, lock


def retry(directory: Path, ids: Iterable[str]) -> list[str]:
    """Make queued entries due now and revive dead ones; return the ids done."""
    storage, lock = _locked(directory)
    done: list[str] = []
    try:
        now = time.time_ns()
        for entry_id in ids:
            entry = find_entry(storage, entry_id)
            if entry.state is State.INFLIGHT:
                continue
            schedule = Schedule(
                entry.schedule.attempts,
                now,
                entry.schedule.last_attempt_ns,
                entry.schedule.last_error,
            )
            entry = storage.reschedule(entry, schedule)
            if entry.state is State.DEAD:
                storage.revive(entry)
            done.append(entry.id)
    finally:
        lock.release()
    return done


def purge(directory: Path, ids: Iterable[str]) -> list[str]:
    """Remove entries unsent; return the ids done."""
    storage, lock = _locked(directory)
    done: list[str] = []
    try:
        for entry_id in ids:
            entry = find_entry(storage, entry_id)
            storage.cleanup(storage.drop(entry))
            done.append(entry.id)
    finally:
        lock.release()
    return done
