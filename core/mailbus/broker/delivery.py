"""What a full queue does to a message (the Backpressure of its link or sink): block the
publisher, bounded by a timeout, or drop with a counter and a `broker.dropped` trace
event. Never in silence. Also what happens to messages for a module whose worker died."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from mailbus.broker.kinds import BrokerKind
from mailbus.broker.policy import Backpressure, Overflow
from mailbus.broker.record import Item, ModuleRecord
from mailbus.broker.snapshot import ModuleState

log = logging.getLogger(__name__)
FAILED = ModuleState.FAILED
# `trace(kind, module name, **TraceEvent fields)`: the broker's tracer, if any listens.
Trace = Callable[..., Any]


def overflow(sink: ModuleRecord, backpressure: Backpressure, item: Item, trace: Trace) -> bool:
    """The sink's queue is full, or its worker died: apply `backpressure`. False if it
    refused the item."""
    queue = sink.queue
    if sink.state == FAILED:  # nobody will ever take it: never queue, count it
        drop(sink, item, "module failed (its worker ended), dropped the message", trace)
        return True
    overflow = backpressure.overflow
    if overflow is Overflow.DROP_NEWEST:
        drop(sink, item, "queue full, dropped the newest message", trace)
        return True
    if overflow is Overflow.DROP_OLDEST:
        queue.append(item)
        sink.poke()
        while len(queue) > sink.capacity:
            try:
                oldest = queue.popleft()
            except IndexError:  # the worker emptied it meanwhile
                break
            drop(sink, oldest, "queue full, dropped the oldest message", trace)
        return True
    # BLOCK. A module publishing to itself through a cycle cannot wait for its own
    # worker, and a sink being removed takes what is still in flight.
    if sink.ident != threading.get_ident() and sink.state is ModuleState.RUNNING:
        deadline = None if backpressure.timeout is None else time.monotonic() + backpressure.timeout
        timed_out = False
        with sink.space:
            sink.waiting += 1
            try:
                while (
                    len(queue) >= sink.capacity
                    and sink.state is ModuleState.RUNNING
                    and not sink.overfill
                ):
                    if deadline is None:
                        sink.space.wait()
                        continue
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        timed_out = True
                        break
                    sink.space.wait(remaining)  # <= TIMEOUT_MAX (BackPressure)
            finally:
                sink.waiting -= 1
        if sink.state == FAILED:  # died while we waited
            drop(sink, item, "module failed (its worker ended), dropped the message", trace)
            return True
        if timed_out:
            with sink.stats_lock:
                sink.refused += 1
            trace(
                BrokerKind.REFUSED,
                sink.name,
                detail=f"no room within {backpressure.timeout:g} s",
                extra={"source": item[0], "capacity": sink.capacity},
            )
            return False
    queue.append(item)
    sink.poke()
    return True


def drop(sink: ModuleRecord, item: Item, reason: str, trace: Trace) -> None:
    """Count and report a message `sink` will never receive."""
    with sink.stats_lock:
        sink.dropped += 1
        first = sink.dropped == 1
    if first:
        log.warning("broker module %r: %s (further drops are counted)", sink.name, reason)
    trace(
        BrokerKind.DROPPED,
        sink.name,
        detail=reason,
        size=len(item[1].content),
        extra={"source": item[0], "capacity": sink.capacity},
    )
