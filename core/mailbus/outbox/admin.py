"""What an operator does to an outbox by hand: retry entries now, purge them. Shared by
`mailbus queue` and the workbench's queue view. Both change the outbox, so they run
under its lock and fail while a sender process holds it."""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.scheduler import OutboxLock
from mailbus.outbox.storage import Entry, Schedule, State


@contextmanager
def locked_storage(directory: str | os.PathLike[str]) -> Iterator[FsStorage]:
    """The outbox at `directory` under its lock (refused at once if a sender has it)."""
    storage = FsStorage(directory, create=False)
    lock = OutboxLock(storage.lock_path)
    lock.acquire(0.0)
    try:
        yield storage
    finally:
        lock.release()


def retry_now(storage: FsStorage, entries: Iterable[Entry]) -> list[str]:
    """Make queued entries due now and revive dead ones (in-flight ones are left to
    their sender); return the ids done."""
    done: list[str] = []
    now = time.time_ns()
    for entry in entries:
        if entry.state is State.INFLIGHT:
            continue
        schedule = Schedule(
            entry.schedule.attempts, now, entry.schedule.last_attempt_ns, entry.schedule.last_error
        )
        entry = storage.reschedule(entry, schedule)
        if entry.state is State.DEAD:
            storage.revive(entry)
        done.append(entry.id)
    return done


def purge(storage: FsStorage, entries: Iterable[Entry]) -> list[str]:
    """Remove entries unsent; return the ids done."""
    done: list[str] = []
    for entry in entries:
        storage.cleanup(storage.drop(entry))
        done.append(entry.id)
    return done
