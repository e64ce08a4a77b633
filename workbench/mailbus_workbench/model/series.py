"""The plot's series: numbers over time, fed from the model's event feed (live traffic
and replayed sessions alike), each held in a ring buffer.

Memory bound: at most MAX_SERIES series of at most POINTS_PER_SERIES points (a time and
a value each), about 12 MB at worst; the oldest points go first. A new series starts
with what the model still holds (the kept messages of its topic, the kept calls of its
service), then grows with every event pumped in."""

from __future__ import annotations

import bisect
import math
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from mailbus.envelope import EnvelopeKind
from mailbus.trace import TraceEvent

from mailbus_workbench.model.plot_paths import (
    MAX_FIELDS,
    PathError,
    SeriesKey,
    SeriesKind,
    decode,
    format_path,
    numeric_paths,
    value_at,
)
from mailbus_workbench.model.services import ServiceStore, Trace
from mailbus_workbench.model.topics import TopicStore

MAX_SERIES = 12
POINTS_PER_SERIES = 10_000  # 1000 s of a 10 Hz topic
RATE_BUCKET_S = 1.0  # a rate series gets one point per second
COMPLETION_MESSAGES = 20  # newest kept messages of each topic walked for field names

Point = tuple[float, float]  # (seconds since the epoch, value)
OFFERED_FIELDS = 6  # numeric fields named when a field is refused


def _no_number(key: SeriesKey, bodies: list[str]) -> str:
    """Why a field no kept message has is refused, with the numbers the topic has."""
    at = format_path(key.path) or " (the body itself)"
    offered: dict[str, None] = {}
    for body in reversed(bodies[-COMPLETION_MESSAGES:]):
        for path in numeric_paths(decode(body)):
            offered.setdefault(key.name + format_path(path))
    said = f"no message kept on {key.name} has a number at {at}"
    if not offered:
        return said + " (its messages hold no JSON number)"
    return said + "; try " + ", ".join(list(offered)[:OFFERED_FIELDS])


def _seen_s(event: TraceEvent) -> float:
    return (event.reception_timestamp_ns or event.time_ns) / 1e9


@dataclass(slots=True)
class Series:
    key: SeriesKey
    points: deque[Point]
    missing: int = 0  # messages without a number at the path (shown, never silent)
    _bucket: int | None = None  # rate: the second being counted
    _count: int = 0

    @property
    def name(self) -> str:
        return str(self.key)

    @property
    def last(self) -> float | None:
        return self.points[-1][1] if self.points else None

    def at(self, t: float) -> float | None:
        """The value in force at `t`: the last point at or before it."""
        i = bisect.bisect_right(self.points, t, key=lambda p: p[0])
        return self.points[i - 1][1] if i else None

    def between(self, start: float, end: float) -> list[Point]:
        points = self.points
        lo = bisect.bisect_left(points, start, key=lambda p: p[0])
        hi = bisect.bisect_right(points, end, key=lambda p: p[0])
        return [points[i] for i in range(lo, hi)]

    def _append(self, t: float, value: float) -> None:
        if self.points and t < self.points[-1][0]:
            t = self.points[-1][0]  # mail reorders: keep the buffer in time order
        self.points.append((t, value))

    # -- rate ---------------------------------------------------------------------------
    def count(self, t: float) -> None:
        bucket = math.floor(t / RATE_BUCKET_S)
        if self._bucket is None:
            self._bucket = bucket
        elif bucket > self._bucket:
            self._close(bucket)
        self._count += 1

    def _close(self, bucket: int) -> None:
        """End the counted second(s) before `bucket`: one point at the end of each, and
        zero for silent seconds (two points draw a flat line however long the silence)."""
        assert self._bucket is not None
        if bucket <= self._bucket:
            return
        end = (self._bucket + 1) * RATE_BUCKET_S
        self._append(end, self._count / RATE_BUCKET_S)
        if bucket > self._bucket + 1:
            self._append(end + RATE_BUCKET_S, 0.0)
            if bucket > self._bucket + 2:
                self._append(bucket * RATE_BUCKET_S, 0.0)
        self._bucket = bucket
        self._count = 0


