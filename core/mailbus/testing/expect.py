"""Expectations armed before the trigger: `expect.topic`, `expect.never`,
`expect.service(...)` and `expect.rate`.

Arming subscribes at once, on the test's bus (whose receiving side was confirmed live
when the bus was opened), so nothing published after the call can be missed. Each
expectation's clock (`within`, `during`) starts when it is armed. A test calls
`.wait()` on one, or lets the plugin verify all of them when the test function returns;
a failure names what was expected, the nearest misses and what arrived.
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from mailbus.envelope import Message
from mailbus.testing.buses import Bus
from mailbus.testing.matching import ANYTHING, Observed, Where, compile_where
from mailbus.testing.report import nearest_misses, timeline
from mailbus.testing.watch import Watch
from mailbus.trace import Kind, TraceEvent

KEPT = 1000  # arrivals an expectation keeps for its report


class ExpectationFailed(AssertionError):
    """An expectation did not hold; the message is its whole report."""


class Expectation:
    """What every expectation shares: arrivals kept for the report, a condition to wait
    on, and the verdict once its time is up."""

    label = "expectation"

    def __init__(self, name: str, where: object) -> None:
        self.name = name
        self.where: Where = compile_where(where)
        self.armed_ns = time.time_ns()
        self.armed = time.monotonic()
        self.arrived: deque[Observed] = deque(maxlen=KEPT)
        self.total = 0
        self.matches: list[Observed] = []
        self._matched_ids: set[int] = set()
        self._cond = threading.Condition()
        self.verdict: str | None = None  # None: not decided; "" passed; else the report
        self.close: Callable[[], None] = lambda: None

    # -- what arrives ----------------------------------------------------------------------
    def observe(self, observed: Observed) -> None:
        matched = self.where.test(observed)
        with self._cond:
            self.total += 1
            self.arrived.append(observed)
            if matched:
                self.matches.append(observed)
                self._matched_ids.add(id(observed))
            self._cond.notify_all()

    def observe_message(self, message: Message) -> None:
        info = message.info
        self.observe(
            Observed(
                name=message.topic,
                body=message.body,
                at_ns=info.reception_timestamp_ns - self.armed_ns,
                headers=message.email.headers,
                sequence=info.sequence_number,
                source_gid=info.source_gid,
                message_id=message.message_id,
            )
        )

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
            with self._cond:
                while not self.decided():
                    left = self.deadline() - time.monotonic()
                    if left <= 0:
                        break
                    self._cond.wait(left)
                problem = self.judge()
            self.close()
            self.verdict = "" if not problem else self.report(problem)
        if self.verdict:
            raise ExpectationFailed(self.verdict)
        return self

    def __await__(self) -> Generator[Any, None, Expectation]:
        return asyncio.to_thread(self.wait).__await__()

    def report(self, problem: str) -> str:
        with self._cond:
            arrived = list(self.arrived)
            misses = [o for o in arrived if id(o) not in self._matched_ids]
            ids = set(self._matched_ids)
            total = self.total
        lines = [f"{self.describe()}: {problem}"]
        if self.where is not ANYTHING:
            lines += nearest_misses(self.where, misses)
        lines += timeline(arrived, ids, total)
        return "\n".join(lines)

    def _where_text(self) -> str:
        return f" where {self.where.text}" if self.where.text else ""


class TopicExpectation(Expectation):
    label = "topic"

    def __init__(self, name: str, where: object, count: int, within: float, ordered: bool) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        if not within > 0:
            raise ValueError(f"within must be above 0 seconds, got {within}")
        super().__init__(name, where)
        self.count = count
        self.within = within
        self.ordered = ordered

    def describe(self) -> str:
        n = "1 message" if self.count == 1 else f"{self.count} messages"
        order = ", in order" if self.ordered else ""
        return f"expected {n} on {self.name!r}{self._where_text()} within {self.within} s{order}"

    def deadline(self) -> float:
        return self.armed + self.within

    def decided(self) -> bool:
        return len(self.matches) >= self.count

    def judge(self) -> str:
        if len(self.matches) < self.count:
            return f"{len(self.matches)} matched of {self.total} received"
        if self.ordered:
            last: dict[str, int] = {}
            for item in self.matches:
                previous = last.get(item.source_gid, -1)
                if 0 <= item.sequence < previous:
                    return (
                        f"out of order: message {item.sequence} of publisher "
                        f"{item.source_gid[:8]} came after {previous}"
                    )
                last[item.source_gid] = item.sequence
        return ""

    def observed_latency_s(self) -> float | None:
        if len(self.matches) < self.count:
            return None
        return self.matches[self.count - 1].at_ns / 1e9


class NeverExpectation(Expectation):
    label = "never"

    def __init__(self, name: str, where: object, during: float) -> None:
        if not during > 0:
            raise ValueError(f"during must be above 0 seconds, got {during}")
        super().__init__(name, where)
        self.during = during

    def describe(self) -> str:
        return f"expected no message on {self.name!r}{self._where_text()} for {self.during} s"

    def deadline(self) -> float:
        return self.armed + self.during

    def decided(self) -> bool:
        return bool(self.matches)

    def judge(self) -> str:
        if not self.matches:
            return ""
        first = self.matches[0]
        return f"{len(self.matches)} arrived, the first at +{first.at_ns / 1e9:.3f} s"

    def report(self, problem: str) -> str:
        # The offending messages are the interesting ones: no near misses here.
        with self._cond:
            arrived, ids, total = list(self.arrived), set(self._matched_ids), self.total
        return "\n".join([f"{self.describe()}: {problem}", *timeline(arrived, ids, total)])


class RateExpectation(Expectation):
    label = "rate"

    def __init__(
        self, name: str, where: object, hz: float, tolerance: float, during: float
    ) -> None:
        if not hz > 0 or not 0 <= tolerance < 1 or not during > 0:
            raise ValueError("rate needs hz > 0, 0 <= tolerance < 1 and during > 0")
        super().__init__(name, where)
        self.hz = hz
        self.tolerance = tolerance
        self.during = during
        self.measured: float | None = None

    def describe(self) -> str:
        return (
            f"expected {self.hz} Hz ± {self.tolerance:.0%} on {self.name!r}"
            f"{self._where_text()} over {self.during} s"
        )

    def deadline(self) -> float:
        return self.armed + self.during

    def decided(self) -> bool:
        return False

    def judge(self) -> str:
        window = [m for m in self.matches if m.at_ns <= self.during * 1e9]
        if len(window) < 2:
            return f"{len(window)} message(s) arrived: too few to measure a rate"
        span = (window[-1].at_ns - window[0].at_ns) / 1e9
        self.measured = (len(window) - 1) / span if span > 0 else math.inf
        if abs(self.measured - self.hz) > self.tolerance * self.hz:
            return f"measured {self.measured:.2f} Hz from {len(window)} messages"
        return ""


class ServiceExpectation(Expectation):
    """Checks on one service's requests and responses, chained:
    `expect.service("thermo/convert").answered(2).responds(where={"ok": True})`."""

    label = "service"

    def __init__(self, name: str) -> None:
        super().__init__(name, None)
        self.requests: dict[str, Observed] = {}
        self.latencies: list[float] = []  # s from request sent to response received
        self.answered_count = 0
        self.within = 5.0
        self.response_where: Where | None = None
        self.p95: float | None = None

    def answered(self, count: int = 1, *, within: float = 5.0) -> ServiceExpectation:
        self.answered_count, self.within = count, within
        return self

    def responds(self, where: object, *, within: float | None = None) -> ServiceExpectation:
        self.response_where = self.where = compile_where(where)
        self.answered_count = max(self.answered_count, 1)
        if within is not None:
            self.within = within
        return self

    def latency(self, *, p95: float) -> ServiceExpectation:
        self.p95 = p95
        self.answered_count = max(self.answered_count, 1)
        return self

    def observe_event(self, event: TraceEvent) -> None:
        body = event.body or ""
        at_ns = event.reception_timestamp_ns - self.armed_ns
        item = Observed(
            self.name, body, at_ns, event.detail, event.headers, event.sequence_number,
            event.source_gid, event.message_id, event.in_reply_to,
        )  # fmt: skip
        if event.detail == "request":
            with self._cond:
                self.requests[event.message_id] = item
                self.total += 1
                self.arrived.append(item)
                self._cond.notify_all()
            return
        request = self.requests.get(event.in_reply_to)
        if request is None:
            return  # an answer to a request sent before arming
        sent_ns = request.at_ns + self.armed_ns
        for name, value in request.headers.items():
            if name.lower() == "source-timestamp" and value.isdigit():
                sent_ns = int(value)
        with self._cond:
            self.latencies.append((event.reception_timestamp_ns - sent_ns) / 1e9)
        self.observe(item)

    def describe(self) -> str:
        parts = [f"expected service {self.name!r} to answer"]
        parts.append(f" {self.answered_count} request(s) within {self.within} s")
        if self.response_where is not None:
            parts.append(f", every response where {self.response_where.text}")
        if self.p95 is not None:
            parts.append(f", p95 latency <= {self.p95} s")
        return "".join(parts)

    def deadline(self) -> float:
        return self.armed + self.within

    def decided(self) -> bool:
        return self.total - len(self.requests) >= self.answered_count

    def judge(self) -> str:
        responses = self.total - len(self.requests)
        if responses < self.answered_count:
            return f"{responses} answered of {len(self.requests)} requests seen"
        if self.response_where is not None and len(self.matches) < responses:
            return f"{responses - len(self.matches)} of {responses} responses did not match"
        p95 = self.observed_p95()
        if self.p95 is not None and p95 is not None and p95 > self.p95:
            return f"p95 latency was {p95:.3f} s over {len(self.latencies)} calls"
        return ""

    def observed_p95(self) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]

    def observed_latency_s(self) -> float | None:
        return self.observed_p95()


E = TypeVar("E", bound=Expectation)


class Expect:
    """The `expect` fixture: arms expectations on `bus` and verifies them."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.armed: list[Expectation] = []
        self._services: dict[str, list[ServiceExpectation]] = {}
        self._remove_listener: Callable[[], None] | None = None

    def topic(
        self,
        name: str,
        where: object = None,
        *,
        count: int = 1,
        within: float = 5.0,
        ordered: bool = False,
    ) -> TopicExpectation:
        return self._watch(TopicExpectation(name, where, count, within, ordered))

    def never(self, name: str, where: object = None, *, during: float = 1.0) -> NeverExpectation:
        return self._watch(NeverExpectation(name, where, during))

    def rate(
        self,
        name: str,
        hz: float,
        *,
        tolerance: float = 0.2,
        during: float = 2.0,
        where: object = None,
    ) -> RateExpectation:
        return self._watch(RateExpectation(name, where, hz, tolerance, during))

    def service(self, name: str) -> ServiceExpectation:
        expectation = ServiceExpectation(name)
        if self._remove_listener is None:
            self._remove_listener = self.bus.context.tracer.add_listener(self._on_event)
        self._services.setdefault(name, []).append(expectation)
        self.armed.append(expectation)
        return expectation

    def _watch(self, expectation: E) -> E:
        watch = Watch(self.bus.context, expectation.name, expectation.observe_message)
        expectation.close = watch.close
        self.armed.append(expectation)
        return expectation

    def _on_event(self, event: TraceEvent) -> None:
        if event.kind == Kind.RECEIVED and event.detail in ("request", "response"):
            for expectation in self._services.get(event.name, ()):
                expectation.observe_event(event)

    def verify(self) -> list[str]:
        """Wait for every armed expectation's verdict; the reports of those that failed."""
        failures = []
        for expectation in self.armed:
            try:
                expectation.wait()
            except ExpectationFailed as exc:
                failures.append(str(exc))
        return failures

    def latencies(self) -> list[tuple[str, float]]:
        """(what, seconds) of each expectation met, for JUnit properties."""
        found = []
        for expectation in self.armed:
            value = expectation.observed_latency_s()
            if value is not None:
                found.append((f"mailbus {expectation.label} {expectation.name}", round(value, 6)))
        return found

    def close(self) -> None:
        for expectation in self.armed:
            expectation.close()
        if self._remove_listener is not None:
            self._remove_listener()
