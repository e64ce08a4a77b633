"""Expectations armed before the trigger: `expect.topic`, `expect.never`,
`expect.service(...)` and `expect.rate`.

Arming subscribes at once, on the test's bus (whose receiving side was confirmed live
when the bus was opened), so nothing published after the call can be missed. Each
expectation's clock (`within`, `during`) starts when it is armed. A test calls
`.wait()` on one, or lets the plugin verify all of them when the test function returns;
a failure names what was expected, the nearest misses and what arrived.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

from mailbus.envelope import Message
from mailbus.testing.buses import Bus
from mailbus.testing.expectation import KEPT, Arrivals, Expectation, ExpectationFailed
from mailbus.testing.matching import ANYTHING, Observed, Where
from mailbus.testing.report import timeline
from mailbus.testing.watch import Watch
from mailbus.trace import Kind, TraceEvent

__all__ = ["Expect", "Expectation", "ExpectationFailed"]


class TopicExpectation(Expectation):
    label = "topic"

    def __init__(
        self,
        name: str,
        where: object,
        count: int,
        within: float,
        ordered: bool,
        arrivals: Arrivals | None = None,
    ) -> None:
        if count < 1:
            raise ValueError(f"count must be at least 1, got {count}")
        if not within > 0:
            raise ValueError(f"within must be above 0 seconds, got {within}")
        super().__init__(name, where, arrivals)
        self.count = self.wake_at = count
        self.within = within
        self.ordered = self.wants_each = ordered
        self.disorder = ""
        self._last: dict[str, int] = {}

    def describe(self) -> str:
        n = "1 message" if self.count == 1 else f"{self.count} messages"
        order = ", in order" if self.ordered else ""
        return f"expected {n} on {self.name!r}{self._where_text()} within {self.within} s{order}"

    def deadline(self) -> float:
        return self.armed + self.within

    def decided(self) -> bool:
        return self.matched >= self.count

    def judge(self) -> str:
        # Too few and out of order are both told: one does not hide the other.
        problems = [self.disorder] if self.disorder else []
        if self.matched < self.count:
            problems.insert(0, f"{self.matched} matched of {self.total} received")
        return "; ".join(problems)

    def each(self, observed: Observed) -> None:
        """With `ordered`: every match, to find the first one out of its publisher's order."""
        gid, sequence = observed.source_gid, observed.sequence
        previous = self._last.get(gid, -1)
        if 0 <= sequence < previous and not self.disorder:
            self.disorder = (
                f"out of order: message {sequence} of publisher {gid[:8]} came after {previous}"
            )
        self._last[gid] = max(sequence, previous)

    def observed_latency_s(self) -> float | None:
        if self.matched < self.count:
            return None
        return (self.met_ns - self.armed_ns) / 1e9


class NeverExpectation(Expectation):
    label = "never"

    wake_at = 1

    def __init__(
        self, name: str, where: object, during: float, arrivals: Arrivals | None = None
    ) -> None:
        if not during > 0:
            raise ValueError(f"during must be above 0 seconds, got {during}")
        super().__init__(name, where, arrivals)
        self.during = during

    def describe(self) -> str:
        return f"expected no message on {self.name!r}{self._where_text()} for {self.during} s"

    def deadline(self) -> float:
        return self.armed + self.during

    def decided(self) -> bool:
        return self.matched > 0

    def judge(self) -> str:
        if not self.matched:
            return ""
        first = self.matches[0]
        return f"{self.matched} arrived, the first at +{self.at_s(first):.3f} s"

    def report(self, problem: str) -> str:
        # The offending messages are the interesting ones: no near misses here.
        arrived, total = self.arrivals.since(self.first)
        ids = {id(o) for o in self.matches}
        lines = timeline(arrived, ids, total, self.armed_ns)
        return "\n".join([f"{self.describe()}: {problem}", *lines])


class RateExpectation(Expectation):
    label = "rate"
    wants_each = True

    def __init__(
        self,
        name: str,
        where: object,
        hz: float,
        tolerance: float,
        during: float,
        arrivals: Arrivals | None = None,
    ) -> None:
        if not hz > 0 or not 0 <= tolerance < 1 or not during > 0:
            raise ValueError("rate needs hz > 0, 0 <= tolerance < 1 and during > 0")
        super().__init__(name, where, arrivals)
        self.hz = hz
        self.tolerance = tolerance
        self.during = during
        self.measured: float | None = None
        self.times: list[int] = []  # when each match arrived (ns)

    def each(self, observed: Observed) -> None:
        self.times.append(observed.received_ns)

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
        end = self.armed_ns + int(self.during * 1e9)
        window = [t for t in self.times if t <= end]
        if len(window) < 2:
            return f"{len(window)} message(s) arrived: too few to measure a rate"
        span = (window[-1] - window[0]) / 1e9
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
        self.responses = 0
        self.answered_count = 0
        self.within = 5.0
        self.response_where: Where | None = None
        self.p95: float | None = None

    def answered(self, count: int = 1, *, within: float = 5.0) -> ServiceExpectation:
        self.answered_count, self.within = count, within
        return self

    def responds(self, where: object, *, within: float | None = None) -> ServiceExpectation:
        self.response_where = self.where = self.compiled(where)
        self.answered_count = max(self.answered_count, 1)
        if within is not None:
            self.within = within
        return self

    def latency(self, *, p95: float) -> ServiceExpectation:
        self.p95 = p95
        self.answered_count = max(self.answered_count, 1)
        return self

    def observe_event(self, event: TraceEvent) -> None:
        item = Observed(event)
        if event.detail == "request":
            with self.arrivals.lock:
                self.arrivals.add(item)
            with self._cond:
                self.requests[event.message_id] = item
            return
        request = self.requests.get(event.in_reply_to)
        if request is None:
            return  # an answer to a request sent before arming
        sent_ns = request.received_ns
        for name, value in request.headers.items():
            if name.lower() == "source-timestamp" and value.isdigit():
                sent_ns = int(value)
        with self._cond:
            self.latencies.append((event.reception_timestamp_ns - sent_ns) / 1e9)
            self.responses += 1
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
        return self.responses >= self.answered_count

    def judge(self) -> str:
        responses = self.responses
        if responses < self.answered_count:
            return f"{responses} answered of {len(self.requests)} requests seen"
        if self.response_where is not None and self.matched < responses:
            return f"{responses - self.matched} of {responses} responses did not match"
        p95 = self.observed_p95()
        if self.p95 is not None and p95 is not None and p95 > self.p95:
            return f"p95 latency was {p95:.6f} s over {len(self.latencies)} calls"
        return ""

    def observed_p95(self) -> float | None:
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, math.ceil(0.95 * len(ordered)) - 1)]

    def observed_latency_s(self) -> float | None:
        return self.observed_p95()


