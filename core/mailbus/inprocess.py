"""The in-process transport: a sender that hands emails straight to a receiver.

Once the polling manager registers as its consumer, the receiver runs the handlers
on the sending thread: no thread hand-off, which halves publish-to-take latency
(docs/benchmarks.md). As in the design, the receiver adds a random Message-ID to an
email that has none, so that replies can name it. Emails stay Python objects: nothing
is serialised.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

from mailbus.email_message import Email, new_message_id
from mailbus.errors import TransportError
from mailbus.transport import EmailReceiver, EmailSender, Inbound, RawEmail, Transport


class InProcessReceiver(EmailReceiver):
    def __init__(self) -> None:
        self._queue: deque[Inbound] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._woken = False
        self._closed = False
        self._consumer: Callable[[Inbound], None] | None = None

    def set_consumer(self, consumer: Callable[[Inbound], None]) -> bool:
        self._consumer = consumer
        return True

    def push(self, item: Inbound) -> None:
        """Hand over an email (or raw bytes, to test how bad input is handled)."""
        if isinstance(item, Email) and not item.message_id:
            item = item.with_message_id(new_message_id(item.sender))
        consumer = self._consumer
        if consumer is not None:
            if self._closed:
                raise TransportError("in-process receiver is closed")
            consumer(item)
            return
        with self._ready:
            if self._closed:
                raise TransportError("in-process receiver is closed")
            self._queue.append(item)
            if len(self._queue) == 1:
                self._ready.notify()

    def push_raw(self, data: bytes, origin: str = "") -> None:
        self.push(RawEmail(data, origin))

    def receive(self, timeout: float | None) -> list[Inbound]:
        with self._ready:
            if not self._queue and not self._woken and timeout != 0:
                self._ready.wait(timeout)
            self._woken = False
            items = list(self._queue)
            self._queue.clear()
            return items

    def wake(self) -> None:
        with self._ready:
            self._woken = True
            self._ready.notify_all()

    def close(self) -> None:
        with self._ready:
            self._closed = True
            self._ready.notify_all()


class InProcessSender(EmailSender):
    def __init__(self, receiver: InProcessReceiver) -> None:
        self._receiver = receiver

    def deliver(self, email: Email) -> None:
        self._receiver.push(email)


def in_process_transport() -> Transport:
    receiver = InProcessReceiver()
    return Transport(InProcessSender(receiver), receiver, name="inprocess")
