"""The analysis pipeline, written once with narwhals over lazy frames.

`load(...)` opens sessions as one narwhals LazyFrame backed by polars (the default) or
by PySpark (`engine="spark"`, `master="local[*]"` or a cluster URL). Every table
function takes that dataset and returns a polars DataFrame sorted by its keys, so the
same code serves the command line, notebooks and the parity tests.

The tables themselves, each defined once, are in `tables`; see there how each engine
runs them. Here: opening sessions on an engine, collecting tables to polars, writing
them from the engine that computed them, and computing the calls table once per
`analyze()`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypeVar

from mailbus.envelope import EnvelopeKind
from mailbus.extras import needs_extra
from mailbus.sessions import tables as defined
from mailbus.sessions.reader import (
    Session,
    SessionError,
    expand_paths,
    open_sessions,
    scan_parts,
)
from mailbus.sessions.spark import read_sessions
from mailbus.sessions.spark import spark_session as spark_session  # re-exported
from mailbus.sessions.tables import (
    CALL_KEYS,
    CALL_SCHEMA,
    PERCENTILES,
    RECEIVED,
    SEQUENCE_KEYS,
    SEQUENCE_SCHEMA,
    SERIES_SCHEMA,
    SERVICE_SCHEMA,
    TOPIC_SCHEMA,
    gap_percentiles,
    gap_percentiles_generic,
    percentiles,
    sequence_counts,
    sequence_counts_generic,
)

with needs_extra("mailbus.sessions"):
    import narwhals.stable.v2 as nw
    import polars as pl

__all__ = [
    "PERCENTILES",
    "TOPIC_SCHEMA",
    "gap_percentiles",
    "gap_percentiles_generic",
    "percentiles",
    "sequence_counts",
    "sequence_counts_generic",
]

Engine = Literal["polars", "spark"]
ENGINES: tuple[Engine, ...] = ("polars", "spark")

# The columns the analysis reads; the rest (headers, bodies) stay on disk.
ANALYSIS_COLUMNS = (
    "event_index",
    "kind",
    "recorded_ns",
    "source_ns",
    "reception_ns",
    "name",
    "source_gid",
    "sequence_number",
    "message_id",
    "in_reply_to",
    "body_size",
    "detail",
)


# The peak memory one event costs while the tables are computed in memory: its analysis
# columns (~100 bytes on busy sessions: names and ids are short strings) and the
# queries' working memory (about twice that, measured on 10 M events: 3.1 GB peak).
BYTES_PER_EVENT = 320


@dataclass
class Dataset:
    """Sessions opened for analysis on one engine. `batches`: on polars, sessions that
    together exceed the memory budget are analysed a batch of sessions at a time (every
    table is per session, so batches add up to the whole)."""

    frame: nw.LazyFrame[Any]
    engine: Engine
    sessions: tuple[Session, ...]
    spark: Any = None
    batches: tuple[tuple[Session, ...], ...] = ()
    budget_bytes: int | None = None


def memory_budget() -> int:
    """Bytes the polars engine may keep in memory for a dataset: a quarter of the
    machine's memory (the rest is for the tables, the query's own buffers and the
    user's other work)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        total = 8 << 30
    return int(total) // 4


def fits_in_memory(sessions: Iterable[Session], budget: int | None = None) -> bool:
    """Whether the sessions' analysis columns fit the memory budget, by row count (read
    from the parts' footers, no data)."""
    rows = sum(s.rows for s in sessions)
    return rows * BYTES_PER_EVENT <= (memory_budget() if budget is None else budget)


def batches(sessions: Sequence[Session], budget: int) -> tuple[tuple[Session, ...], ...]:
    """Consecutive sessions grouped so that each group fits `budget` (a session larger
    than the budget is a group of its own, read by the streaming engine)."""
    groups: list[list[Session]] = []
    used = budget + 1
    for session in sessions:
        size = session.rows * BYTES_PER_EVENT
        if used + size > budget:
            groups.append([])
            used = 0
        groups[-1].append(session)
        used += size
    return tuple(tuple(g) for g in groups)


