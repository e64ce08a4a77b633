"""The analysis part of bench.sessions: the pipeline beside its plain baselines.

Per size, in the same run and on the same synthetic session: the pipeline on polars
beside `plain_polars` (the best of two alternating runs each), and on Spark local[2]
beside `direct_spark` (Spark SQL over a cached view), with the results checked equal,
so the ratios compare the same work. 100 M events are ten 10 M sessions analysed in a
fresh process, whose peak RSS is the memory figure.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
from mailbus.sessions import analysis
from polars.testing import assert_frame_equal

from bench.analysis_baselines import direct_spark, plain_polars

# 100k: a smoke run of the whole path (the suite runs the documented commands with it).
LABELS = {100_000: "100k", 1_000_000: "1m", 10_000_000: "10m", 100_000_000: "100m"}


def log(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _timed(run: Callable[[], dict[str, pl.DataFrame]]) -> tuple[float, dict[str, pl.DataFrame]]:
    started = time.perf_counter()
    tables = run()
    return time.perf_counter() - started, tables


def check_equal(pipeline: dict[str, pl.DataFrame], baseline: dict[str, pl.DataFrame]) -> None:
    """The baseline computed the same tables: same rows, floats to 1e-12 relative."""
    for name, frame in pipeline.items():
        keys = analysis.TABLE_KEYS[name]
        other = baseline[name].select(pl.col(c).cast(frame.schema[c]) for c in frame.columns)
        assert_frame_equal(
            other.sort(keys, nulls_last=True), frame, check_exact=False, rel_tol=1e-12, abs_tol=0
        )


def polars_pair(path: Path, runs: int = 2) -> tuple[float, float]:
    """(pipeline, plain) best-of-`runs` seconds, alternating so noise hits both."""
    pipe, plain = [], []
    for _ in range(runs):
        seconds, ours = _timed(lambda: analysis.analyze([path]))
        pipe.append(seconds)
        seconds, theirs = _timed(lambda: plain_polars([path]))
        plain.append(seconds)
    check_equal(ours, theirs)
    return min(pipe), min(plain)


def spark_pair(spark: Any, path: Path, runs: int = 2) -> tuple[float, float]:
    """(pipeline, direct Spark SQL) best-of-`runs` seconds on a running SparkSession,
    alternating (the first run of each also warms the JVM up)."""
    pipe, direct = [], []
    for _ in range(runs):
        seconds, theirs = _timed(lambda: direct_spark(spark, [path]))
        direct.append(seconds)
        seconds, ours = _timed(
            lambda: analysis.analyze(analysis.load([path], engine="spark", spark=spark))
        )
        pipe.append(seconds)
    check_equal(ours, theirs)
    return min(pipe), min(direct)


CHILD = """
import json, resource, sys, time
from mailbus.sessions import analysis
paths = sys.argv[1:]
started = time.perf_counter()
dataset = analysis.load(paths)
tables = analysis.analyze(dataset)
elapsed = time.perf_counter() - started
print(json.dumps({
    "seconds": elapsed,
    "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "batches": len(dataset.batches),
    "received": int(tables["topics"]["received"].sum()),
}))
"""


def polars_100m(session_10m: Path, work: Path) -> dict[str, Any]:
    """Ten copies of a 10 M session, analysed in a fresh process (its peak RSS)."""
    fleet = work / "fleet"
    paths = []
    for i in range(10):
        target = fleet / f"robot{i}"
        shutil.copytree(session_10m, target)
        paths.append(str(target))
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *paths], capture_output=True, text=True, check=True
    )
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    result["paths"] = paths
    return result


def spark_100m(spark: Any, paths: list[str]) -> float:
    started = time.perf_counter()
    tables = analysis.analyze(analysis.load(paths, engine="spark", spark=spark))
    assert tables["topics"]["received"].sum() > 0
    return time.perf_counter() - started


def cluster_10m(spark: Any, path: Path, work: Path) -> float:
    """The same analysis on a standalone cluster on loopback (a master and two workers
    of one core each, started from the pyspark package as the tests do)."""
    from mailbus.stacks.spark_cluster import SparkProcesses

    if spark is not None:
        spark.stop()  # getOrCreate would hand back the local session
    root = work / "cluster"
    root.mkdir()
    processes = SparkProcesses(root, worker_memory="2g").start()
    try:
        on_cluster = analysis.spark_session(processes.master_url, driver_memory="2g")
        try:
            started = time.perf_counter()
            tables = analysis.analyze(analysis.load([path], engine="spark", spark=on_cluster))
            elapsed = time.perf_counter() - started
            assert tables["topics"]["received"].sum() > 0
        finally:
            on_cluster.stop()
    finally:
        processes.stop()
    return elapsed


def run(
    work: Path,
    synthetic_session: Callable[[Path, int], None],
    *,
    quick: bool,
    spark: Any,
    spark_100m_too: bool,
    sizes: list[int] | None = None,
    with_100m: bool = True,
    cluster: bool = False,
) -> dict[str, Any]:
    result: dict[str, Any] = {"cluster_10m_spark_s": None}
    sizes = sizes or ([1_000_000] if quick else [1_000_000, 10_000_000])
    for size, label in LABELS.items():
        if size == 100_000_000:
            continue
        keys = (f"analysis_{label}_polars_s", f"plain_polars_{label}_s")
        spark_keys = (f"analysis_{label}_spark_s", f"direct_spark_{label}_s")
        if size not in sizes:
            result.update(dict.fromkeys((*keys, *spark_keys)))
            continue
        path = work / f"synthetic-{label}"
        log(f"writing a synthetic session of {size:,} events")
        synthetic_session(path, size)
        pipe, plain = polars_pair(path)
        result[keys[0]], result[keys[1]] = round(pipe, 2), round(plain, 2)
        log(f"  polars: pipeline {pipe:.2f} s, plain polars {plain:.2f} s")
        if spark is not None:
            pipe, direct = spark_pair(spark, path)
            result[spark_keys[0]], result[spark_keys[1]] = round(pipe, 2), round(direct, 2)
            log(f"  spark local[2]: pipeline {pipe:.2f} s, direct Spark SQL {direct:.2f} s")
        else:
            result.update(dict.fromkeys(spark_keys))
        if size == 10_000_000 and not quick and with_100m:
            log("100 M events: ten 10 M sessions, polars in a fresh process")
            big = polars_100m(path, work)
            result["analysis_100m_polars_s"] = round(big["seconds"], 1)
            result["analysis_100m_polars_peak_rss_mb"] = round(big["peak_rss_mb"])
            result["analysis_100m_polars_batches"] = big["batches"]
            log(f"  {big['seconds']:.1f} s, peak {big['peak_rss_mb']:.0f} MB")
            if spark is not None and spark_100m_too:
                result["analysis_100m_spark_s"] = round(spark_100m(spark, big["paths"]), 1)
                log(f"  spark local[2]: {result['analysis_100m_spark_s']} s")
            shutil.rmtree(work / "fleet")
        if cluster and size == max(sizes):
            log(f"{size:,} events on a standalone cluster (master + 2 workers on loopback)")
            result[f"cluster_{label}_spark_s"] = round(cluster_10m(spark, path, work), 2)
            log(f"  cluster: {result[f'cluster_{label}_spark_s']} s")
        shutil.rmtree(path)
    result.setdefault("analysis_100m_polars_s", None)
    result.setdefault("analysis_100m_polars_peak_rss_mb", None)
    result.setdefault("analysis_100m_spark_s", None)
    at = "10m" if 10_000_000 in sizes else "1m"
    pipe, plain = result[f"analysis_{at}_polars_s"], result[f"plain_polars_{at}_s"]
    result["polars_ratio_to_plain"] = round(pipe / plain, 2) if pipe and plain else None
    pipe, direct = result[f"analysis_{at}_spark_s"], result[f"direct_spark_{at}_s"]
    result["spark_ratio_to_direct"] = round(pipe / direct, 2) if pipe and direct else None
    result["ratios_at"] = at
    return result
