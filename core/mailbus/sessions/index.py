"""The index of a session: what a reader needs to find a time without reading the parts.

A session directory holds, beside its parts, `index.json` (written atomically, never
part of what was recorded). It lists:

- per part (`PartEntry`: file, bytes, modification time, rows) and per row group
  (`RowGroup`): its row
  offsets (`first_row` in the session, `part_row` in its part), row count, time range
  (`first_ns`, `last_ns`) and, when few, the names it holds;
- per name (`NameStats`): rows, time range, and the emails a replay sends (counts per
  EnvelopeKind, their time range and a histogram);
- counts per kind, and a histogram of all rows at a fixed resolution (`width_ns`, a
  power of two times 1 ms, doubled whenever the session spans more than `MAX_BINS`
  bins) from which `density(bins)` draws a timeline. Histograms are `Histogram`s:
  dense, as stored, with running totals for the count of a range of bins.

The time axis is the replay's: `coalesce(source_ns, recorded_ns)` (`replay_rows.TIME`),
in nanoseconds since the epoch. Emails are counted with the replay's rules
(`replay_rows`: one per Message-ID, the sender's copy first).

API:
- `load_index(session, *, build=True, progress=None) -> SessionIndex`: reads the index
  file; builds it (streaming row group by row group, a few columns at a time, so in
  bounded memory) when it is missing, unreadable or disagrees with the parts, and
  extends it with the parts added since (a session still being recorded); `notes` says
  what was done. Whether the index still describes the parts is decided from a stat of
  each (size, and modification time where the index has it; a part whose time changed
  but not its size has its footer compared: rows and row groups), never from reading
  all their footers, so that loading the index of a 100-part session stays quick. It
  is written beside the parts unless the directory is read-only (kept in memory, said
  in `notes`) or the recorder is still writing it.
- `SessionIndex.locate(t_ns) -> Position | None`: the part, row group and row offset
  where time `t_ns` starts (None past the end); `groups_in_time_order(start, stop)`: the
  row groups of a time range, found by bisection.
- `SessionIndex.density(bins, name=None, emails=False)`: row (or email) counts in `bins`
  equal columns over the session.
- `IndexBuilder`: the incremental builder the recorder feeds as it writes row groups.
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import json
import logging
import os
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate
from pathlib import Path
from typing import Any

from mailbus.extras import needs_extra
from mailbus.sessions.reader import Session, SessionError, open_session
from mailbus.sessions.replay_rows import (
    LIGHT_COLUMNS,
    TIME,
    SeenHashes,
    choose_copies,
    email_rows,
    time_expr,
)
from mailbus.sessions.schema import TEMP_SUFFIX
from mailbus.sessions.session_dir import (
    INDEX_FILE,
    INDEX_FORMAT,
    INDEX_VERSION,
    index_signature,
)

with needs_extra("mailbus.sessions"):
    import polars as pl
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

log = logging.getLogger(__name__)

__all__ = ["INDEX_FILE", "INDEX_FORMAT", "INDEX_VERSION"]  # defined with the directory

BASE_WIDTH_NS = 1_000_000  # the finest histogram bin: 1 ms
MAX_BINS = 4096  # histogram resolution: the span is cut into at most this many bins
MAX_GROUP_NAMES = 64  # a row group lists its names when it holds at most this many
# Rows of light columns counted at once while building (about 15 MB of Arrow data).
BUILD_BATCH_ROWS = 262_144
# Message-IDs remembered across batches to drop a later copy (copies lie together).
BUILD_SEEN_IDS = 65_536

Progress = Callable[[int, int], None]  # (rows indexed, rows in all)
# Indexes loaded lately, by directory and index file signature: a second player or view
# on the same session does not parse the file again (they are immutable).
_LOADED_KEEP = 4
_loaded: OrderedDict[tuple[str, tuple[int, int, int], bool], SessionIndex] = OrderedDict()
_loaded_lock = threading.Lock()


class IndexUnavailableError(SessionError):
    """A session's index is missing or out of date, and building it was not allowed."""