def load(
    sessions: Sequence[str | os.PathLike[str] | Session] | str | os.PathLike[str] | Session,
    *,
    engine: Engine = "polars",
    master: str | None = None,
    remote: str | None = None,
    spark: Any = None,
    skip_bad_parts: bool = False,
    cache: bool | None = None,
    memory_budget_bytes: int | None = None,
) -> Dataset:
    """Open one or more session directories as one lazy dataset on `engine`.

    A path that does not exist and holds `*`, `?` or `[` is a glob pattern, expanded in
    sorted order (an error if it matches nothing). On Spark, `master` is `local[N]` or a
    cluster URL, `remote` a Spark Connect server `sc://HOST:PORT` (not both); every part
    of every session is read in one scan. With `cache`, the columns the analysis reads are
    decoded once and kept (polars: in memory; Spark: `DataFrame.cache()`, spilling to
    disk), since every table scans them. By default polars caches only what fits
    `memory_budget_bytes` (a quarter of the machine's memory, see `fits_in_memory`);
    larger sets of sessions are analysed in batches (see `analyze`).
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if master is not None and remote is not None:
        raise ValueError("give a Spark master or a Spark Connect remote, not both")
    if engine == "polars" and (master is not None or remote is not None):
        raise ValueError("a Spark master or remote needs engine spark, not polars")
    if isinstance(sessions, str | os.PathLike | Session):
        sessions = [sessions]
    if not sessions:
        raise SessionError("no session given")
    opened = _open(sessions, skip_bad_parts)
    if engine == "polars" or not any(s.parts for s in opened):
        # Empty sessions give empty tables; no need to start Spark for them. One scan
        # over every part of every session (polars reads the files in parallel).
        lazy = scan_parts(opened, ANALYSIS_COLUMNS)
        budget = memory_budget() if memory_budget_bytes is None else memory_budget_bytes
        groups: tuple[tuple[Session, ...], ...] = ()
        if cache is None:
            cache = fits_in_memory(opened, budget)
            if not cache:
                groups = batches(opened, budget)
        if cache:
            lazy = lazy.collect().lazy()
        return Dataset(
            nw.from_native(lazy),
            "polars" if engine == "polars" else engine,
            opened,
            batches=groups,
            budget_bytes=budget,
        )
    if spark is None:
        spark = spark_session(master or "local[*]", remote=remote)
    native = read_sessions(spark, opened, ANALYSIS_COLUMNS)
    if cache is not False:
        native = native.cache()
    return Dataset(nw.from_native(native), "spark", opened, spark)


def _open(sessions: Sequence[str | os.PathLike[str] | Session], skip: bool) -> tuple[Session, ...]:
    given = [s for s in sessions if isinstance(s, Session)]
    paths = [s for s in sessions if not isinstance(s, Session)]
    return (*given, *open_sessions(expand_paths(paths), skip_bad_parts=skip))


def _as_dataset(
    data: Dataset | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
) -> Dataset:
    return data if isinstance(data, Dataset) else load(data)


def _collect(frame: nw.LazyFrame[Any], schema: dict[str, Any], keys: Sequence[str]) -> pl.DataFrame:
    """Collect to polars with fixed dtypes and sorted rows, whatever the engine."""
    selected = nw.to_native(frame.select(*schema))
    if isinstance(selected, pl.LazyFrame):
        # Streaming: sessions larger than memory are read in batches.
        native = selected.collect(engine="streaming")
    else:
        native = nw.from_native(selected).collect(backend="polars").to_native()
    assert isinstance(native, pl.DataFrame)
    return native.select(pl.col(name).cast(dtype) for name, dtype in schema.items()).sort(
        keys, nulls_last=True
    )


def _materialise(frame: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    """Compute a frame once for several tables: polars keeps it in memory, Spark caches it
    (spilling to disk)."""
    native = nw.to_native(frame)
    if isinstance(native, pl.LazyFrame):
        return nw.from_native(native.collect(engine="streaming").lazy())
    cached: nw.LazyFrame[Any] = nw.from_native(native.cache())
    return cached


def _release(frame: nw.LazyFrame[Any]) -> None:
    native = nw.to_native(frame)
    if not isinstance(native, pl.LazyFrame):
        native.unpersist()


def _table(data: Dataset | Sequence[str] | str, name: str) -> pl.DataFrame:
    return analyze(_as_dataset(data), tables=[name])[name]


def topic_stats(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """Per session and topic: messages published and received, bytes, reception span,
    rate (received - 1 over the span, i.e. one over the mean inter-arrival time), and
    p50/p90/p99 of inter-arrival time and of source-to-reception latency, in ms."""
    return _table(data, "topics")


def service_calls(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """One row per request: its responses, the first one's arrival and the round trip;
    status is answered, late (answered after the client gave up) or orphan."""
    return _table(data, "calls")


def orphans(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """The requests that were never answered."""
    return _table(data, "orphans")


def service_stats(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """Per session and service: requests, answered, orphans (never answered), late
    (answered after the client gave up), duplicate responses (beyond the first to a
    request), and p50/p90/p99 round-trip time in ms over the answered requests."""
    return _table(data, "services")


def sequence_stats(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """Per session, topic or service, and sender (publisher GID for messages, client GID
    for requests), over what was received: sequence numbers missing from first to last,
    gaps (runs of missing numbers), duplicates, and reordered arrivals (a number lower
    than the one received just before it)."""
    return _table(data, "sequences")


def timeseries(data: Dataset | Sequence[str] | str, bin_s: float = 1.0) -> pl.DataFrame:
    """Messages received per topic in bins of `bin_s` seconds from the session's first
    reception: rate and mean/max latency over time, for plots."""
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    ds = _as_dataset(data)
    keys = ["session", "topic", "_bin"]
    bin_ns = int(bin_s * 1e9)
    frame = (
        ds.frame.filter(
            (nw.col("kind") == RECEIVED) & (nw.col("detail") == EnvelopeKind.MESSAGE.value)
        )
        .rename({"name": "topic"})
        .with_columns(nw.col("reception_ns").min().over("session").alias("_start"))
        .with_columns(
            ((nw.col("reception_ns") - nw.col("_start")) // bin_ns).alias("_bin"),
            ((nw.col("reception_ns") - nw.col("source_ns")) / 1_000_000).alias("_lat"),
        )
        .group_by(*keys)
        .agg(
            nw.len().alias("messages"),
            nw.col("_lat").mean().alias("latency_ms_mean"),
            nw.col("_lat").max().alias("latency_ms_max"),
        )
        .with_columns(
            (nw.col("_bin") * bin_s).alias("t_s"),
            (nw.col("messages") / bin_s).alias("rate_hz"),
        )
    )
    return _collect(frame, SERIES_SCHEMA, ["session", "topic", "t_s"])


TABLES: dict[str, Callable[[Dataset], pl.DataFrame]] = {
    "topics": topic_stats,
    "services": service_stats,
    "calls": service_calls,
    "orphans": orphans,
    "sequences": sequence_stats,
}


def analyze(
    data: Dataset | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
    *,
    engine: Engine = "polars",
    master: str | None = None,
    spark: Any = None,
    tables: Iterable[str] = TABLES,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, pl.DataFrame]:
    """Every analysis table, by name (see TABLES). `progress(table, done, total)` is
    called before each table is computed (per batch of sessions, when the dataset is
    analysed in batches) and once at the end."""
    ds = (
        data if isinstance(data, Dataset) else load(data, engine=engine, master=master, spark=spark)
    )
    names = _checked(tables)
    if len(ds.batches) > 1:
        results = _analyze_in_batches(ds, names, progress)
        total = len(names) * len(ds.batches)
    else:
        results = _analyze(ds, names, progress, 0, len(names))
        total = len(names)
    if progress is not None:
        progress("", total, total)
    return results


TABLE_KEYS: dict[str, list[str]] = {
    "topics": ["session", "topic"],
    "services": ["session", "service"],
    "calls": CALL_KEYS,
    "orphans": CALL_KEYS,
    "sequences": SEQUENCE_KEYS,
}


def _checked(tables: Iterable[str]) -> list[str]:
    names = list(tables)
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        raise ValueError(f"unknown tables {unknown}; known: {', '.join(TABLES)}")
    return names


T = TypeVar("T")
# A table's plan: its lazy frame, schema and sort keys.
_Plan = tuple[nw.LazyFrame[Any], dict[str, Any], list[str]]


def _each_table(
    ds: Dataset,
    names: Sequence[str],
    progress: Callable[[str, int, int], None] | None,
    done: int,
    total: int,
    finish: Callable[[str, _Plan], T],
) -> dict[str, T]:
    """`finish(name, plan)` for each table, the calls table computed once (on first use)
    and shared by the calls, services and orphans tables, released at the end."""
    shared: list[nw.LazyFrame[Any]] = []

    def calls() -> nw.LazyFrame[Any]:
        if not shared:
            shared.append(_materialise(defined.calls(ds.frame)))
        return shared[0]

    plans: dict[str, Callable[[], _Plan]] = {
        "topics": lambda: (defined.topics(ds.frame), TOPIC_SCHEMA, TABLE_KEYS["topics"]),
        "services": lambda: (defined.services(calls()), SERVICE_SCHEMA, TABLE_KEYS["services"]),
        "calls": lambda: (calls(), CALL_SCHEMA, CALL_KEYS),
        "orphans": lambda: (defined.orphans(calls()), CALL_SCHEMA, CALL_KEYS),
        "sequences": lambda: (defined.sequences(ds.frame), SEQUENCE_SCHEMA, SEQUENCE_KEYS),
    }
    results: dict[str, T] = {}
    try:
        for n, name in enumerate(names):
            if progress is not None:
                progress(name, done + n, total)
            results[name] = finish(name, plans[name]())
    finally:
        for frame in shared:
            _release(frame)
    return results


def _analyze(
    ds: Dataset,
    names: Sequence[str],
    progress: Callable[[str, int, int], None] | None,
    done: int,
    total: int,
) -> dict[str, pl.DataFrame]:
    return _each_table(ds, names, progress, done, total, lambda _name, plan: _collect(*plan))


def _analyze_in_batches(
    ds: Dataset, names: Sequence[str], progress: Callable[[str, int, int], None] | None
) -> dict[str, pl.DataFrame]:
    """Each batch of sessions loaded (in memory when it fits the budget) and analysed
    on its own; every table is per session, so the batches' rows are the whole table."""
    parts: dict[str, list[pl.DataFrame]] = {name: [] for name in names}
    total = len(names) * len(ds.batches)
    for i, group in enumerate(ds.batches):
        batch = load(list(group), cache=fits_in_memory(group, ds.budget_bytes))
        for name, frame in _analyze(batch, names, progress, i * len(names), total).items():
            parts[name].append(frame)
    return {
        name: pl.concat(frames, how="vertical").sort(TABLE_KEYS[name], nulls_last=True)
        for name, frames in parts.items()
    }


