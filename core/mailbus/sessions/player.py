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

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from itertools import repeat
from typing import TYPE_CHECKING, Any

from mailbus import headers as H
from mailbus.email_message import (
    PLAIN_ID_CHARACTERS,
    PLAIN_ID_MAX,
    Email,
    new_message_id,
    plain_id,
    validate,
)
from mailbus.envelope import EnvelopeKind
from mailbus.errors import ContextError
from mailbus.extras import needs_extra
from mailbus.gid import new_gid
from mailbus.names import check_name
from mailbus.presence import TOPIC as PARTICIPANTS_TOPIC
from mailbus.sessions.index import RowGroup, SessionIndex, load_index
from mailbus.sessions.kinds import SessionKind
from mailbus.sessions.pages import RowGroupReader, time_ordered
from mailbus.sessions.reader import Session, open_session
from mailbus.sessions.replay_options import (
    check_offset,
    check_prefix,
    check_rate,
    compile_filter,
    offset_ns,
)
from mailbus.sessions.replay_rows import (
    LIGHT_COLUMNS,
    RECEIVED,
    SENT_KINDS,
    TIME,
    SeenIds,
    choose_copies,
    email_rows,
)
from mailbus.sessions.schema import REDACTED
from mailbus.trace import Kind
from mailbus.transport import EmailSender

with needs_extra("mailbus.sessions"):
    import polars as pl

if TYPE_CHECKING:
    from mailbus.context import Context

log = logging.getLogger(__name__)

REPLAY_OF = H.REPLAY_OF
DEFAULT_READ_AHEAD = 1_000  # emails read ahead of the sender (rosbag2's default queue)
DEFAULT_ID_MAP_SIZE = 100_000  # recorded -> replayed Message-IDs remembered for replies
DEFAULT_GID_MAP_SIZE = 10_000  # recorded -> replayed GIDs
INT64_MAX = 2**63 - 1
_SLICE_ROWS = 1_024  # emails turned into Python objects at a time
# After a start or seek: rows of the first frame whose copies are chosen before the rest
# of its row group, and emails of the first slice (what the first email waits for).
_FIRST_ROWS = 2_048
_FIRST_SLICE = 32
# The fields of ReplayEvent that come from a column of `_event_columns` as they are.
_PLAIN_FIELDS = (
    "offset_ns",
    "source_ns",
    "what",
    "name",
    "source_gid",
    "client_gid",
    "sequence_number",
    "message_id",
    "in_reply_to",
    "body_truncated",
)
_SEND_BATCH = 64  # emails due at once that the sender takes under one acquisition of the lock
_MESSAGE, _RESPONSE = EnvelopeKind.MESSAGE.value, EnvelopeKind.RESPONSE.value
_SOURCE_TIMESTAMP, _REPLAY_SOURCE_TIMESTAMP = H.SOURCE_TIMESTAMP, H.REPLAY_SOURCE_TIMESTAMP
_PUBLISHER_GID, _PUBLISHER_SEQUENCE_NUMBER = H.PUBLISHER_GID, H.PUBLISHER_SEQUENCE_NUMBER
_CLIENT_GID, _SERVER_GID = H.CLIENT_GID, H.SERVER_GID
_REQUEST_SEQUENCE_NUMBER = H.REQUEST_SEQUENCE_NUMBER
_KNOWN_GOOD_MAX = 4096  # subjects and header sets validated, remembered (then cleared)
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


@dataclass(slots=True, unsafe_hash=True)
class ReplayEvent:
    """One email to re-send, `offset_ns` after the first one of the session.

    Treat it as read-only (it is hashable by its fields). Not a frozen dataclass: the
    player builds one per email, and a frozen one cost 14 times as much to build, more
    than sending the email (docs/benchmarks.md, 2026-11-29, "replay ratio")."""

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
    # True when the reader found message_id, in_reply_to and references plain
    # (email_message.plain_id): the sender need not check them again.
    ids_checked: bool = field(default=False, compare=False, repr=False)


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


