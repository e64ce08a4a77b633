"""Which rows of a session are the emails a replay sends, and which copy of each.

An email may be recorded more than once: by its sender (message.published,
request.sent, response.sent) and by each receiver (email.received, whose `detail` says
what it carried). A replay sends each Message-ID once, from the sender's event when it
was recorded, else from the first received copy. Rows are taken on a time axis
`_t = coalesce(source_ns, recorded_ns)`: the Source-Timestamp, which every copy of an
email carries alike, or the recording time when none was sent.

These rules work on one frame of rows at a time (a row group, or the rows a streaming
reader has ready), so that neither the index nor the player ever holds a session:
copies within one frame are resolved exactly; a copy in a later frame is dropped when its
Message-ID is among the last `SeenIds.capacity` chosen ones (docs/sessions.md, "Replay
in bounded memory").
"""

from __future__ import annotations

from collections import deque

from mailbus.envelope import EnvelopeKind
from mailbus.extras import needs_extra
from mailbus.trace import Kind

with needs_extra("mailbus.sessions"):
    import polars as pl

SENT_KINDS = {
    Kind.PUBLISHED.value: EnvelopeKind.MESSAGE.value,
    Kind.REQUEST_SENT.value: EnvelopeKind.REQUEST.value,
    Kind.RESPONSE_SENT.value: EnvelopeKind.RESPONSE.value,
}
RECEIVED = Kind.RECEIVED.value
WHATS = tuple(kind.value for kind in EnvelopeKind)
TIME = "_t"  # the replay's time axis, a column added to the rows read
# What finding an email's rows needs: light columns, read before any body.
LIGHT_COLUMNS = ("event_index", "kind", "recorded_ns", "source_ns", "name", "detail", "message_id")
# Chosen Message-IDs remembered to drop a late copy (about 100 bytes each).
DEFAULT_SEEN_IDS = 200_000


def time_expr() -> pl.Expr:
    return pl.coalesce("source_ns", "recorded_ns").alias(TIME)