class Histogram(Mapping[int, int]):
    """Counts per bin (bin -> count, the bins holding none left out), stored dense from
    its first bin as the index file stores it, with running totals so that the count of
    a range of bins (`between`) is two look-ups, not a loop over the bins."""

    __slots__ = ("_counts", "_first", "_running", "_size")

    def __init__(self, first: int, counts: Sequence[int]) -> None:
        self._first = first
        self._counts = list(counts)
        self._running: list[int] | None = None
        self._size: int | None = None

    @classmethod
    def of(cls, counts: Mapping[int, int]) -> Histogram:
        if isinstance(counts, Histogram):
            return counts
        bins = [b for b, n in counts.items() if n]
        if not bins:
            return cls(0, [])
        first, last = min(bins), max(bins)
        return cls(first, [counts.get(b, 0) for b in range(first, last + 1)])

    @property
    def first_bin(self) -> int:
        return self._first

    @property
    def dense(self) -> list[int]:
        """Counts from `first_bin` on, one per bin (zeros included)."""
        return self._counts

    def __getitem__(self, b: int) -> int:
        i = b - self._first
        if 0 <= i < len(self._counts) and self._counts[i]:
            return self._counts[i]
        raise KeyError(b)

    def __iter__(self) -> Iterator[int]:
        first = self._first
        return (first + i for i, n in enumerate(self._counts) if n)

    def __len__(self) -> int:
        if self._size is None:
            self._size = sum(1 for n in self._counts if n)
        return self._size

    def __repr__(self) -> str:
        return f"Histogram(first_bin={self._first}, bins={len(self._counts)})"

    def between(self, lo: int, hi: int) -> int:
        """The count of bins lo to hi, both included."""
        lo, hi = max(lo, self._first), min(hi, self._first + len(self._counts) - 1)
        if lo > hi:
            return 0
        if self._running is None:
            self._running = [0, *accumulate(self._counts)]
        return self._running[hi - self._first + 1] - self._running[lo - self._first]


@dataclass(frozen=True, slots=True)
class RowGroup:
    part: int  # the part's position in `SessionIndex.parts`
    number: int  # the row group's number in its part file
    first_row: int  # row number in the session (parts in order) of its first row
    part_row: int  # row number in its part of its first row
    rows: int
    first_ns: int | None  # its time range (None: no row)
    last_ns: int | None
    names: tuple[str, ...] | None = None  # the names it holds; None: too many to list

    def overlaps(self, start_ns: int, stop_ns: int | None) -> bool:
        """Holds a row with `start_ns <= t` and `t <= stop_ns` (None: no end)."""
        if self.first_ns is None or self.last_ns is None:
            return False
        return self.last_ns >= start_ns and (stop_ns is None or self.first_ns <= stop_ns)


@dataclass(frozen=True, slots=True)
class PartEntry:
    file: str
    bytes: int
    rows: int
    row_groups: tuple[RowGroup, ...]
    # When the part was last written (st_mtime_ns; None in indexes made before it was
    # kept): with its size, tells that the part is still the one indexed. Not content.
    mtime_ns: int | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class NameStats:
    rows: int
    first_ns: int
    last_ns: int
    emails: Mapping[str, int]  # emails a replay sends, per EnvelopeKind value
    emails_first_ns: int | None
    emails_last_ns: int | None
    histogram: Histogram  # emails per bin (bin = t // width_ns)

    @property
    def email_count(self) -> int:
        return sum(self.emails.values())


@dataclass(frozen=True, slots=True)
class Position:
    """Where a time starts: row `row` of row group `row_group` of part `part`."""

    part: int
    file: str
    row_group: int
    row: int  # offset in the row group
    row_number: int  # in the session (parts in order)
    group: RowGroup


