"""What the notebook monitor knows about live traffic, without any widget or thread.

`MonitorModel.listener` is a trace listener: it runs on engine threads, so it only
updates counters and appends to bounded deques under one lock. Everything the widget
shows comes from `snapshot(now)`; `frame()` and `services()` turn what was kept into
polars frames. Memory is bounded by `max_events` rows (capped bodies), `window_s` of
rate/field samples per topic (at most `max_samples` each) and `max_calls` calls.
"""

from __future__ import annotations

import builtins
import threading
import time
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mailbus import field_path
from mailbus.envelope import EnvelopeKind
from mailbus.extras import needs_extra
from mailbus.field_path import Step
from mailbus.sessions.schema import Redactor, arrow_schema, cap_body, event_columns
from mailbus.trace import Kind, TraceEvent

with needs_extra("mailbus.notebook", "notebook"):
    import polars as pl
    import pyarrow as pa  # type: ignore[import-untyped]

DEFAULT_MAX_EVENTS = 50_000
DEFAULT_BODY_CAP = 4 * 1024
DEFAULT_WINDOW_S = 30.0
DEFAULT_MAX_SAMPLES = 2_000
DEFAULT_MAX_CALLS = 10_000
DEFAULT_MAX_TOPICS = 1_000
LATEST_PREVIEW_CHARS = 2_000
RAW_PREVIEW_BYTES = 8 * 1024
# A rate is said once the monitor has watched this long: 6 messages in its first 0.1 s
# are not 60 Hz. Until then the snapshot gives None ("-" in the widget).
MIN_RATE_SPAN_S = 1.0
CALLS_SHOWN = 30


_UNPARSED = object()


def json_path_value(body: str, path: Sequence[Step]) -> float | None:
    """The number at `path` (keys or list indices) in a JSON body, else None."""
    return field_path.value_at(field_path.decode(body), tuple(path))


def split_field(spec: str, topics: Iterable[str]) -> tuple[str, tuple[Step, ...]]:
    """'robot/pose.x' → ('robot/pose', ('x',)): the longest known topic before a dot,
    else everything before the first dot; the rest is a field path (mailbus.field_path)."""
    for topic in sorted(topics, key=len, reverse=True):
        if spec.startswith(topic + ".") or spec.startswith(topic + "["):
            return topic, field_path.parse_steps(spec[len(topic) :])
    slash = spec.rfind("/")
    ends = [i for i in (spec.find(".", slash + 1), spec.find("[", slash + 1)) if i > 0]
    if not ends or ends[0] == len(spec) - 1:
        raise ValueError(f"a field is 'topic.key[.key...]', not {spec!r}")
    cut = min(ends)
    return spec[:cut], field_path.parse_steps(spec[cut:])


@dataclass
class _Topic:
    count: int = 0
    bytes: int = 0
    times: deque[float] = field(default_factory=deque)  # receptions within the window
    latest: str = ""
    latest_at: float = 0.0
    # The latest message's email: headers and raw bytes are the engine's own objects,
    # shared and not copied (one per topic), redacted and cut when a snapshot shows them.
    latest_id: str = ""
    latest_sequence: int = -1
    latest_headers: Any = None
    latest_raw: builtins.bytes | None = None  # `bytes` is a field name here


@dataclass
class _Call:
    service: str
    request_id: str
    sent_ns: int
    sequence_number: int
    request_body: str = ""
    response_ns: int = 0
    response_body: str = ""
    response_id: str = ""


