"""The bounded hand-over between engine threads and the UI.

The trace listener runs on engine threads at message rate; it only appends to a
deque (atomic under the GIL, no lock) and the UI drains it at its refresh rate. When
the UI falls behind by more than `capacity` events the oldest are dropped and counted,
so memory stays bounded and the loss is visible, never silent. Bodies beyond BODY_KEEP
characters are cut (the event's size still says how large the message was); the raw
bytes of a received email are kept whole up to RAW_KEEP bytes, or not at all (a cut
source is not what arrived; `extra["raw_size"]` then says how large it was)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace

from mailbus.sessions.kinds import SessionKind
from mailbus.stem.errors import ADDRESSING_ERROR, CELL_ERROR, NO_METHOD, UNDELIVERABLE
from mailbus.trace import Kind, TraceEvent

STEM_ERRORS = (ADDRESSING_ERROR, NO_METHOD, UNDELIVERABLE, CELL_ERROR)

# What the views need; everything else is ignored at the source.
WANTED = frozenset(
    {
        Kind.RECEIVED.value,
        Kind.RESPONSE_MATCHED.value,
        Kind.DISCARDED.value,
        Kind.SKIPPED.value,
        Kind.WAIT_STARTED.value,
        Kind.WAIT_COMPLETE.value,
        Kind.WAIT_TIMED_OUT.value,
        Kind.ERROR.value,
        *STEM_ERRORS,
        SessionKind.REPLAY_SENT.value,  # a replay's recorded bytes (model/recorded_raw.py)
    }
)

DEFAULT_CAPACITY = 200_000
# Characters of a body the workbench keeps: the feed and every topic's history hold
# events, so a flood of large messages must not hold them whole (the size stays true).
BODY_KEEP = 64 * 1024
# Bytes of a received email's raw source the workbench keeps: twice BODY_KEEP, so that
# an email whose body is kept whole (64 Ki ASCII characters, base64 or quoted-printable
# on the wire, plus the header block) keeps its exact bytes too.
RAW_KEEP = 2 * BODY_KEEP


class EventFeed:
    def __init__(self, capacity: int = DEFAULT_CAPACITY, wanted: frozenset[str] = WANTED):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._wanted = wanted
        self._events: deque[TraceEvent] = deque(maxlen=capacity)
        self.pushed = 0  # written by engine threads only (approximate under races)
        self.drained = 0

    def listener(self, event: TraceEvent) -> None:
        """The trace listener: cheap, never blocks, never raises."""
        if event.kind in self._wanted:
            body = event.body
            if body is not None and len(body) > BODY_KEEP:
                # A copy: the event is shared with other listeners (the recorder).
                cut = len(body) - BODY_KEEP
                event = replace(event, body=f"{body[:BODY_KEEP]}\n… {cut} more characters")
            raw = event.raw
            if raw is not None and len(raw) > RAW_KEEP:
                event = replace(event, raw=None, extra={**event.extra, "raw_size": len(raw)})
            self._events.append(event)
            self.pushed += 1

    def attach(
        self, add_listener: Callable[[Callable[[TraceEvent], None]], Callable[[], None]]
    ) -> Callable[[], None]:
        return add_listener(self.listener)

    def drain(self, limit: int | None = None) -> list[TraceEvent]:
        """Take up to `limit` events (all when None), oldest first."""
        events = self._events
        n = len(events) if limit is None else min(limit, len(events))
        popleft = events.popleft
        taken = [popleft() for _ in range(n)]
        self.drained += n
        return taken

    def __len__(self) -> int:
        return len(self._events)

    @property
    def dropped(self) -> int:
        """Events lost because the UI fell more than `capacity` behind."""
        return max(0, self.pushed - self.drained - len(self._events))
