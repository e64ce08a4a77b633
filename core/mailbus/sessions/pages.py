"""Reading a session a page at a time, through its index: only the row groups and the
columns asked for are read (pyarrow `ParquetFile.read_row_group(..., columns=...)`).

- `read_rows(index, first_row, count, columns)`: rows in file order (parts in order),
  for a table that pages through a session by row number;
- `read_window(index, start_ns, stop_ns, columns, limit)`: rows whose time (the replay's
  time axis, `replay_rows.TIME`) is in [start_ns, stop_ns), in time order, at most
  `limit` of them;
- `time_ordered(...)`: the rows of a time range as a stream of frames in time order, the
  player's reader. Row groups are read in the order of their first time; rows are handed
  out once no row group left to read can hold an earlier time, so memory holds the row
  groups that overlap in time (one or two for parts written sorted), never the session.

A row group is read whole (Parquet's unit here: the parts carry no page index), but
only its rows in the time range asked for are converted and filtered: in a row group
sorted by time (as the recorder writes them) the range is found by bisection of its
time columns, read first, and the other columns are sliced to it before they reach
polars. Open part files are kept, at most `OPEN_PARTS` of them, the least recently
read closed first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from mailbus.extras import needs_extra
from mailbus.sessions.index import RowGroup, SessionIndex
from mailbus.sessions.reader import SessionError
from mailbus.sessions.replay_rows import TIME, time_expr
from mailbus.sessions.schema import COLUMN_NAMES

with needs_extra("mailbus.sessions"):
    import polars as pl
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

# Columns added to schema version 1 later: read as null from parts that lack them.
_ADDED_DTYPES = {"raw": pl.Binary, "signature": pl.String}
_TIME_COLUMNS = ("source_ns", "recorded_ns")
OPEN_PARTS = 8  # part files kept open by one reader (their footers parsed)


class RowGroupReader:
    """Reads row groups of an indexed session, keeping the last `open_parts` part files
    read open."""

    def __init__(self, index: SessionIndex, *, open_parts: int = OPEN_PARTS) -> None:
        self.index = index
        self.open_parts = max(1, open_parts)
        self._files: OrderedDict[int, pq.ParquetFile] = OrderedDict()
        self.groups_read = 0  # for tests and benchmarks: what was touched
        self.files_opened = 0
        self.pending_high_water = 0  # most rows time_ordered held waiting for their turn

    @property
    def open_files(self) -> int:
        return len(self._files)

    def _file(self, part: int) -> pq.ParquetFile:
        parquet = self._files.get(part)
        if parquet is not None:
            self._files.move_to_end(part)
            return parquet
        path = self.index.path / self.index.parts[part].file
        try:
            parquet = pq.ParquetFile(path)
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(path, exc) from None
        self.files_opened += 1
        self._files[part] = parquet
        while len(self._files) > self.open_parts:
            _, oldest = self._files.popitem(last=False)
            oldest.close()
        return parquet

    def read(
        self,
        group: RowGroup,
        columns: Sequence[str],
        where: pl.Expr | None = None,
        *,
        start_ns: int | None = None,
        stop_ns: int | None = None,
    ) -> pl.DataFrame:
        """`columns` (plus `_t`) of the rows of `group` that match `where`, an expression
        on the columns it names. With `where`, the columns it needs are read first, and
        the others only for a row group holding a match. With `start_ns` / `stop_ns`,
        only rows with start_ns <= t <= stop_ns are returned (and only they converted)."""
        parquet = self._file(group.part)
        present = set(parquet.schema_arrow.names)
        wanted = [c for c in dict.fromkeys([*columns, *_TIME_COLUMNS]) if c in COLUMN_NAMES]
        if where is None and start_ns is None and stop_ns is None:
            frame = self._columns(parquet, group, wanted, present)
            return frame.with_columns(time_expr())
        roots = set(where.meta.root_names()) if where is not None else set()
        first = [c for c in wanted if c in roots | set(_TIME_COLUMNS)]
        rest = [c for c in wanted if c not in first]
        table = self._table(parquet, group, first, present)
        times = _times(table)
        offset, length, in_range = _clip(times, start_ns, stop_ns)
        head = self._frame(table.slice(offset, length), first).with_columns(
            times.slice(offset, length).alias(TIME)
        )
        conditions = [c for c in (where, in_range) if c is not None]
        mask = (
            head.select(pl.all_horizontal(conditions).fill_null(False)).to_series()
            if conditions
            else None
        )
        if head.height == 0 or (mask is not None and not mask.any()):
            return head.clear().select(*first, TIME).hstack(self._empty(rest))
        if rest:
            tail = self._table(parquet, group, rest, present).slice(offset, length)
            head = head.hstack(self._frame(tail, rest))
        return head if mask is None else head.filter(mask)

    def _table(
        self, parquet: pq.ParquetFile, group: RowGroup, columns: list[str], present: set[str]
    ) -> pa.Table:
        self.groups_read += 1
        try:
            # One thread: on two shared cores, Arrow's pool costs more CPU than it saves.
            return parquet.read_row_group(
                group.number, columns=[c for c in columns if c in present], use_threads=False
            )
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(self.index.path / self.index.parts[group.part].file, exc) from None

    def _columns(
        self, parquet: pq.ParquetFile, group: RowGroup, columns: list[str], present: set[str]
    ) -> pl.DataFrame:
        return self._frame(self._table(parquet, group, columns, present), columns)

    def _frame(self, table: pa.Table, columns: list[str]) -> pl.DataFrame:
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        missing = [c for c in columns if c not in table.column_names]
        if missing:
            frame = frame.with_columns(
                pl.lit(None, dtype=_ADDED_DTYPES.get(c, pl.String)).alias(c) for c in missing
            )
        return frame.select(columns)

    def _empty(self, columns: list[str]) -> pl.DataFrame:
        return pl.DataFrame(
            [pl.Series(c, [], dtype=_ADDED_DTYPES.get(c, pl.String)) for c in columns]
        )


def _times(table: pa.Table) -> pl.Series:
    """The replay's time of each row of `table` (which holds the time columns)."""
    names = table.column_names
    frame = pl.from_arrow(table.select([c for c in _TIME_COLUMNS if c in names]))
    assert isinstance(frame, pl.DataFrame)
    for column in _TIME_COLUMNS:
        if column not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias(column))
    return frame.select(time_expr()).to_series()


