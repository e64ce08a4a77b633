"""A module attached to the broker: its queue, the hand-off to its worker, its counters."""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from collections.abc import Iterable
from concurrent.futures import Future
from typing import Any

from mailbus.broker.message import BrokerMessage
from mailbus.broker.policy import Backpressure
from mailbus.broker.snapshot import ModuleState, ModuleStats

Item = tuple[str, BrokerMessage]  # (source module's name, message)


class ModuleRecord:
    """A module attached to the broker, with its queue, worker and counters."""

    __slots__ = (
        "abort",
        "backpressure",
        "capacity",
        "control",
        "delivered",
        "done",
        "dropped",
        "failed",
        "ident",
        "kind",
        "low_water",
        "module",
        "name",
        "overfill",
        "publish_lock",
        "published",
        "queue",
        "refused",
        "routes",
        "sleeping",
        "space",
        "started",
        "state",
        "stats_lock",
        "stop",
        "thread",
        "waiting",
        "wake",
    )

    def __init__(self, name: str, module: Any, capacity: int, backpressure: Backpressure) -> None:
        self.name = name
        self.module = module
        self.kind = type(module).__name__
        self.capacity = capacity
        self.low_water = capacity // 2  # blocked publishers resume below this: batch hand-offs
        self.backpressure = backpressure
        self.queue: deque[Item] = deque()
        self.control: deque[Future[None]] = deque()  # start() calls for the worker
        self.sleeping = False
        self.wake = threading.Lock()
        self.wake.acquire()  # locked = nothing to wake for; a publisher releases it
        self.space = threading.Condition(threading.Lock())
        self.waiting = 0
        self.overfill = 0  # > 0: blocked publishers may append beyond capacity (see Broker._remove)
        self.publish_lock = threading.RLock()
        self.routes: tuple[tuple[ModuleRecord, Backpressure], ...] = ()
        self.published = 0
        self.delivered = 0
        self.failed = 0
        self.dropped = 0
        self.refused = 0
        self.stats_lock = threading.Lock()
        # "stopping" once removal began, "stopped" when the worker ended; "failed" when the
        # worker died (a receive or start raised a BaseException such as SystemExit) while
        # the module is still attached: what is published to it then is dropped, counted.
        self.state = ModuleState.RUNNING
        self.stop = False  # set once no publisher can reach the queue any more
        self.abort = False  # stop without delivering what is queued
        self.started = False
        self.ident = 0
        self.done = threading.Event()
        self.thread: threading.Thread | None = None

    def poke(self) -> None:
        """Wake the worker if it announced it is about to sleep."""
        if self.sleeping:
            self.sleeping = False
            with contextlib.suppress(RuntimeError):  # another publisher woke it first
                self.wake.release()


def stats_of(r: ModuleRecord) -> ModuleStats:
    """The module's counters now, as a frozen snapshot."""
    return ModuleStats(
        name=r.name,
        kind=r.kind,
        state=r.state,
        started=r.started,
        queue_depth=len(r.queue),
        capacity=r.capacity,
        backpressure=r.backpressure.describe(),
        published=r.published,
        delivered=r.delivered,
        failed=r.failed,
        dropped=r.dropped,
        refused=r.refused,
        blocked_publishers=r.waiting,
    )


def wait_out_publishers(sources: Iterable[ModuleRecord]) -> None:
    """Hold each source's publish lock once. A publish reads its source's routes and
    state and appends under that lock, so afterwards none that read them before a
    change can still append."""
    for source in sources:
        with source.publish_lock:
            pass
