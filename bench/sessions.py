"""Session recording and analysis costs.

    python -m bench.sessions [--quick] [--no-spark] [--events N]

1. The recorder: trace events through `Recorder.listener` to zstd Parquet parts, with
   the default bounded queue (the producer backs off when the queue is half full, so
   nothing is dropped and the rate is the sustained one), beside polars building and
   writing the same rows directly in the same run (the baseline; target: the recorder
   at least half as fast). Peak RSS of the recording phase.
2. The analysis (bench/analysis_costs.py): every table on synthetic sessions of 1 M and
   10 M events on polars beside the same tables in plain polars, and on Spark local[2]
   beside the same in direct Spark SQL, results checked equal; 100 M events (ten 10 M
   sessions) on polars in a fresh process with its peak RSS, and on Spark with
   `--spark-100m`. `--quick` stops at 1 M. Spark start-up is reported apart.

Last stdout line: one JSON object (keys in shared/BENCH.md).
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
from mailbus.sessions import analysis
from mailbus.sessions.recorder import Recorder, write_json_atomic
from mailbus.sessions.schema import SCHEMA_VERSION, arrow_schema, part_name
from mailbus.trace import TraceEvent

from bench import analysis_costs

T0 = 1_700_000_000_000_000_000
RECORDER_KEYS = (
    "recorder_peak_rss_mb",
    "recorder_rss_before_mb",
    "recorder_events_per_s",
    "recorder_dropped",
    "polars_direct_rows_per_s",
    "recorder_ratio",
)


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def reset_peak_rss() -> bool:
    """Linux: writing 5 to clear_refs resets VmHWM, the peak RSS."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def peak_rss_mb() -> float:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_events(count: int) -> list[TraceEvent]:
    body = '{"x": 0.5, "y": 1.25, "theta": 3.14159, "note": "a typical small body ...."}'
    events = []
    for i in range(count):
        topic = f"robot/topic{i % 20}"
        events.append(
            TraceEvent(
                "email.received",
                T0 + i * 100_000,
                name=topic,
                source_gid=f"{i % 20:032x}",
                sequence_number=i // 20 + 1,
                message_id=f"<{i:032x}@bench>",
                source_timestamp_ns=T0 + i * 100_000 - 300_000,
                reception_timestamp_ns=T0 + i * 100_000,
                body=body,
                size=len(body),
                headers={
                    "Source-Timestamp": str(T0 + i * 100_000 - 300_000),
                    "Publisher-GID": f"{i % 20:032x}",
                    "Publisher-Sequence-Number": str(i // 20 + 1),
                },
                detail="message",
            )
        )
    return events


def bench_recorder(events: list[TraceEvent], directory: Path) -> dict[str, Any]:
    recorder = Recorder(directory, participant="bench@localhost", transport="inprocess")
    limit = recorder.max_queued // 2
    idle = threading.Event()
    listener = recorder.listener
    started = time.perf_counter()
    for i, event in enumerate(events):
        if i % 1000 == 0:
            while recorder.queued > limit:  # back off: measure the sustained rate
                idle.wait(0.001)
        listener(event)
    manifest = recorder.stop()
    elapsed = time.perf_counter() - started
    return {
        "events_per_s": len(events) / elapsed,
        "dropped": manifest["counts"]["dropped"],
        "written": manifest["counts"]["events"],
        "parts": len(manifest["parts"]),
    }


def bench_polars_direct(events: list[TraceEvent], directory: Path, batch: int) -> float:
    """The same rows, built as polars frames from the events and written with zstd."""
    directory.mkdir(parents=True)
    started = time.perf_counter()
    for n, start in enumerate(range(0, len(events), batch)):
        chunk = events[start : start + batch]
        frame = pl.DataFrame(
            {
                "event_index": range(start, start + len(chunk)),
                "kind": [e.kind for e in chunk],
                "recorded_ns": [e.time_ns for e in chunk],
                "source_ns": [e.source_timestamp_ns for e in chunk],
                "reception_ns": [e.reception_timestamp_ns for e in chunk],
                "name": [e.name for e in chunk],
                "source_gid": [e.source_gid for e in chunk],
                "sequence_number": [e.sequence_number for e in chunk],
                "message_id": [e.message_id for e in chunk],
                "headers": [[{"key": k, "value": v} for k, v in e.headers.items()] for e in chunk],
                "body": [e.body.encode() if e.body is not None else None for e in chunk],
                "body_size": [e.size for e in chunk],
                "detail": [e.detail for e in chunk],
            }
        )
        frame.write_parquet(directory / f"{n:05d}.parquet", compression="zstd")
    return len(events) / (time.perf_counter() - started)


def synthetic_session(path: Path, total: int, part_rows: int = 1_000_000) -> None:
    """A session of `total` events shaped like a busy system: 65 % received messages on
    20 topics, 15 % published, 20 % service requests, responses and the client's
    `response.matched` (2 % of requests unanswered, about 1 % answered after the client
    gave up, i.e. late), written as the recorder writes parts."""
    path.mkdir(parents=True)
    n_msg, n_pub = total * 65 // 100, total * 15 // 100
    n_req = (total - n_msg - n_pub) // 3
    n_resp = n_req
    n_match = total - n_msg - n_pub - n_req - n_resp
    i = pl.int_range(0, pl.len(), dtype=pl.Int64)
    jitter = (i * 7919 % 5000) * 1000 + 200_000
    messages = (
        pl.DataFrame({"i": pl.int_range(0, n_msg, eager=True)})
        .with_columns(
            kind=pl.lit("email.received"),
            detail=pl.lit("message"),
            name=pl.format("robot/topic{}", pl.col("i") % 20),
            source_gid=pl.format("pub{}", pl.col("i") % 20),
            sequence_number=pl.col("i") // 20 + 1,
            message_id=pl.format("<m{}@b>", pl.col("i")),
            source_ns=T0 + pl.col("i") * 100_000,
        )
        .with_columns(reception_ns=pl.col("source_ns") + jitter)
    )
    published = messages.head(n_pub).with_columns(
        kind=pl.lit("message.published"), detail=pl.lit(None, pl.String), reception_ns=None
    )
    requests = pl.DataFrame({"i": pl.int_range(0, n_req, eager=True)}).with_columns(
        kind=pl.lit("request.sent"),
        detail=pl.lit(None, pl.String),
        name=pl.format("svc{}", pl.col("i") % 5),
        source_gid=pl.format("client{}", pl.col("i") % 5),
        sequence_number=pl.col("i") // 5 + 1,
        message_id=pl.format("<r{}@b>", pl.col("i")),
        source_ns=T0 + pl.col("i") * 400_000,
    )
    responses = (
        requests.filter(pl.col("i") % 50 != 0)
        .head(n_resp)
        .with_columns(
            kind=pl.lit("email.received"),
            detail=pl.lit("response"),
            in_reply_to=pl.col("message_id"),
            message_id=pl.format("<s{}@b>", pl.col("i")),
            source_gid=pl.lit("server"),
        )
        .with_columns(reception_ns=pl.col("source_ns") + jitter * 3)
    )
    # The client matches each response it waited for; every 97th it had given up on.
    matched = (
        responses.filter(pl.col("i") % 97 != 0)
        .head(n_match)
        .with_columns(
            kind=pl.lit("response.matched"),
            detail=pl.lit(None, pl.String),
            reception_ns=pl.col("reception_ns") + 1_000,
        )
    )
    frame = pl.concat([messages, published, requests, responses, matched], how="diagonal_relaxed")
    frame = frame.with_columns(
        event_index=pl.int_range(0, pl.len(), dtype=pl.Int64),
        recorded_ns=pl.coalesce("reception_ns", "source_ns"),
        body_size=pl.lit(64, pl.Int64),
        body_truncated=pl.lit(False),
        transport=pl.lit("synthetic"),
        participant=pl.lit("bench@localhost"),
    ).drop("i")
    schema = arrow_schema("bench")
    parts = []
    for n, start in enumerate(range(0, frame.height, part_rows), start=1):
        chunk = frame.slice(start, part_rows).to_arrow()
        columns = {
            f.name: (
                chunk.column(f.name).cast(f.type)
                if f.name in chunk.column_names
                else pa.nulls(chunk.num_rows, f.type)
            )
            for f in schema
        }
        table = pa.table(columns, schema=schema)
        pq.write_table(table, path / part_name(n), compression="zstd")
        parts.append({"file": part_name(n), "rows": table.num_rows})
    write_json_atomic(
        path / "manifest.json",
        {"schema_version": SCHEMA_VERSION, "status": "complete", "parts": parts},
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller runs, no 10 M")
    parser.add_argument("--no-spark", action="store_true")
    parser.add_argument("--events", type=int, default=None, help="recorder events")
    parser.add_argument("--spark-100m", action="store_true", help="Spark on 100 M events too")
    parser.add_argument(
        "--cluster", action="store_true", help="the largest size on a standalone cluster"
    )
    parser.add_argument("--analysis-only", action="store_true", help="skip the recorder")
    parser.add_argument(
        "--sizes", default=None, help="e.g. 10m (default 1m,10m; quick 1m; 100k: a smoke run)"
    )
    parser.add_argument("--no-100m", action="store_true", help="skip the 100 M point")
    args = parser.parse_args()
    count = args.events or (100_000 if args.quick else 300_000)
    sizes = None
    if args.sizes:
        named = {"100k": 100_000, "1m": 1_000_000, "10m": 10_000_000}
        sizes = [named[x.strip()] for x in args.sizes.split(",")]
    work = Path(tempfile.mkdtemp(prefix="mailbus-bench-sessions-"))
    result: dict[str, Any] = {"quick": args.quick, "recorder_events": count}
    try:
        if args.analysis_only:
            result.update(dict.fromkeys(RECORDER_KEYS))
        else:
            log(f"building {count} trace events")
            events = make_events(count)
            reset_peak_rss()
            base_rss = peak_rss_mb()
            log("recorder: listener -> bounded queue -> writer thread -> zstd parts")
            rec = bench_recorder(events, work / "recorded")
            result["recorder_peak_rss_mb"] = round(peak_rss_mb(), 1)
            result["recorder_rss_before_mb"] = round(base_rss, 1)
            result["recorder_events_per_s"] = round(rec["events_per_s"])
            result["recorder_dropped"] = rec["dropped"]
            log(
                f"  {rec['events_per_s']:,.0f} events/s, {rec['parts']} parts,"
                f" dropped {rec['dropped']}"
            )
            log("baseline: polars frames from the same events, written with zstd")
            direct = bench_polars_direct(events, work / "direct", 5_000)
            result["polars_direct_rows_per_s"] = round(direct)
            result["recorder_ratio"] = round(rec["events_per_s"] / direct, 3)
            log(f"  {direct:,.0f} rows/s; ratio {result['recorder_ratio']}")
            del events

        spark = None
        if not args.no_spark:
            log("starting Spark local[2]")
            started = time.perf_counter()
            spark = analysis.spark_session("local[2]", shuffle_partitions=4, driver_memory="6g")
            result["spark_start_s"] = round(time.perf_counter() - started, 1)
        else:
            result["spark_start_s"] = None
        result.update(
            analysis_costs.run(
                work,
                synthetic_session,
                quick=args.quick,
                spark=spark,
                spark_100m_too=args.spark_100m,
                sizes=sizes,
                with_100m=not args.no_100m,
                cluster=args.cluster,
            )
        )
        if spark is not None:
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