@dataclass(frozen=True)
class SessionIndex:
    path: Path
    parts: tuple[PartEntry, ...]
    first_ns: int | None
    last_ns: int | None
    rows: int
    counts_by_kind: Mapping[str, int]
    names: Mapping[str, NameStats]
    width_ns: int
    histogram: Histogram  # rows per bin (bin = t // width_ns)
    complete: bool  # the recording was closed (its manifest says complete)
    notes: tuple[str, ...] = field(default=(), compare=False)  # what load_index did
    written: bool = field(default=True, compare=False)  # False: kept in memory only

    # -- summary -------------------------------------------------------------------------
    @property
    def counts_by_name(self) -> dict[str, int]:
        return {name: stats.rows for name, stats in self.names.items()}

    @cached_property
    def row_groups(self) -> tuple[RowGroup, ...]:
        """Every row group, parts in order."""
        return tuple(g for part in self.parts for g in part.row_groups)

    @cached_property
    def _time_order(self) -> tuple[list[RowGroup], list[int], list[int]]:
        """The row groups holding rows, by (first time, part, number); their first times;
        and the latest last time of each and of all before it (non-decreasing), so that
        the groups of a time range are found by bisection."""
        groups = sorted(
            (g for g in self.row_groups if g.first_ns is not None and g.last_ns is not None),
            key=lambda g: (g.first_ns, g.part, g.number),
        )
        firsts = [g.first_ns for g in groups if g.first_ns is not None]
        reach = list(accumulate((g.last_ns for g in groups if g.last_ns is not None), max))
        return groups, firsts, reach

    @cached_property
    def _row_starts(self) -> list[int]:
        return [g.first_row for g in self.row_groups]

    @property
    def duration_ns(self) -> int:
        if self.first_ns is None or self.last_ns is None:
            return 0
        return self.last_ns - self.first_ns

    def emails(self, names: Iterable[str] | None = None, *, services: bool = True) -> int:
        """Emails a replay of `names` (all: None) sends."""
        return sum(
            count
            for name in (self.names if names is None else names)
            if name in self.names
            for what, count in self.names[name].emails.items()
            if services or what == "message"
        )

    def emails_range(self, names: Iterable[str] | None = None) -> tuple[int, int] | None:
        """The time of the first and last email of `names` (all: None); None if none."""
        firsts, lasts = [], []
        for name in self.names if names is None else names:
            stats = self.names.get(name)
            if stats is not None and stats.emails_first_ns is not None:
                firsts.append(stats.emails_first_ns)
                lasts.append(stats.emails_last_ns or stats.emails_first_ns)
        return (min(firsts), max(lasts)) if firsts else None

    # -- timeline ------------------------------------------------------------------------
    def density(
        self,
        bins: int,
        name: str | None = None,
        *,
        emails: bool = False,
        first_ns: int | None = None,
        last_ns: int | None = None,
    ) -> list[int]:
        """Counts in `bins` equal columns from `first_ns` to `last_ns` (default: the
        session's span): of all rows, or with `emails` of the emails a replay sends (of
        one `name`, or of all). Each stored bin lands in the column of its start."""
        if bins <= 0:
            return []
        if name is not None:
            stats = self.names.get(name)
            sources: list[Mapping[int, int]] = [stats.histogram] if stats else []
        elif emails:
            sources = [s.histogram for s in self.names.values()]
        else:
            sources = [self.histogram]
        lo = self.first_ns if first_ns is None else first_ns
        hi = self.last_ns if last_ns is None else last_ns
        out = [0] * bins
        if lo is None or hi is None:
            return out
        span = max(hi - lo, 1)
        width, last = self.width_ns, bins - 1
        for source in sources:
            hist = Histogram.of(source)
            first = hist.first_bin
            for i, count in enumerate(hist.dense):
                if count:
                    column = ((first + i) * width - lo) * bins // span
                    out[min(last, max(0, column))] += count
        return out

    def emails_between(self, names: Iterable[str], lo_bin: int, hi_bin: int) -> int:
        """Emails of `names` in histogram bins lo_bin to hi_bin (both included): a
        couple of look-ups per name, whatever the span."""
        total = 0
        for name in names:
            stats = self.names.get(name)
            if stats is not None:
                total += stats.histogram.between(lo_bin, hi_bin)
        return total

    # -- seeking -------------------------------------------------------------------------
    def groups_in_time_order(self, start_ns: int = 0, stop_ns: int | None = None) -> list[RowGroup]:
        """The row groups holding a time in [start_ns, stop_ns], by their first time
        (bisection: those before hold no time that late, those after none that early)."""
        groups, firsts, reach = self._time_order
        lo = bisect.bisect_left(reach, start_ns)
        hi = len(groups) if stop_ns is None else bisect.bisect_right(firsts, stop_ns)
        return [g for g in groups[lo:hi] if g.overlaps(start_ns, stop_ns)]

    def locate(self, t_ns: int) -> Position | None:
        """Where time `t_ns` starts: the row group (in time order) holding the first row
        at or after it, and that row's offset in the group (its time column is read,
        one row group). None past the end of the session."""
        groups, _, reach = self._time_order
        i = bisect.bisect_left(reach, t_ns)
        group = next((g for g in groups[i:] if g.overlaps(t_ns, None)), None)
        if group is None:
            return None
        entry = self.parts[group.part]
        table = pq.ParquetFile(self.path / entry.file).read_row_group(
            group.number, columns=["source_ns", "recorded_ns"], use_threads=False
        )
        frame = pl.from_arrow(table)
        assert isinstance(frame, pl.DataFrame)
        times = frame.select(time_expr()).get_column(TIME)
        if times.is_sorted():
            row = times.search_sorted(t_ns, side="left")
        else:  # a part written before parts were sorted: the first such row in file order
            hits = (times >= t_ns).arg_true()
            row = int(hits[0]) if hits.len() else group.rows
        return Position(
            group.part, entry.file, group.number, int(row), group.first_row + int(row), group
        )

    def row_group_of_row(self, row_number: int) -> RowGroup | None:
        """The row group holding session row `row_number` (parts in order)."""
        groups = self.row_groups
        i = bisect.bisect_right(self._row_starts, row_number) - 1
        if i < 0 or row_number >= groups[i].first_row + groups[i].rows:
            return None
        return groups[i]

    # -- file ----------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {
            "format": INDEX_FORMAT,
            "version": INDEX_VERSION,
            "complete": self.complete,
            "first_ns": self.first_ns,
            "last_ns": self.last_ns,
            "rows": self.rows,
            "counts_by_kind": dict(sorted(self.counts_by_kind.items())),
            "width_ns": self.width_ns,
            "histogram": _hist_json(self.histogram),
            "names": {
                name: {
                    "rows": s.rows,
                    "first_ns": s.first_ns,
                    "last_ns": s.last_ns,
                    "emails": dict(sorted(s.emails.items())),
                    "emails_first_ns": s.emails_first_ns,
                    "emails_last_ns": s.emails_last_ns,
                    "histogram": _hist_json(s.histogram),
                }
                for name, s in sorted(self.names.items())
            },
            "parts": [
                {
                    "file": p.file,
                    "bytes": p.bytes,
                    **({} if p.mtime_ns is None else {"mtime_ns": p.mtime_ns}),
                    "rows": p.rows,
                    "row_groups": [
                        [g.number, g.part_row, g.rows, g.first_ns, g.last_ns, g.names]
                        for g in p.row_groups
                    ],
                }
                for p in self.parts
            ],
        }


