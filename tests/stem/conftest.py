"""Fixtures of the Stem tests: trace recorders, in-process contexts, hub clean-up."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest

from mailbus import Context, TraceEvent
from mailbus.stem import Hub


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


@pytest.fixture
def recorder() -> Callable[[Hub], Recorder]:
    def attach(hub: Hub) -> Recorder:
        rec = Recorder()
        hub.tracer.add_listener(rec)
        return rec

    return attach


@pytest.fixture
def ctx() -> Iterator[Context]:
    with Context() as context:
        yield context


@pytest.fixture
def ctx2() -> Iterator[Context]:
    with Context() as context:
        yield context


@pytest.fixture
def hubs() -> Iterator[Callable[..., Hub]]:
    """Make hubs that are closed (thread stopped, inboxes left) after the test."""
    made: list[Hub] = []

    def make(name: str, **kwargs: object) -> Hub:
        hub = Hub(name, **kwargs)  # type: ignore[arg-type]
        made.append(hub)
        return hub

    yield make
    for hub in made:
        hub.close()