class _RecentMap(dict[str, str]):
    """Recorded -> replayed identifiers (Message-IDs, GIDs), remembering at least the
    last `capacity` set and at most twice as many: the dict holds the newer generation,
    `older` the one before it, dropped whole when the newer one is full. `m[key]` falls
    back to `older`, then to `key` itself (an identifier not replayed stays as
    recorded). A dict, so that lookups and sets stay in C: an OrderedDict forgetting its
    oldest key at every insertion cost the player a microsecond an email
    (docs/benchmarks.md, "replay ratio")."""

    __slots__ = ("capacity", "older")

    def __init__(self, capacity: int) -> None:
        super().__init__()
        self.capacity = capacity
        self.older: dict[str, str] = {}

    def __missing__(self, key: str) -> str:
        return self.older.get(key, key)

    def find(self, key: str) -> str | None:
        """The identifier `key` maps to, None if none."""
        found = self.get(key)
        return self.older.get(key) if found is None else found

    def remember(self, key: str, value: str) -> None:
        self[key] = value
        if len(self) >= self.capacity:
            self.rotate()

    def rotate(self) -> None:
        self.older = dict(self)
        super().clear()

    def clear(self) -> None:
        super().clear()
        self.older = {}


def plain_ids(column: pl.Expr) -> pl.Expr:
    """email_message.plain_id of each value of `column` (strings), in polars."""
    return (
        column.str.contains(f"^<[{PLAIN_ID_CHARACTERS}]+>$")
        & ~column.str.contains("=?", literal=True)
        & (column.str.len_bytes() <= PLAIN_ID_MAX)
    )


def _event_columns(chosen: pl.DataFrame, origin_ns: int) -> pl.DataFrame:
    """The chosen rows (see replay_rows.choose_copies) as ReplayEvent's fields, filled in
    by polars for a whole frame at once (`_events_of` turns slices of it into events)."""
    request = EnvelopeKind.REQUEST.value
    gid = pl.col("source_gid").fill_null("")
    raw = pl.col("raw") if "raw" in chosen.columns else pl.lit(None, dtype=pl.Binary)
    return chosen.select(
        (pl.col(TIME) - origin_ns).alias("offset_ns"),
        pl.col(TIME).alias("source_ns"),
        pl.col("what"),
        pl.col("name"),
        gid.alias("source_gid"),
        pl.when(pl.col("what") == request).then(gid).otherwise(pl.lit("")).alias("client_gid"),
        pl.col("sequence_number").fill_null(-1),
        pl.col("message_id"),
        pl.col("in_reply_to").fill_null(""),
        pl.col("body_truncated").fill_null(value=False),
        pl.col("body"),
        raw.alias("raw"),
        pl.col("references"),
        (pl.col("references").list.len() > 0).fill_null(value=False).alias("_has_references"),
        pl.col("headers"),
        pl.col("headers").is_not_null().alias("_has_headers"),
        (
            plain_ids(pl.col("message_id"))
            & (pl.col("in_reply_to").fill_null("").eq("") | plain_ids(pl.col("in_reply_to")))
            & pl.col("references")
            .list.eval(plain_ids(pl.element()).fill_null(False))  # a null item is no ID
            .list.all()
            .fill_null(True)
        )
        .fill_null(False)
        .alias("ids_checked"),
    )


def _sparse(columns: pl.DataFrame, name: str) -> Iterator[tuple[int, Any]]:
    """(row, value) of column `name` where `_has_<name>` holds: a column that few rows
    fill is turned into Python objects only in those rows."""
    has = columns.get_column(f"_has_{name}")
    if not has.any():
        return iter(())
    return zip(
        has.arg_true().to_list(), columns.get_column(name).filter(has).to_list(), strict=True
    )


