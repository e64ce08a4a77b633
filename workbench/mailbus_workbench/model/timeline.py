"""A session's emails over time, as the timeline bar shows them (rosbag2/Foxglove style):
one row per busiest name with its density in fixed bins, the rest in one `other` row.

Memory is bounded whatever the session's size: `BINS` counts per row, `MAX_ROWS` rows.
The bar resamples the bins to its width and maps columns to offsets and back."""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mailbus.sessions.index import SessionIndex

BINS = 1024  # fine bins per row; any bar narrower than this resamples them exactly
MAX_ROWS = 6  # named rows; the rest are summed in an `other` row
OTHER = "other"


@dataclass(frozen=True, slots=True)
class TimelineRow:
    name: str
    count: int
    bins: tuple[int, ...]  # BINS counts over [0, duration]


@dataclass(frozen=True, slots=True)
class Timeline:
    duration_s: float
    rows: tuple[TimelineRow, ...]

    @property
    def total(self) -> int:
        return sum(row.count for row in self.rows)


def build_timeline(emails: Iterable[tuple[str, int]], max_rows: int = MAX_ROWS) -> Timeline:
    """The timeline of `(name, offset_ns)` pairs (offsets from the first email, >= 0)."""
    pairs = list(emails)
    duration_ns = max((offset for _, offset in pairs), default=0)
    counts = Counter(name for name, _ in pairs)
    named = [name for name, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    if len(named) > max_rows:
        named = named[: max_rows - 1]  # the last row becomes `other`
    row_of = {name: i for i, name in enumerate(named)}
    other = len(named) if len(counts) > len(named) else -1
    bins = [[0] * BINS for _ in range(len(named) + (other >= 0))]
    for name, offset in pairs:
        index = row_of.get(name, other)
        bins[index][bin_of(offset, duration_ns)] += 1
    names = [*named, OTHER] if other >= 0 else named
    rows = tuple(
        TimelineRow(name, sum(row_bins), tuple(row_bins))
        for name, row_bins in zip(names, bins, strict=True)
    )
    return Timeline(duration_ns / 1e9, rows)


def timeline_from_index(index: SessionIndex, skip: Collection[str] = ()) -> Timeline:
    """The timeline of the emails a replay sends, from a session's index: its counts and
    histograms per name, nothing read from the parts. Offsets run from the first email
    of the names shown (the player's origin), as `build_timeline` counts them."""
    counts = {
        name: stats.email_count
        for name, stats in index.names.items()
        if stats.email_count and name not in skip
    }
    span = index.emails_range(counts)
    if span is None:
        return Timeline(0.0, ())
    first_ns, last_ns = span
    named = [name for name, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    rest: list[str] = []
    if len(named) > MAX_ROWS:
        named, rest = named[: MAX_ROWS - 1], named[MAX_ROWS - 1 :]

    def bins(names: Iterable[str]) -> tuple[int, ...]:
        total = [0] * BINS
        for name in names:
            for i, count in enumerate(
                index.density(BINS, name, first_ns=first_ns, last_ns=last_ns)
            ):
                total[i] += count
        return tuple(total)

    rows = [TimelineRow(name, counts[name], bins((name,))) for name in named]
    if rest:
        rows.append(TimelineRow(OTHER, sum(counts[name] for name in rest), bins(rest)))
    return Timeline((last_ns - first_ns) / 1e9, tuple(rows))


def bin_of(offset_ns: int, duration_ns: int) -> int:
    if duration_ns <= 0:
        return 0
    return min(BINS - 1, max(0, offset_ns * BINS // duration_ns))


def resample(bins: tuple[int, ...], columns: int) -> list[int]:
    """`bins` summed into `columns` columns (each bin lands in exactly one column)."""
    out = [0] * max(columns, 0)
    if columns <= 0:
        return out
    for i, count in enumerate(bins):
        if count:
            out[i * columns // len(bins)] += count
    return out


def column_of(offset_s: float, duration_s: float, columns: int) -> int:
    """The column (0 to columns - 1) showing `offset_s`."""
    if columns <= 1 or duration_s <= 0:
        return 0
    fraction = min(max(offset_s / duration_s, 0.0), 1.0)
    return round(fraction * (columns - 1))


def offset_at(column: int, duration_s: float, columns: int) -> float:
    """The offset a click on `column` seeks to (clamped to the session)."""
    if columns <= 1 or duration_s <= 0:
        return 0.0
    return min(max(column, 0), columns - 1) / (columns - 1) * duration_s


def stepped(offset_s: float, duration_s: float, fraction: float) -> float:
    """`offset_s` moved by `fraction` of the session (negative: back), kept inside it."""
    return min(max(offset_s + fraction * duration_s, 0.0), duration_s)
