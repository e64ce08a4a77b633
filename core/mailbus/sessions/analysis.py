"""The analysis pipeline, written once with narwhals over lazy frames.

`load(...)` opens sessions as one narwhals LazyFrame backed by polars (the default) or
by PySpark (`engine="spark"`, `master="local[*]"` or a cluster URL). Every table
function takes that dataset and returns a polars DataFrame sorted by its keys, so the
same code serves the command line, notebooks and the parity tests.

Percentiles use exact linear interpolation (numpy's default, polars' "linear"): for n
sorted values x[0..n-1] and q in [0, 1], h = (n - 1) q and the result is
x[floor(h)] + (h - floor(h)) (x[floor(h) + 1] - x[floor(h)]). Spark's built-in
percentile is exact but its approx_percentile is not, and polars and Spark disagree on
edge cases, so both engines compute it here from ordinal ranks with integer arithmetic
for h: the two give the same floats.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import narwhals.stable.v2 as nw
import polars as pl

from mailbus.sessions.reader import (
    Session,
    SessionError,
    expand_paths,
    open_sessions,
    scan_parts,
)
from mailbus.sessions.spark import read_sessions
from mailbus.sessions.spark import spark_session as spark_session  # re-exported

Engine = Literal["polars", "spark"]
ENGINES: tuple[Engine, ...] = ("polars", "spark")
# (column suffix, q in percent): integer percents keep h = (n-1)q/100 exact.
PERCENTILES: tuple[tuple[str, int], ...] = (("p50", 50), ("p90", 90), ("p99", 99))

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

RECEIVED = "email.received"
PUBLISHED = "message.published"
REQUEST_SENT = "request.sent"
RESPONSE_SENT = "response.sent"
RESPONSE_MATCHED = "response.matched"


@dataclass
class Dataset:
    """Sessions opened for analysis on one engine."""

    frame: nw.LazyFrame[Any]
    engine: Engine
    sessions: tuple[Session, ...]
    spark: Any = None


def load(
    sessions: Sequence[str | os.PathLike[str] | Session] | str | os.PathLike[str] | Session,
    *,
    engine: Engine = "polars",
    master: str | None = None,
    remote: str | None = None,
    spark: Any = None,
    skip_bad_parts: bool = False,
    cache: bool = True,
) -> Dataset:
    """Open one or more session directories as one lazy dataset on `engine`.

    A path that does not exist and holds `*`, `?` or `[` is a glob pattern, expanded in
    sorted order (an error if it matches nothing). On Spark, `master` is `local[N]` or a
    cluster URL, `remote` a Spark Connect server `sc://HOST:PORT` (not both); every part
    of every session is read in one scan. With `cache`, the columns the analysis reads are
    decoded once and kept (polars: in memory; Spark: `DataFrame.cache()`, spilling to
    disk), since every table scans them.
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
        if cache:
            lazy = lazy.collect().lazy()
        return Dataset(nw.from_native(lazy), "polars" if engine == "polars" else engine, opened)
    if spark is None:
        spark = spark_session(master or "local[*]", remote=remote)
    native = read_sessions(spark, opened, ANALYSIS_COLUMNS)
    if cache:
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