def _events_of(columns: pl.DataFrame) -> list[ReplayEvent]:
    """The ReplayEvents of a slice of `_event_columns`. Python touches a row only where
    it must: its body's bytes, and the references and user headers of the rows that have
    them (row by row, building events cost more than sending them: docs/benchmarks.md,
    "replay ratio")."""
    height = columns.height
    if height == 0:
        return []
    plain = [columns.get_column(field) for field in _PLAIN_FIELDS]
    (offsets, times, whats, names, gids, client_gids, seqs, mids, replies, cuts) = (
        column.to_list() for column in plain
    )
    bodies = [
        body.decode("utf-8", "replace") if body else ""
        for body in columns.get_column("body").to_list()
    ]
    references: list[tuple[str, ...]] = [()] * height
    for row, refs in _sparse(columns, "references"):
        references[row] = tuple(refs)
    headers: list[tuple[tuple[str, str], ...]] = [()] * height
    client_header, engine = H.CLIENT_GID, _ENGINE_HEADERS
    for row, value in _sparse(columns, "headers"):
        recorded = _header_map(value)
        headers[row] = tuple(
            (k, v) for k, v in recorded.items() if k.lower() not in engine and v != REDACTED
        )
        client_gid = recorded.get(client_header, "")
        if client_gid:
            client_gids[row] = client_gid
    raws = columns.get_column("raw")
    return list(
        map(
            ReplayEvent,
            offsets,
            times,
            whats,
            names,
            gids,
            client_gids,
            seqs,
            mids,
            replies,
            references,
            headers,
            bodies,
            cuts,
            raws.to_list() if raws.null_count() < height else repeat(None),
            columns.get_column("ids_checked").to_list(),
        )
    )


# What the player reads of each email's rows (and `raw`, from the received copies).
_SEND_COLUMNS = (
    *LIGHT_COLUMNS,
    "source_gid",
    "sequence_number",
    "in_reply_to",
    "references",
    "headers",
    "body",
    "body_truncated",
    "raw",
)