def _hist_json(hist: Mapping[int, int]) -> list[Any]:
    """[first bin, [count per bin from it on]] (dense: at most MAX_BINS bins)."""
    dense = Histogram.of(hist)
    if not len(dense):
        return [0, []]
    counts = dense.dense
    end = len(counts)
    while end and not counts[end - 1]:
        end -= 1
    start = next(i for i, n in enumerate(counts) if n)
    return [dense.first_bin + start, counts[start:end]]


def _hist_from_json(value: Any) -> Histogram:
    first, counts = value
    # One pass in C: a string fails the sum, a fraction makes it no int.
    if not isinstance(counts, list) or not isinstance(sum(counts), int):
        raise ValueError("a histogram's counts are not whole numbers")
    return Histogram(int(first), counts)


def index_from_json(path: Path, data: Mapping[str, Any], *, complete: bool) -> SessionIndex:
    """The index stored in `data` (ValueError, KeyError, TypeError when malformed)."""
    if data.get("format") != INDEX_FORMAT:
        raise ValueError("not a mailbus session index")
    parts: list[PartEntry] = []
    first_row = 0
    for p_i, part in enumerate(data["parts"]):
        groups = []
        for number, part_row, rows, g_first, g_last, names in part["row_groups"]:
            groups.append(
                RowGroup(
                    p_i,
                    int(number),
                    first_row + int(part_row),
                    int(part_row),
                    int(rows),
                    None if g_first is None else int(g_first),
                    None if g_last is None else int(g_last),
                    None if names is None else tuple(str(n) for n in names),
                )
            )
        mtime = part.get("mtime_ns")
        parts.append(
            PartEntry(
                str(part["file"]),
                int(part["bytes"]),
                int(part["rows"]),
                tuple(groups),
                None if mtime is None else int(mtime),
            )
        )
        first_row += int(part["rows"])
    names = {
        str(name): NameStats(
            int(s["rows"]),
            int(s["first_ns"]),
            int(s["last_ns"]),
            {str(k): int(v) for k, v in s["emails"].items()},
            None if s["emails_first_ns"] is None else int(s["emails_first_ns"]),
            None if s["emails_last_ns"] is None else int(s["emails_last_ns"]),
            _hist_from_json(s["histogram"]),
        )
        for name, s in data["names"].items()
    }
    return SessionIndex(
        path=path,
        parts=tuple(parts),
        first_ns=None if data["first_ns"] is None else int(data["first_ns"]),
        last_ns=None if data["last_ns"] is None else int(data["last_ns"]),
        rows=int(data["rows"]),
        counts_by_kind={str(k): int(v) for k, v in data["counts_by_kind"].items()},
        names=names,
        width_ns=int(data["width_ns"]),
        histogram=_hist_from_json(data["histogram"]),
        complete=complete,
    )