@dataclass
class SeriesStore:
    capacity: int = POINTS_PER_SERIES
    max_series: int = MAX_SERIES
    series: dict[str, Series] = field(default_factory=dict)  # by name, in order added
    version: int = 0  # bumps when a series comes or goes
    _fields: dict[str, list[Series]] = field(default_factory=dict)  # by topic
    _rates: dict[str, Series] = field(default_factory=dict)  # by topic
    _latencies: dict[str, Series] = field(default_factory=dict)  # by service
    _seen: dict[str, tuple[int, list[str]]] = field(default_factory=dict)  # completion

    def __post_init__(self) -> None:
        if self.capacity < 2 or self.max_series < 1:
            raise ValueError("a series store holds at least one series of two points")

    def add(self, key: SeriesKey, topics: TopicStore, services: ServiceStore) -> Series:
        """Start plotting `key`, with what the model still holds of it."""
        name = str(key)
        if name in self.series:
            raise PathError(f"{name} is plotted already")
        if len(self.series) >= self.max_series:
            raise PathError(f"at most {self.max_series} series: remove one first")
        series = Series(key, deque(maxlen=self.capacity))
        if key.kind is SeriesKind.LATENCY:
            for trace in sorted(services.traces(key.name), key=_answered_s):
                self._call(series, trace)
            self._latencies[key.name] = series
        else:
            history = topics.history(key.name)
            if key.kind is SeriesKind.RATE:
                for record in history:
                    series.count(record.time_s)
                self._rates[key.name] = series
            else:
                for record in history:
                    self._field(series, decode(record.body), record.time_s)
                if history and not series.points:
                    raise PathError(_no_number(key, [r.body for r in history]))
                self._fields.setdefault(key.name, []).append(series)
        self.series[name] = series
        self.version += 1
        return series

    def remove(self, name: str) -> None:
        series = self.series.pop(name, None)
        if series is None:
            raise PathError(f"{name} is not plotted")
        key = series.key
        if key.kind is SeriesKind.LATENCY:
            del self._latencies[key.name]
        elif key.kind is SeriesKind.RATE:
            del self._rates[key.name]
        else:
            fields = self._fields[key.name]
            fields.remove(series)
            if not fields:
                del self._fields[key.name]
        self.version += 1

    def clear_points(self) -> None:
        for series in self.series.values():
            series.points.clear()
            series.missing = 0
            series._bucket = None
            series._count = 0

    # -- fed by the model's pump --------------------------------------------------------
    def on_message(self, event: TraceEvent) -> None:
        """A message received on a topic (cheap when its topic is not plotted)."""
        name = event.name
        fields = self._fields.get(name)
        rate = self._rates.get(name)
        if fields is None and rate is None:
            return
        t = _seen_s(event)
        if rate is not None:
            rate.count(t)
        if fields is not None:
            document = decode(event.body)
            for series in fields:
                self._field(series, document, t)

    def on_call_event(self, event: TraceEvent, services: ServiceStore) -> None:
        """A request or response the service store has just folded in."""
        series = self._latencies.get(event.name)
        if series is None:
            return
        key = event.message_id if event.detail == EnvelopeKind.REQUEST else event.in_reply_to
        trace = services.get(key) if key else None
        # Only the event that completes a call adds its point (not a duplicate answer).
        if trace is not None and (trace.response is event or trace.request is event):
            self._call(series, trace)

    def tick(self, now: float) -> None:
        """Close the rate seconds that have ended by `now`."""
        for series in self._rates.values():
            if series._bucket is not None:
                series._close(math.floor(now / RATE_BUCKET_S))

    @staticmethod
    def _field(series: Series, document: object, t: float) -> None:
        value = value_at(document, series.key.path)
        if value is None:
            series.missing += 1
        else:
            series._append(t, value)

    @staticmethod
    def _call(series: Series, trace: Trace) -> None:
        latency = trace.latency_s
        if latency is not None and not trace.duplicate:
            series._append(_answered_s(trace), latency * 1000.0)

    # -- completion ---------------------------------------------------------------------
    def candidates(self, topics: TopicStore, services: ServiceStore) -> list[str]:
        """Every series one could add now: each numeric field seen in the newest kept
        messages of each topic, each topic's rate and each service's latency."""
        out: list[str] = []
        for topic in topics.names():
            out.extend(self.fields_seen(topic, topics))
            out.append(f"rate({topic})")
        out.extend(f"latency({service})" for service in services.services())
        return out

    def fields_seen(self, topic: str, topics: TopicStore) -> list[str]:
        history = topics.history(topic)
        newest = history[-1].number if history else 0
        cached = self._seen.get(topic)
        if cached is not None and cached[0] == newest:
            return cached[1]
        found: dict[str, None] = {}
        for record in history[-COMPLETION_MESSAGES:]:
            for path in numeric_paths(decode(record.body)):
                found[topic + format_path(path)] = None
                if len(found) >= MAX_FIELDS:
                    break
        names = sorted(found)
        self._seen[topic] = (newest, names)
        return names

    def __iter__(self) -> Iterator[Series]:
        return iter(self.series.values())

    def __len__(self) -> int:
        return len(self.series)


def _answered_s(trace: Trace) -> float:
    event = trace.response or trace.request
    assert event is not None
    return _seen_s(event)