class Player:
    """Re-sends a session's emails into `context` with the recorded timing, streaming.

    rate: speed factor (2.0 twice as fast). loop: start again at the end. start_s /
    stop_s: the window of the session to play, in seconds from its first email.
    include/exclude: regular expressions on topic and service names. remap: new names
    for topics or services. prefix: put before every (remapped) name, e.g. `replay/`.
    on_sent(player, event) is called after each email.

    A reader thread reads the session's row groups in time order (only those of the
    window and of the names replayed, and only the columns a replay needs) into a
    read-ahead buffer of at most `read_ahead` emails; the sending thread sends each on
    time. Memory holds that buffer, the row groups overlapping the time being read, and
    at least the last `id_map_size` Message-ID mappings, at most twice as many
    (docs/sessions.md, "Replay in bounded memory"). `index` is the session's index
    (loaded, or built once, when not given).
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
        read_ahead: int = DEFAULT_READ_AHEAD,
        id_map_size: int = DEFAULT_ID_MAP_SIZE,
        index: SessionIndex | None = None,
    ) -> None:
        rate = check_rate(rate)
        start_s = check_offset(start_s, "start_s")
        if stop_s is not None:
            stop_s = check_offset(stop_s, "stop_s")
            if stop_s < start_s:
                raise ValueError(f"need start_s <= stop_s, got {start_s} > {stop_s}")
        if read_ahead < 1 or id_map_size < 1:
            raise ValueError("read_ahead and id_map_size must be at least 1")
        include_re = compile_filter(include, "include")
        exclude_re = compile_filter(exclude, "exclude")
        self.remap = dict(remap or {})
        for old, new in self.remap.items():
            check_name(prefix + new, f"remapped name for {old!r}")
        self.prefix = check_prefix(prefix)
        self.context = context
        self.rate = rate
        self.loop = loop
        self.on_sent = on_sent
        self.read_ahead = read_ahead
        if not isinstance(session, Session):
            session = open_session(session)
        self.session = session
        self.index = index if index is not None else load_index(session)
        self.services = services
        self.names = frozenset(
            name
            for name, stats in self.index.names.items()
            if stats.email_count
            and name != PARTICIPANTS_TOPIC
            and (include_re is None or include_re.search(name))
            and not (exclude_re is not None and exclude_re.search(name))
            and (services or stats.emails.get(EnvelopeKind.MESSAGE.value, 0))
        )
        span = self.index.emails_range(self.names)
        self.origin_ns = span[0] if span else 0
        last = span[1] if span else 0
        # Times are int64 nanoseconds: a window reaching past that reaches the end.
        self._lo = min(self.origin_ns + offset_ns(start_s), INT64_MAX)
        self._hi = None if stop_s is None else min(self.origin_ns + offset_ns(stop_s), INT64_MAX)
        end = last if self._hi is None else min(last, self._hi)
        self._empty = span is None or self._lo > end
        self._last_offset = max(end - self.origin_ns, 0)
        kinds = pl.col("kind").is_in(list(SENT_KINDS)) | (
            (pl.col("kind") == RECEIVED) & pl.col("detail").is_not_null()
        )
        if not services:
            kinds = (pl.col("kind") == Kind.PUBLISHED.value) | (
                (pl.col("kind") == RECEIVED) & (pl.col("detail") == EnvelopeKind.MESSAGE.value)
            )
        self._where = (
            kinds & pl.col("message_id").is_not_null() & pl.col("name").is_in(list(self.names))
        )
        self._total: int | None = None
        self._events: list[ReplayEvent] | None = None
        self.sent = 0
        self.loops = 0
        self.truncated_bodies = 0
        self.errors = 0
        self.read_error: str | None = None
        self.read_ahead_high_water = 0
        self.reader = RowGroupReader(self.index)
        self._id_map = _RecentMap(id_map_size)
        self._gid_map = _RecentMap(DEFAULT_GID_MAP_SIZE)
        self._subjects: dict[str, str] = {}  # recorded name -> the name replayed
        # What _validated() found good (see _vouched).
        self._good_subjects: set[str] = set()
        self._good_headers: set[tuple[tuple[str, str], ...]] = set()
        self._good_address: str | None = None
        self._good_recipients: object = None
        self._cond = threading.Condition()
        self._buffer: deque[ReplayEvent] = deque()
        # Taken from the buffer by the sender, to send now (see _next_due): with the
        # buffer, what the player holds, and where the next email is.
        self._taken: deque[ReplayEvent] = deque()
        self._reader_waits = False  # for room in the buffer
        self._refill_at = read_ahead // 2
        self._generation = 0  # a pass or a seek starts a new stream
        self._stream_from = self._lo
        self._stream_done = True  # no stream asked for yet
        self._pending_anchor = True
        self._position_ns = offset_ns(start_s)
        self._pass_position = 0
        self._pass_sent = 0
        self._paused = False
        self._steps = 0
        self._stopped = False
        self._ended = False  # the sender is done: the reader ends
        self._anchor = 0.0  # monotonic time at which offset `_anchor_offset` is due
        self._anchor_offset = 0
        self._thread: threading.Thread | None = None
        self._reader_thread: threading.Thread | None = None
        self.done = threading.Event()

    # -- what is played ------------------------------------------------------------------
    def _in_names(self, group: RowGroup) -> bool:
        return group.names is None or not self.names.isdisjoint(group.names)

    def stream(
        self, start_ns: int, *, cancelled: Callable[[], bool] | None = None
    ) -> Iterator[ReplayEvent]:
        """The emails of the window from time `start_ns` on, in order, read lazily."""
        for batch in self._batches(start_ns, cancelled):
            yield from batch

    def _batches(
        self, start_ns: int, cancelled: Callable[[], bool] | None
    ) -> Iterator[list[ReplayEvent]]:
        """`stream` in slices of up to _SLICE_ROWS emails (the first one short: the first
        email is ready without converting a whole row group)."""
        if self._empty:
            return
        seen = SeenIds()
        frames = time_ordered(
            self.reader,
            max(start_ns, self._lo),
            self._hi,
            _SEND_COLUMNS,
            self._where,
            groups=self._in_names,
            cancelled=cancelled,
            first_rows=_FIRST_ROWS,
        )
        first = True
        for frame in frames:
            if cancelled is not None and cancelled():  # a seek: the rest is not wanted
                return
            columns = _event_columns(
                choose_copies(email_rows(frame), seen, cut_between_times=True), self.origin_ns
            )
            start = 0
            while start < columns.height:
                size = _FIRST_SLICE if first else _SLICE_ROWS
                first = False
                yield _events_of(columns.slice(start, size))
                start += size

    @property
    def events(self) -> list[ReplayEvent]:
        """Every email of the window, read into memory once (then kept): for small
        sessions and tests. A large session streams: use `total` and `duration_s`."""
        if self._events is None:
            self._events = list(self.stream(self._lo))
        return self._events

    @property
    def total(self) -> int:
        """Emails of the window (of one pass): from the index for the whole session,
        else counted once from the light columns of the window's row groups."""
        if self._total is None:
            self._total = self._count()
        return self._total

    def _count(self) -> int:
        if self._empty:
            return 0
        if self._lo <= self.origin_ns and self._hi is None:
            return self.index.emails(self.names, services=self.services)
        seen = SeenIds()
        frames = time_ordered(
            RowGroupReader(self.index),
            self._lo,
            self._hi,
            LIGHT_COLUMNS,
            self._where,
            groups=self._in_names,
        )
        return sum(
            choose_copies(email_rows(frame), seen, cut_between_times=True).height
            for frame in frames
        )

    @property
    def buffered(self) -> int:
        """Emails read ahead and waiting to be sent: after a seek, more than 0 once the
        email at the new position is read (the seek has landed)."""
        with self._cond:
            return len(self._buffer) + len(self._taken)

    def wait_landed(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds for the last seek (or start) to land: its first
        email read, or nothing left to read there. True if it landed. (The workbench
        reads its event list once the player has landed, not against it.)"""
        with self._cond:
            return self._cond.wait_for(
                lambda: (
                    bool(self._buffer or self._taken)
                    or self._stream_done
                    or self._stopped
                    or self._ended
                ),
                timeout,
            )

    @property
    def duration_s(self) -> float:
        """Offset of the last email of the window (0.0 for none)."""
        return 0.0 if self._empty else self._last_offset / 1e9

    @property
    def pass_position(self) -> int:
        """Emails of the current pass sent or skipped over so far (0 to `total`); after a
        seek, the emails skipped are estimated from the index's histograms."""
        with self._cond:
            return self._pass_position

    # -- control -------------------------------------------------------------------------
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
            taken = self._taken
            if taken:
                try:
                    return taken[0].offset_ns / 1e9
                except IndexError:  # the sender took it meanwhile (it takes without the lock)
                    pass
            if self._buffer:
                return self._buffer[0].offset_ns / 1e9
            return min(self._position_ns, self._last_offset) / 1e9

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
                self._pending_anchor = True
            self._cond.notify_all()

    def step(self) -> None:
        """While paused: send the next email now."""
        with self._cond:
            self._steps += 1
            self._cond.notify_all()

    def seek(self, offset_s: float) -> None:
        """Continue from the first email at or after `offset_s` seconds (a finite number
        >= 0, else ValueError; past the end: the end). Reading restarts at the row group
        holding that time."""
        target = offset_ns(check_offset(offset_s, "seek offset"))
        with self._cond:
            self._position_ns = target
            self._pass_position = self._emails_before(self.origin_ns + target)
            self._restart(min(self.origin_ns + target, INT64_MAX))

    def _emails_before(self, t_ns: int) -> int:
        """Emails of the window before time `t_ns`, from the index's histograms (whole
        bins: an estimate within one bin): the bins ending by `t_ns` and starting no
        more than one bin before the window, from running totals (a seek on the
        caller's thread costs a few look-ups per name, not a pass over the bins)."""
        width = self.index.width_ns
        last_bin = t_ns // width - 1
        first_bin = -((width - self._lo) // width)  # ceil((lo - width) / width)
        count = self.index.emails_between(self.names, first_bin, last_bin)
        return min(count, self._total) if self._total is not None else count

    def stop(self, timeout: float = 5.0) -> None:
        with self._cond:
            self._stopped = True
            self._generation += 1
            self._cond.notify_all()
        for thread in (self._thread, self._reader_thread):
            if thread is not None and thread is not threading.current_thread():
                thread.join(timeout)
        self.done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the replay ends (not with loop); True if it did."""
        return self.done.wait(timeout)

    def run(self) -> None:
        """Play in the calling thread until the end (or stop())."""
        self._thread = threading.current_thread()
        self._run()

    # -- the reader ----------------------------------------------------------------------
    def _restart(self, start_ns: int) -> None:
        """(Holding the lock.) A new stream from time `start_ns`: the buffer is emptied
        and the reader starts over there."""
        self._generation += 1
        self._buffer.clear()
        self._taken.clear()
        self._stream_from = start_ns
        self._stream_done = False
        self._pending_anchor = True
        if self._reader_thread is None:
            self._reader_thread = threading.Thread(
                target=self._read, name="mailbus-player-reader", daemon=True
            )
            self._reader_thread.start()
        self._cond.notify_all()

    def _read(self) -> None:
        generation = -1
        while True:
            with self._cond:
                while self._generation == generation and not (self._stopped or self._ended):
                    self._cond.wait()
                if self._stopped or self._ended:
                    return
                generation, start = self._generation, self._stream_from
            try:
                self._fill(generation, start)
            except Exception as exc:  # a part that became unreadable: end, and say why
                log.warning("replay: reading the session failed: %s", exc)
                with self._cond:
                    self.read_error = str(exc)
                    self._stopped_reading(generation)
                continue
            with self._cond:
                self._stopped_reading(generation)

    def _stopped_reading(self, generation: int) -> None:
        if generation == self._generation:
            self._stream_done = True
            self._cond.notify_all()

    def _fill(self, generation: int, start: int) -> None:
        def cancelled() -> bool:
            return self._generation != generation or self._stopped or self._ended

        # A slice at a time, as much of it as there is room for, under one acquisition
        # of the lock and one notification (per email, the two threads spent more time
        # handing over than sending).
        buffer, taken, limit = self._buffer, self._taken, self.read_ahead
        for batch in self._batches(start, cancelled):
            moved = 0
            while moved < len(batch):
                with self._cond:
                    while len(buffer) + len(taken) >= limit and not cancelled():
                        self._reader_waits = True
                        self._cond.wait()
                    self._reader_waits = False
                    if cancelled():
                        return
                    room = limit - len(buffer) - len(taken)
                    whole = not moved and room >= len(batch)
                    buffer.extend(batch if whole else batch[moved : moved + room])
                    moved += room
                    held = len(buffer) + len(taken)
                    if held > self.read_ahead_high_water:
                        self.read_ahead_high_water = held
                    self._cond.notify_all()

    # -- the sender ----------------------------------------------------------------------
    def _reanchor(self, offset: int) -> None:
        self._anchor = time.monotonic()
        self._anchor_offset = offset
        self._pending_anchor = False

    def _run(self) -> None:
        try:
            with self._cond:
                if self._reader_thread is None:  # else a seek before start() chose
                    self._restart(self._lo)
            while (generation := self._next_due()) is not None:
                self._send_taken(generation)
        finally:
            with self._cond:
                self._ended = True  # the reader ends too
                self._generation += 1
                self._cond.notify_all()
            self.done.set()

    def _put_back(self, event: ReplayEvent, generation: int) -> None:
        """Return `event` and the rest of its batch, not sent, to the buffer's front (not
        after a seek: they are not wanted)."""
        with self._cond:
            back = [event, *self._taken]
            self._taken.clear()
            if generation == self._generation:
                self._buffer.extendleft(reversed(back))
                self._pass_position -= len(back)
                self._pass_sent -= len(back)

    def _next_due(self) -> int | None:
        """Wait until the next email is due (or stepped to), and move it into `_taken`
        with the emails after it that are due too (up to _SEND_BATCH; one while
        paused): the sender sends them without taking the lock for each. Returns the
        stream's generation, None at the end."""
        with self._cond:
            while True:
                # The reader waits for room only when the buffer is full (`_taken` is
                # empty here): wake it once half is free, not for every email taken.
                if self._reader_waits and len(self._buffer) <= self._refill_at:
                    self._cond.notify_all()
                if self._stopped:
                    return None
                if not self._buffer:
                    if not self._stream_done:
                        self._cond.wait()  # the reader is behind
                        continue
                    if not self.loop or self._pass_sent == 0 or self.read_error:
                        return None
                    self.loops += 1
                    self._pass_sent = 0
                    self._pass_position = 0
                    self._position_ns = self._lo - self.origin_ns
                    self._id_map.clear()  # a new pass is new traffic
                    self._restart(self._lo)
                    continue
                head = self._buffer[0]
                if self._pending_anchor:
                    self._reanchor(head.offset_ns)
                if self._paused:
                    if self._steps:
                        self._steps -= 1
                        break
                    self._cond.wait()
                    continue
                due = self._anchor + (head.offset_ns - self._anchor_offset) / (1e9 * self.rate)
                delay = due - time.monotonic()
                if delay <= 0:
                    break
                self._cond.wait(min(delay, threading.TIMEOUT_MAX))  # a slow rate: huge delays
            buffer = self._buffer
            count = 1
            if self._paused:  # stepping keeps the schedule anchored on the next email
                self._pending_anchor = True
            else:
                most = min(len(buffer), _SEND_BATCH)
                if count < most:
                    now = self._anchor_offset + (time.monotonic() - self._anchor) * 1e9 * self.rate
                    while count < most and buffer[count].offset_ns <= now:
                        count += 1
            popleft = buffer.popleft
            self._taken.extend([popleft() for _ in range(count)])
            self._position_ns = self._taken[-1].offset_ns
            self._pass_position += count
            self._pass_sent += count
            return self._generation

    def _gid(self, gid: str) -> str:
        if not gid:
            return new_gid()
        mapped = self._gid_map.find(gid)
        if mapped is None:
            mapped = new_gid()
            self._gid_map.remember(gid, mapped)
        return mapped

    def _subject(self, name: str) -> str:
        subject = self._subjects.get(name)
        if subject is None:
            subject = self._subjects[name] = self.prefix + self.remap.get(name, name)
        return subject

    def build_email(self, event: ReplayEvent) -> Email:
        """The email that replays `event` (a new Message-ID, references remapped)."""
        ctx = self.context
        gid_map = self._gid_map
        if event.what == _MESSAGE:
            gid = event.source_gid
            publisher = (gid_map.get(gid) if gid else None) or self._gid(gid)
            if event.sequence_number >= 0:
                engine = {
                    _SOURCE_TIMESTAMP: str(time.time_ns()),
                    _PUBLISHER_GID: publisher,
                    _PUBLISHER_SEQUENCE_NUMBER: str(event.sequence_number),
                    REPLAY_OF: event.message_id,
                    _REPLAY_SOURCE_TIMESTAMP: str(event.source_ns),
                }
            else:
                engine = {
                    _SOURCE_TIMESTAMP: str(time.time_ns()),
                    _PUBLISHER_GID: publisher,
                    REPLAY_OF: event.message_id,
                    _REPLAY_SOURCE_TIMESTAMP: str(event.source_ns),
                }
        else:
            engine = {
                _SOURCE_TIMESTAMP: str(time.time_ns()),
                _CLIENT_GID: self._gid(event.client_gid),
                _REQUEST_SEQUENCE_NUMBER: str(max(event.sequence_number, 0)),
            }
            if event.what == _RESPONSE:
                engine[_SERVER_GID] = self._gid(event.source_gid)
            engine[REPLAY_OF] = event.message_id
            engine[_REPLAY_SOURCE_TIMESTAMP] = str(event.source_ns)
        if event.headers:  # the recorded user headers first, as the engine writes them
            headers = dict(event.headers)
            headers.update(engine)
        else:
            headers = engine
        id_map = self._id_map
        message_id = new_message_id(ctx.address)
        id_map[event.message_id] = message_id  # remember(), inlined
        if len(id_map) >= id_map.capacity:
            id_map.rotate()
        reply = event.in_reply_to
        recipients = ctx.recipients
        return Email(
            self._subjects.get(event.name) or self._subject(event.name),
            event.body,
            ctx.address,
            recipients.to,
            recipients.cc,
            recipients.bcc,
            headers,
            message_id,
            id_map[reply] if reply else "",
            tuple([id_map[r] for r in event.references]) if event.references else (),
        )

    def _vouched(self, email: Email, event: ReplayEvent) -> bool:
        """True if `email` (built by build_email from `event`) passes validation without
        running it: every part of it that did not come from the recording the player
        made itself (GIDs, numbers, Message-IDs, engine header names), the subject, the
        addresses and the recorded user headers were validated in full on an earlier
        email (`_validated`), and the recorded Message-IDs are checked for each email:
        by the reader, in polars (`ids_checked`), else here. Anything else is validated
        in full."""
        ctx = self.context
        references = email.references
        return (
            email.subject in self._good_subjects
            and ctx.address is self._good_address
            and ctx.recipients is self._good_recipients
            and (not event.headers or event.headers in self._good_headers)
            and (
                event.ids_checked
                or (
                    plain_id(event.message_id)
                    and (not email.in_reply_to or plain_id(email.in_reply_to))
                    and (not references or all(map(plain_id, references)))
                )
            )
        )

    def _validated(self, email: Email, event: ReplayEvent) -> None:
        """Validate `email` in full (InvalidNameError), and remember what passed."""
        validate(email)
        good = (self._good_subjects, self._good_headers)
        if any(len(known) >= _KNOWN_GOOD_MAX for known in good):
            for known in good:
                known.clear()
        self._good_subjects.add(email.subject)
        if event.headers:
            self._good_headers.add(event.headers)
        self._good_address = self.context.address
        self._good_recipients = self.context.recipients

    def _send_taken(self, generation: int) -> None:
        """Send the emails `_next_due` took (at most _SEND_BATCH). Between two of them a
        pause, seek or stop takes effect as it did between emails taken one by one."""
        taken, ctx = self._taken, self.context
        try:
            sender: EmailSender | None = ctx.sender  # once a batch: it was a lookup an email
        except ContextError:  # closed: _send says so for each email
            sender = None
        # EmailSender.send is validate() then deliver(): the player vouches for its own.
        vouches = sender is not None and type(sender).send is EmailSender.send
        first = True
        while taken:
            try:
                event = taken.popleft()
            except IndexError:  # a seek emptied it meanwhile
                break
            if not first and (self._paused or self._stopped or self._generation != generation):
                self._put_back(event, generation)
                break
            first = False
            email = self._send(event, sender, vouches=vouches)
            if email is not None and (ctx.tracer.active or self.on_sent is not None):
                self._report(event, email)

    def _failed(self, event: ReplayEvent, exc: Exception) -> None:
        self.errors += 1
        log.warning("replay of %s failed: %s", event.message_id, exc)
        tracer = self.context.tracer
        if tracer.active:
            tracer.event(SessionKind.REPLAY_ERROR, name=event.name, detail=str(exc))

    def _send(
        self, event: ReplayEvent, sender: EmailSender | None, *, vouches: bool
    ) -> Email | None:
        """Send `event`'s email with `sender` (the context's at the start of the batch;
        None: it was closed), vouching for what the player built when `vouches`. The
        email, None if it failed (counted and logged)."""
        try:
            email = self.build_email(event)
            if sender is None:
                sender = self.context.sender  # raises ContextError while closed
            if vouches:
                if not self._vouched(email, event):
                    self._validated(email, event)
                sender.deliver(email)
            else:
                sender.send(email)
        except Exception as exc:  # a bad name, a closed or failing transport
            self._failed(event, exc)
            return None
        self.sent += 1
        if event.truncated:
            self.truncated_bodies += 1
        return email

    def _report(self, event: ReplayEvent, email: Email) -> None:
        """Tell the tracer and `on_sent` that `event` was replayed as `email`."""
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
