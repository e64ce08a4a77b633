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
"""

from __future__ import annotations

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


class RowGroupReader:
    """Reads row groups of an indexed session, keeping each part file open."""

    def __init__(self, index: SessionIndex) -> None:
        self.index = index
        self._files: dict[int, pq.ParquetFile] = {}
        self.groups_read = 0  # for tests and benchmarks: what was touched
        self.pending_high_water = 0  # most rows time_ordered held waiting for their turn

    def _file(self, part: int) -> pq.ParquetFile:
        parquet = self._files.get(part)
        if parquet is None:
            path = self.index.path / self.index.parts[part].file
            try:
                parquet = pq.ParquetFile(path)
            except (pa.ArrowException, OSError) as exc:
                raise _unreadable(path, exc) from None
            self._files[part] = parquet
        return parquet

    def read(
        self, group: RowGroup, columns: Sequence[str], where: pl.Expr | None = None
    ) -> pl.DataFrame:
        """`columns` (plus `_t`) of the rows of `group` that match `where`, an expression
        on the columns it names. With `where`, the columns it needs are read first, and
        the others only for a row group holding a match."""
        parquet = self._file(group.part)
        present = set(parquet.schema_arrow.names)
        wanted = [c for c in dict.fromkeys([*columns, *_TIME_COLUMNS]) if c in COLUMN_NAMES]
        if where is None:
            frame = self._columns(parquet, group, wanted, present)
            return frame.with_columns(time_expr())
        first = [c for c in wanted if c in set(where.meta.root_names()) | set(_TIME_COLUMNS)]
        head = self._columns(parquet, group, first, present).with_columns(time_expr())
        mask = head.select(where.fill_null(False)).to_series()
        if not mask.any():
            return (
                head.clear()
                .select(*first, TIME)
                .hstack(self._empty([c for c in wanted if c not in first]))
            )
        rest = [c for c in wanted if c not in first]
        if rest:
            head = head.hstack(self._columns(parquet, group, rest, present))
        return head.filter(mask)

    def _columns(
        self, parquet: pq.ParquetFile, group: RowGroup, columns: list[str], present: set[str]
    ) -> pl.DataFrame:
        self.groups_read += 1
        try:
            table = parquet.read_row_group(
                group.number, columns=[c for c in columns if c in present]
            )
        except (pa.ArrowException, OSError) as exc:
            raise _unreadable(self.index.path / self.index.parts[group.part].file, exc) from None
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        missing = [c for c in columns if c not in present]
        if missing:
            frame = frame.with_columns(
                pl.lit(None, dtype=_ADDED_DTYPES.get(c, pl.String)).alias(c) for c in missing
            )
        return frame.select(columns)

    def _empty(self, columns: list[str]) -> pl.DataFrame:
        return pl.DataFrame(
            [pl.Series(c, [], dtype=_ADDED_DTYPES.get(c, pl.String)) for c in columns]
        )


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
) -> Iterator[pl.DataFrame]:
    """Frames of the rows with start_ns <= t <= stop_ns (None: no end) matching `where`,
    sorted by (t, event_index) across frames; only the row groups `groups` accepts (all:
    None) are read. `cancelled()` true ends the stream."""
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
        frame = reader.read(group, columns, where)
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
            yield ready.sort(TIME, "event_index")


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
