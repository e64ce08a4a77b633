"""A PostOffice publisher that outlives a daemon restart.

`send()` queues the letter in memory and returns; one thread delivers the queue in
order, retrying the letter at its head with capped exponential back-off while the
daemon is unreachable, as the SMTP sender does for a mail server. It is bounded: at most
`max_pending` letters wait (more are refused at `send()` with a clear error) and none
waits longer than `retry_for_s` (older ones are given up). Nothing is lost silently:
every retry is traced (`postoffice.send_retrying`), every letter given up too
(`postoffice.send_abandoned`, with its Message-ID), and both are counted.
"""

from __future__ import annotations

import random
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass

from mailbus.backoff import Backoff
from mailbus.errors import TransportError
from mailbus.postoffice.kinds import PostOfficeKind
from mailbus.trace import Tracer

SEND_RETRYING = PostOfficeKind.SEND_RETRYING
SEND_ABANDONED = PostOfficeKind.SEND_ABANDONED
SEND_FAILED = PostOfficeKind.SEND_FAILED
DEFAULT_MAX_PENDING = 10_000
DEFAULT_RETRY_FOR_S = 300.0


class Undeliverable(TransportError):
    """The daemon refused the letter for good (no such box or group): no retry."""


@dataclass(slots=True)
class Letter:
    targets: tuple[str, ...]
    data: bytes
    message_id: str
    subject: str
    queued_s: float  # on the delivery clock
    delivered_to: int = 0  # targets done, in order
    attempts: int = 0


class BackgroundDelivery:
    """The queue and its delivery thread; `deliver(target, data)` sends one letter and
    raises TransportError (retried) or Undeliverable (given up)."""

    def __init__(
        self,
        deliver: Callable[[str, bytes], None],
        tracer: Tracer,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
        retry_for_s: float = DEFAULT_RETRY_FOR_S,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._deliver = deliver
        self.tracer = tracer
        self.max_pending = max_pending
        self.retry_for_s = retry_for_s
        self.backoff = backoff or Backoff(initial=0.1, maximum=5.0)
        self.clock = clock
        self.counters: Counter[str] = Counter()
        self._queue: deque[Letter] = deque()
        self._cond = threading.Condition()
        self._closing = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def put(self, targets: list[str], data: bytes, message_id: str, subject: str) -> None:
        letter = Letter(tuple(targets), data, message_id, subject, self.clock())
        with self._cond:
            if self._closing:
                raise TransportError("the PostOffice sender is closed")
            if len(self._queue) >= self.max_pending:
                self.counters["send_refused_full"] += 1
                raise TransportError(
                    f"{len(self._queue)} letters are waiting for the PostOffice daemon; "
                    "refusing more until it takes them"
                )
            self._queue.append(letter)
            self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="mailbus-postoffice-send", daemon=True
                )
                self._thread.start()

    @property
    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every letter handed over so far was delivered or given up."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._queue, timeout)

    def close(self, timeout: float = 5.0) -> None:
        """Deliver what waits for up to `timeout` seconds, then give up the rest."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
            self._cond.notify_all()
        self.flush(timeout)
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        with self._cond:
            rest = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        self._abandon(rest, "the sender closed before the daemon took them")

    def _abandon(self, letters: list[Letter], why: str) -> None:
        if not letters:
            return
        self.counters["send_abandoned"] += len(letters)
        self.tracer.event(
            SEND_ABANDONED,
            detail=f"{len(letters)} letters given up: {why}",
            extra={"count": len(letters), "message_ids": [x.message_id for x in letters][:100]},
        )

    def _run(self) -> None:
        while not self._stop.is_set():
            with self._cond:
                while not self._queue and not self._stop.is_set():
                    self._cond.wait()
                if not self._queue:
                    return
                letter = self._queue[0]
            delay = self._attempt(letter)
            if delay is None:
                with self._cond:
                    if self._queue and self._queue[0] is letter:
                        self._queue.popleft()
                    self._cond.notify_all()
            elif self._stop.wait(delay):
                return

    def _attempt(self, letter: Letter) -> float | None:
        """Deliver the rest of `letter`; None when done with it, else the retry delay."""
        while letter.delivered_to < len(letter.targets):
            target = letter.targets[letter.delivered_to]
            try:
                self._deliver(target, letter.data)
            except Undeliverable as exc:
                self.counters["send_failed"] += 1
                self.tracer.event(
                    SEND_FAILED, name=letter.subject, message_id=letter.message_id, detail=str(exc)
                )
            except TransportError as exc:
                return self._failed(letter, exc)
            letter.delivered_to += 1
        if letter.attempts:
            self.counters["sent_after_retry"] += 1
        return None

    def _failed(self, letter: Letter, exc: TransportError) -> float | None:
        letter.attempts += 1
        self.counters["send_retries"] += 1
        now = self.clock()
        if now - letter.queued_s >= self.retry_for_s:
            # The daemon has been gone too long: give up every letter as old as that.
            with self._cond:
                expired = [x for x in self._queue if now - x.queued_s >= self.retry_for_s]
                for gone in expired:
                    self._queue.remove(gone)
                self._cond.notify_all()
            self._abandon(expired, f"not delivered within {self.retry_for_s:g} s ({exc})")
            return 0.0
        delay = self.backoff.delay(letter.attempts, random.random())
        self.tracer.event(
            SEND_RETRYING,
            name=letter.subject,
            message_id=letter.message_id,
            detail=str(exc),
            extra={"attempts": letter.attempts, "retry_in_s": round(delay, 3)},
        )
        return delay