def _clip(
    times: pl.Series, start_ns: int | None, stop_ns: int | None
) -> tuple[int, int, pl.Expr | None]:
    """The rows to convert for times in [start_ns, stop_ns]: (offset, length) of a
    slice, and a filter still to apply in it (None: every row of the slice is in range).
    Rows sorted by time give an exact slice by bisection; others are filtered whole."""
    if start_ns is None and stop_ns is None:
        return 0, times.len(), None
    if times.null_count() or not times.is_sorted():
        in_range = pl.lit(True)
        if start_ns is not None:
            in_range &= pl.col(TIME) >= start_ns
        if stop_ns is not None:
            in_range &= pl.col(TIME) <= stop_ns
        return 0, times.len(), in_range
    lo = 0 if start_ns is None else int(times.search_sorted(start_ns, side="left"))
    hi = times.len() if stop_ns is None else int(times.search_sorted(stop_ns, side="right"))
    return lo, max(hi - lo, 0), None


def _unreadable(path: Path, exc: BaseException) -> SessionError:
    return SessionError(f"part {path} cannot be read: it is truncated or corrupt ({exc})")


def time_ordered(
    reader: RowGroupReader,
    start_ns: int,
    stop_ns: int | None,
    columns: Sequence[str],
    where: pl.Expr | None = None,
    *,
    groups: Callable[[RowGroup], bool] | None = None,
    cancelled: Callable[[], bool] | None = None,
    first_rows: int | None = None,
) -> Iterator[pl.DataFrame]:
    """Frames of the rows with start_ns <= t <= stop_ns (None: no end) matching `where`,
    sorted by (t, event_index) across frames; only the row groups `groups` accepts (all:
    None) are read. `cancelled()` true ends the stream. With `first_rows`, the first
    frame holds about that many rows (cut between two times, never inside one), so that
    what follows a seek starts before a whole row group is worked through."""
    order = [
        g
        for g in reader.index.groups_in_time_order(start_ns, stop_ns)
        if groups is None or groups(g)
    ]
    in_range = pl.col(TIME) >= start_ns
    if stop_ns is not None:
        in_range &= pl.col(TIME) <= stop_ns
    columns = list(dict.fromkeys([*columns, "event_index"]))
    pending: pl.DataFrame | None = None
    for i, group in enumerate(order):
        if cancelled is not None and cancelled():
            return
        frame = reader.read(group, columns, where, start_ns=start_ns, stop_ns=stop_ns)
        if cancelled is not None and cancelled():
            return
        frame = frame.filter(in_range)
        pending = frame if pending is None else pl.concat([pending, frame], how="vertical")
        reader.pending_high_water = max(reader.pending_high_water, pending.height)
        frontier = order[i + 1].first_ns if i + 1 < len(order) else None
        if frontier is None:
            ready, pending = pending, None
        else:  # a row at the frontier may tie with an earlier event_index still unread
            early = pl.col(TIME) < frontier
            ready, pending = pending.filter(early), pending.filter(~early)
        if ready.height:
            ready = ready.sort(TIME, "event_index")
            if first_rows is not None and ready.height > first_rows:
                times = ready.get_column(TIME)
                cut = int(times.search_sorted(times[first_rows - 1], side="right"))
                head, ready = ready.slice(0, cut), ready.slice(cut)
                if head.height:
                    yield head
            first_rows = None
            if ready.height:
                yield ready