def email_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of `frame` that are copies of an email, with `what` (an EnvelopeKind
    value), `_received` and `_t` added."""
    if TIME not in frame.columns:
        frame = frame.with_columns(time_expr())
    return (
        frame.filter(
            (
                pl.col("kind").is_in(list(SENT_KINDS))
                | ((pl.col("kind") == RECEIVED) & pl.col("detail").is_not_null())
            )
            & pl.col("message_id").is_not_null()
            & pl.col("name").is_not_null()
        )
        .with_columns(
            pl.col("kind").replace_strict(SENT_KINDS, default=pl.col("detail")).alias("what"),
            (pl.col("kind") == RECEIVED).alias("_received"),
        )
        .filter(pl.col("what").is_in(WHATS))
    )


class SeenIds:
    """The Message-IDs chosen most recently: at least the last `capacity` of them (the
    oldest forgotten a frame's worth at a time, so up to a frame's more). A Python set:
    a frame's IDs are looked up in it without hashing the remembered ones again, as
    polars' `is_in` would for every frame (that cost the player 2 µs an email at
    200,000 IDs: docs/benchmarks.md)."""

    def __init__(self, capacity: int = DEFAULT_SEEN_IDS) -> None:
        self.capacity = capacity
        self._ids: set[str] = set()
        self._chunks: deque[list[str]] = deque()

    def __len__(self) -> int:
        return len(self._ids)

    def clear(self) -> None:
        self._ids.clear()
        self._chunks.clear()

    def add(self, ids: list[str]) -> None:
        """Remember `ids` (none of them remembered now: choose_copies drops those)."""
        if not ids or self.capacity <= 0:
            return
        if len(ids) > self.capacity:
            ids = ids[-self.capacity :]  # the latest: copies of an email lie together
        self._chunks.append(ids)
        self._ids.update(ids)
        while self._chunks and len(self._ids) - len(self._chunks[0]) >= self.capacity:
            self._ids.difference_update(self._chunks.popleft())

    def unseen(self, ids: list[str]) -> list[bool]:
        """For each of `ids`, True if it is not remembered."""
        remembered = self._ids
        return [i not in remembered for i in ids]


class SeenHashes:
    """SeenIds for counting (the index): 64-bit hashes of the Message-IDs chosen most
    recently, at least the last `capacity`, as polars Series, so that a batch of 262,144
    rows is checked in one vectorised step. Two IDs whose hashes collide (odds about
    10^-9 a batch) would cost one count."""

    def __init__(self, capacity: int = DEFAULT_SEEN_IDS) -> None:
        self.capacity = capacity
        self._chunks: deque[pl.Series] = deque()
        self._size = 0
        self._merged: pl.Series | None = None

    def __len__(self) -> int:
        return self._size

    def add(self, hashes: pl.Series) -> None:
        if hashes.len() == 0 or self.capacity <= 0:
            return
        if hashes.len() > self.capacity:
            hashes = hashes.tail(self.capacity)  # the latest: copies of an email lie together
        self._chunks.append(hashes)
        self._size += hashes.len()
        while self._chunks and self._size - self._chunks[0].len() >= self.capacity:
            self._size -= self._chunks.popleft().len()
        self._merged = None

    def series(self) -> pl.Series:
        if self._merged is None:
            self._merged = (
                pl.concat(list(self._chunks)) if self._chunks else pl.Series([], dtype=pl.UInt64)
            )
        return self._merged


def choose_copies(
    emails: pl.DataFrame,
    seen: SeenIds | SeenHashes,
    *,
    ordered: bool = True,
    cut_between_times: bool = False,
) -> pl.DataFrame:
    """One row per Message-ID of `emails` (rows from `email_rows`): the sender's event
    when present, else the first received copy (by event_index); Message-IDs in `seen`
    dropped (a copy of an email chosen earlier), the chosen ones added to it. With a
    `raw` column, each chosen row gets the raw bytes of the first received copy that has
    them (the sender's event has none). Sorted by (`_t`, event_index) when `ordered`.
    With SeenHashes, copies are told apart by a 64-bit hash of the Message-ID instead of
    the string (faster; for counting only: two IDs of one batch colliding, odds about
    10^-9 for 262,144 rows, would cost one count).

    `cut_between_times` (with SeenIds): the frames come from `pages.time_ordered`, which
    never puts rows of one time in two frames. The copies of an email that carry its
    Source-Timestamp then all lie in one frame, and only the copies without one (taken
    at each receiver's own time) can come in a later frame: only those are remembered
    and checked in `seen` (checking every email cost the player more than choosing).
    That takes every copy of an email to agree on having a Source-Timestamp or not, as
    the recorder's copies do (its sender's event always has one, and a received copy
    counts as an email's only with one); a session made otherwise may replay such an
    email twice."""
    if emails.height == 0:
        return emails
    # One key orders the copies: the sender's first, then by event_index (unique in a
    # session); the copy with the smallest key of its Message-ID is chosen.
    keyed = emails.with_columns(
        (pl.col("_received").cast(pl.Int64) * (1 << 62) + pl.col("event_index")).alias("_k")
    )
    if isinstance(seen, SeenHashes):
        keyed = keyed.with_columns(pl.col("message_id").hash().alias("_id"))
        best = keyed.group_by("_id").agg(pl.col("_k").min())
        chosen = keyed.join(best.select("_k"), on="_k", how="semi").drop("_k")
        if len(seen):
            chosen = chosen.filter(~pl.col("_id").is_in(seen.series().implode()))
        seen.add(chosen.get_column("_id"))
        chosen = chosen.drop("_id")
    else:
        best = keyed.group_by("message_id").agg(pl.col("_k").min())
        chosen = _unseen(
            keyed.join(best.select("_k"), on="_k", how="semi").drop("_k"),
            seen,
            cut_between_times=cut_between_times,
        )
    if "raw" in emails.columns and emails.get_column("raw").null_count() < emails.height:
        raws = (
            emails.filter(pl.col("_received") & pl.col("raw").is_not_null())
            .sort("event_index")
            .unique("message_id", keep="first")
            .select("message_id", pl.col("raw").alias("_raw"))
        )
        chosen = (
            chosen.join(raws, on="message_id", how="left", maintain_order="left")
            .with_columns(pl.col("_raw").alias("raw"))
            .drop("_raw")
        )
    return chosen.sort(TIME, "event_index") if ordered else chosen


def _unseen(chosen: pl.DataFrame, seen: SeenIds, *, cut_between_times: bool) -> pl.DataFrame:
    """`chosen` without the copies of emails in `seen`; the others remembered."""
    # The chosen rows that may be an email chosen in an earlier frame (None: all).
    loose = chosen.get_column("source_ns").is_null() if cut_between_times else None
    ids_column = chosen.get_column("message_id")
    ids = (ids_column if loose is None else ids_column.filter(loose)).to_list()
    if len(seen) and ids:
        unseen = seen.unseen(ids)
        if not all(unseen):
            keep = pl.Series(unseen, dtype=pl.Boolean)
            if loose is not None:  # the others are kept
                keep = pl.Series([True] * chosen.height).scatter(loose.arg_true(), keep)
            chosen = chosen.filter(keep)
            ids = [i for i, new in zip(ids, unseen, strict=True) if new]
    seen.add(ids)
    return chosen
