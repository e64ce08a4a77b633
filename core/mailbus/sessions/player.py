"""Replay a session into a live system, and mock a service with recorded responses.

The player re-sends what was sent in the recording (messages, requests, responses),
spaced by their recorded source timestamps divided by `rate`. Each replayed email gets a
new Message-ID; In-Reply-To and References are rewritten through the same mapping, so
replayed request/response threads stay linked. Sender GIDs are replaced by fresh ones,
one per recorded GID, so that replayed traffic never poses as a live entity. Emails go
through `context.sender.send` with headers built as the engine builds them (see
mailbus.envelope), plus `Replay-Of` naming the recorded Message-ID and
`Replay-Source-Timestamp` carrying the recorded Source-Timestamp (`Source-Timestamp` is
the time of the replay). With `prefix` every name is replayed under it (`replay/`), so
replayed and live traffic of the same name never mix.

Control (for the workbench): start, pause, resume, step (one event while paused),
seek (to an offset in seconds), stop, and `state`/`position_s`/`sent` to display.
"""

from __future__ import annotations

import bisect
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from mailbus import headers as H
from mailbus.email_message import Email, new_message_id
from mailbus.envelope import EnvelopeKind
from mailbus.extras import needs_extra
from mailbus.gid import new_gid
from mailbus.names import check_name
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.sessions.kinds import SessionKind
from mailbus.sessions.reader import Session, open_session
from mailbus.sessions.replay_options import (
    check_offset,
    check_prefix,
    check_rate,
    compile_filter,
    offset_ns,
)
from mailbus.sessions.schema import REDACTED
from mailbus.trace import Kind

with needs_extra("mailbus.sessions"):
    import polars as pl

if TYPE_CHECKING:
    from mailbus.context import Context

log = logging.getLogger(__name__)

REPLAY_OF = H.REPLAY_OF
SENT_KINDS = {
    Kind.PUBLISHED: EnvelopeKind.MESSAGE.value,
    Kind.REQUEST_SENT: EnvelopeKind.REQUEST.value,
    Kind.RESPONSE_SENT: EnvelopeKind.RESPONSE.value,
}
_ENGINE_HEADERS = {
    h.lower()
    for h in (
        H.SOURCE_TIMESTAMP,
        H.PUBLISHER_GID,
        H.CLIENT_GID,
        H.SERVER_GID,
        H.REQUEST_SEQUENCE_NUMBER,
        H.PUBLISHER_SEQUENCE_NUMBER,
        REPLAY_OF,
        H.REPLAY_SOURCE_TIMESTAMP,
    )
}


class PlayerState(StrEnum):
    READY = "ready"
    PLAYING = "playing"
    PAUSED = "paused"
    FINISHED = "finished"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class ReplayEvent:
    """One email to re-send, `offset_ns` after the first one of the session."""

    offset_ns: int
    source_ns: int  # the recorded Source-Timestamp (the reception time if none was sent)
    what: str  # an EnvelopeKind's value
    name: str
    source_gid: str
    client_gid: str  # requests and responses: the client's GID
    sequence_number: int
    message_id: str
    in_reply_to: str
    references: tuple[str, ...]
    headers: tuple[tuple[str, str], ...]  # user headers only, engine headers rebuilt
    body: str
    truncated: bool
    # The bytes the email arrived with, when the session recorded them (its raw column).
    raw: bytes | None = None


def _header_map(value: object) -> dict[str, str]:
    if not value:
        return {}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items()}
    return {str(item["key"]): str(item["value"]) for item in value}  # type: ignore[attr-defined]


