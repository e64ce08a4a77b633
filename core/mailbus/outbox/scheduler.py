"""The scheduler: sends what is due, retries with back-off, gives up into dead letters,
recovers at start-up, and holds the lock that keeps one process per outbox directory.

It is driven from one thread (the OutboxSender's); `add` and `retry_now` may be called
from any thread.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from mailbus.outbox.kinds import OutboxKind
from mailbus.outbox.retry import RetryPolicy, is_permanent
from mailbus.outbox.storage import (
    Corrupt,
    CorruptEntryError,
    Entry,
    RetryLaterError,
    Schedule,
    State,
    Storage,
    VanishedError,
)
from mailbus.trace import Tracer

log = logging.getLogger(__name__)

Deliver = Callable[[Entry, bytes], None]
Clock = Callable[[], int]
NS = 1_000_000_000
MAX_ERROR_TEXT = 500
# How soon to retry a storage operation that failed (disk full, I/O error).
STORAGE_RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    cleanups_finished: int
    inflight_requeued: int
    uncommitted_removed: int
    set_aside: tuple[Corrupt, ...]
    queued: int
    dead: int
    replayed: int = 0  # entries put back from the journal after a power cut


class Scheduler:
    """Due sends, retries and dead letters over a Storage."""

    def __init__(
        self,
        storage: Storage,
        deliver: Deliver,
        *,
        policy: RetryPolicy | None = None,
        tracer: Tracer | None = None,
        clock: Clock = time.time_ns,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.storage = storage
        self.deliver = deliver
        self.policy = policy or RetryPolicy()
        self.tracer = tracer
        self.clock = clock
        self.rand = rand
        self.changed = threading.Condition()
        self._heap: list[tuple[int, int, Entry]] = []
        self._seq = 0
        # Storage steps that failed and must not be forgotten (moving a sent entry out of
        # inflight/, putting a failed one back in the queue): retried first, in order;
        # each raises RetryLaterError while the storage still fails.
        self._unfinished: list[Callable[[], None]] = []
        # An outage costs one back-off for the destination, not one attempt per entry:
        # after a transient failure nothing is tried before `_hold_until_ns`, then one
        # entry at a time (a probe) until one gets through. Entries retried by hand
        # (`_forced`) are attempted at once all the same.
        self._outage_failures = 0
        self._hold_until_ns = 0
        self._forced: set[str] = set()
        self.busy = 0
        self.counts: dict[str, int] = {
            "sent": 0,
            "rescheduled": 0,
            "dead_lettered": 0,
            "set_aside": 0,
            "storage_errors": 0,
        }

    # -- events ---------------------------------------------------------------------------
    def _event(
        self, kind: str, entry: Entry | None = None, detail: str = "", **extra: object
    ) -> None:
        tracer = self.tracer
        if tracer is None or not tracer.active:
            return
        if entry is None:
            tracer.event(kind, detail=detail, extra=extra)
            return
        tracer.event(
            kind,
            name=entry.metadata.subject,
            message_id=entry.metadata.message_id,
            size=entry.metadata.size,
            detail=detail,
            extra={
                "entry": entry.id,
                "mail": entry.mail,
                "destination": ", ".join(entry.metadata.recipients),
                "attempts": entry.schedule.attempts,
                "next_attempt_ns": entry.schedule.next_attempt_ns,
                **extra,
            },
        )

    def _set_aside(self, corrupt: Corrupt) -> None:
        log.warning("outbox: setting aside %s/%s: %s", corrupt.state, corrupt.name, corrupt.reason)
        self.storage.set_aside(corrupt)
        self.counts["set_aside"] += 1
        self._event(
            OutboxKind.SET_ASIDE,
            detail=corrupt.reason,
            entry_name=corrupt.name,
            state=corrupt.state.value,
        )

    # -- start-up -------------------------------------------------------------------------
    def recover(self) -> RecoveryReport:
        """Make the stored state safe to run from, at once: finish pending cleanups,
        requeue in-flight entries (their sender is dead: we hold the lock), set corrupt
        entries aside, remove enqueues that never committed, and load the queue."""
        storage = self.storage
        set_aside: list[Corrupt] = []
        replayed = storage.replay_journal()
        cleanups = storage.find_pending_cleanup()
        for cleanup in cleanups.entries:
            storage.cleanup(cleanup)
            self._event(
                OutboxKind.CLEANED, detail="recovered", entry_name=cleanup.id, mail=cleanup.mail
            )
        inflight = storage.find_inflight()
        requeued = 0
        for entry in inflight.entries:
            with contextlib.suppress(VanishedError):
                storage.send_cancel(entry)
                requeued += 1
        queue = storage.list_queue()
        dead = storage.list_dead()
        for corrupt in (*cleanups.corrupt, *inflight.corrupt, *queue.corrupt, *dead.corrupt):
            self._set_aside(corrupt)
            set_aside.append(corrupt)
        removed = storage.remove_uncommitted()
        storage.checkpoint()
        with self.changed:
            self._heap.clear()
            for entry in queue.entries:
                self._push(entry)
            self.changed.notify_all()
        report = RecoveryReport(
            cleanups_finished=len(cleanups.entries),
            inflight_requeued=requeued,
            uncommitted_removed=len(removed),
            set_aside=tuple(set_aside),
            queued=len(queue.entries),
            dead=len(dead.entries),
            replayed=replayed,
        )
        self._event(
            OutboxKind.RECOVERED,
            detail=(
                f"{report.queued} queued ({requeued} were in flight), "
                f"{report.cleanups_finished} cleanups finished, "
                f"{report.uncommitted_removed} uncommitted removed, "
                f"{len(set_aside)} set aside, {report.dead} dead, "
                f"{replayed} put back from the journal"
            ),
            cleanups_finished=report.cleanups_finished,
            inflight_requeued=requeued,
            uncommitted_removed=report.uncommitted_removed,
            set_aside=len(set_aside),
            queued=report.queued,
            dead=report.dead,
            replayed=replayed,
        )
        return report

    # -- the queue in memory --------------------------------------------------------------
    def _push(self, entry: Entry) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (entry.schedule.next_attempt_ns, self._seq, entry))

    def add(self, entries: Iterable[Entry], *, forced: bool = False) -> None:
        """Entries just enqueued, or requeued by hand (`forced`: not held by an outage)."""
        with self.changed:
            for entry in entries:
                self._push(entry)
                if forced:
                    self._forced.add(entry.id)
            self.changed.notify_all()

    def pending(self) -> int:
        """Entries queued in memory, being sent, or waiting for storage to recover."""
        with self.changed:
            return len(self._heap) + self.busy + len(self._unfinished)

    def next_due_ns(self) -> int | None:
        with self.changed:
            if self._unfinished:
                return self.clock()
            return self._due_at_locked()

    @property
    def in_outage(self) -> bool:
        """The destination's last word was a transient failure."""
        with self.changed:
            return self._outage_failures > 0

    def _due_at_locked(self) -> int | None:
        if not self._heap:
            return None
        if self._forced:
            forced = [when for when, _, entry in self._heap if entry.id in self._forced]
            if forced:
                return min(forced)
        return max(self._heap[0][0], self._hold_until_ns)

    def _take_forced_locked(self, now_ns: int, limit: int) -> list[Entry]:
        taken = [i for i in self._heap if i[2].id in self._forced and i[0] <= now_ns][:limit]
        if taken:
            # Still forced until attempted (_send_one): put back unsent, they stay so.
            ids = {item[2].id for item in taken}
            self._heap = [item for item in self._heap if item[2].id not in ids]
            heapq.heapify(self._heap)
            self.busy += len(taken)
        return [item[2] for item in taken]

    def take_due(self, now_ns: int, limit: int = 64) -> list[Entry]:
        with self.changed:
            if self._forced:
                forced = self._take_forced_locked(now_ns, limit)
                if forced:
                    return forced
            if now_ns < self._hold_until_ns:
                return []
            if self._outage_failures:
                limit = 1  # probing: one entry until the destination answers again
            due: list[Entry] = []
            while self._heap and self._heap[0][0] <= now_ns and len(due) < limit:
                due.append(heapq.heappop(self._heap)[2])
            self.busy += len(due)
            return due

    def _put_back(self, entries: list[Entry]) -> None:
        with self.changed:
            for entry in entries:
                self._push(entry)
            self.busy -= len(entries)
            self.changed.notify_all()

    def retry_now(self, entry_ids: Iterable[str] | None = None) -> int:
        """Make queued entries (all, or those named) due now. Returns how many."""
        wanted = None if entry_ids is None else set(entry_ids)
        with self.changed:
            items = [item for item in self._heap]
            count = 0
            self._heap = []
            for _, seq, entry in items:
                when = entry.schedule.next_attempt_ns
                if wanted is None or entry.id in wanted:
                    when = 0
                    count += 1
                    self._forced.add(entry.id)
                heapq.heappush(self._heap, (when, seq, entry))
            self.changed.notify_all()
            return count

    def forget(self, entry_ids: Iterable[str]) -> int:
        """Drop the named entries from the queue in memory (purged, or about to be
        added again with a new schedule). Returns how many were there."""
        unwanted = set(entry_ids)
        with self.changed:
            self._forced -= unwanted
            kept = [item for item in self._heap if item[2].id not in unwanted]
            count = len(self._heap) - len(kept)
            if count:
                heapq.heapify(kept)
                self._heap = kept
                self.changed.notify_all()
            return count

    # -- sending --------------------------------------------------------------------------
    def run_due(self, between: Callable[[], None] | None = None) -> int:
        """Send everything due now; returns how many entries were handled. `between` is
        called after each entry (the sender serves control requests there, so that a
        long run of failing deliveries does not keep them waiting)."""
        handled = self._finish_unfinished()
        while True:
            due = self.take_due(self.clock(), 1 if between is not None else 64)
            if not due:
                return handled
            for index, entry in enumerate(due):
                try:
                    self._send_one(entry)
                finally:
                    with self.changed:
                        self.busy -= 1
                        self.changed.notify_all()
                handled += 1
                if self._outage_failures and index + 1 < len(due):
                    self._put_back(due[index + 1 :])  # the rest of the batch waits too
                    break
            if between is not None:
                between()

    def _finish_unfinished(self) -> int:
        with self.changed:
            unfinished, self._unfinished = self._unfinished, []
        for index, step in enumerate(unfinished):
            try:
                step()
            except RetryLaterError:
                with self.changed:
                    self._unfinished.extend(unfinished[index:])
                return index
        return len(unfinished)

    def _storage_failed(self, entry: Entry, exc: Exception, what: str) -> None:
        self.counts["storage_errors"] += 1
        log.warning("outbox: %s %s failed: %s", what, entry.id, exc)
        self._event(OutboxKind.STORAGE_ERROR, entry, detail=f"{what}: {exc}")

    def _send_one(self, entry: Entry) -> None:
        if self._forced:  # attempted now: a retry by hand is done with
            with self.changed:
                self._forced.discard(entry.id)
        storage = self.storage
        try:
            inflight = storage.send_start(entry)
        except VanishedError:
            return  # purged meanwhile
        except RetryLaterError as exc:
            self._storage_failed(entry, exc, "send_start")
            self._push_later(entry)
            return
        self._event(OutboxKind.SEND_STARTED, inflight)
        try:
            data = storage.read_inflight(inflight)
        except CorruptEntryError as exc:
            self._set_aside(Corrupt(State.INFLIGHT, inflight.id, exc.reason))
            return
        except RetryLaterError as exc:
            self._storage_failed(inflight, exc, "read")
            self._cancel(inflight, inflight.schedule)
            return
        try:
            self.deliver(inflight, data)
        except Exception as exc:
            self._failed(inflight, exc)
            return
        with self.changed:  # the destination answered: the outage, if any, is over
            self._outage_failures = 0
            self._hold_until_ns = 0
            self.changed.notify_all()
        try:
            self._complete(inflight)
        except RetryLaterError as exc:
            self._storage_failed(inflight, exc, "send_done")
            with self.changed:
                self._unfinished.append(lambda: self._complete(inflight))

    def _complete(self, inflight: Entry) -> None:
        try:
            cleanup = self.storage.send_done(inflight)
        except VanishedError:
            return
        self.counts["sent"] += 1
        self._event(OutboxKind.SENT, inflight)
        try:
            self.storage.cleanup(cleanup)
        except RetryLaterError as exc:
            # Sent and recorded as done: start-up (or the next cleanup) finishes it.
            self._storage_failed(inflight, exc, "cleanup")
            return
        self._event(OutboxKind.CLEANED, inflight)

    def _push_later(self, entry: Entry) -> None:
        later = Schedule(
            entry.schedule.attempts,
            self.clock() + int(STORAGE_RETRY_S * NS),
            entry.schedule.last_attempt_ns,
            entry.schedule.last_error,
        )
        moved = Entry(entry.id, entry.mail, entry.dest, entry.state, entry.metadata, later)
        with self.changed:
            self._push(moved)

    def _cancel(self, inflight: Entry, schedule: Schedule) -> None:
        try:
            self._requeue(inflight, schedule)
        except RetryLaterError as exc:
            # Retried with the other unfinished steps: left in flight, it would wait for
            # the next start-up.
            self._storage_failed(inflight, exc, "send_cancel")
            with self.changed:
                self._unfinished.append(lambda: self._requeue(inflight, schedule))

    def _requeue(self, inflight: Entry, schedule: Schedule) -> None:
        try:
            queued = self.storage.send_cancel(inflight)
        except VanishedError:
            return
        self.add(
            [Entry(queued.id, queued.mail, queued.dest, queued.state, queued.metadata, schedule)]
        )

    def _failed(self, inflight: Entry, exc: Exception) -> None:
        now = self.clock()
        attempts = inflight.schedule.attempts + 1
        error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_TEXT]
        age_s = (now - inflight.metadata.created_ns) / NS
        give_up = is_permanent(exc) or self.policy.gives_up(attempts, age_s)
        delay = 0.0 if give_up else self.policy.delay_s(attempts, self.rand())
        schedule = Schedule(attempts, now + int(delay * NS), now, error)
        try:
            updated = self.storage.reschedule(inflight, schedule)
        except VanishedError:
            return
        except RetryLaterError as err:
            self._storage_failed(inflight, err, "reschedule")
            updated = inflight
        if give_up:
            try:
                dead = self.storage.dead_letter(updated)
            except VanishedError:
                return
            except RetryLaterError as err:
                self._storage_failed(inflight, err, "dead_letter")
                self._cancel(updated, schedule)
                return
            self.counts["dead_lettered"] += 1
            log.warning("outbox: gave up on %s after %d attempts: %s", dead.id, attempts, error)
            self._event(OutboxKind.DEAD_LETTERED, dead, detail=error)
            return
        with self.changed:
            self._outage_failures += 1
            hold = self.policy.delay_s(self._outage_failures, self.rand())
            self._hold_until_ns = max(self._hold_until_ns, now + int(hold * NS))
        self.counts["rescheduled"] += 1
        self._event(OutboxKind.RESCHEDULED, updated, detail=error)
        self._cancel(updated, schedule)

    def idle_locked(self) -> bool:
        """Nothing due, being sent or unfinished; call with `changed` held."""
        due_at = self._due_at_locked()
        due = due_at is not None and due_at <= self.clock()
        return not due and self.busy == 0 and not self._unfinished

    def wait_for_work(
        self, timeout: float | None, should_stop: Callable[[], bool] | None = None
    ) -> None:
        """Block until something may be due (an add, or the earliest due time), at most
        `timeout` seconds, or until `should_stop()` (checked under the lock, so a
        notify after setting it cannot be missed)."""
        with self.changed:
            if should_stop is not None and should_stop():
                return
            if self._unfinished:
                wait = STORAGE_RETRY_S
            elif self._heap:
                wait = max(0.0, ((self._due_at_locked() or 0) - self.clock()) / NS)
            else:
                wait = float("inf")
            if timeout is not None:
                wait = min(wait, timeout)
            if wait > 0:
                self.changed.wait(None if wait == float("inf") else wait)
