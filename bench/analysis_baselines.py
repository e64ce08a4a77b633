"""The analysis tables written plainly, beside the pipeline, for bench.sessions.

`plain_polars` is what a polars user would write by hand for the tables of
docs/sessions.md (no narwhals); `direct_spark` is the same in Spark SQL. They are the
baselines the pipeline's cost is measured against, and they must give the pipeline's
numbers (bench.sessions checks that they do), so each one is also a second, independent
reading of the definitions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

RECEIVED = "email.received"
QS = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
COLUMNS = [
    *("event_index", "kind", "recorded_ns", "source_ns", "reception_ns", "name"),
    *("source_gid", "sequence_number", "message_id", "in_reply_to", "body_size", "detail"),
]


def _parts(session: Path) -> list[str]:
    return sorted(str(p) for p in session.glob("part-*.parquet"))


def plain_polars(sessions: list[Path]) -> dict[str, pl.DataFrame]:
    frame = pl.concat(
        [
            pl.scan_parquet(_parts(s)).select(COLUMNS).with_columns(session=pl.lit(s.name))
            for s in sessions
        ]
    ).collect()
    lf = frame.lazy()
    kind, detail = pl.col("kind"), pl.col("detail")
    is_rec = (kind == RECEIVED) & (detail == "message")
    is_pub = kind == "message.published"
    keys = ["session", "topic"]
    latency = (pl.col("reception_ns") - pl.col("source_ns")) / 1e6
    counts = (
        lf.filter(is_rec | is_pub)
        .rename({"name": "topic"})
        .group_by(keys)
        .agg(
            published=is_pub.sum().cast(pl.Int64),
            received=is_rec.sum().cast(pl.Int64),
            bytes_published=pl.col("body_size").filter(is_pub).sum(),
            bytes_received=pl.col("body_size").filter(is_rec).sum(),
            first_ns=pl.col("reception_ns").filter(is_rec).min(),
            last_ns=pl.col("reception_ns").filter(is_rec).max(),
            **{f"latency_ms_{t}": latency.filter(is_rec).quantile(q, "linear") for t, q in QS},
        )
    )
    # Inter-arrival gaps are the differences of the sorted reception times.
    gap_ms = pl.col("reception_ns").sort().diff() / 1e6
    gaps = (
        lf.filter(is_rec)
        .rename({"name": "topic"})
        .group_by(keys)
        .agg(**{f"interarrival_ms_{t}": gap_ms.quantile(q, "linear") for t, q in QS})
    )
    span = (pl.col("last_ns") - pl.col("first_ns")) / 1e9
    topics = counts.join(gaps, on=keys, how="left").with_columns(
        duration_s=span,
        rate_hz=pl.when((pl.col("received") > 1) & (span > 0)).then(
            (pl.col("received") - 1) / span
        ),
    )
    requests = (
        lf.filter(
            ((kind == "request.sent") | ((kind == RECEIVED) & (detail == "request")))
            & pl.col("message_id").is_not_null()
        )
        .group_by("session", "message_id")
        .agg(
            service=pl.col("name").min(),
            client_gid=pl.col("source_gid").min(),
            sequence_number=pl.col("sequence_number").min(),
            sent_ns=pl.col("source_ns").min(),
            client_side=(kind == "request.sent").any(),
        )
        .rename({"message_id": "request_id"})
    )
    responses = (
        lf.filter(
            ((kind == "response.sent") | ((kind == RECEIVED) & (detail == "response")))
            & pl.col("message_id").is_not_null()
            & pl.col("in_reply_to").is_not_null()
        )
        .group_by("session", "message_id")
        .agg(
            request_id=pl.col("in_reply_to").min(),
            arrival_ns=pl.coalesce(pl.col("reception_ns").max(), pl.col("source_ns").max()),
        )
        .group_by("session", "request_id")
        .agg(responses=pl.len().cast(pl.Int64), first_response_ns=pl.col("arrival_ns").min())
    )
    matched = (
        lf.filter(kind == "response.matched")
        .group_by("session", pl.col("in_reply_to").alias("request_id"))
        .agg(_matched=pl.len())
    )
    n = pl.col("responses").fill_null(0)
    calls = (
        requests.join(responses, on=["session", "request_id"], how="left")
        .join(matched, on=["session", "request_id"], how="left")
        .with_columns(
            responses=n,
            rtt_ms=(pl.col("first_response_ns") - pl.col("sent_ns")) / 1e6,
            status=pl.when(n == 0)
            .then(pl.lit("orphan"))
            .when(pl.col("client_side") & pl.col("_matched").is_null())
            .then(pl.lit("late"))
            .otherwise(pl.lit("answered")),
        )
        .collect()
    )
    status = pl.col("status")
    services = calls.group_by("session", "service").agg(
        requests=pl.len().cast(pl.Int64),
        answered=(status != "orphan").sum().cast(pl.Int64),
        orphans=(status == "orphan").sum().cast(pl.Int64),
        late=(status == "late").sum().cast(pl.Int64),
        duplicate_responses=(pl.col("responses") - 1).clip(0).sum(),
        **{f"rtt_ms_{t}": pl.col("rtt_ms").quantile(q, "linear") for t, q in QS},
    )
    seq = pl.col("sequence_number")
    sequences = (
        lf.filter(
            (kind == RECEIVED)
            & detail.is_in(["message", "request"])
            & (seq >= 0)
            & pl.col("source_gid").is_not_null()
        )
        .rename({"detail": "what"})
        .group_by("session", "what", "name", "source_gid")
        .agg(
            received=pl.len().cast(pl.Int64),
            reordered=(seq.sort_by("reception_ns", "event_index").diff() < 0).sum().cast(pl.Int64),
            distinct=seq.n_unique().cast(pl.Int64),
            first_sequence=seq.min(),
            last_sequence=seq.max(),
            gaps=(seq.sort().diff() > 1).sum().cast(pl.Int64),
        )
        .with_columns(
            missing=pl.col("last_sequence") - pl.col("first_sequence") + 1 - pl.col("distinct"),
            duplicates=pl.col("received") - pl.col("distinct"),
        )
    )
    topics_df, sequences_df = pl.collect_all([topics, sequences])
    return {
        "topics": topics_df,
        "services": services,
        "calls": calls,
        "orphans": calls.filter(status == "orphan"),
        "sequences": sequences_df,
    }


DIRECT_SQL = {
    "topics": """