def read_window(
    index: SessionIndex,
    start_ns: int,
    stop_ns: int,
    columns: Sequence[str],
    limit: int | None = None,
    *,
    reader: RowGroupReader | None = None,
) -> pl.DataFrame:
    """Rows with start_ns <= t < stop_ns in time order, at most `limit`, with `columns`
    and `_t` (reads only the row groups of that range, in time order, until `limit`)."""
    reader = reader or RowGroupReader(index)
    frames: list[pl.DataFrame] = []
    got = 0
    for frame in time_ordered(reader, start_ns, stop_ns - 1, columns):
        frames.append(frame)
        got += frame.height
        if limit is not None and got >= limit:
            break
    wanted = [*dict.fromkeys([*columns, TIME])]
    if not frames:
        return _nothing(wanted)
    result = pl.concat(frames, how="vertical").select(wanted)
    return result if limit is None else result.head(limit)


def read_rows(
    index: SessionIndex,
    first_row: int,
    count: int,
    columns: Sequence[str],
    *,
    reader: RowGroupReader | None = None,
) -> pl.DataFrame:
    """Rows `first_row` to `first_row + count - 1` of the session in file order (parts in
    order), with `columns` and `_t`; fewer at the end of the session."""
    reader = reader or RowGroupReader(index)
    frames: list[pl.DataFrame] = []
    wanted = [*dict.fromkeys([*columns, TIME])]
    row, end = max(first_row, 0), max(first_row, 0) + max(count, 0)
    while row < end:
        group = index.row_group_of_row(row)
        if group is None:
            break
        frame = reader.read(group, columns)
        offset = row - group.first_row
        take = min(end, group.first_row + group.rows) - row
        frames.append(frame.slice(offset, take).select(wanted))
        row += take
    if not frames:
        return _nothing(wanted)
    return pl.concat(frames, how="vertical")


def _nothing(columns: list[str]) -> pl.DataFrame:
    from mailbus.sessions.schema import arrow_schema

    empty = pl.from_arrow(arrow_schema().empty_table())
    assert isinstance(empty, pl.DataFrame)
    return empty.with_columns(time_expr()).select(columns)
