"""MCAP export and import speed.

    python -m bench.mcap [--events N] [--quick]

On a synthetic session (bench.sessions.synthetic_session, 1 M events by default, given
JSON bodies of ~60 bytes on every email so that the body channels carry data):

1. `export_mcap` (two streaming passes: schemas, then messages) against its floor in the
   same run: the same rows read with pyarrow into Python values and the same number of
   pre-encoded messages written with `mcap.writer.Writer` (no envelope, no schema).
2. `open_mcap` (the conversion of the file into a cached session) against its floor:
   `mcap.reader` iterating the file's messages and doing nothing with them.

Peak RSS of each phase (VmHWM reset before it). Last stdout line: one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
from mailbus.sessions import mcap_import
from mailbus.sessions.mcap_export import export_mcap
from mailbus.sessions.reader import open_session
from mailbus.sessions.schema import arrow_schema
from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer

from bench.sessions import peak_rss_mb, reset_peak_rss, synthetic_session


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def with_bodies(path: Path) -> None:
    """Every email row of the synthetic session gets a small JSON body (it has none)."""
    for part in sorted(path.glob("part-*.parquet")):
        frame = pl.read_parquet(part)
        frame = frame.with_columns(
            body=pl.when(pl.col("kind") != "response.matched")
            .then(
                pl.concat_str(
                    pl.lit('{"x": '),
                    (pl.col("event_index") % 1000).cast(pl.String),
                    pl.lit(', "y": 1.25, "seq": '),
                    pl.col("sequence_number").cast(pl.String),
                    pl.lit(', "note": "ok"}'),
                ).cast(pl.Binary)
            )
            .otherwise(None)
        )
        pq.write_table(
            frame.to_arrow().cast(arrow_schema("bench")),
            part,
            compression="zstd",
            row_group_size=65_536,
        )


def floor_export(session_path: Path, out: Path, emails: int) -> float:
    session = open_session(session_path)
    payload = b'{"x": 1, "y": 1.25, "seq": 7, "note": "ok"}' * 4
    started = time.perf_counter()
    with open(out, "wb") as handle:
        writer = Writer(handle, compression=CompressionType.ZSTD)
        writer.start()
        schema = writer.register_schema("s", "jsonschema", b"{}")
        channel = writer.register_channel("/c", "json", schema)
        written = 0
        for part in session.parts:
            for batch in pq.ParquetFile(part).iter_batches(batch_size=16_384):
                columns = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                for values in zip(*columns, strict=True):
                    t = values[2]
                    writer.add_message(channel, t, payload, t, 0)
                    if written < emails:
                        writer.add_message(channel, t, payload[:60], t, 0)
                    written += 1
        writer.finish()
    return time.perf_counter() - started


def floor_import(path: Path) -> tuple[float, int]:
    started = time.perf_counter()
    count = 0
    with open(path, "rb") as handle:
        for _ in make_reader(handle).iter_messages(log_time_order=False):
            count += 1
    return time.perf_counter() - started, count


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--quick", action="store_true", help="100k events")
    args = parser.parse_args()
    events = 100_000 if args.quick else args.events
    work = Path(tempfile.mkdtemp(prefix="bench-mcap-"))
    os.environ["XDG_CACHE_HOME"] = str(work / "cache")
    result: dict[str, Any] = {"events": events}
    try:
        session_path = work / "session"
        log(f"making a synthetic session of {events} events ...")
        synthetic_session(session_path, events)
        with_bodies(session_path)
        session = open_session(session_path)
        rows = session.rows
        emails = session.scan().filter(pl.col("kind") != "response.matched").select(pl.len())
        n_emails = int(emails.collect().item())
        out = work / "s.mcap"

        log("export ...")
        reset_peak_rss()
        rss_before = peak_rss_mb()
        started = time.perf_counter()
        exported = export_mcap(session, out)
        export_s = time.perf_counter() - started
        result["export_peak_rss_mb"] = round(peak_rss_mb(), 1)
        result["export_rss_before_mb"] = round(rss_before, 1)
        result["export_s"] = round(export_s, 2)
        result["export_rows_per_s"] = round(rows / export_s)
        result["mcap_mb"] = round(exported.bytes / 1e6, 1)
        result["session_mb"] = round(sum(p.stat().st_size for p in session.parts) / 1e6, 1)
        log(f"  {result['export_rows_per_s']} rows/s, {result['mcap_mb']} MB")

        log("export floor: pyarrow rows + mcap Writer, pre-encoded messages ...")
        floor_s = floor_export(session_path, work / "floor.mcap", n_emails)
        result["export_floor_rows_per_s"] = round(rows / floor_s)
        result["export_ratio_to_floor"] = round(floor_s / export_s, 3)

        log("import (open_mcap: the conversion into a cached session) ...")
        reset_peak_rss()
        rss_before = peak_rss_mb()
        started = time.perf_counter()
        back = mcap_import.open_mcap(out, report=None)
        import_s = time.perf_counter() - started
        result["import_peak_rss_mb"] = round(peak_rss_mb(), 1)
        result["import_rss_before_mb"] = round(rss_before, 1)
        result["import_s"] = round(import_s, 2)
        result["import_rows_per_s"] = round(back.rows / import_s)
        assert back.rows == rows, (back.rows, rows)
        started = time.perf_counter()
        mcap_import.open_mcap(out, report=None)
        result["import_cached_open_s"] = round(time.perf_counter() - started, 3)
        log(f"  {result['import_rows_per_s']} rows/s")

        log("import floor: mcap reader iterating the messages ...")
        floor_s, messages = floor_import(out)
        result["mcap_messages"] = messages
        result["import_floor_rows_per_s"] = round(rows / floor_s)
        result["import_ratio_to_floor"] = round(floor_s / import_s, 3)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
