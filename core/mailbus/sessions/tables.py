"""The analysis tables, each defined once over a narwhals LazyFrame of events.

Each function takes the events (or the calls) as a lazy frame on either engine and
returns the table as a lazy frame; `analysis` opens sessions, collects, writes and
shares the calls table between the tables that need it. docs/sessions.md defines every
column.

Percentiles are each engine's own exact linear interpolation (numpy's default):
polars' `quantile(q, "linear")` and Spark's exact `percentile` (never Spark's
approx_percentile), inside the group-by. For n sorted values x[0..n-1] and q in [0, 1],
h = (n - 1) q and the result is x[floor(h)] + (h - floor(h)) (x[floor(h) + 1] -
x[floor(h)]); both engines compute h in floating point, so they agree to 1e-12 relative
(the parity tests check it), not always to the last bit.

Where narwhals cannot say the fast plan (the gaps between successive values inside a
group-by), a small kernel gives polars its native plan: a per-group sort instead of a
window and a join. Spark runs the narwhals definition, which is its native plan (a
window). A property test checks each kernel against its narwhals definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from mailbus.envelope import EnvelopeKind
from mailbus.extras import needs_extra
from mailbus.trace import Kind

with needs_extra("mailbus.sessions"):
    import narwhals.stable.v2 as nw
    import polars as pl

# (column suffix, q): the percentiles every table reports.
PERCENTILES: tuple[tuple[str, float], ...] = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


RECEIVED = Kind.RECEIVED.value


PUBLISHED = Kind.PUBLISHED.value


REQUEST_SENT = Kind.REQUEST_SENT.value


RESPONSE_SENT = Kind.RESPONSE_SENT.value


RESPONSE_MATCHED = Kind.RESPONSE_MATCHED.value


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


def topics(frame: nw.LazyFrame[Any], *, kernels: bool = True) -> nw.LazyFrame[Any]:
    """The topics table. Its definition is one window (each reception's gap to the one
    before it) and one group-by, which Spark runs as is; polars, with `kernels`, gets
    the gaps from a per-group sort instead of the window, joined to the rest."""
    keys = ["session", "topic"]
    lf = frame.rename({"name": "topic"})
    kind, detail = nw.col("kind"), nw.col("detail")
    is_received = (kind == RECEIVED) & (detail == EnvelopeKind.MESSAGE.value)
    is_published = kind == PUBLISHED
    # One group-by for the counts and the percentiles (conditional columns).
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
    aggregations = [
        nw.col("_pub").sum().alias("published"),
        nw.col("_rec").sum().alias("received"),
        nw.col("_pub_bytes").sum().alias("bytes_published"),
        nw.col("_rec_bytes").sum().alias("bytes_received"),
        nw.col("_rec_ns").min().alias("first_ns"),
        nw.col("_rec_ns").max().alias("last_ns"),
        *_quantiles("_latency", "latency_ms"),
    ]
    if kernels and _is_polars(events):
        interarrival = gap_percentiles(
            lf.filter(is_received), keys, "reception_ns", "interarrival_ms", 1_000_000
        )
        table = events.group_by(*keys).agg(*aggregations).join(interarrival, on=keys, how="left")
    else:
        # Published rows have no reception (null): their gap is null and skipped.
        previous = nw.col("_rec_ns").shift(1).over(*keys, order_by="_rec_ns")
        gap = ((nw.col("_rec_ns") - previous) / 1_000_000).alias("_gap")
        table = (
            events.with_columns(gap)
            .group_by(*keys)
            .agg(*aggregations, *_quantiles("_gap", "interarrival_ms"))
        )
    span = (nw.col("last_ns") - nw.col("first_ns")) / 1_000_000_000
    return table.with_columns(
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


def calls(lf: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    kind, detail = nw.col("kind"), nw.col("detail")
    # A request is known from the client (request.sent) and/or the server's reception.
    requests = (
        lf.filter(
            (kind == REQUEST_SENT) | ((kind == RECEIVED) & (detail == EnvelopeKind.REQUEST.value))
        )
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
        lf.filter(
            (kind == RESPONSE_SENT) | ((kind == RECEIVED) & (detail == EnvelopeKind.RESPONSE.value))
        )
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


def orphans(calls: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
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


def services(calls: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
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


SEQUENCE_KEYS = ["session", "what", "name", "source_gid"]


def sequences(frame: nw.LazyFrame[Any]) -> nw.LazyFrame[Any]:
    kind, detail = nw.col("kind"), nw.col("detail")
    received = frame.filter(
        (kind == RECEIVED)
        & ((detail == EnvelopeKind.MESSAGE.value) | (detail == EnvelopeKind.REQUEST.value))
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