WITH ev AS (
  SELECT session, name AS topic, kind, body_size, reception_ns,
         (kind = 'email.received' AND detail = 'message') AS rec,
         kind = 'message.published' AS pub,
         (reception_ns - source_ns) / 1e6 AS latency_ms,
         (reception_ns - LAG(reception_ns) OVER (
            PARTITION BY session, name ORDER BY reception_ns, event_index)) / 1e6 AS gap_ms
  FROM events
  WHERE kind = 'message.published' OR (kind = 'email.received' AND detail = 'message')
)
SELECT session, topic,
  SUM(CAST(pub AS BIGINT)) AS published, SUM(CAST(rec AS BIGINT)) AS received,
  SUM(IF(pub, body_size, 0)) AS bytes_published, SUM(IF(rec, body_size, 0)) AS bytes_received,
  MIN(IF(rec, reception_ns, NULL)) AS first_ns, MAX(IF(rec, reception_ns, NULL)) AS last_ns,
  percentile(IF(rec, latency_ms, NULL), 0.5) AS latency_ms_p50,
  percentile(IF(rec, latency_ms, NULL), 0.9) AS latency_ms_p90,
  percentile(IF(rec, latency_ms, NULL), 0.99) AS latency_ms_p99,
  percentile(IF(rec, gap_ms, NULL), 0.5) AS interarrival_ms_p50,
  percentile(IF(rec, gap_ms, NULL), 0.9) AS interarrival_ms_p90,
  percentile(IF(rec, gap_ms, NULL), 0.99) AS interarrival_ms_p99
FROM ev GROUP BY session, topic
""",
    "topics_rate": """
SELECT *, (last_ns - first_ns) / 1e9 AS duration_s,
  IF(received > 1 AND last_ns > first_ns, (received - 1) / ((last_ns - first_ns) / 1e9), NULL)
    AS rate_hz
FROM topics
""",
    "calls": """
