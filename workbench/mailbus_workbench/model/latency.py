"""Latency of each service's answered calls: the last RECENT latencies per service (a
ring), their p50/p90/p99 and a histogram with fixed log-spaced buckets.

Memory is bounded: RECENT floats for each of at most MAX_SERVICES services (the least
recently answered service is forgotten first), so at most 256 x 1,000 latencies."""

from __future__ import annotations

import math
from array import array
from collections import OrderedDict
from dataclasses import dataclass

RECENT = 1_000  # latencies kept per service
MAX_SERVICES = 256
QUANTILES = (0.5, 0.9, 0.99)
# Histogram buckets: 4 per decade from 10 µs to 100 s; below and above fall in the ends.
BUCKETS_PER_DECADE = 4
LOWEST_S = 1e-5
DECADES = 7
BUCKET_COUNT = BUCKETS_PER_DECADE * DECADES


def bucket_bounds() -> list[float]:
    """The upper bound (seconds) of each histogram bucket; the last one is open."""
    return [LOWEST_S * 10 ** ((i + 1) / BUCKETS_PER_DECADE) for i in range(BUCKET_COUNT)]


def bucket_of(latency_s: float) -> int:
    """The bucket holding `latency_s`: bucket i holds (bound[i-1], bound[i]]."""
    if latency_s <= LOWEST_S:
        return 0
    # The epsilon keeps a value equal to a bound in its own bucket despite float error.
    i = math.ceil(math.log10(latency_s / LOWEST_S) * BUCKETS_PER_DECADE - 1e-9) - 1
    return max(0, min(BUCKET_COUNT - 1, i))


def percentile(ordered: list[float], q: float) -> float:
    """Nearest rank: the smallest value with at least q of the values at or below it."""
    if not ordered:
        raise ValueError("no values")
    if not 0 < q <= 1:
        raise ValueError("q must be in (0, 1]")
    rank = max(1, math.ceil(q * len(ordered) - 1e-9))
    return ordered[rank - 1]


@dataclass(frozen=True, slots=True)
class LatencySummary:
    service: str
    calls: int  # answered calls seen since the last clear (not only the ring's)
    p50_s: float
    p90_s: float
    p99_s: float
    max_s: float  # of the recent ones


class ServiceLatency:
    """One service's recent latencies, oldest overwritten first."""

    __slots__ = ("_next", "_ring", "calls")

    def __init__(self) -> None:
        self._ring = array("d")
        self._next = 0
        self.calls = 0

    def add(self, latency_s: float) -> None:
        self.calls += 1
        if len(self._ring) < RECENT:
            self._ring.append(latency_s)
        else:
            self._ring[self._next] = latency_s
            self._next = (self._next + 1) % RECENT

    def recent(self) -> list[float]:
        return list(self._ring)

    def histogram(self) -> list[int]:
        counts = [0] * BUCKET_COUNT
        for value in self._ring:
            counts[bucket_of(value)] += 1
        return counts


class LatencyBook:
    """Every service's latencies; `version` changes with each one added."""

    def __init__(self) -> None:
        self._services: OrderedDict[str, ServiceLatency] = OrderedDict()
        self.version = 0

    def add(self, service: str, latency_s: float) -> None:
        if not math.isfinite(latency_s) or latency_s < 0:
            return  # a clock step backwards says nothing about the service
        entry = self._services.get(service)
        if entry is None:
            entry = self._services[service] = ServiceLatency()
            while len(self._services) > MAX_SERVICES:
                self._services.popitem(last=False)
        else:
            self._services.move_to_end(service)
        entry.add(latency_s)
        self.version += 1

    def services(self) -> list[str]:
        return sorted(self._services)

    def get(self, service: str) -> ServiceLatency | None:
        return self._services.get(service)

    def summary(self, service: str) -> LatencySummary | None:
        entry = self._services.get(service)
        if entry is None or not entry.calls:
            return None
        ordered = sorted(entry.recent())
        p50, p90, p99 = (percentile(ordered, q) for q in QUANTILES)
        return LatencySummary(service, entry.calls, p50, p90, p99, ordered[-1])

    def summaries(self) -> list[LatencySummary]:
        found = (self.summary(s) for s in self.services())
        return [s for s in found if s is not None]

    def clear(self) -> None:
        self._services.clear()
        self.version += 1

    def __len__(self) -> int:
        return len(self._services)