# -- building blocks -------------------------------------------------------------------
def percentiles(
    frame: nw.LazyFrame[Any], keys: Sequence[str], value: str, prefix: str
) -> nw.LazyFrame[Any]:
    """Per group of `keys`: `{prefix}_p50/_p90/_p99` of `value` (nulls ignored), by exact
    linear interpolation between the ordinal ranks around h = (n - 1) q."""
    v = nw.col(value)
    ranked = frame.filter(~v.is_null()).with_columns(
        (v.rank("ordinal").over(*keys) - 1).cast(nw.Int64()).alias("_rank"),
        v.count().over(*keys).cast(nw.Int64()).alias("_n"),
    )
    picks = []
    for tag, q in PERCENTILES:
        lo = (nw.col("_n") - 1) * q // 100
        picks.append(nw.when(nw.col("_rank") == lo).then(v).alias(f"_lo_{tag}"))
        picks.append(nw.when(nw.col("_rank") == lo + 1).then(v).alias(f"_hi_{tag}"))
    aggregated = (
        ranked.with_columns(*picks)
        .group_by(*keys)
        .agg(
            nw.col("_n").max(),
            *(nw.col(f"_{end}_{tag}").max() for tag, _ in PERCENTILES for end in ("lo", "hi")),
        )
    )
    results = []
    for tag, q in PERCENTILES:
        h100 = (nw.col("_n") - 1) * q
        fraction = (h100 - (h100 // 100) * 100) / 100
        lo, hi = nw.col(f"_lo_{tag}"), nw.col(f"_hi_{tag}")
        interpolated = lo + (hi - lo) * fraction
        # At the top rank there is no x[lo + 1]; the fraction is 0 there.
        results.append(
            nw.when(hi.is_null()).then(lo).otherwise(interpolated).alias(f"{prefix}_{tag}")
        )
    return aggregated.select(*keys, *results)


def _collect(frame: nw.LazyFrame[Any], schema: dict[str, Any], keys: Sequence[str]) -> pl.DataFrame:
    """Collect to polars with fixed dtypes and sorted rows, whatever the engine."""
    native = frame.select(*schema).collect(backend="polars").to_native()
    assert isinstance(native, pl.DataFrame)
    return native.select(pl.col(name).cast(dtype) for name, dtype in schema.items()).sort(
        keys, nulls_last=True
    )


def _count(name: str) -> nw.Expr:
    return nw.col(name).fill_null(0).cast(nw.Int64())


_Q = pl.Float64
TOPIC_SCHEMA: dict[str, Any] = {
    "session": pl.String,
    "topic": pl.String,
    "published": pl.Int64,
    "received": pl.Int64,
    "bytes_published": pl.Int64,
    "bytes_received": pl.Int64,
    "first_ns": pl.Int64,
    "last_ns": pl.Int64,
    "duration_s": _Q,
    "rate_hz": _Q,
    **{f"interarrival_ms_{t}": _Q for t, _ in PERCENTILES},
    **{f"latency_ms_{t}": _Q for t, _ in PERCENTILES},
}


def topic_stats(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """Per session and topic: messages published and received, bytes, reception span,
    rate (received - 1 over the span, i.e. one over the mean inter-arrival time), and
    p50/p90/p99 of inter-arrival time and of source-to-reception latency, in ms."""
    ds = _as_dataset(data)
    keys = ["session", "topic"]
    lf = ds.frame.rename({"name": "topic"})
    kind, detail = nw.col("kind"), nw.col("detail")
    is_received = (kind == RECEIVED) & (detail == "message")
    is_published = kind == PUBLISHED
    # One pass for the counts (conditional sums), no union of keys and joins.
    events = lf.filter(is_received | is_published).with_columns(
        nw.when(is_published).then(1).otherwise(0).alias("_pub"),
        nw.when(is_received).then(1).otherwise(0).alias("_rec"),
        nw.when(is_published).then(nw.col("body_size")).otherwise(0).alias("_pub_bytes"),
        nw.when(is_received).then(nw.col("body_size")).otherwise(0).alias("_rec_bytes"),
        nw.when(is_received).then(nw.col("reception_ns")).alias("_rec_ns"),
    )
    counts = events.group_by(*keys).agg(
        nw.col("_pub").sum().alias("published"),
        nw.col("_rec").sum().alias("received"),
        nw.col("_pub_bytes").sum().alias("bytes_published"),
        nw.col("_rec_bytes").sum().alias("bytes_received"),
        nw.col("_rec_ns").min().alias("first_ns"),
        nw.col("_rec_ns").max().alias("last_ns"),
    )
    received = lf.filter(is_received)
    previous = nw.col("reception_ns").shift(1).over(*keys, order_by=["reception_ns", "event_index"])
    gaps = received.with_columns(
        ((nw.col("reception_ns") - previous) / 1_000_000).alias("interarrival_ms"),
        ((nw.col("reception_ns") - nw.col("source_ns")) / 1_000_000).alias("latency_ms"),
    )
    span = (nw.col("last_ns") - nw.col("first_ns")) / 1_000_000_000
    table = (
        counts.join(
            percentiles(gaps, keys, "interarrival_ms", "interarrival_ms"), on=keys, how="left"
        )
        .join(percentiles(gaps, keys, "latency_ms", "latency_ms"), on=keys, how="left")
        .with_columns(
            _count("published").alias("published"),
            _count("received").alias("received"),
            _count("bytes_published").alias("bytes_published"),
            _count("bytes_received").alias("bytes_received"),
            span.alias("duration_s"),
            nw.when((nw.col("received") > 1) & (nw.col("last_ns") > nw.col("first_ns")))
            .then((nw.col("received") - 1) / span)
            .alias("rate_hz"),
        )
    )
    return _collect(table, TOPIC_SCHEMA, keys)


CALL_SCHEMA: dict[str, Any] = {
    "session": pl.String,
    "service": pl.String,
    "request_id": pl.String,
    "client_gid": pl.String,
    "sequence_number": pl.Int64,
    "sent_ns": pl.Int64,
    "responses": pl.Int64,
    "first_response_ns": pl.Int64,
    "rtt_ms": _Q,
    "status": pl.String,
}


def _calls(ds: Dataset) -> nw.LazyFrame[Any]:
    lf = ds.frame
    kind, detail = nw.col("kind"), nw.col("detail")
    # A request is known from the client (request.sent) and/or the server's reception.
    requests = (
        lf.filter((kind == REQUEST_SENT) | ((kind == RECEIVED) & (detail == "request")))
        .filter(~nw.col("message_id").is_null())
        .with_columns(
            nw.when(kind == REQUEST_SENT).then(1).otherwise(0).alias("_client_side"),
        )
        .group_by("session", "message_id")
        .agg(
            nw.col("name").min().alias("service"),
            nw.col("source_gid").min().alias("client_gid"),
            nw.col("sequence_number").min(),
            nw.col("source_ns").min().alias("sent_ns"),
            nw.col("_client_side").max().alias("client_side"),
        )
        .rename({"message_id": "request_id"})
    )
    # A response is known from the server (response.sent) and/or the client's reception;
    # it arrives when the client received it (else, server side only, when it was sent).
    responses = (
        lf.filter((kind == RESPONSE_SENT) | ((kind == RECEIVED) & (detail == "response")))
        .filter(~nw.col("message_id").is_null() & ~nw.col("in_reply_to").is_null())
        .group_by("session", "message_id")
        .agg(
            nw.col("in_reply_to").min().alias("request_id"),
            nw.col("reception_ns").max().alias("_received_ns"),
            nw.col("source_ns").max().alias("_sent_ns"),
        )
        .with_columns(
            nw.when(nw.col("_received_ns").is_null())
            .then(nw.col("_sent_ns"))
            .otherwise(nw.col("_received_ns"))
            .alias("arrival_ns")
        )
        .group_by("session", "request_id")
        .agg(nw.len().alias("responses"), nw.col("arrival_ns").min().alias("first_response_ns"))
    )
    matched = (
        lf.filter(kind == RESPONSE_MATCHED)
        .group_by("session", "in_reply_to")
        .agg(nw.len().alias("_matched"))
        .rename({"in_reply_to": "request_id"})
    )
    keys = ["session", "request_id"]
    responses_n = _count("responses")
    # Late: the client recorded the request, an answer came, but the client never
    # matched one (it had given up and discarded it).
    late = (nw.col("client_side") == 1) & (responses_n > 0) & (_count("_matched") == 0)
    return (
        requests.join(responses, on=keys, how="left")
        .join(matched, on=keys, how="left")
        .with_columns(
            responses_n.alias("responses"),
            ((nw.col("first_response_ns") - nw.col("sent_ns")) / 1_000_000).alias("rtt_ms"),
            nw.when(responses_n == 0)
            .then(nw.lit("orphan"))
            .when(late)
            .then(nw.lit("late"))
            .otherwise(nw.lit("answered"))
            .alias("status"),
        )
    )


def service_calls(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """One row per request: its responses, the first one's arrival and the round trip;
    status is answered, late (answered after the client gave up) or orphan."""
    ds = _as_dataset(data)
    return _collect(_calls(ds), CALL_SCHEMA, ["session", "service", "sent_ns", "request_id"])


def orphans(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """The requests that were never answered."""
    ds = _as_dataset(data)
    frame = _calls(ds).filter(nw.col("status") == "orphan")
    return _collect(frame, CALL_SCHEMA, ["session", "service", "sent_ns", "request_id"])


SERVICE_SCHEMA: dict[str, Any] = {
    "session": pl.String,
    "service": pl.String,
    "requests": pl.Int64,
    "answered": pl.Int64,
    "orphans": pl.Int64,
    "late": pl.Int64,
    "duplicate_responses": pl.Int64,
    **{f"rtt_ms_{t}": _Q for t, _ in PERCENTILES},
}


def service_stats(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """Per session and service: requests, answered, orphans (never answered), late
    (answered after the client gave up), duplicate responses (beyond the first to a
    request), and p50/p90/p99 round-trip time in ms over the answered requests."""
    ds = _as_dataset(data)
    keys = ["session", "service"]
    calls = _calls(ds)
    status = nw.col("status")
    counts = (
        calls.with_columns(
            nw.when(status != "orphan").then(1).otherwise(0).alias("_answered"),
            nw.when(status == "orphan").then(1).otherwise(0).alias("_orphan"),
            nw.when(status == "late").then(1).otherwise(0).alias("_late"),
            nw.when(nw.col("responses") > 1)
            .then(nw.col("responses") - 1)
            .otherwise(0)
            .alias("_dup"),
        )
        .group_by(*keys)
        .agg(
            nw.len().alias("requests"),
            nw.col("_answered").sum().alias("answered"),
            nw.col("_orphan").sum().alias("orphans"),
            nw.col("_late").sum().alias("late"),
            nw.col("_dup").sum().alias("duplicate_responses"),
        )
    )
    table = counts.join(percentiles(calls, keys, "rtt_ms", "rtt_ms"), on=keys, how="left")
    return _collect(table, SERVICE_SCHEMA, keys)


SEQUENCE_SCHEMA: dict[str, Any] = {
    "session": pl.String,
    "what": pl.String,
    "name": pl.String,
    "source_gid": pl.String,
    "received": pl.Int64,
    "distinct": pl.Int64,
    "first_sequence": pl.Int64,
    "last_sequence": pl.Int64,
    "missing": pl.Int64,
    "gaps": pl.Int64,
    "duplicates": pl.Int64,
    "reordered": pl.Int64,
}


def sequence_stats(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """Per session, topic or service, and sender (publisher GID for messages, client GID
    for requests), over what was received: sequence numbers missing from first to last,
    gaps (runs of missing numbers), duplicates, and reordered arrivals (a number lower
    than the one received just before it)."""
    ds = _as_dataset(data)
    keys = ["session", "what", "name", "source_gid"]
    kind, detail = nw.col("kind"), nw.col("detail")
    received = ds.frame.filter(
        (kind == RECEIVED)
        & ((detail == "message") | (detail == "request"))
        & ~nw.col("sequence_number").is_null()
        # Numbers start at 1; a negative one (-1 means "none" in the engine, and a
        # hand-written file may hold it) is not a number a sender gave.
        & (nw.col("sequence_number") >= 0)
        & ~nw.col("source_gid").is_null()
    ).rename({"detail": "what"})
    seq = nw.col("sequence_number")
    arrivals = (
        received.with_columns(
            seq.shift(1).over(*keys, order_by=["reception_ns", "event_index"]).alias("_prev")
        )
        .with_columns(nw.when(seq < nw.col("_prev")).then(1).otherwise(0).alias("_reordered"))
        .group_by(*keys)
        .agg(nw.len().alias("received"), nw.col("_reordered").sum().alias("reordered"))
    )
    distinct = (
        received.select(*keys, "sequence_number")
        .unique([*keys, "sequence_number"])
        .with_columns(seq.shift(1).over(*keys, order_by="sequence_number").alias("_below"))
        .with_columns(nw.when(seq - nw.col("_below") > 1).then(1).otherwise(0).alias("_gap"))
        .group_by(*keys)
        .agg(
            nw.len().alias("distinct"),
            seq.min().alias("first_sequence"),
            seq.max().alias("last_sequence"),
            nw.col("_gap").sum().alias("gaps"),
        )
    )
    table = arrivals.join(distinct, on=keys, how="left").with_columns(
        (nw.col("last_sequence") - nw.col("first_sequence") + 1 - nw.col("distinct")).alias(
            "missing"
        ),
        (nw.col("received") - nw.col("distinct")).alias("duplicates"),
    )
    return _collect(table, SEQUENCE_SCHEMA, keys)


SERIES_SCHEMA: dict[str, Any] = {
    "session": pl.String,
    "topic": pl.String,
    "t_s": _Q,
    "messages": pl.Int64,
    "rate_hz": _Q,
    "latency_ms_mean": _Q,
    "latency_ms_max": _Q,
}


def timeseries(data: Dataset | Sequence[str] | str, bin_s: float = 1.0) -> pl.DataFrame:
    """Messages received per topic in bins of `bin_s` seconds from the session's first
    reception: rate and mean/max latency over time, for plots."""
    if bin_s <= 0:
        raise ValueError("bin_s must be positive")
    ds = _as_dataset(data)
    keys = ["session", "topic", "_bin"]
    bin_ns = int(bin_s * 1e9)
    frame = (
        ds.frame.filter((nw.col("kind") == RECEIVED) & (nw.col("detail") == "message"))
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
    called before each table is computed and once at the end."""
    ds = (
        data if isinstance(data, Dataset) else load(data, engine=engine, master=master, spark=spark)
    )
    names = list(tables)
    unknown = [n for n in names if n not in TABLES]
    if unknown:
        raise ValueError(f"unknown tables {unknown}; known: {', '.join(TABLES)}")
    results: dict[str, pl.DataFrame] = {}
    for done, name in enumerate(names):
        if progress is not None:
            progress(name, done, len(names))
        if name == "orphans" and "calls" in results:
            # The same rows as orphans(ds) computes, without a second query.
            results[name] = results["calls"].filter(pl.col("status") == "orphan")
        else:
            results[name] = TABLES[name](ds)
    if progress is not None:
        progress("", len(names), len(names))
    return results