WITH req AS (
  SELECT session, message_id AS request_id, MIN(name) AS service,
         MIN(source_gid) AS client_gid, MIN(sequence_number) AS sequence_number,
         MIN(source_ns) AS sent_ns, MAX(kind = 'request.sent') AS client_side
  FROM events
  WHERE (kind = 'request.sent' OR (kind = 'email.received' AND detail = 'request'))
    AND message_id IS NOT NULL
  GROUP BY session, message_id
), resp AS (
  SELECT session, request_id, COUNT(*) AS responses, MIN(arrival_ns) AS first_response_ns
  FROM (SELECT session, MIN(in_reply_to) AS request_id,
               COALESCE(MAX(reception_ns), MAX(source_ns)) AS arrival_ns
        FROM events
        WHERE (kind = 'response.sent' OR (kind = 'email.received' AND detail = 'response'))
          AND message_id IS NOT NULL AND in_reply_to IS NOT NULL
        GROUP BY session, message_id)
  GROUP BY session, request_id
), matched AS (
  SELECT session, in_reply_to AS request_id, COUNT(*) AS n FROM events
  WHERE kind = 'response.matched' GROUP BY session, in_reply_to
)
SELECT req.session, service, req.request_id, client_gid, sequence_number, sent_ns,
  COALESCE(responses, 0) AS responses, first_response_ns,
  (first_response_ns - sent_ns) / 1e6 AS rtt_ms,
  CASE WHEN COALESCE(responses, 0) = 0 THEN 'orphan'
       WHEN client_side AND matched.n IS NULL THEN 'late' ELSE 'answered' END AS status
FROM req LEFT JOIN resp ON req.session = resp.session AND req.request_id = resp.request_id
LEFT JOIN matched ON req.session = matched.session AND req.request_id = matched.request_id
""",
    "services": """
SELECT session, service, COUNT(*) AS requests,
  SUM(CAST(status <> 'orphan' AS BIGINT)) AS answered,
  SUM(CAST(status = 'orphan' AS BIGINT)) AS orphans,
  SUM(CAST(status = 'late' AS BIGINT)) AS late,
  SUM(GREATEST(responses - 1, 0)) AS duplicate_responses,
  percentile(rtt_ms, 0.5) AS rtt_ms_p50, percentile(rtt_ms, 0.9) AS rtt_ms_p90,
  percentile(rtt_ms, 0.99) AS rtt_ms_p99
FROM calls GROUP BY session, service
""",
    "sequences": """
WITH r AS (
  SELECT session, detail AS what, name, source_gid, sequence_number AS seq,
    LAG(sequence_number) OVER (PARTITION BY session, detail, name, source_gid
                               ORDER BY reception_ns, event_index) AS prev,
    LAG(sequence_number) OVER (PARTITION BY session, detail, name, source_gid
                               ORDER BY sequence_number) AS below
  FROM events
  WHERE kind = 'email.received' AND detail IN ('message', 'request')
    AND sequence_number >= 0 AND source_gid IS NOT NULL
)
SELECT session, what, name, source_gid, COUNT(*) AS received,
  COUNT(DISTINCT seq) AS distinct, MIN(seq) AS first_sequence, MAX(seq) AS last_sequence,
  MAX(seq) - MIN(seq) + 1 - COUNT(DISTINCT seq) AS missing,
  SUM(CAST(seq - below > 1 AS BIGINT)) AS gaps,
  COUNT(*) - COUNT(DISTINCT seq) AS duplicates,
  SUM(CAST(seq < prev AS BIGINT)) AS reordered
FROM r GROUP BY session, what, name, source_gid
""",
}


def direct_spark(spark: Any, sessions: list[Path]) -> dict[str, pl.DataFrame]:
    """The tables in Spark SQL over a cached view of the sessions' parts."""
    from pyspark.sql import functions as F

    frames = [
        spark.read.parquet(*_parts(s)).select(*COLUMNS).withColumn("session", F.lit(s.name))
        for s in sessions
    ]
    events = frames[0]
    for frame in frames[1:]:
        events = events.unionByName(frame)
    events.cache().createOrReplaceTempView("events")
    calls = spark.sql(DIRECT_SQL["calls"]).cache()
    calls.createOrReplaceTempView("calls")
    spark.sql(DIRECT_SQL["topics"]).createOrReplaceTempView("topics")
    out = {
        name: pl.from_arrow(spark.sql(DIRECT_SQL[query]).toArrow())
        for name, query in (
            ("topics", "topics_rate"),
            ("services", "services"),
            ("sequences", "sequences"),
        )
    }
    out["calls"] = pl.from_arrow(calls.toArrow())
    out["orphans"] = out["calls"].filter(pl.col("status") == "orphan")
    calls.unpersist()
    spark.catalog.dropTempView("events")
    spark.catalog.dropTempView("calls")
    spark.catalog.dropTempView("topics")
    return {k: v for k, v in out.items() if isinstance(v, pl.DataFrame)}