def replay_events(
    session: Session | str,
    *,
    include: str | None = None,
    exclude: str | None = None,
    services: bool = True,
) -> list[ReplayEvent]:
    """What a replay sends, in order: each email once, taken from the sender's event
    (message.published, request.sent, response.sent) or, when only the receiving side
    was recorded, from its email.received event. Participants' announcements are not
    replayed: they speak for the recorded processes, which are gone, and a viewer would
    list them as alive."""
    include_re = compile_filter(include, "include")
    exclude_re = compile_filter(exclude, "exclude")
    if not isinstance(session, Session):
        session = open_session(session)
    frame = (
        session.scan(with_session=False)
        .filter(
            pl.col("kind").is_in(list(SENT_KINDS))
            | ((pl.col("kind") == Kind.RECEIVED.value) & pl.col("detail").is_not_null())
        )
        .filter(pl.col("message_id").is_not_null() & pl.col("name").is_not_null())
        .with_columns(
            pl.col("kind").replace_strict(SENT_KINDS, default=pl.col("detail")).alias("what"),
            (pl.col("kind") == Kind.RECEIVED.value).alias("_received"),
            pl.coalesce("source_ns", "recorded_ns").alias("_t"),
        )
        .filter(pl.col("what").is_in([kind.value for kind in EnvelopeKind]))
        .sort("_received", "event_index")
        .unique("message_id", keep="first", maintain_order=True)
        .sort("_t", "event_index")
        .collect()
    )
    raws = _recorded_raw(session)
    events: list[ReplayEvent] = []
    start: int | None = None
    for row in frame.iter_rows(named=True):
        name = row["name"]
        if name == PARTICIPANTS_TOPIC:
            continue
        if include_re is not None and not include_re.search(name):
            continue
        if exclude_re is not None and exclude_re.search(name):
            continue
        what = row["what"]
        if what != EnvelopeKind.MESSAGE and not services:
            continue
        headers = _header_map(row["headers"])
        if start is None:
            start = row["_t"]
        client_gid = headers.get(H.CLIENT_GID, "")
        if what == EnvelopeKind.REQUEST and not client_gid:
            client_gid = row["source_gid"] or ""
        body = bytes(row["body"] or b"").decode("utf-8", "replace")
        events.append(
            ReplayEvent(
                offset_ns=row["_t"] - start,
                source_ns=row["_t"],
                what=what,
                name=name,
                source_gid=row["source_gid"] or "",
                client_gid=client_gid,
                sequence_number=row["sequence_number"]
                if row["sequence_number"] is not None
                else -1,
                message_id=row["message_id"],
                in_reply_to=row["in_reply_to"] or "",
                references=tuple(row["references"] or ()),
                headers=tuple(
                    (k, v)
                    for k, v in headers.items()
                    if k.lower() not in _ENGINE_HEADERS and v != REDACTED
                ),
                body=body,
                truncated=bool(row["body_truncated"]),
                raw=raws.get(row["message_id"]),
            )
        )
    return events


def _recorded_raw(session: Session) -> dict[str, bytes]:
    """Message-ID -> the raw bytes a received email was recorded with (the sender's
    event, which a replay prefers, has none)."""
    frame = (
        session.scan(with_session=False)
        .filter(
            (pl.col("kind") == Kind.RECEIVED.value)
            & pl.col("raw").is_not_null()
            & pl.col("message_id").is_not_null()
        )
        .select("message_id", "raw")
        .unique("message_id", keep="first")
        .collect()
    )
    return {row[0]: bytes(row[1]) for row in frame.iter_rows()}


