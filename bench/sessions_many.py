"""Many sessions on Spark: one scan over every part vs a union of one scan per session.

    python -m bench.sessions_many [--quick] [--sessions N] [--rounds R]

N copies of the `gaps` sample session (100 by default, 30 with --quick) are loaded on
Spark local[2] the way `analysis.load` does (`read_sessions`: one `spark.read.parquet`
over all parts, the session named from each row's file) and, as the baseline in the same
run, as the union of one read per session with a literal session column (what load did
before). Each side is cached, then the topics and sequences tables are computed; the
sides alternate over `--rounds` rounds (2 by default) after an uncounted JIT warm-up, and
the best time of each is reported. Both sides must give the same tables.

Last stdout line: one JSON object: `single_scan_s`, `union_s`, `union_ratio` (union
time over single-scan time), `sessions`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import narwhals.stable.v2 as nw
from mailbus.sessions import analysis
from mailbus.sessions.reader import Session, open_sessions
from mailbus.sessions.spark import read_sessions, spark_session
from polars.testing import assert_frame_equal

SAMPLE = Path(__file__).resolve().parents[1] / "sample_sessions" / "gaps"
TABLES = ("topics", "sequences")


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def union(spark: Any, sessions: list[Session]) -> Any:
    frames = []
    for s in sessions:
        native = spark.read.parquet(*(str(p) for p in s.parts))
        frame = nw.from_native(native).select(*analysis.ANALYSIS_COLUMNS)
        frames.append(frame.with_columns(session=nw.lit(s.name, dtype=nw.String())))
    return nw.to_native(nw.concat(frames, how="vertical"))


def single(spark: Any, sessions: list[Session]) -> Any:
    return read_sessions(spark, sessions, analysis.ANALYSIS_COLUMNS)


def timed(
    spark: Any, sessions: list[Session], build: Callable[[Any, list[Session]], Any]
) -> tuple[float, dict[str, Any]]:
    started = time.perf_counter()
    native = build(spark, sessions).cache()
    dataset = analysis.Dataset(nw.from_native(native), "spark", tuple(sessions), spark)
    tables = analysis.analyze(dataset, tables=TABLES)
    elapsed = time.perf_counter() - started
    native.unpersist()
    return elapsed, tables


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sessions", type=int)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    n = args.sessions or (30 if args.quick else 100)
    root = Path(tempfile.mkdtemp(prefix="bench-many-"))
    try:
        paths = [shutil.copytree(SAMPLE, root / f"s{i:03}") for i in range(n)]
        sessions = open_sessions(paths)
        spark = spark_session("local[2]", shuffle_partitions=2, driver_memory="1g")
        timed(spark, sessions, single)  # warm-up (JIT, first job), not counted
        best = {"single": float("inf"), "union": float("inf")}
        for r in range(args.rounds):
            results = {}
            for name, build in (("union", union), ("single", single)):
                elapsed, results[name] = timed(spark, sessions, build)
                best[name] = min(best[name], elapsed)
                log(f"round {r + 1}/{args.rounds}  {name:6} {elapsed:6.2f} s  ({n} sessions)")
            for table in TABLES:
                assert_frame_equal(results["single"][table], results["union"][table])
        spark.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        json.dumps(
            {
                "sessions": n,
                "single_scan_s": round(best["single"], 2),
                "union_s": round(best["union"], 2),
                "union_ratio": round(best["union"] / best["single"], 2),
            }
        )
    )


if __name__ == "__main__":
    main()
