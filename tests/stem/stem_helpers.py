"""Helpers shared by the Stem tests (imported by name: pytest puts this folder on
sys.path)."""

from __future__ import annotations

import threading
import time

from mailbus import TraceEvent


class Recorder:
    """Collects a hub's trace events; `wait_for` blocks on a condition, bounded."""

    def __init__(self) -> None:
        self.events: list[TraceEvent] = []
        self._changed = threading.Condition()

    def __call__(self, event: TraceEvent) -> None:
        with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    def kinds(self) -> list[str]:
        return [e.kind for e in self.events]

    def of(self, kind: str) -> list[TraceEvent]:
        return [e for e in self.events if e.kind == kind]

    def wait_for(self, kind: str, count: int = 1, timeout: float = 5.0) -> list[TraceEvent]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self.of(kind)) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"no {count} x {kind} within {timeout} s: {self.kinds()}")
                self._changed.wait(remaining)
            return self.of(kind)