class Player:
    """Re-sends a session's emails into `context` with the recorded timing.

    rate: speed factor (2.0 twice as fast). loop: start again at the end. start_s /
    stop_s: the window of the session to play, in seconds from its first email.
    include/exclude: regular expressions on topic and service names. remap: new names
    for topics or services. prefix: put before every (remapped) name, e.g. `replay/`.
    on_sent(player, event) is called after each email.
    """

    def __init__(
        self,
        session: Session | str,
        context: Context,
        *,
        rate: float = 1.0,
        loop: bool = False,
        start_s: float = 0.0,
        stop_s: float | None = None,
        include: str | None = None,
        exclude: str | None = None,
        remap: Mapping[str, str] | None = None,
        prefix: str = "",
        services: bool = True,
        on_sent: Callable[[Player, ReplayEvent], None] | None = None,
    ) -> None:
        rate = check_rate(rate)
        start_s = check_offset(start_s, "start_s")
        if stop_s is not None:
            stop_s = check_offset(stop_s, "stop_s")
            if stop_s < start_s:
                raise ValueError(f"need start_s <= stop_s, got {start_s} > {stop_s}")
        self.remap = dict(remap or {})
        for old, new in self.remap.items():
            check_name(prefix + new, f"remapped name for {old!r}")
        self.prefix = check_prefix(prefix)
        self.context = context
        self.rate = rate
        self.loop = loop
        self.on_sent = on_sent
        events = replay_events(session, include=include, exclude=exclude, services=services)
        lo, hi = offset_ns(start_s), None if stop_s is None else offset_ns(stop_s)
        self.events = [e for e in events if e.offset_ns >= lo and (hi is None or e.offset_ns <= hi)]
        self._offsets = [e.offset_ns for e in self.events]
        self._window_start = lo
        self.sent = 0
        self.loops = 0
        self.truncated_bodies = 0
        self.errors = 0
        self._index = 0
        self._id_map: dict[str, str] = {}
        self._gid_map: dict[str, str] = {}
        self._cond = threading.Condition()
        self._paused = False
        self._steps = 0
        self._stopped = False
        self._anchor = 0.0  # monotonic time at which offset `_anchor_offset` is due
        self._anchor_offset = 0
        self._thread: threading.Thread | None = None
        self.done = threading.Event()

    @property
    def pass_position(self) -> int:
        """Emails of the current pass sent or skipped over so far (0 to `total`)."""
        with self._cond:
            return self._index

    # -- control -------------------------------------------------------------------------
    @property
    def total(self) -> int:
        return len(self.events)

    @property
    def state(self) -> PlayerState:
        if self.done.is_set():
            return PlayerState.STOPPED if self._stopped else PlayerState.FINISHED
        if self._thread is None:
            return PlayerState.READY
        return PlayerState.PAUSED if self._paused else PlayerState.PLAYING

    @property
    def position_s(self) -> float:
        """Offset in the session of the next email to send."""
        with self._cond:
            if self._index < len(self._offsets):
                return self._offsets[self._index] / 1e9
            return self._offsets[-1] / 1e9 if self._offsets else 0.0

    def start(self, *, paused: bool = False) -> Player:
        if self._thread is not None:
            raise RuntimeError("player already started")
        self._paused = paused
        self._thread = threading.Thread(target=self._run, name="mailbus-player", daemon=True)
        self._thread.start()
        return self

    def pause(self) -> None:
        with self._cond:
            self._paused = True
            self._cond.notify_all()

    def resume(self) -> None:
        with self._cond:
            if self._paused:
                self._paused = False
                self._reanchor()
            self._cond.notify_all()

    def step(self) -> None:
        """While paused: send the next email now."""
        with self._cond:
            self._steps += 1
            self._cond.notify_all()

    def seek(self, offset_s: float) -> None:
        """Continue from the first email at or after `offset_s` seconds (a finite number
        >= 0, else ValueError; past the end: the end)."""
        target = offset_ns(check_offset(offset_s, "seek offset"))
        with self._cond:
            self._index = bisect.bisect_left(self._offsets, target)
            self._reanchor()
            self._cond.notify_all()

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self.done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the replay ends (not with loop); True if it did."""
        return self.done.wait(timeout)

    def run(self) -> None:
        """Play in the calling thread until the end (or stop())."""
        self._thread = threading.current_thread()
        self._run()

    # -- the loop ------------------------------------------------------------------------
    def _reanchor(self) -> None:
        offset = self._offsets[self._index] if self._index < len(self._offsets) else 0
        self._anchor = time.monotonic()
        self._anchor_offset = offset

    def _run(self) -> None:
        try:
            with self._cond:
                self._reanchor()
            while True:
                event = self._next_due()
                if event is None:
                    break
                self._send(event)
        finally:
            self.done.set()

    def _next_due(self) -> ReplayEvent | None:
        """Wait until the next email is due (or stepped to); None at the end."""
        with self._cond:
            while True:
                if self._stopped:
                    return None
                if self._index >= len(self.events):
                    if not self.loop or not self.events:
                        return None
                    self.loops += 1
                    self._index = 0
                    self._id_map.clear()  # a new pass is new traffic
                    self._reanchor()
                if self._paused:
                    if self._steps:
                        self._steps -= 1
                        break
                    self._cond.wait()
                    continue
                due = self._anchor + (self._offsets[self._index] - self._anchor_offset) / (
                    1e9 * self.rate
                )
                delay = due - time.monotonic()
                if delay <= 0:
                    break
                self._cond.wait(min(delay, threading.TIMEOUT_MAX))  # a slow rate: huge delays
            event = self.events[self._index]
            self._index += 1
            if self._paused:  # stepping keeps the schedule anchored on the next email
                self._reanchor()
            return event

    def _gid(self, gid: str) -> str:
        if not gid:
            return new_gid()
        mapped = self._gid_map.get(gid)
        if mapped is None:
            mapped = self._gid_map[gid] = new_gid()
        return mapped

    def _new_id(self, old: str) -> str:
        new = new_message_id(self.context.address)
        self._id_map[old] = new
        return new

    def build_email(self, event: ReplayEvent) -> Email:
        """The email that replays `event` (a new Message-ID, references remapped)."""
        ctx = self.context
        headers: dict[str, str] = dict(event.headers)
        headers[H.SOURCE_TIMESTAMP] = str(time.time_ns())
        if event.what == EnvelopeKind.MESSAGE:
            headers[H.PUBLISHER_GID] = self._gid(event.source_gid)
            if event.sequence_number >= 0:
                headers[H.PUBLISHER_SEQUENCE_NUMBER] = str(event.sequence_number)
        else:
            headers[H.CLIENT_GID] = self._gid(event.client_gid)
            headers[H.REQUEST_SEQUENCE_NUMBER] = str(max(event.sequence_number, 0))
            if event.what == EnvelopeKind.RESPONSE:
                headers[H.SERVER_GID] = self._gid(event.source_gid)
        headers[REPLAY_OF] = event.message_id
        headers[H.REPLAY_SOURCE_TIMESTAMP] = str(event.source_ns)
        return Email(
            subject=self.prefix + self.remap.get(event.name, event.name),
            body=event.body,
            sender=ctx.address,
            to=ctx.recipients.to,
            cc=ctx.recipients.cc,
            bcc=ctx.recipients.bcc,
            headers=headers,
            message_id=self._new_id(event.message_id),
            in_reply_to=self._id_map.get(event.in_reply_to, event.in_reply_to),
            references=tuple(self._id_map.get(r, r) for r in event.references),
        )

    def _send(self, event: ReplayEvent) -> None:
        try:
            email = self.build_email(event)
            self.context.sender.send(email)
        except Exception as exc:  # a bad name, a closed or failing transport
            self.errors += 1
            log.warning("replay of %s failed: %s", event.message_id, exc)
            tracer = self.context.tracer
            if tracer.active:
                tracer.event(SessionKind.REPLAY_ERROR, name=event.name, detail=str(exc))
            return
        self.sent += 1
        if event.truncated:
            self.truncated_bodies += 1
        tracer = self.context.tracer
        if tracer.active:
            tracer.event(
                SessionKind.REPLAY_SENT,
                name=email.subject,
                message_id=email.message_id,
                in_reply_to=email.in_reply_to,
                references=email.references,
                source_timestamp_ns=int(email.headers[H.SOURCE_TIMESTAMP]),
                size=len(email.body),
                extra={"original": event.message_id, "offset_ns": event.offset_ns},
                raw=event.raw,  # what the original arrived with, when recorded
            )
        if self.on_sent is not None:
            self.on_sent(self, event)
