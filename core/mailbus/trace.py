"""Trace events: what the engine does, for the recorder, the workbench and tests.

Listeners are plain callables registered on a Tracer. Emitting sites test
`tracer.active` before they build an event, so tracing costs one attribute read when
nobody listens. Event names follow `area.action` (see docs/trace-events.md).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

log = logging.getLogger(__name__)


class Kind(StrEnum):
    """Event names of the core engine. Other parts (outbox, postoffice, stem, broker)
    use their own `area.action` strings with the same TraceEvent."""

    PUBLISHED = "message.published"
    RECEIVED = "email.received"
    DELIVERED = "message.delivered"
    TAKEN = "message.taken"
    REQUEST_SENT = "request.sent"
    REQUEST_TAKEN = "request.taken"
    RESPONSE_SENT = "response.sent"
    RESPONSE_MATCHED = "response.matched"
    OVERFLOWED = "subscription.overflowed"
    DISCARDED = "response.discarded"
    SKIPPED = "email.skipped"
    WAIT_STARTED = "wait.started"
    WAIT_COMPLETE = "wait.complete"
    WAIT_TIMED_OUT = "wait.timed_out"
    ERROR = "error"
    RECONNECTED = "transport.reconnected"
    ANNOUNCED = "participant.announced"
    ANNOUNCEMENT_INVALID = "participant.invalid"


class _EmptyMapping(Mapping[str, Any]):
    """An immutable, hashable empty mapping: a default no event can change."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0

    def __repr__(self) -> str:
        return "{}"


_EMPTY: Mapping[str, Any] = _EmptyMapping()


@dataclass(slots=True)
class TraceEvent:
    """One thing that happened. Fields that do not apply stay at their defaults.

    Treat it as read-only: every listener gets the same object. (Not frozen because a
    frozen dataclass of this size costs several microseconds to build, on hot paths.)
    """

    kind: str
    time_ns: int
    name: str = ""  # topic or service
    gid: str = ""  # GID of the entity the event concerns
    source_gid: str = ""  # GID of the publisher, client or server that sent the email
    sequence_number: int = -1
    message_id: str = ""
    in_reply_to: str = ""
    references: tuple[str, ...] = ()
    source_timestamp_ns: int = 0
    reception_timestamp_ns: int = 0
    body: str | None = None
    size: int = 0
    headers: Mapping[str, str] = _EMPTY
    detail: str = ""
    extra: Mapping[str, object] = _EMPTY
    # email.received: the bytes the email arrived with (None on the in-process
    # transport, where nothing is serialised). Shared, not copied: do not keep it longer
    # than you must (the workbench keeps it under a bound, the recorder under raw_cap).
    raw: bytes | None = None


Listener = Callable[[TraceEvent], None]


class Tracer:
    """Fans events out to listeners; a listener that raises is logged and counted, never
    allowed to break the engine."""

    def __init__(self) -> None:
        self._listeners: tuple[Listener, ...] = ()
        self._lock = threading.Lock()
        self.active = False
        self.listener_errors = 0

    def add_listener(self, listener: Listener) -> Callable[[], None]:
        """Register `listener`; return a function that removes it again."""
        with self._lock:
            self._listeners = (*self._listeners, listener)
            self.active = True

        def remove() -> None:
            self.remove_listener(listener)

        return remove

    def remove_listener(self, listener: Listener) -> None:
        with self._lock:
            self._listeners = tuple(x for x in self._listeners if x is not listener)
            self.active = bool(self._listeners)

    def emit(self, event: TraceEvent) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                self.listener_errors += 1
                log.exception("trace listener %r failed on %s", listener, event.kind)

    def event(self, kind: str, **fields: object) -> None:
        """Build and emit an event; callers check `active` first on hot paths."""
        if self._listeners:
            self.emit(TraceEvent(kind, time.time_ns(), **fields))  # type: ignore[arg-type]