E = TypeVar("E", bound=Expectation)


class _Tap:
    """One subscription to a topic, shared by the expectations armed on it: each message
    is read into one `Observed`, numbered, and offered to each expectation in turn."""

    def __init__(self, bus: Bus, topic: str) -> None:
        self.arrivals = Arrivals()
        # (where, expectation, its `each` or None) of each expectation armed on the topic.
        self.targets: tuple[tuple[Where, Expectation, Callable[[Observed], None] | None], ...] = ()
        self.watch = Watch(bus.context, topic, self.seen)

    def add(self, expectation: Expectation) -> None:
        with self.arrivals.lock:
            each = expectation.each if expectation.wants_each else None
            target = (expectation.where, expectation, each)
            self.targets = (*self.targets, target)

    def seen(self, message: Message) -> None:
        observed = Observed(message)
        arrivals = self.arrivals
        lock = arrivals.lock
        lock.acquire()  # offers in arrival order, one message at a time
        try:
            # Expectation.offer and Arrivals.add, inlined: this runs per message and
            # per expectation (bench/testing.py measures it).
            observed.index = arrivals.total
            arrivals.total += 1
            arrivals.kept.append(observed)
            anything = ANYTHING
            for where, expectation, each in self.targets:
                if where is anything or where.test(observed):
                    matched = expectation.matched = expectation.matched + 1
                    if matched <= KEPT:
                        expectation.matches.append(observed)
                    if each is not None:
                        each(observed)
                    if matched == expectation.wake_at:
                        expectation.met_ns = observed.received_ns
                        expectation.wake()
        finally:
            lock.release()


class Expect:
    """The `expect` fixture: arms expectations on `bus` and verifies them."""

    def __init__(self, bus: Bus) -> None:
        self.bus = bus
        self.armed: list[Expectation] = []
        self._services: dict[str, list[ServiceExpectation]] = {}
        self._remove_listener: Callable[[], None] | None = None
        self._taps: dict[str, _Tap] = {}

    def topic(
        self,
        name: str,
        where: object = None,
        *,
        count: int = 1,
        within: float = 5.0,
        ordered: bool = False,
    ) -> TopicExpectation:
        return self._arm(
            TopicExpectation(name, where, count, within, ordered, self._arrivals(name))
        )

    def never(self, name: str, where: object = None, *, during: float = 1.0) -> NeverExpectation:
        return self._arm(NeverExpectation(name, where, during, self._arrivals(name)))

    def rate(
        self,
        name: str,
        hz: float,
        *,
        tolerance: float = 0.2,
        during: float = 2.0,
        where: object = None,
    ) -> RateExpectation:
        return self._arm(RateExpectation(name, where, hz, tolerance, during, self._arrivals(name)))

    def service(self, name: str) -> ServiceExpectation:
        expectation = ServiceExpectation(name)
        if self._remove_listener is None:
            self._remove_listener = self.bus.context.tracer.add_listener(self._on_event)
        self._services.setdefault(name, []).append(expectation)
        self.armed.append(expectation)
        return expectation

    def _arm(self, expectation: E) -> E:
        self._taps[expectation.name].add(expectation)
        self.armed.append(expectation)
        return expectation

    def _arrivals(self, topic: str) -> Arrivals:
        """The one subscription (and record of arrivals) for every expectation on `topic`."""
        tap = self._taps.get(topic)
        if tap is None:
            tap = self._taps[topic] = _Tap(self.bus, topic)
        return tap.arrivals

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
        """(what, seconds) of each expectation met, for JUnit properties (a failed one
        has none, though it may have measured one)."""
        found = []
        for expectation in self.armed:
            if expectation.verdict != "":
                continue
            value = expectation.observed_latency_s()
            if value is not None:
                found.append((f"mailbus {expectation.label} {expectation.name}", round(value, 6)))
        return found

    def close(self) -> None:
        for tap in self._taps.values():
            tap.watch.close()
        if self._remove_listener is not None:
            self._remove_listener()
