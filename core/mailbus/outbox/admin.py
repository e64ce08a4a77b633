"""What an operator does to an outbox by hand: retry entries now, purge them. Shared by
`mailbus queue` and the workbench's queue view.

Both change the outbox, which one process at a time may do: the holder of its lock.
`run` takes the lock and applies the request itself when the outbox is free; when a
running OutboxSender holds it (for its whole life), `run` hands the request to that
sender through the control channel (`mailbus.outbox.control`) and waits for its answer,
so that "retry now" works exactly when it is needed: while the sender backs off.
"""

from __future__ import annotations

import math
import os
import shutil
import time
from dataclasses import dataclass, field

from mailbus.outbox import control
from mailbus.outbox.control import ControlError, ControlRequest, ControlTimeoutError, Result
from mailbus.outbox.fs_storage import FsStorage
from mailbus.outbox.listing import find_entry
from mailbus.outbox.lock import OutboxLock
from mailbus.outbox.storage import Entry, OutboxLockedError, Schedule, State

DEFAULT_TIMEOUT_S = 10.0
# An empty lock file while the lock is held: its holder took it a moment ago and is
# about to write its pid. Wait this long for the record before giving up on it.
SETTLE_S = 1.0


def _retry_one(storage: FsStorage, entry: Entry, now_ns: int) -> Entry:
    schedule = Schedule(
        entry.schedule.attempts, now_ns, entry.schedule.last_attempt_ns, entry.schedule.last_error
    )
    entry = storage.reschedule(entry, schedule)
    if entry.state is State.DEAD:
        entry = storage.revive(entry)
    return entry


@dataclass
class Applied:
    """What `apply` did so far (also when it stopped on an error): the ids (and corrupt
    names) done, and the entries now queued with a new schedule."""

    done: list[str] = field(default_factory=list)
    requeued: list[Entry] = field(default_factory=list)


def _selected(storage: FsStorage, request: ControlRequest) -> list[Entry]:
    # Every id is resolved before anything changes: an unknown one refuses the request.
    entries: list[Entry] = []
    if "all" in request.select:
        entries += [*storage.list_queue().entries, *storage.list_dead().entries]
    elif "dead" in request.select:
        entries += storage.list_dead().entries
    entries += [find_entry(storage, entry_id) for entry_id in request.ids]
    return list({entry.id: entry for entry in entries}.values())  # each once, in order


def apply(
    storage: FsStorage,
    request: ControlRequest,
    applied: Applied | None = None,
    *,
    by_sender: bool = False,
) -> Applied:
    """Carry out `request` on `storage`, whose lock the caller holds. Raises on the first
    failure; `applied` (pass one in to see it then) says what was done before.
    `by_sender`: the running sender applies it, while its `send()` may be writing a new
    mail into data/, so uncommitted data is left for its next start-up to remove."""
    applied = Applied() if applied is None else applied
    entries = _selected(storage, request)
    if request.action == "retry":
        now = time.time_ns()
        for entry in entries:
            if entry.state is State.INFLIGHT:
                continue  # its sender decides what happens next
            updated = _retry_one(storage, entry, now)
            applied.done.append(updated.id)
            applied.requeued.append(updated)
        return applied
    for entry in entries:
        storage.cleanup(storage.drop(entry))
        applied.done.append(entry.id)
    if request.select & {"corrupt", "all"}:
        for name in storage.list_corrupt():
            path = storage.root / State.CORRUPT / name
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()
            applied.done.append(name)
        if not by_sender:
            storage.remove_uncommitted()
    return applied


@dataclass(frozen=True, slots=True)
class _Holder:
    pid: str
    serves_control: bool


def _take_or_find_holder(lock: OutboxLock) -> _Holder | None:
    """None once we hold the lock; else who holds it."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            lock.acquire(0.0)
            return None
        except OutboxLockedError:
            pass
        record = lock.record()
        if record is not None:
            return _Holder(record[0], control.SERVES_CONTROL in record[1].split())
        if time.monotonic() >= deadline:
            return _Holder("?", False)
        control.pause(0.02)


def run(
    directory: str | os.PathLike[str], request: ControlRequest, timeout: float = DEFAULT_TIMEOUT_S
) -> list[str]:
    """Retry or purge as `request` says; return the ids (and corrupt names) done.

    With the outbox free, under its lock, here. With a running sender holding it, by
    that sender, waiting up to `timeout` seconds for its answer (ControlTimeoutError
    after that, saying whether the request was withdrawn or will still be applied).
    OutboxLockedError if the holder is not a sender that takes control requests."""
    if not (timeout > 0 and math.isfinite(timeout)):
        raise ControlError(f"timeout must be a positive number of seconds, not {timeout!r}")
    storage = FsStorage(directory, create=False)
    lock = OutboxLock(storage.lock_path)
    holder = _take_or_find_holder(lock)
    if holder is None:
        try:
            return apply(storage, request).done
        finally:
            lock.release()
    if not holder.serves_control:
        raise OutboxLockedError(
            f"outbox {storage.root} is in use by process {holder.pid}, which does not take "
            "retry/purge requests; try again when it has finished"
        )
    return _ask(storage, lock, request, holder.pid, timeout)


def _answered(result: Result, request: ControlRequest, pid: str) -> list[str]:
    if result.error:
        done = f" ({len(result.done)} done before that)" if result.done else ""
        raise ControlError(f"{request.action} by the sender (process {pid}): {result.error}{done}")
    return list(result.done)


def _ask(
    storage: FsStorage, lock: OutboxLock, request: ControlRequest, pid: str, timeout: float
) -> list[str]:
    root = storage.root
    rid = request.request_id
    control.submit(root, request)
    deadline = time.monotonic() + timeout
    delay = 0.005
    while True:
        result = control.take_result(root, rid)
        if result is not None:
            return _answered(result, request, pid)
        try:
            lock.acquire(0.0)
        except OutboxLockedError:
            pass
        else:
            # The sender stopped meanwhile: the outbox is ours now.
            try:
                return _after_sender_stopped(storage, request, pid)
            finally:
                lock.release()
        left = deadline - time.monotonic()
        if left <= 0:
            break
        control.pause(min(delay, left))
        delay = min(delay * 2, 0.05)
    if control.withdraw(root, rid):
        raise ControlTimeoutError(
            f"the sender holding outbox {root} (process {pid}) did not answer within "
            f"{timeout:g} s; the request was withdrawn and nothing was changed"
        )
    result = control.take_result(root, rid)
    if result is not None:  # answered just now
        return _answered(result, request, pid)
    raise ControlTimeoutError(
        f"the sender holding outbox {root} (process {pid}) took the request but did not "
        f"answer within {timeout:g} s; it will still carry it out: check `mailbus queue list`"
    )


def _after_sender_stopped(storage: FsStorage, request: ControlRequest, pid: str) -> list[str]:
    root, rid = storage.root, request.request_id
    result = control.take_result(root, rid)
    if result is not None:
        return _answered(result, request, pid)
    if control.withdraw(root, rid):
        return apply(storage, request).done
    control.forget_taken(root, rid)
    raise ControlError(
        f"the sender (process {pid}) stopped while carrying out the request; it may be "
        "partly done: check `mailbus queue list`"
    )
