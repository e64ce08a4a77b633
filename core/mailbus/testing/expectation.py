"""What every expectation shares (mailbus.testing.expect arms them): the arrivals it
saw, kept once per name for every expectation on it, a condition to wait on, the verdict
when its time is up, and the report of a failure."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from collections.abc import Generator
from typing import Any

from mailbus.testing.matching import ANYTHING, Observed, Where, compile_where
from mailbus.testing.report import nearest_misses, timeline

KEPT = 1000  # arrivals an expectation keeps for its report


class ExpectationFailed(AssertionError):
    """An expectation did not hold; the message is its whole report."""


class Arrivals:
    """What arrived on one name, kept once for every expectation armed on it: the last
    KEPT, each numbered, and how many in all."""

    def __init__(self) -> None:
        self.kept: deque[Observed] = deque(maxlen=KEPT)
        self.total = 0
        self.lock = threading.Lock()

    def add(self, observed: Observed) -> None:
        """Number and keep `observed` (under `lock`, which the caller holds)."""
        observed.index = self.total
        self.total += 1
        self.kept.append(observed)

    def since(self, first: int) -> tuple[list[Observed], int]:
        """(the kept arrivals numbered `first` or later, how many arrived since)."""
        with self.lock:
            return [o for o in self.kept if o.index >= first], self.total - first


class Expectation:
    """What every expectation shares: the arrivals it saw (for the report), a condition
    to wait on, and the verdict once its time is up."""

    label = "expectation"
    # Wake a waiter when this many messages have matched (0: never early).
    wake_at = 0
    # Whether `each` must see every match (not only the first KEPT).
    wants_each = False

    def __init__(self, name: str, where: object, arrivals: Arrivals | None = None) -> None:
        self.name = name
        self._cond = threading.Condition()
        self.where: Where = self.compiled(where)
        self.armed_ns = time.time_ns()
        self.armed = time.monotonic()
        self.arrivals = arrivals if arrivals is not None else Arrivals()
        with self.arrivals.lock:
            self.first = self.arrivals.total
        # The first KEPT matches (a busy topic's would fill memory, and the collector's
        # time with it), how many matched in all, and when the wake_at-th one arrived.
        self.matches: list[Observed] = []
        self.matched = 0
        self.met_ns = 0
        self.verdict: str | None = None  # None: not decided; "" passed; else the report

    def compiled(self, where: object) -> Where:
        """`where=` compiled; a callable that raises wakes this expectation's waiter."""
        compiled = compile_where(where)
        if compiled.raised is not None:
            compiled.raised.wake = self.wake
        return compiled

    @property
    def total(self) -> int:
        return self.arrivals.total - self.first

    # -- what arrives ----------------------------------------------------------------------
    def each(self, observed: Observed) -> None:
        """Every match, when `wants_each`."""

    def wake(self) -> None:
        """The verdict may be known now: wake whoever waits for it."""
        with self._cond:
            self._cond.notify_all()

    def observe(self, observed: Observed) -> None:
        """An arrival on a name no other expectation shares (services)."""
        with self.arrivals.lock:
            self.arrivals.add(observed)
        with self._cond:
            if self.where.test(observed):
                self.matched += 1
                if len(self.matches) < KEPT:
                    self.matches.append(observed)
            self._cond.notify_all()

    def at_s(self, observed: Observed) -> float:
        """Seconds from arming to the arrival of `observed`."""
        return (observed.received_ns - self.armed_ns) / 1e9

    # -- the verdict -------------------------------------------------------------------------
    def deadline(self) -> float:
        raise NotImplementedError

    def decided(self) -> bool:
        """True once the verdict cannot change before the deadline."""
        raise NotImplementedError

    def judge(self) -> str:
        """'' when the expectation holds, else what went wrong (first line of the report)."""
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError

    def observed_latency_s(self) -> float | None:
        """For JUnit properties: how long after arming the expectation was met."""
        return None

    def wait(self) -> Expectation:
        """Block until the verdict; raise ExpectationFailed with the report if it failed."""
        __tracebackhide__ = True
        if self.verdict is None:
            raised = self.where.raised
            with self._cond:
                while not self.decided() and (raised is None or raised.error is None):
                    left = self.deadline() - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                problem = self.judge()
                if raised is not None and raised.error is not None:
                    # The predicate itself failed: that is this expectation's verdict.
                    problem = raised.line(self.where.text) + (f"; {problem}" if problem else "")
            self.verdict = "" if not problem else self.report(problem)
        if self.verdict:
            raise ExpectationFailed(self.verdict)
        return self

    def __await__(self) -> Generator[Any, None, Expectation]:
        return asyncio.to_thread(self.wait).__await__()

    def report(self, problem: str) -> str:
        arrived, total = self.arrivals.since(self.first)
        ids = {id(o) for o in self.matches}
        misses = [o for o in arrived if id(o) not in ids and o.what != "request"]
        lines = [f"{self.describe()}: {problem}"]
        if self.where is not ANYTHING:
            lines += nearest_misses(self.where, misses, self.armed_ns)
        lines += timeline(arrived, ids, total, self.armed_ns)
        return "\n".join(lines)

    def _where_text(self) -> str:
        return f" where {self.where.text}" if self.where.text else ""
