"""Helpers of the broker tests (a module of its own so that test files can import it)."""

from __future__ import annotations

import threading
import time

from mailbus.broker import Broker, BrokerMessage
from mailbus.trace import TraceEvent

# The shared bounded wait under this directory's old name (the call sites keep it
# until the test files are next reorganised).
from waiting import eventually as wait_until  # noqa: F401


class Recorder:
    """Records what it receives, the thread it ran on, and whether two calls ever
    overlapped (the broker must never call a module concurrently)."""

    def __init__(self, broker: Broker | None = None, args: object = None) -> None:
        self.messages: list[BrokerMessage] = []
        self.threads: set[int] = set()
        self.overlaps = 0
        self.destroyed = 0
        self.destroy_thread = 0
        self.started = 0
        self.start_thread = 0
        self.delay = 0.0
        self.gate: threading.Event | None = None  # when given, receive waits for it
        self.entered = threading.Event()
        self.fail_on: bytes | None = None
        self._guard = threading.Lock()

    def _enter(self) -> None:
        if not self._guard.acquire(blocking=False):
            self.overlaps += 1
            self._guard.acquire()

    def _leave(self) -> None:
        self._guard.release()

    def start(self) -> None:
        self._enter()
        try:
            self.started += 1
            self.start_thread = threading.get_ident()
        finally:
            self._leave()

    def receive(self, message: BrokerMessage) -> None:
        self._enter()
        try:
            self.threads.add(threading.get_ident())
            self.entered.set()
            if self.gate is not None:
                assert self.gate.wait(30)
            if self.delay:
                time.sleep(self.delay)  # a slow module, not a synchronisation
            if self.fail_on is not None and message.content == self.fail_on:
                raise RuntimeError(f"refusing {message.content!r}")
            self.messages.append(message)
        finally:
            self._leave()

    def destroy(self) -> None:
        self._enter()
        try:
            self.destroyed += 1
            self.destroy_thread = threading.get_ident()
        finally:
            self._leave()

    @property
    def contents(self) -> list[bytes]:
        return [m.content for m in self.messages]


class Source:
    """A module that only publishes."""

    def __init__(self, broker: Broker | None = None, args: object = None) -> None:
        self.received = 0

    def receive(self, message: BrokerMessage) -> None:
        self.received += 1

    def destroy(self) -> None:
        pass


def kinds(events: list[TraceEvent], kind: str) -> list[TraceEvent]:
    return [e for e in events if e.kind == kind]
