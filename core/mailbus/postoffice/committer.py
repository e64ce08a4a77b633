"""Group commit of the store's writes on the daemon's event loop (see Committer)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from mailbus.postoffice import store as st

log = logging.getLogger(__name__)
T = TypeVar("T")


Done = Callable[[Any, BaseException | None], None]


CHECKPOINT_BATCHES = 500
# ... or this many bytes of letters accepted since the last one (big letters fill the
# WAL long before 500 batches).
CHECKPOINT_BYTES = 4 * 1024 * 1024
# The free room of the store's disk is measured again after this long or this many
# bytes accepted, whichever comes first (a statvfs and a PRAGMA: cheap, not free).
ROOM_CHECK_S = 0.05
ROOM_CHECK_BYTES = 1024 * 1024
ROOM_RESUME_BYTES = 1024 * 1024
_WAL_FRAME_HEADER = 24


FORGET_DELAY_S = 0.05


class GroupSync:
    """Acknowledgments that wait for an fsync of the WAL ("full" mode).

    `after_sync(waiters)` runs each `done(result, None)` once an fsync that started after
    the call has returned (the caller calls it right after the commit those waiters
    are for). One fsync runs at a time, on the committer's executor; whoever commits
    while it runs waits for the next one, which then covers all of them (group commit):
    with N concurrent senders, about N letters share an fsync. The fsync's completion
    comes back to the loop with one `call_soon_threadsafe`."""

    def __init__(
        self,
        sync: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
        executor: ThreadPoolExecutor,
    ) -> None:
        self.sync = sync  # the fsync (public: a test holds it to see who waits for it)
        self._loop = loop
        self._executor = executor
        self._waiting: list[tuple[Done, Any]] = []
        self._running: Future[None] | None = None
        self._idle: asyncio.Event | None = None
        self.rounds = 0  # fsyncs made for acknowledgments

    @property
    def busy(self) -> bool:
        return self._running is not None

    def after_sync(self, waiters: list[tuple[Done, Any]]) -> None:
        self._waiting.extend(waiters)
        self._start()

    def _start(self) -> None:
        if self._running is not None or not self._waiting:
            return
        waiting, self._waiting = self._waiting, []
        self.rounds += 1
        running = self._executor.submit(self.sync)
        self._running = running

        def back_on_loop(_: Future[None]) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                self._loop.call_soon_threadsafe(self._synced, running, waiting)

        running.add_done_callback(back_on_loop)

    def _synced(self, running: Future[None], waiting: list[tuple[Done, Any]]) -> None:
        self._running = None
        error = running.exception()
        if error is not None:
            log.error("%s", error)
        for done, result in waiting:
            done(result, error)
        self._start()
        if self._running is None and self._idle is not None:
            self._idle.set()

    async def drain(self) -> None:
        """Until every waiter has been answered."""
        while self._running is not None:
            self._idle = asyncio.Event()
            await self._idle.wait()


class Committer:
    """Group commit on the event loop. Writes submitted while the loop handles one round
    of events share a transaction, run by a callback scheduled for the end of that
    round. In "full" mode their callbacks run only after an fsync of the WAL that
    started after their commit (GroupSync: one fsync covers every batch committed while
    the previous one ran). In "normal" mode they run at commit and the WAL is fsynced
    within a second."""

    def __init__(self, store: st.Store, loop: asyncio.AbstractEventLoop) -> None:
        self.store = store
        self.loop = loop
        # Its own threads: at most one fsync and one checkpoint run at a time, and
        # nothing else (scrypt, to_thread users) can sit in front of them.
        self.executor = ThreadPoolExecutor(max_workers=2, thread_name_prefix="postoffice-store")
        self.full = store.sync == "full"
        self._pending: list[tuple[Callable[[Any], Any], Done | None]] = []
        self._deletes: list[int] = []
        self._forget_timer: asyncio.TimerHandle | None = None
        self._scheduled = False
        self.group_sync = GroupSync(store.sync_wal, loop, self.executor)
        self._dirty_timer: asyncio.TimerHandle | None = None
        self._maintaining = False
        self._maintenance: asyncio.Future[Any] | None = None
        self._batches_at_checkpoint = 0
        self._bytes_since_checkpoint = 0
        self._uncheckpointed = 0  # bytes of letters taken since the last checkpoint
        self._holding = False  # commits wait while a RESTART checkpoint runs
        self.wal_restarts = 0  # RESTART checkpoints run, and the time commits were held
        self.held_s = 0.0
        self._room = 0
        self._room_checked = float("-inf")
        self._room_spent = 0
        self._room_warned = False
        self.refusing = False  # refusing new letters and boxes: the disk is at the reserve

    def room_for(self, size: int) -> bool:
        """Whether the store may take `size` more bytes: False once its disk is down
        to the store's reserve (the room its deletes and checkpoints need). Measured
        every ROOM_CHECK_S or ROOM_CHECK_BYTES, on the loop thread."""
        now = time.monotonic()
        if now - self._room_checked >= ROOM_CHECK_S or self._room_spent >= ROOM_CHECK_BYTES:
            try:
                self._room = self.store.room()
            except st.StoreError as exc:
                if not self._room_warned:
                    log.warning("%s", exc)
                    self._room_warned = True
                self._room = self.store.reserve_bytes + size  # unknown: do not refuse
            self._room_checked = now
            self._room_spent = 0
        # What the WAL holds beyond the last checkpoint needs room again in the database
        # when it is copied there (an estimate: the letters' bytes).
        needed = self.store.reserve_bytes + self._uncheckpointed
        if self.refusing:
            # Take again only with some room past that: no flapping between letters
            # that fit and letters that do not.
            needed += ROOM_RESUME_BYTES
        if self._room - self._room_spent - size < needed:
            self.refusing = True
            return False
        self.refusing = False
        self._room_spent += size
        self._bytes_since_checkpoint += size
        self._uncheckpointed += size
        return True

    def submit(self, operation: Callable[[Any], Any], done: Done | None = None) -> None:
        """Queue `operation`; `done(result, error)` runs once it is committed (and, in
        "full" mode, fsynced)."""
        self._pending.append((operation, done))
        if not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._commit)

    def forget(self, letter_id: int) -> None:
        """Delete a delivered letter; nobody waits for it. The deletes ride along with
        the next batch (one statement for all of them), or go on their own within
        FORGET_DELAY_S when nothing else commits: a crash before that means those
        letters are delivered again (the receivers drop duplicates by Message-ID), never
        that one is lost, and under load it halves the commits per letter."""
        self._deletes.append(letter_id)
        if self._forget_timer is None:
            # Not cancelled when a batch takes the deletes first: one timer per interval
            # rather than a timer armed and cancelled per letter.
            self._forget_timer = self.loop.call_later(FORGET_DELAY_S, self._flush_deletes)

    def _flush_deletes(self) -> None:
        self._forget_timer = None
        if self._deletes and not self._scheduled:
            self._scheduled = True
            self.loop.call_soon(self._commit)

    def wait(self, operation: Callable[[Any], T]) -> asyncio.Future[T]:
        future: asyncio.Future[T] = self.loop.create_future()

        def done(result: Any, error: BaseException | None) -> None:
            if future.done():
                return
            if error is None:
                future.set_result(result)
            else:
                future.set_exception(error)

        self.submit(operation, done)
        return future

    def _commit(self) -> None:
        self._scheduled = False
        if self._holding:
            return  # a RESTART checkpoint runs: committed once it is done
        batch, self._pending = self._pending, []
        if self._deletes:
            batch.insert(0, (st.op_delete_letters(self._deletes), None))
            self._deletes = []
        if not batch:
            return
        try:
            results = self.store.run_batch([operation for operation, _ in batch])
        except st.StoreError as exc:
            log.error("%s", exc)
            for _, done in batch:
                if done is not None:
                    done(None, exc)
            return
        pairs = [(done, r) for (_, done), r in zip(batch, results, strict=True) if done]
        if self._dirty_timer is None:
            self._dirty_timer = self.loop.call_later(1.0, self._periodic_sync)
        if (
            self.store.batches - self._batches_at_checkpoint >= CHECKPOINT_BATCHES
            or self._bytes_since_checkpoint >= CHECKPOINT_BYTES
            # Past its size limit, the WAL file grows only when it is not recycled.
            or self.store.wal_bytes() > st.WAL_SIZE_LIMIT
        ):
            self._maintain()  # keep the WAL short under load too
        if self.full:
            # Before any answer goes out: the fsync that covers this commit.
            self.group_sync.after_sync(pairs)
            return
        for done, result in pairs:
            done(result, None)

    def _periodic_sync(self) -> None:
        """Within a second of a commit: fsync the WAL ("normal" mode's promise) and
        checkpoint it, in the executor."""
        self._dirty_timer = None
        if self._maintaining:  # the last one is still running: try again shortly
            self._dirty_timer = self.loop.call_later(0.1, self._periodic_sync)
            return
        self._maintain()

    def _maintain(self) -> None:
        if self._maintaining:
            return
        self._maintaining = True
        self._batches_at_checkpoint = self.store.batches
        self._bytes_since_checkpoint = 0
        store = self.store
        covered = self._uncheckpointed

        def run() -> st.Checkpointed:
            store.sync_wal()
            return store.checkpoint("PASSIVE")

        future = self.loop.run_in_executor(self.executor, run)
        self._maintenance = future

        def finished(_: object) -> None:
            if future.cancelled() or future.exception() is not None:
                self._maintaining = False
                _log_failure(future)
                return
            done = future.result()
            if not done.busy:  # it copied every frame there was when it started
                self._uncheckpointed = max(0, self._uncheckpointed - covered)
            if done.wal_frames * (store.page_size + _WAL_FRAME_HEADER) >= st.WAL_RESTART_BYTES:
                self._restart_wal()
            else:
                self._maintaining = False

        future.add_done_callback(finished)

    def _restart_wal(self) -> None:
        """Hold commits for one RESTART checkpoint: with no writer it copies all of the
        WAL (the PASSIVE one before it copied most), so the next commit writes the WAL
        from its start. Steady traffic, which never lets PASSIVE finish, thus cannot
        grow the WAL past about WAL_RESTART_BYTES plus what arrives meanwhile. The
        commits held wait for the copy of the last frames and two fsyncs."""
        self._holding = True
        self.wal_restarts += 1
        started = time.monotonic()
        future = self.loop.run_in_executor(self.executor, self.store.checkpoint, "RESTART")
        self._maintenance = future

        def finished(_: object) -> None:
            self._holding = False
            self.held_s += time.monotonic() - started
            self._maintaining = False
            _log_failure(future)
            copied = not future.cancelled() and future.exception() is None
            if copied and not future.result().busy:  # all of the WAL is in the database
                self._uncheckpointed = 0
            if (self._pending or self._deletes) and not self._scheduled:
                self._scheduled = True
                self.loop.call_soon(self._commit)

        future.add_done_callback(finished)

    async def close(self) -> None:
        """Commit what is pending and wait until it is durable."""
        if self._forget_timer is not None:
            self._forget_timer.cancel()
            self._forget_timer = None
        self._commit()
        await self.group_sync.drain()
        while self._maintenance is not None:  # the store closes next: let it finish
            running = self._maintenance
            await asyncio.gather(running, return_exceptions=True)
            await asyncio.sleep(0)  # its callback may start a RESTART checkpoint
            if self._maintenance is running:
                break
        if self._pending or self._deletes:
            self._commit()  # held during a RESTART checkpoint
            await self.group_sync.drain()
        if self._dirty_timer is not None:
            self._dirty_timer.cancel()
            self._dirty_timer = None
        self.executor.shutdown(wait=False)  # idle by now


def _log_failure(future: Any) -> None:
    if future.cancelled():
        return
    exc = future.exception()
    if exc is not None:
        log.warning("background store write failed: %s", exc)
