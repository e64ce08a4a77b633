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
from typing import Any

from mailbus.email_message import Email
from mailbus.event_kind import EventKind, Extra

log = logging.getLogger(__name__)


class Kind(EventKind):
    """Event kinds of the core engine (each area has its own: `mailbus.<area>.kinds`)."""

    PUBLISHED = (
        "message.published",
        "a publisher sent a message | name, gid, message_id, source_timestamp_ns, body, headers",
    )
    RECEIVED = (
        "email.received",
        "the engine received and opened an email | name, source_gid, message_id, "
        "in_reply_to, reception_timestamp_ns, body, raw (the bytes that arrived; None "
        "in-process), `detail` = message/request/response",
        {
            "from": Extra(str, "the sender"),
            "to": Extra(tuple[str, ...]),
            "cc": Extra(tuple[str, ...]),
            "signature": Extra(str, "the signature's status, when signing is configured"),
        },
    )
    DELIVERED = (
        "message.delivered",
        "a message or request was queued on a subscription or server | name, gid "
        "(subscription or server), source_gid, message_id, sequence_number",
    )
    TAKEN = (
        "message.taken",
        "a subscription's message was taken | name, gid (subscription), source_gid, message_id",
    )
    REQUEST_SENT = (
        "request.sent",
        "a client sent a request | name, gid, sequence_number, message_id, body",
    )
    REQUEST_TAKEN = (
        "request.taken",
        "a server took a request | name, gid (server), source_gid (client), sequence_number",
    )
    RESPONSE_SENT = (
        "response.sent",
        "a server answered | name, gid, sequence_number, message_id, in_reply_to",
    )
    RESPONSE_MATCHED = (
        "response.matched",
        "a client accepted a response | name, gid, sequence_number, in_reply_to, body",
    )
    OVERFLOWED = (
        "subscription.overflowed",
        "a full subscription dropped a message | name, gid, message_id (the dropped one), "
        "detail = policy",
    )
    DISCARDED = (
        "response.discarded",
        "a duplicate or unknown response was dropped | name, gid, sequence_number, in_reply_to",
    )
    SKIPPED = (
        "email.skipped",
        "a malformed, foreign or duplicate email was skipped, or one the signature rules "
        "refuse (`unsigned`, `bad_signature`, `replayed`, `replay_window_full`: "
        "[mail.md](mail.md#signed-mail)) "
        "| detail",
        {
            "origin": Extra(str, "where it came from (IMAP `uid:N`, a PostOffice letter...)"),
            "reason": Extra(str, "`malformed`, `foreign` or a signature refusal"),
            "from": Extra(str, "the sender, when the email could be read"),
        },
    )
    WAIT_STARTED = (
        "wait.started",
        "a wait set began to wait | name (the wait set)",
        {"timeout_s": Extra(float, "< 0: for ever, 0: only a look")},
    )
    WAIT_COMPLETE = (
        "wait.complete",
        "a wait returned ready entities | name, detail = the ready entities",
        {"timeout_s": Extra(float)},
    )
    WAIT_TIMED_OUT = (
        "wait.timed_out",
        "a wait returned empty | name",
        {"timeout_s": Extra(float)},
    )
    ERROR = (
        "error",
        "the receiver or a handler failed | detail",
        {"retry_in_s": Extra(float, "when receiving failed: the back-off before the next try")},
    )
    RECONNECTED = (
        "transport.reconnected",
        "receiving works again after `error`s with `retry_in_s` (the workbench badge) | detail",
    )
    ANNOUNCED = (
        "participant.announced",
        "the context sent its participant announcement (`announce-period-s`) | name "
        "(participant), gid (its participant GID), sequence_number, size, detail = "
        "alive/goodbye; a failed send is an `error`",
    )
    ANNOUNCEMENT_INVALID = (
        "participant.invalid",
        "a body on `_mailbus/participants` is not a readable announcement (made by the "
        "workbench's model, listed in its Log) | source_gid, message_id, detail = the "
        "sender and why",
        {"from": Extra(str, "the sender")},
    )


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

    def event(
        self,
        kind: str,
        *,
        name: str = "",
        gid: str = "",
        source_gid: str = "",
        sequence_number: int = -1,
        message_id: str = "",
        in_reply_to: str = "",
        references: tuple[str, ...] = (),
        source_timestamp_ns: int = 0,
        reception_timestamp_ns: int = 0,
        body: str | None = None,
        size: int = 0,
        headers: Mapping[str, str] = _EMPTY,
        detail: str = "",
        extra: Mapping[str, object] = _EMPTY,
        raw: bytes | None = None,
    ) -> None:
        """Build and emit an event; callers check `active` first on hot paths. The
        fields are TraceEvent's, spelled out so that a misspelt one fails at once (and
        under mypy), not only when a listener happens to be attached."""
        if self._listeners:
            self.emit(
                TraceEvent(
                    kind,
                    time.time_ns(),
                    name,
                    gid,
                    source_gid,
                    sequence_number,
                    message_id,
                    in_reply_to,
                    references,
                    source_timestamp_ns,
                    reception_timestamp_ns,
                    body,
                    size,
                    headers,
                    detail,
                    extra,
                    raw,
                )
            )


def trace_sent(
    tracer: Tracer,
    kind: Kind,
    email: Email,
    gid: str,
    sequence_number: int,
    source_timestamp_ns: int,
    references: tuple[str, ...] = (),
    in_reply_to: str = "",
) -> None:
    """The event of an email an entity sent (`message.published`, `request.sent`,
    `response.sent`): the entity is its own source. Callers check `active` first."""
    tracer.event(
        kind,
        name=email.subject,
        gid=gid,
        source_gid=gid,
        sequence_number=sequence_number,
        message_id=email.message_id,
        in_reply_to=in_reply_to,
        references=references,
        source_timestamp_ns=source_timestamp_ns,
        body=email.body,
        size=len(email.body),
        headers=email.headers,
    )