# -- building ------------------------------------------------------------------------------
@dataclass
class _NameAcc:
    rows: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    emails: Counter[str] = field(default_factory=Counter)
    emails_first_ns: int | None = None
    emails_last_ns: int | None = None
    histogram: Counter[int] = field(default_factory=Counter)


def _lo(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)


def _hi(a: int | None, b: int) -> int:
    return b if a is None else max(a, b)


class IndexBuilder:
    """Builds an index row group by row group (the recorder feeds it as it writes; the
    reader when a session has none). Holds counts only, plus the Message-IDs of the last
    emails counted (`SeenHashes`), never rows."""

    def __init__(self, path: Path, base: SessionIndex | None = None) -> None:
        self.path = path
        self.parts: list[PartEntry] = list(base.parts) if base else []
        self.rows = base.rows if base else 0
        self.first_ns = base.first_ns if base else None
        self.last_ns = base.last_ns if base else None
        self.kinds: Counter[str] = Counter(base.counts_by_kind if base else {})
        self.width_ns = base.width_ns if base else BASE_WIDTH_NS
        self.histogram: Counter[int] = Counter(base.histogram if base else {})
        self.names: dict[str, _NameAcc] = {}
        if base:
            for name, s in base.names.items():
                self.names[name] = _NameAcc(
                    s.rows,
                    s.first_ns,
                    s.last_ns,
                    Counter(s.emails),
                    s.emails_first_ns,
                    s.emails_last_ns,
                    Counter(s.histogram),
                )
        self.seen = SeenHashes(BUILD_SEEN_IDS)
        self._groups: list[RowGroup] = []  # of the part being added
        self._part_rows = 0

    def add_row_group(self, table: pa.Table | pl.DataFrame) -> None:
        """Count one row group of the part being added (LIGHT_COLUMNS at least)."""
        self.add_row_groups([table])

    def add_row_groups(self, tables: Sequence[pa.Table | pl.DataFrame]) -> None:
        """Count consecutive row groups of the part being added, in one pass (fewer,
        larger vectorised steps than one group at a time)."""
        frames = []
        for g, table in enumerate(tables):
            frame = table if isinstance(table, pl.DataFrame) else pl.from_arrow(table)
            assert isinstance(frame, pl.DataFrame)
            frames.append(frame.select(*LIGHT_COLUMNS).with_columns(_g=pl.lit(g, pl.Int32)))
        if not frames:
            return
        frame = pl.concat(frames, how="vertical").with_columns(time_expr())
        sizes = [f.height for f in frames]
        if frame.height:
            times = frame.get_column(TIME)
            lo, hi = int(times.min()), int(times.max())  # type: ignore[arg-type]
            self.first_ns, self.last_ns = _lo(self.first_ns, lo), _hi(self.last_ns, hi)
            self._widen()
        width = self.width_ns
        for kind, count in frame.get_column("kind").value_counts().iter_rows():
            self.kinds[str(kind)] += int(count)
        for b, count in (frame.get_column(TIME) // width).value_counts().iter_rows():
            self.histogram[int(b)] += int(count)
        spans = {
            g: (int(lo), int(hi))
            for g, lo, hi in frame.group_by("_g")
            .agg(pl.col(TIME).min(), pl.col(TIME).max().alias("hi"))
            .iter_rows()
        }
        by_name = (
            frame.filter(pl.col("name").is_not_null())
            .group_by("_g", "name")
            .agg(
                pl.len().alias("n"), pl.col(TIME).min().alias("lo"), pl.col(TIME).max().alias("hi")
            )
        )
        group_names: dict[int, list[str]] = {}
        for g, name, n, lo, hi in by_name.iter_rows():
            acc = self.names.setdefault(str(name), _NameAcc())
            acc.rows += int(n)
            acc.first_ns, acc.last_ns = _lo(acc.first_ns, int(lo)), _hi(acc.last_ns, int(hi))
            group_names.setdefault(int(g), []).append(str(name))
        chosen = choose_copies(email_rows(frame), self.seen, ordered=False)
        if chosen.height:
            per = chosen.group_by("name", "what").agg(
                pl.len().alias("n"), pl.col(TIME).min().alias("lo"), pl.col(TIME).max().alias("hi")
            )
            for name, what, n, lo, hi in per.iter_rows():
                acc = self.names[str(name)]
                acc.emails[str(what)] += int(n)
                acc.emails_first_ns = _lo(acc.emails_first_ns, int(lo))
                acc.emails_last_ns = _hi(acc.emails_last_ns, int(hi))
            bins = chosen.group_by("name", (pl.col(TIME) // width).alias("b")).len()
            for name, b, n in bins.iter_rows():
                self.names[str(name)].histogram[int(b)] += int(n)
        part = len(self.parts)
        for g, rows in enumerate(sizes):
            first, last = spans.get(g, (None, None))
            names = group_names.get(g, [])
            self._groups.append(
                RowGroup(
                    part,
                    len(self._groups),
                    self.rows,
                    self._part_rows,
                    rows,
                    first,
                    last,
                    tuple(sorted(names)) if len(names) <= MAX_GROUP_NAMES else None,
                )
            )
            self.rows += rows
            self._part_rows += rows

    def expect_span(self, first_ns: int, last_ns: int) -> None:
        """Start with the bin width a session spanning these times ends with (so that the
        first row groups are not counted at a finer width, then merged)."""
        if self.first_ns is None:
            width = self.width_ns
            while last_ns // width - first_ns // width + 1 > MAX_BINS:
                width *= 2
            self.width_ns = width

    def _widen(self) -> None:
        """Double the bin width until the session spans at most MAX_BINS bins."""
        if self.first_ns is None or self.last_ns is None:
            return
        width = self.width_ns
        while self.last_ns // width - self.first_ns // width + 1 > MAX_BINS:
            width *= 2
        if width == self.width_ns:
            return
        factor = width // self.width_ns
        self.width_ns = width
        self.histogram = _rebin(self.histogram, factor)
        for acc in self.names.values():
            acc.histogram = _rebin(acc.histogram, factor)

    def finish_part(self, file: str, size: int, mtime_ns: int | None = None) -> None:
        """The part whose row groups were added is complete as `file` of `size` bytes,
        last written at `mtime_ns` (its st_mtime_ns)."""
        self.parts.append(PartEntry(file, size, self._part_rows, tuple(self._groups), mtime_ns))
        self._groups = []
        self._part_rows = 0

    def add_part(self, path: Path, progress: Callable[[int], None] | None = None) -> None:
        """Index a whole part file, one row group (light columns) at a time."""
        try:
            parquet = pq.ParquetFile(path)
            batch: list[pa.Table] = []
            for number in range(parquet.metadata.num_row_groups):
                batch.append(parquet.read_row_group(number, columns=list(LIGHT_COLUMNS)))
                if sum(t.num_rows for t in batch) >= BUILD_BATCH_ROWS:
                    self.add_row_groups(batch)
                    batch = []
                    if progress is not None:
                        progress(self.rows)
            self.add_row_groups(batch)
            if progress is not None:
                progress(self.rows)
        except (pa.ArrowException, OSError) as exc:
            raise SessionError(
                f"part {path} cannot be indexed: it is truncated or corrupt ({exc})"
            ) from None
        st = path.stat()
        self.finish_part(path.name, st.st_size, st.st_mtime_ns)

    def snapshot(self, *, complete: bool, notes: Sequence[str] = ()) -> SessionIndex:
        return SessionIndex(
            path=self.path,
            parts=tuple(self.parts),
            first_ns=self.first_ns,
            last_ns=self.last_ns,
            rows=sum(p.rows for p in self.parts),
            counts_by_kind=dict(self.kinds),
            names={
                name: NameStats(
                    acc.rows,
                    acc.first_ns if acc.first_ns is not None else 0,
                    acc.last_ns if acc.last_ns is not None else 0,
                    dict(acc.emails),
                    acc.emails_first_ns,
                    acc.emails_last_ns,
                    Histogram.of(acc.histogram),
                )
                for name, acc in self.names.items()
            },
            width_ns=self.width_ns,
            histogram=Histogram.of(self.histogram),
            complete=complete,
            notes=tuple(notes),
        )


def _rebin(hist: Mapping[int, int], factor: int) -> Counter[int]:
    out: Counter[int] = Counter()
    for b, count in hist.items():
        out[b // factor] += count
    return out


# -- loading -------------------------------------------------------------------------------
def _footer(path: Path) -> tuple[int, int, int]:
    """(bytes, rows, row groups) of a part, from its footer."""
    metadata = pq.read_metadata(path)
    return path.stat().st_size, metadata.num_rows, metadata.num_row_groups


def _span_hint(parts: Sequence[Path]) -> tuple[int, int] | None:
    """The times the parts' footers' statistics bound (source_ns and recorded_ns), or
    None when they have none."""
    lows: list[int] = []
    highs: list[int] = []
    for path in parts:
        metadata = pq.read_metadata(path)
        names = metadata.schema.names
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            for column in ("source_ns", "recorded_ns"):
                if column not in names:
                    continue
                stats = group.column(names.index(column)).statistics
                if stats is not None and stats.has_min_max:
                    lows.append(int(stats.min))
                    highs.append(int(stats.max))
    return (min(lows), max(highs)) if lows else None


def _stored(session: Session) -> tuple[SessionIndex | None, str]:
    """The index file's content, or None and why it cannot be used. The file read when
    the session was opened is used when it has not changed since, and an index loaded
    lately from the same file is handed out again."""
    path = session.path / INDEX_FILE
    signature = index_signature(path)
    if signature is None:
        return None, "no index"
    key = (str(session.path), signature, session.complete)
    with _loaded_lock:
        cached = _loaded.get(key)
        if cached is not None:
            _loaded.move_to_end(key)
            return cached, ""
    held = session.index_file
    try:
        if held is not None and held.signature == signature:
            data: Any = held.data
        else:
            data = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        version = data.get("version")
        if isinstance(version, int) and version > INDEX_VERSION:
            return None, f"index version {version} is newer than this mailbus reads"
        index = index_from_json(session.path, data, complete=session.complete)
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError) as exc:
        return None, f"index unreadable ({type(exc).__name__}: {exc})"
    with _loaded_lock:
        _loaded[key] = index
        while len(_loaded) > _LOADED_KEEP:
            _loaded.popitem(last=False)
    return index, ""


def _usable_prefix(
    stored: SessionIndex, session: Session, retimed: dict[int, int] | None = None
) -> tuple[int, str]:
    """How many of the session's parts the stored index describes as they are (same
    name, same size and, where the index has it, modification time: a stat, not a
    footer read, so that opening stays quick); and, when it disagrees with them, why. A
    part whose time changed but not its size (copied without its times, touched) has its
    footer compared with the index: rows and row groups; when they agree, its new time
    goes into `retimed` (part number -> st_mtime_ns)."""
    on_disk = list(session.parts)
    for i, entry in enumerate(stored.parts):
        if i >= len(on_disk) or on_disk[i].name != entry.file:
            return -1, f"index lists part {entry.file}, which the session does not have"
        st = on_disk[i].stat()
        if st.st_size != entry.bytes:
            return -1, (
                f"index disagrees with part {entry.file} ({entry.bytes} bytes indexed, "
                f"{st.st_size} found)"
            )
        if entry.mtime_ns is not None and entry.mtime_ns != st.st_mtime_ns:
            _, rows, groups = _footer(on_disk[i])
            if (rows, groups) != (entry.rows, len(entry.row_groups)):
                return -1, (
                    f"index disagrees with part {entry.file} ({entry.rows} rows in "
                    f"{len(entry.row_groups)} row groups indexed, {rows} in {groups} found)"
                )
            if retimed is not None:
                retimed[i] = st.st_mtime_ns
    return len(stored.parts), ""


def _recorder_writes(session: Session) -> bool:
    """A recording in progress that keeps its own index.json: nobody else writes it."""
    return session.manifest.get("status") == "recording" and (session.path / INDEX_FILE).exists()


def _keep_times(stored: SessionIndex, session: Session, retimed: dict[int, int]) -> None:
    """The index with the parts' new times written over the old one, so that the next
    open trusts a stat again instead of reading those footers (a session copied without
    its times had them all read at every open). Best effort: unwritable (a read-only
    disk), the footers are compared again next time, as before."""
    if _recorder_writes(session):
        return
    parts = tuple(
        dataclasses.replace(p, mtime_ns=retimed[i]) if i in retimed else p
        for i, p in enumerate(stored.parts)
    )
    with contextlib.suppress(OSError):
        _write_atomic(session.path / INDEX_FILE, dataclasses.replace(stored, parts=parts).to_json())


def load_index(
    session: Session | str | os.PathLike[str],
    *,
    build: bool = True,
    progress: Progress | None = None,
) -> SessionIndex:
    """The index of `session` (see the module docstring). `progress(rows done, rows in
    all)` is called while building. Raises SessionError for a part that cannot be read,
    and IndexUnavailableError when the index must be built and `build` is false."""
    if not isinstance(session, Session):
        session = open_session(session)
    stored, why = _stored(session)
    notes: list[str] = []
    base: SessionIndex | None = None
    if stored is not None:
        retimed: dict[int, int] = {}
        usable, why = _usable_prefix(stored, session, retimed)
        if usable == len(session.parts) and usable == len(stored.parts):
            if retimed:
                _keep_times(stored, session, retimed)
            return stored
        if usable >= 0:
            base = stored
    if not build:
        raise IndexUnavailableError(f"session {session.path}: {why or 'index out of date'}")
    builder = IndexBuilder(session.path, base)
    todo = session.parts[len(base.parts) if base else 0 :]
    if base is None:
        hint = _span_hint(todo)
        if hint is not None:
            builder.expect_span(*hint)
    if base is not None:
        notes.append(f"index extended with {len(todo)} new part(s)")
    elif why == "no index":
        notes.append(f"no index: built it ({len(todo)} part(s))")
    else:
        notes.append(f"{why}: index rebuilt")
    total = sum(_footer(p)[1] for p in todo) + builder.rows
    for part in todo:
        builder.add_part(part, None if progress is None else lambda done: progress(done, total))
    skipped = bool(session.skipped)
    recorder_owns = _recorder_writes(session)
    newer = why.startswith("index version")
    written = False
    if not recorder_owns and not newer and not skipped:
        try:
            _write_atomic(
                session.path / INDEX_FILE, builder.snapshot(complete=session.complete).to_json()
            )
            written = True
        except OSError as exc:
            why = exc.strerror or str(exc)
            notes.append(
                f"cannot write {INDEX_FILE} beside the parts ({why}): index kept in memory"
            )
    else:
        why_not = (
            "the recorder writes it"
            if recorder_owns
            else "parts were skipped"
            if skipped
            else "a newer mailbus wrote the file"
        )
        notes.append(f"index kept in memory ({why_not})")
    for note in notes:
        log.info("session %s: %s", session.path, note)
    index = builder.snapshot(complete=session.complete, notes=notes)
    return index if written else _unwritten(index)


def write_index(path: Path, index: SessionIndex) -> None:
    """Write `index` to `path` atomically (OSError when it cannot)."""
    _write_atomic(path, index.to_json())


def _unwritten(index: SessionIndex) -> SessionIndex:
    from dataclasses import replace

    return replace(index, written=False)


def _write_atomic(path: Path, data: Mapping[str, Any]) -> None:
    """Write `data` as JSON under a temporary name, then rename over `path`."""
    # A name of its own: two readers building the same index at once never share it.
    temp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}")
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(json.dumps(data, separators=(",", ":")))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise
