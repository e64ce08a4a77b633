"""The analysis pipeline, written once with narwhals over lazy frames.

`load(...)` opens sessions as one narwhals LazyFrame backed by polars (the default) or
by PySpark (`engine="spark"`, `master="local[*]"` or a cluster URL). Every table
function takes that dataset and returns a polars DataFrame sorted by its keys, so the
same code serves the command line, notebooks and the parity tests.

Percentiles are each engine's own exact linear interpolation (numpy's default):
polars' `quantile(q, "linear")` and Spark's exact `percentile` (never Spark's
approx_percentile), inside the group-by. For n sorted values x[0..n-1] and q in [0, 1],
h = (n - 1) q and the result is x[floor(h)] + (h - floor(h)) (x[floor(h) + 1] -
x[floor(h)]); both engines compute h in floating point, so they agree to 1e-12 relative
(the parity tests check it), not always to the last bit.

Each table is defined once, in narwhals. Where narwhals cannot say the fast plan (the
gaps between successive values inside a group-by), a small kernel gives polars its
native plan: a per-group sort instead of a window and a join. Spark runs the narwhals
definition, which is its native plan (a window). The parity tests cover both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import narwhals.stable.v2 as nw
import polars as pl

from mailbus.sessions.reader import Session, SessionError, open_sessions

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Engine = Literal["polars", "spark"]
ENGINES: tuple[Engine, ...] = ("polars", "spark")
# (column suffix, q): the percentiles every table reports.
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))

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


def spark_session(
    master: str = "local[*]",
    *,
    shuffle_partitions: int = 4,
    driver_memory: str = "2g",
    app_name: str = "mailbus-analyze",
) -> SparkSession:
    """A SparkSession for the analysis (getOrCreate: an existing one is reused)."""
    from pyspark.sql import SparkSession

    builder: Any = SparkSession.builder
    spark = (
        builder.master(master)
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
    )
    if master.startswith("local"):
        # A local driver listens on loopback only, never on the machine's interfaces.
        spark = spark.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    spark = spark.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    session: SparkSession = spark
    return session


def load(
    sessions: Sequence[str | os.PathLike[str] | Session] | str | os.PathLike[str] | Session,
    *,
    engine: Engine = "polars",
    master: str | None = None,
    spark: Any = None,
    skip_bad_parts: bool = False,
    cache: bool = True,
) -> Dataset:
    """Open one or more session directories as one lazy dataset on `engine`.

    With `cache`, the columns the analysis reads are decoded once and kept (polars: in
    memory; Spark: `DataFrame.cache()`, spilling to disk), since every table scans them.
    """
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if isinstance(sessions, str | os.PathLike | Session):
        sessions = [sessions]
    if not sessions:
        raise SessionError("no session given")
    opened = _open(sessions, skip_bad_parts)
    if engine == "polars" or not any(s.parts for s in opened):
        # Empty sessions give empty tables; no need to start Spark for them.
        frames = [s.scan().select(*ANALYSIS_COLUMNS, "session") for s in opened]
        lazy = pl.concat(frames, how="vertical")
        if cache:
            lazy = lazy.collect().lazy()
        return Dataset(nw.from_native(lazy), "polars" if engine == "polars" else engine, opened)
    if spark is None:
        spark = spark_session(master or "local[*]")
    parts: list[nw.LazyFrame[Any]] = []
    for s in opened:
        if not s.parts:
            continue
        native = spark.read.parquet(*(str(p) for p in s.parts))
        frame = nw.from_native(native).select(*ANALYSIS_COLUMNS)
        parts.append(frame.with_columns(session=nw.lit(s.name, dtype=nw.String())))
    frame = nw.concat(parts, how="vertical")
    if cache:
        frame = nw.from_native(nw.to_native(frame).cache())
    return Dataset(frame, "spark", opened, spark)


def _open(sessions: Sequence[str | os.PathLike[str] | Session], skip: bool) -> tuple[Session, ...]:
    given = [s for s in sessions if isinstance(s, Session)]
    paths = [s for s in sessions if not isinstance(s, Session)]
    return (*given, *open_sessions(paths, skip_bad_parts=skip))


def _as_dataset(
    data: Dataset | Sequence[str | os.PathLike[str]] | str | os.PathLike[str],
) -> Dataset:
    return data if isinstance(data, Dataset) else load(data)


# -- building blocks -------------------------------------------------------------------
def _quantiles(value: str, prefix: str) -> list[nw.Expr]:
    return [nw.col(value).quantile(q, "linear").alias(f"{prefix}_{tag}") for tag, q in PERCENTILES]


def percentiles(
    frame: nw.LazyFrame[Any], keys: Sequence[str], value: str, prefix: str
) -> nw.LazyFrame[Any]:
    """Per group of `keys`: `{prefix}_p50/_p90/_p99` of `value` (nulls ignored), by the
    engine's exact linear interpolation."""
    floats = frame.with_columns(nw.col(value).cast(nw.Float64()))
    return floats.group_by(*keys).agg(*_quantiles(value, prefix))


def _is_polars(frame: nw.LazyFrame[Any]) -> bool:
    return bool(frame.implementation.is_polars())


def gap_percentiles(
    frame: nw.LazyFrame[Any], keys: Sequence[str], value: str, prefix: str, scale: float
) -> nw.LazyFrame[Any]:
    """Per group: percentiles of the gaps between successive values of `value` (each gap
    divided by `scale`). The gaps of the sorted values do not depend on how ties are
    ordered, so no tie-breaking key is needed."""
    if _is_polars(frame):
        native = nw.to_native(frame)
        assert isinstance(native, pl.LazyFrame)
        gap = pl.col(value).sort().diff() / scale
        return nw.from_native(
            native.group_by(keys).agg(
                gap.quantile(q, "linear").alias(f"{prefix}_{tag}") for tag, q in PERCENTILES
            )
        )
    return gap_percentiles_generic(frame, keys, value, prefix, scale)


def gap_percentiles_generic(
    frame: nw.LazyFrame[Any], keys: Sequence[str], value: str, prefix: str, scale: float
) -> nw.LazyFrame[Any]:
    """`gap_percentiles` in narwhals alone (a window): Spark's plan."""
    previous = nw.col(value).shift(1).over(*keys, order_by=value)
    gaps = frame.with_columns(((nw.col(value) - previous) / scale).alias("_gap"))
    return percentiles(gaps, keys, "_gap", prefix)


def _collect(frame: nw.LazyFrame[Any], schema: dict[str, Any], keys: Sequence[str]) -> pl.DataFrame:
    """Collect to polars with fixed dtypes and sorted rows, whatever the engine."""
    native = frame.select(*schema).collect(backend="polars").to_native()
    assert isinstance(native, pl.DataFrame)
    return native.select(pl.col(name).cast(dtype) for name, dtype in schema.items()).sort(
        keys, nulls_last=True
    )