_NW_TYPES: dict[Any, Any] = {pl.String: nw.String(), pl.Int64: nw.Int64(), pl.Float64: nw.Float64()}


def write_tables(
    ds: Dataset,
    directory: str | os.PathLike[str],
    *,
    tables: Iterable[str] = TABLES,
    progress: Callable[[str, int, int], None] | None = None,
) -> dict[str, int]:
    """Each table written as `DIR/<table>.parquet` by the engine that computed it, and
    its row count. Spark writes from its executors (a directory of part files, as Spark
    does; polars and Spark both read it back) and nothing of a table goes through the
    driver; polars writes one file. `directory` may be any URL the engine can write
    (`hdfs://`, `s3a://` on a cluster)."""
    names = _checked(tables)
    if ds.engine == "polars" or ds.spark is None:
        results = analyze(ds, tables=names, progress=progress)
        Path(directory).mkdir(parents=True, exist_ok=True)
        for name, frame in results.items():
            frame.write_parquet(Path(directory) / f"{name}.parquet")
        return {name: frame.height for name, frame in results.items()}
    base = str(directory).rstrip("/")

    def write(name: str, plan: _Plan) -> int:
        lazy, schema, keys = plan
        typed = lazy.select(nw.col(c).cast(_NW_TYPES[t]) for c, t in schema.items())
        path = f"{base}/{name}.parquet"
        nw.to_native(typed).orderBy(*keys).write.mode("overwrite").parquet(path)
        # The count comes from the written files' footers, not from the data.
        return int(ds.spark.read.parquet(path).count())

    counts = _each_table(ds, names, progress, 0, len(names), write)
    if progress is not None:
        progress("", len(names), len(names))
    return counts
