"""Interval statistics for `topic hz/bw/delay`: pure arithmetic over a sliding window,
fed with (source time, arrival time, size) samples."""

from __future__ import annotations

import itertools
import math
from collections import deque
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RateReport:
    """What `topic hz` prints: the rate over the window and its intervals' spread."""

    count: int
    rate_hz: float
    min_s: float
    max_s: float
    std_s: float
    window: int


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of `values` (not empty)."""
    ordered = sorted(values)
    rank = max(0, math.ceil(fraction * len(ordered)) - 1)
    return ordered[rank]


class Window:
    """The last `size` samples of one topic."""

    def __init__(self, size: int) -> None:
        if size < 2:
            raise ValueError("a window needs at least 2 messages")
        self.size = size
        self.sent_ns: deque[int] = deque(maxlen=size)
        self.arrived_ns: deque[int] = deque(maxlen=size)
        self.sizes: deque[int] = deque(maxlen=size)
        self.total = 0

    def add(self, sent_ns: int, arrived_ns: int, size: int) -> None:
        self.sent_ns.append(sent_ns)
        self.arrived_ns.append(arrived_ns)
        self.sizes.append(size)
        self.total += 1

    def rate(self) -> RateReport | None:
        """The rate from the publisher's own timestamps (the sender's clock is what a
        rate is about; delivery jitter is `delay`'s business), None below 2 messages."""
        times = list(self.sent_ns)
        if len(times) < 2:
            return None
        intervals = [(b - a) / 1e9 for a, b in itertools.pairwise(times)]
        span = (times[-1] - times[0]) / 1e9
        if span <= 0:
            return None
        mean = sum(intervals) / len(intervals)
        std = math.sqrt(sum((i - mean) ** 2 for i in intervals) / len(intervals))
        return RateReport(
            len(times), (len(times) - 1) / span, min(intervals), max(intervals), std, self.size
        )

    def bandwidth(self) -> tuple[float, float] | None:
        """(bytes per second, mean size) over the window, by arrival."""
        if len(self.arrived_ns) < 2:
            return None
        span = (self.arrived_ns[-1] - self.arrived_ns[0]) / 1e9
        if span <= 0:
            return None
        sizes = list(self.sizes)
        return sum(sizes[1:]) / span, sum(sizes) / len(sizes)

    def delays(self) -> tuple[float, float, float] | None:
        """Source timestamp -> arrival: (p50, p95, max) in seconds."""
        if not self.sent_ns:
            return None
        delays = [(a - s) / 1e9 for s, a in zip(self.sent_ns, self.arrived_ns, strict=True)]
        return percentile(delays, 0.5), percentile(delays, 0.95), max(delays)
