"""Fixtures of the broker tests: a broker with a recording tracer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mailbus.broker import Broker
from mailbus.trace import TraceEvent, Tracer


@pytest.fixture
def tracer() -> Tracer:
    return Tracer()


@pytest.fixture
def events(tracer: Tracer) -> list[TraceEvent]:
    recorded: list[TraceEvent] = []
    tracer.add_listener(recorded.append)
    return recorded


@pytest.fixture
def broker(tracer: Tracer) -> Iterator[Broker]:
    instance = Broker.create(tracer=tracer)
    try:
        yield instance
    finally:
        if not instance.destroyed:
            for name in instance.module_names():
                instance.remove_module(name, drain=False, timeout=10)
            instance.dec_ref()