def _materialise(frame: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    """Compute a frame once for several tables: polars keeps it in memory, Spark caches it
    (spilling to disk)."""
    native = nw.to_native(frame)
    if isinstance(native, pl.LazyFrame):
        return nw.from_native(native.collect().lazy())
    cached: nw.LazyFrame[Any] = nw.from_native(native.cache())
    return cached


def _release(frame: nw.LazyFrame[Any]) -> None:
    native = nw.to_native(frame)
    if not isinstance(native, pl.LazyFrame):
        native.unpersist()


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
    return _collect(_topics(ds.frame), TOPIC_SCHEMA, ["session", "topic"])


def _topics(frame: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    keys = ["session", "topic"]
    lf = frame.rename({"name": "topic"})
    kind, detail = nw.col("kind"), nw.col("detail")
    is_received = (kind == RECEIVED) & (detail == "message")
    is_published = kind == PUBLISHED
    # One group-by for the counts and the latency percentiles (conditional columns).
    events = lf.filter(is_received | is_published).with_columns(
        nw.when(is_published).then(1).otherwise(0).alias("_pub"),
        nw.when(is_received).then(1).otherwise(0).alias("_rec"),
        nw.when(is_published).then(nw.col("body_size")).otherwise(0).alias("_pub_bytes"),
        nw.when(is_received).then(nw.col("body_size")).otherwise(0).alias("_rec_bytes"),
        nw.when(is_received).then(nw.col("reception_ns")).alias("_rec_ns"),
        nw.when(is_received)
        .then((nw.col("reception_ns") - nw.col("source_ns")) / 1_000_000)
        .alias("_latency"),
    )
    counts = events.group_by(*keys).agg(
        nw.col("_pub").sum().alias("published"),
        nw.col("_rec").sum().alias("received"),
        nw.col("_pub_bytes").sum().alias("bytes_published"),
        nw.col("_rec_bytes").sum().alias("bytes_received"),
        nw.col("_rec_ns").min().alias("first_ns"),
        nw.col("_rec_ns").max().alias("last_ns"),
        *_quantiles("_latency", "latency_ms"),
    )
    interarrival = gap_percentiles(
        lf.filter(is_received), keys, "reception_ns", "interarrival_ms", 1_000_000
    )
    span = (nw.col("last_ns") - nw.col("first_ns")) / 1_000_000_000
    return counts.join(interarrival, on=keys, how="left").with_columns(
        _count("published").alias("published"),
        _count("received").alias("received"),
        _count("bytes_published").alias("bytes_published"),
        _count("bytes_received").alias("bytes_received"),
        span.alias("duration_s"),
        nw.when((nw.col("received") > 1) & (nw.col("last_ns") > nw.col("first_ns")))
        .then((nw.col("received") - 1) / span)
        .alias("rate_hz"),
    )


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
CALL_KEYS = ["session", "service", "sent_ns", "request_id"]


def _calls(lf: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
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
    return _collect(_calls(ds.frame), CALL_SCHEMA, CALL_KEYS)


def orphans(data: Dataset | Sequence[str] | str) -> pl.DataFrame:
    """The requests that were never answered."""
    ds = _as_dataset(data)
    return _collect(_orphans(_calls(ds.frame)), CALL_SCHEMA, CALL_KEYS)


def _orphans(calls: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    return calls.filter(nw.col("status") == "orphan")


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
    return _collect(_services(_calls(ds.frame)), SERVICE_SCHEMA, ["session", "service"])


def _services(calls: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    status = nw.col("status")
    # One group-by for the counts and the round-trip percentiles (orphans' rtt is null).
    return (
        calls.with_columns(
            nw.when(status != "orphan").then(1).otherwise(0).alias("_answered"),
            nw.when(status == "orphan").then(1).otherwise(0).alias("_orphan"),
            nw.when(status == "late").then(1).otherwise(0).alias("_late"),
            nw.when(nw.col("responses") > 1)
            .then(nw.col("responses") - 1)
            .otherwise(0)
            .alias("_dup"),
            nw.col("rtt_ms").cast(nw.Float64()),
        )
        .group_by("session", "service")
        .agg(
            nw.len().alias("requests"),
            nw.col("_answered").sum().alias("answered"),
            nw.col("_orphan").sum().alias("orphans"),
            nw.col("_late").sum().alias("late"),
            nw.col("_dup").sum().alias("duplicate_responses"),
            *_quantiles("rtt_ms", "rtt_ms"),
        )
    )


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
    return _collect(_sequences(ds.frame), SEQUENCE_SCHEMA, SEQUENCE_KEYS)


SEQUENCE_KEYS = ["session", "what", "name", "source_gid"]


def _sequences(frame: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    kind, detail = nw.col("kind"), nw.col("detail")
    received = frame.filter(
        (kind == RECEIVED)
        & ((detail == "message") | (detail == "request"))
        & ~nw.col("sequence_number").is_null()
        # Numbers start at 1; a negative one (-1 means "none" in the engine, and a
        # hand-written file may hold it) is not a number a sender gave.
        & (nw.col("sequence_number") >= 0)
        & ~nw.col("source_gid").is_null()
    ).rename({"detail": "what"})
    return sequence_counts(received, SEQUENCE_KEYS).with_columns(
        (nw.col("last_sequence") - nw.col("first_sequence") + 1 - nw.col("distinct")).alias(
            "missing"
        ),
        (nw.col("received") - nw.col("distinct")).alias("duplicates"),
    )


def sequence_counts(received: nw.LazyFrame[Any], keys: Sequence[str]) -> nw.LazyFrame[Any]:
    """Per group, in one group-by: received, reordered (lower than the number received
    just before it), distinct, first and last number, and gaps (successive distinct
    numbers more than one apart: duplicates sort next to each other, 0 apart)."""
    if _is_polars(received):
        native = nw.to_native(received)
        assert isinstance(native, pl.LazyFrame)
        number = pl.col("sequence_number")
        arrival_order = number.sort_by("reception_ns", "event_index")
        return nw.from_native(
            native.group_by(keys).agg(
                pl.len().alias("received"),
                (arrival_order.diff() < 0).sum().alias("reordered"),
                number.n_unique().alias("distinct"),
                number.min().alias("first_sequence"),
                number.max().alias("last_sequence"),
                (number.sort().diff() > 1).sum().alias("gaps"),
            )
        )
    return sequence_counts_generic(received, keys)


def sequence_counts_generic(received: nw.LazyFrame[Any], keys: Sequence[str]) -> nw.LazyFrame[Any]:
    """`sequence_counts` in narwhals alone (two windows, one group-by): Spark's plan."""
    seq = nw.col("sequence_number")
    before = seq.shift(1).over(*keys, order_by=["reception_ns", "event_index"])
    below = seq.shift(1).over(*keys, order_by="sequence_number")
    return (
        received.with_columns(
            nw.when(seq < before).then(1).otherwise(0).alias("_reordered"),
            nw.when(seq - below > 1).then(1).otherwise(0).alias("_gap"),
        )
        .group_by(*keys)
        .agg(
            nw.len().alias("received"),
            nw.col("_reordered").sum().alias("reordered"),
            seq.n_unique().alias("distinct"),
            seq.min().alias("first_sequence"),
            seq.max().alias("last_sequence"),
            nw.col("_gap").sum().alias("gaps"),
        )
    )


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
    shared: list[nw.LazyFrame[Any]] = []

    def calls() -> nw.LazyFrame[Any]:
        # Computed once and shared by the calls, services and orphans tables.
        if not shared:
            shared.append(_materialise(_calls(ds.frame)))
        return shared[0]

    plans: dict[str, Callable[[], tuple[nw.LazyFrame[Any], dict[str, Any], list[str]]]] = {
        "topics": lambda: (_topics(ds.frame), TOPIC_SCHEMA, ["session", "topic"]),
        "services": lambda: (_services(calls()), SERVICE_SCHEMA, ["session", "service"]),
        "calls": lambda: (calls(), CALL_SCHEMA, CALL_KEYS),
        "orphans": lambda: (_orphans(calls()), CALL_SCHEMA, CALL_KEYS),
        "sequences": lambda: (_sequences(ds.frame), SEQUENCE_SCHEMA, SEQUENCE_KEYS),
    }
    results: dict[str, pl.DataFrame] = {}
    try:
        for done, name in enumerate(names):
            if progress is not None:
                progress(name, done, len(names))
            results[name] = _collect(*plans[name]())
    finally:
        for frame in shared:
            _release(frame)
    if progress is not None:
        progress("", len(names), len(names))
    return results