class MonitorModel:
    """Counts, rates, latest messages, field samples and paired calls seen by a listener."""

    def __init__(
        self,
        *,
        max_events: int = DEFAULT_MAX_EVENTS,
        body_cap: int = DEFAULT_BODY_CAP,
        window_s: float = DEFAULT_WINDOW_S,
        max_samples: int = DEFAULT_MAX_SAMPLES,
        max_calls: int = DEFAULT_MAX_CALLS,
        max_topics: int = DEFAULT_MAX_TOPICS,
        secrets: Iterable[str] = (),
        clock: Any = time.monotonic,
    ) -> None:
        if max_events < 1 or max_samples < 1 or max_calls < 1 or max_topics < 1:
            raise ValueError("max_events, max_samples, max_calls and max_topics must be >= 1")
        if not window_s > 0 or body_cap < 0:
            raise ValueError("window_s must be > 0 and body_cap >= 0")
        self.body_cap = body_cap
        self.window_s = window_s
        self.max_samples = max_samples
        self.max_topics = max_topics
        self._clock = clock
        self.started = clock()
        self._redactor = Redactor(secrets)
        self._lock = threading.Lock()
        self._events: deque[tuple[TraceEvent, bytes | None, int, bool]] = deque(maxlen=max_events)
        self._topics: dict[str, _Topic] = {}
        self._calls: dict[str, _Call] = {}
        self._max_calls = max_calls
        self._fields: dict[str, tuple[str, tuple[Step, ...]]] = {}
        self._samples: dict[str, deque[tuple[float, float]]] = {}
        self.seen = 0
        self.ignored_topics = 0  # messages on topics beyond max_topics
        self.timeouts: set[str] = set()

    # -- listening (engine threads) --------------------------------------------------
    def listener(self, event: TraceEvent) -> None:
        now = self._clock()
        body = event.body
        kept = cap_body(body, self.body_cap) if body is not None else None
        with self._lock:
            self.seen += 1
            if kept is None:
                self._events.append((event, None, -1, False))
            else:
                self._events.append((event, *kept))
            if event.kind != Kind.RECEIVED:
                return
            if event.detail == EnvelopeKind.MESSAGE:
                self._message(event, now)
            elif event.detail == EnvelopeKind.REQUEST:
                self._request(event)
            elif event.detail == EnvelopeKind.RESPONSE:
                self._response(event)

    def _message(self, event: TraceEvent, now: float) -> None:
        topic = self._topics.get(event.name)
        if topic is None:
            if len(self._topics) >= self.max_topics:
                self.ignored_topics += 1
                return
            topic = self._topics[event.name] = _Topic()
        topic.count += 1
        topic.bytes += event.size
        times = topic.times
        times.append(now)
        horizon = now - self.window_s
        while times and (times[0] < horizon or len(times) > self.max_samples):
            times.popleft()
        body = event.body or ""
        topic.latest = body[:LATEST_PREVIEW_CHARS]
        topic.latest_at = now
        topic.latest_id = event.message_id
        topic.latest_sequence = event.sequence_number
        topic.latest_headers = event.headers
        topic.latest_raw = event.raw
        document: Any = _UNPARSED
        for spec, (name, path) in self._fields.items():
            if name == event.name:
                if document is _UNPARSED:  # parse once, for all of this topic's fields
                    document = field_path.decode(body)
                value = field_path.value_at(document, path)
                if value is not None:
                    samples = self._samples[spec]
                    samples.append((now, value))
                    while samples and samples[0][0] < horizon:
                        samples.popleft()

    def _request(self, event: TraceEvent) -> None:
        calls = self._calls
        if len(calls) >= self._max_calls:
            del calls[next(iter(calls))]  # the oldest (dicts keep insertion order)
        calls[event.message_id] = _Call(
            event.name,
            event.message_id,
            event.source_timestamp_ns or event.time_ns,
            event.sequence_number,
            (event.body or "")[:LATEST_PREVIEW_CHARS],
        )

    def _response(self, event: TraceEvent) -> None:
        call = self._calls.get(event.in_reply_to)
        if call is not None and not call.response_ns:
            call.response_ns = event.reception_timestamp_ns or event.time_ns
            call.response_body = (event.body or "")[:LATEST_PREVIEW_CHARS]
            call.response_id = event.message_id

    # -- fields ------------------------------------------------------------------------
    def watch_field(self, spec: str) -> None:
        """Sample a numeric JSON path such as 'robot/pose.x' from now on."""
        with self._lock:
            topic, path = split_field(spec, self._topics)
            self._fields[spec] = (topic, path)
            self._samples.setdefault(spec, deque(maxlen=self.max_samples))

    def unwatch_field(self, spec: str) -> None:
        with self._lock:
            self._fields.pop(spec, None)
            self._samples.pop(spec, None)

    @property
    def fields(self) -> list[str]:
        return list(self._fields)

    # -- reading -----------------------------------------------------------------------
    def latest_body(self, topic: str) -> str | None:
        """The latest message's body on `topic` (its first LATEST_PREVIEW_CHARS), or None."""
        with self._lock:
            found = self._topics.get(topic)
            return None if found is None or not found.count else found.latest

    def traced(self) -> list[TraceEvent]:
        """The events kept (the last `max_events`), oldest first: what a saved test
        finds the inputs of what it saves in (mailbus.testing.codegen)."""
        with self._lock:
            return [event for event, *_ in self._events]

    def latest_call(self, service: str) -> tuple[str, str] | None:
        """(request, response) of the latest answered call to `service`, or None."""
        with self._lock:
            answered = [c for c in self._calls.values() if c.service == service and c.response_ns]
            if not answered:
                return None
            call = max(answered, key=lambda c: c.sent_ns)
            return call.request_body, call.response_body

    def snapshot(self, selected: str = "") -> dict[str, Any]:
        """Plain JSON for the widget: topics with counts and rates, the selected topic's
        latest message (body, headers, raw), the field and rate series (times relative
        to now in seconds, negative) and the newest calls."""
        now = self._clock()
        horizon = now - self.window_s
        # The rate's window is the one really watched: the sliding window once it is
        # full, else the time since the monitor started.
        span = min(self.window_s, now - self.started)
        with self._lock:
            topics = []
            rates: dict[str, list[list[float]]] = {}
            for name, topic in sorted(self._topics.items()):
                times = topic.times
                while times and times[0] < horizon:
                    times.popleft()
                rate = len(times) / span if span >= MIN_RATE_SPAN_S else None
                topics.append(
                    {"topic": name, "count": topic.count, "bytes": topic.bytes, "rate_hz": rate}
                )
                # Only the seconds watched: before the start there is no zero to draw.
                rates[name] = _per_second(times, now, max(1.0, span))
            latest = self._topics.get(selected)
            message = self._message_view(latest, now) if latest is not None else None
            series = {
                spec: [[round(t - now, 3), v] for t, v in samples if t >= horizon]
                for spec, samples in self._samples.items()
            }
            calls = [self._call_view(c) for c in list(self._calls.values())[-CALLS_SHOWN:]]
            calls.reverse()
            call_count = len(self._calls)
        return {
            "topics": topics,
            "selected": selected,
            "latest": latest.latest if latest is not None else "",
            "latest_age_s": round(now - latest.latest_at, 3) if latest is not None else None,
            "message": message,
            "fields": series,
            "rates": rates,
            "calls": calls,
            "call_count": call_count,
            "window_s": self.window_s,
            "watched_s": round(now - self.started, 3),
            "seen": self.seen,
            "ignored_topics": self.ignored_topics,
        }

    def _message_view(self, topic: _Topic, now: float) -> dict[str, Any]:
        redact = self._redactor
        headers = redact.headers(topic.latest_headers) if topic.latest_headers else []
        raw = topic.latest_raw
        return {
            "message_id": topic.latest_id,
            "sequence_number": topic.latest_sequence,
            "age_s": round(now - topic.latest_at, 3),
            "body": redact.text(topic.latest),
            "headers": [list(pair) for pair in headers],
            "raw": (
                redact.raw(raw[:RAW_PREVIEW_BYTES]).decode("utf-8", "replace")
                if raw is not None
                else None
            ),
            "raw_cut": raw is not None and len(raw) > RAW_PREVIEW_BYTES,
        }

    def _call_view(self, call: _Call) -> dict[str, Any]:
        answered = bool(call.response_ns)
        return {
            "service": call.service,
            "status": "answered" if answered else "pending",
            "latency_ms": (call.response_ns - call.sent_ns) / 1e6 if answered else None,
            "request_id": call.request_id,
            "response_id": call.response_id,
            "sequence_number": call.sequence_number,
            "request": self._redactor.text(call.request_body[:500]),
            "response": self._redactor.text(call.response_body[:500]) if answered else None,
        }

    def frame(self, topic: str | None = None, last: int | None = None) -> pl.DataFrame:
        """The kept events as a frame with a recording's columns (bodies capped at
        `body_cap`, secrets redacted); `topic` keeps one topic or service name, `last`
        the newest n rows."""
        with self._lock:
            rows = list(self._events)
        if topic is not None:
            rows = [row for row in rows if row[0].name == topic]
        if last is not None:
            if last < 0:
                raise ValueError("last must be >= 0")
            rows = rows[-last:] if last else []
        return events_frame(rows, self._redactor, start_index=0)

    def services(self) -> pl.DataFrame:
        """Calls seen, requests paired with responses through In-Reply-To: service,
        request_id, sequence_number, sent_ns, response_ns, rtt_ms, status (answered or
        pending) and the response body."""
        with self._lock:
            calls = list(self._calls.values())
        return pl.DataFrame(
            {
                "service": [c.service for c in calls],
                "request_id": [c.request_id for c in calls],
                "sequence_number": [c.sequence_number for c in calls],
                "sent_ns": [c.sent_ns for c in calls],
                "response_ns": [c.response_ns or None for c in calls],
                "rtt_ms": [
                    (c.response_ns - c.sent_ns) / 1e6 if c.response_ns else None for c in calls
                ],
                "status": ["answered" if c.response_ns else "pending" for c in calls],
                "response": [c.response_body if c.response_ns else None for c in calls],
            },
            schema={
                "service": pl.String,
                "request_id": pl.String,
                "sequence_number": pl.Int64,
                "sent_ns": pl.Int64,
                "response_ns": pl.Int64,
                "rtt_ms": pl.Float64,
                "status": pl.String,
                "response": pl.String,
            },
        )


def _per_second(times: deque[float], now: float, window_s: float) -> list[list[float]]:
    """Messages per one-second bin over the window: [[seconds before now, count], ...]."""
    bins = max(1, int(window_s))
    counts = [0] * bins
    for t in times:
        index = int(now - t)
        if 0 <= index < bins:
            counts[index] += 1
    return [[-float(i), float(c)] for i, c in reversed(list(enumerate(counts)))]


def events_frame(
    rows: Sequence[tuple[TraceEvent, bytes | None, int, bool]],
    redactor: Redactor,
    *,
    start_index: int = 0,
) -> pl.DataFrame:
    """Rows of (event, capped body, body size or -1, truncated) as a recording's columns."""
    numbered = [(start_index + i, *row) for i, row in enumerate(rows)]
    columns = event_columns(numbered, redactor)
    # Through the recording's Arrow schema, so dtypes match a session read from disk.
    frame = pl.from_arrow(pa.table(columns, schema=arrow_schema()))
    assert isinstance(frame, pl.DataFrame)
    return frame
