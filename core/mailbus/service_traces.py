"""Service traces: each request paired with its response through In-Reply-To, in
either order of arrival (mail may deliver the response first). The one pairing of the
workbench's Services view and `mailbus service echo`.

Built from the `email.received` events an observer sees, so it works for the demo and
for a real system alike. Latency is measured between the two receptions (one clock).
A response the client discarded (`response.discarded`: it had given up waiting) makes
its call "late", as the analysis of a recording says (docs/sessions.md); the observer
sees that event only for clients in its own process or recording."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from enum import StrEnum

from mailbus import headers as H
from mailbus.trace import Kind, TraceEvent

DEFAULT_MAX_TRACES = 5_000
DEFAULT_TIMEOUT_S = 2.0
DISCARDED = Kind.DISCARDED.value
MAX_EARLY_DISCARDS = 1_000  # discards seen before their request, kept to pair later


class TraceStatus(StrEnum):
    ANSWERED = "answered"
    LATE = "late"  # answered after the client gave up
    PENDING = "pending"
    TIMED_OUT = "timed out"
    ORPHANED = "orphaned"
    DUPLICATE = "duplicate"


def _seen_s(event: TraceEvent) -> float:
    return (event.reception_timestamp_ns or event.time_ns) / 1e9


@dataclass(slots=True)
class Trace:
    """One request and what answered it. Orphans have no request; a duplicate response
    gets its own trace that points at the request it repeats."""

    key: str
    service: str
    client_gid: str
    sequence: int
    request: TraceEvent | None = None
    response: TraceEvent | None = None
    duplicate: bool = False
    duplicates: int = 0  # further responses seen for this request
    server_gid: str = field(default="")
    late: bool = False  # the client discarded the response

    @property
    def started_s(self) -> float:
        first = self.request or self.response
        assert first is not None
        return _seen_s(first)

    @property
    def latency_s(self) -> float | None:
        if self.request is None or self.response is None:
            return None
        return max(0.0, _seen_s(self.response) - _seen_s(self.request))

    def status(self, now: float, timeout_s: float) -> TraceStatus:
        if self.duplicate:
            return TraceStatus.DUPLICATE
        if self.request is None:
            return TraceStatus.ORPHANED
        if self.response is not None:
            return TraceStatus.LATE if self.late else TraceStatus.ANSWERED
        if now - _seen_s(self.request) >= timeout_s:
            return TraceStatus.TIMED_OUT
        return TraceStatus.PENDING


class ServiceTraces:
    """The last `max_traces` traces, oldest first; lookups by request Message-ID."""

    def __init__(
        self, max_traces: int = DEFAULT_MAX_TRACES, timeout_s: float = DEFAULT_TIMEOUT_S
    ) -> None:
        if max_traces < 1:
            raise ValueError("max_traces must be at least 1")
        if timeout_s <= 0:
            raise ValueError("timeout must be positive")
        self.max_traces = max_traces
        self.timeout_s = timeout_s
        self._traces: OrderedDict[str, Trace] = OrderedDict()
        self._orphans: dict[str, str] = {}  # request Message-ID -> key of its orphan
        # Request Message-IDs whose response the client discarded before we saw the call.
        self._discarded: OrderedDict[str, None] = OrderedDict()
        self.version = 0
        self.requests = 0
        self.responses = 0

    def add(self, event: TraceEvent) -> None:
        """Fold one received request or response, or a client's discard, in (other
        events are ignored)."""
        if event.kind == DISCARDED:
            self._discard(event.in_reply_to)
            return
        if event.detail == "request":
            self.requests += 1
            key = event.message_id or f"request:{event.source_gid}:{event.sequence_number}"
            if key in self._traces:  # redelivered request: keep the first sighting
                return
            paired = Trace(key, event.name, event.source_gid, event.sequence_number, request=event)
            if key in self._discarded:  # the client gave up before we saw its request
                del self._discarded[key]
                paired.late = True
            # Mail reorders: the response may have come first and be waiting as an orphan.
            orphan = self._traces.pop(self._orphans.pop(key, ""), None)
            if orphan is not None:
                paired.response, paired.server_gid = orphan.response, orphan.server_gid
                self._answered(paired)
            self._put(paired)
        elif event.detail == "response":
            self.responses += 1
            server = event.headers.get(H.SERVER_GID, "")
            client = event.headers.get(H.CLIENT_GID, "")
            trace = self._traces.get(event.in_reply_to) if event.in_reply_to else None
            if trace is not None and trace.request is not None and not trace.duplicate:
                if trace.response is None:
                    trace.response = event
                    trace.server_gid = server
                    self._answered(trace)
                    self.version += 1
                    return
                trace.duplicates += 1
                self._put(
                    Trace(
                        f"dup:{event.message_id}:{trace.duplicates}",
                        event.name,
                        trace.client_gid,
                        event.sequence_number,
                        request=trace.request,
                        response=event,
                        duplicate=True,
                        server_gid=server,
                    )
                )
                return
            orphan = Trace(
                f"orphan:{event.message_id}",
                event.name,
                client,
                event.sequence_number,
                response=event,
                server_gid=server,
            )
            if event.in_reply_to and event.in_reply_to not in self._orphans:
                self._orphans[event.in_reply_to] = orphan.key
            self._put(orphan)

    def _answered(self, trace: Trace) -> None:
        """Called once per call when its request and response are both in: a hook for
        what keeps figures on answered calls."""

    def _discard(self, request_id: str | None) -> None:
        if not request_id:
            return
        trace = self._traces.get(request_id)
        if trace is not None:
            if not trace.late:
                trace.late = True
                self.version += 1
            return
        self._discarded[request_id] = None
        while len(self._discarded) > MAX_EARLY_DISCARDS:
            self._discarded.popitem(last=False)

    def _put(self, trace: Trace) -> None:
        self._traces[trace.key] = trace
        while len(self._traces) > self.max_traces:
            _, gone = self._traces.popitem(last=False)
            if gone.request is None and gone.response is not None:
                self._orphans.pop(gone.response.in_reply_to or "", None)
        self.version += 1

    def traces(self, service: str | None = None) -> list[Trace]:
        items = list(self._traces.values())
        if service:
            items = [t for t in items if t.service == service]
        return items

    def get(self, key: str) -> Trace | None:
        return self._traces.get(key)

    def services(self) -> list[str]:
        return sorted({t.service for t in self._traces.values()})

    def counts(self, now: float) -> dict[TraceStatus, int]:
        out = dict.fromkeys(TraceStatus, 0)
        for trace in self._traces.values():
            out[trace.status(now, self.timeout_s)] += 1
        return out

    def clear(self) -> None:
        self._traces.clear()
        self._orphans.clear()
        self._discarded.clear()
        self.version += 1

    def __len__(self) -> int:
        return len(self._traces)
