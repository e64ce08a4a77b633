"""The analysis tables: a hand-computed tiny session, the percentile definition, and
parity between polars and real PySpark on the sample sessions."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import hypothesis.strategies as st
import narwhals.stable.v2 as nw
import polars as pl
import pytest
from hypothesis import given, settings
from mailbus.sessions import analysis
from polars.testing import assert_frame_equal
from sessions_helpers import MS, T


def _row(frame: pl.DataFrame, **keys: Any) -> dict[str, Any]:
    found = frame.filter(*(pl.col(k) == v for k, v in keys.items()))
    assert found.height == 1, f"expected one row for {keys}, got {found.height}"
    return found.row(0, named=True)


def _close(actual: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, value in expected.items():
        if isinstance(value, float):
            assert actual[key] == pytest.approx(value, rel=1e-9), key
        else:
            assert actual[key] == value, key


def check_tiny(tables: dict[str, pl.DataFrame], session: str = "tiny") -> None:
    """The expectations worked out by hand (see conftest.tiny_events)."""
    topics = tables["topics"].filter(pl.col("session") == session)
    assert topics["topic"].to_list() == ["a", "b"]
    _close(
        _row(topics, topic="a"),
        {
            "published": 4,
            "received": 4,
            "bytes_published": 8,
            "bytes_received": 8,
            "first_ns": T + 1 * MS,
            "last_ns": T + 45 * MS,
            "duration_s": 0.044,
            "rate_hz": 3 / 0.044,
            # inter-arrival 11, 11, 22 ms: h = 2q
            "interarrival_ms_p50": 11.0,
            "interarrival_ms_p90": 11 + 0.8 * 11,
            "interarrival_ms_p99": 11 + 0.98 * 11,
            # latency 1, 2, 3, 5 ms: h = 3q
            "latency_ms_p50": 2.5,
            "latency_ms_p90": 3 + 0.7 * 2,
            "latency_ms_p99": 3 + 0.97 * 2,
        },
    )
    _close(
        _row(topics, topic="b"),
        {
            "published": 0,
            "received": 5,
            "bytes_received": 15,
            "rate_hz": 4 / 0.04,
            "interarrival_ms_p50": 10.0,
            "interarrival_ms_p99": 10.0,
            "latency_ms_p50": 4.0,
            "latency_ms_p90": 4.0,
        },
    )
    services = tables["services"].filter(pl.col("session") == session)
    _close(
        _row(services, service="svc"),
        {
            "requests": 4,
            "answered": 3,
            "orphans": 1,
            "late": 1,
            "duplicate_responses": 1,
            # round trips 5, 20, 100 ms: h = 2q
            "rtt_ms_p50": 20.0,
            "rtt_ms_p90": 20 + 0.8 * 80,
            "rtt_ms_p99": 20 + 0.98 * 80,
        },
    )
    calls = tables["calls"].filter(pl.col("session") == session)
    assert calls.select("request_id", "status", "responses").rows() == [
        ("<r1@t>", "answered", 1),
        ("<r2@t>", "answered", 2),
        ("<r3@t>", "orphan", 0),
        ("<r4@t>", "late", 1),
    ]
    assert calls["rtt_ms"].to_list()[:2] == pytest.approx([5.0, 20.0], rel=1e-9)
    assert calls["rtt_ms"][2] is None
    orphans = tables["orphans"].filter(pl.col("session") == session)
    assert orphans["request_id"].to_list() == ["<r3@t>"]
    sequences = tables["sequences"].filter(pl.col("session") == session)
    _close(
        _row(sequences, name="a"),
        {"what": "message", "received": 4, "missing": 0, "gaps": 0, "reordered": 0},
    )
    _close(
        _row(sequences, name="b"),
        {
            "source_gid": "P2",
            "received": 5,
            "distinct": 4,
            "first_sequence": 1,
            "last_sequence": 5,
            "missing": 1,
            "gaps": 1,
            "duplicates": 1,
            "reordered": 1,
        },
    )


def test_tiny_session_matches_hand_computed_values_on_polars(tiny_session: Path) -> None:
    check_tiny(analysis.analyze([tiny_session]))


@settings(max_examples=60, deadline=None)
@given(
    groups=st.lists(
        st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=40),
        min_size=1,
        max_size=4,
    )
)
def test_percentiles_are_exact_linear_interpolation(groups: list[list[float]]) -> None:
    rows = [(g, v) for g, values in enumerate(groups) for v in values]
    frame = pl.DataFrame(rows, schema={"g": pl.Int64, "v": pl.Float64}, orient="row")
    got = (
        analysis.percentiles(nw.from_native(frame.lazy()), ["g"], "v", "v")
        .collect()
        .to_native()
        .sort("g")
    )
    for g, values in enumerate(groups):
        ordered = sorted(values)
        n = len(ordered)
        for tag, q in analysis.PERCENTILES:
            h = (n - 1) * q
            lo = int(h)
            hi = min(lo + 1, n - 1)
            expected = ordered[lo] + (h - lo) * (ordered[hi] - ordered[lo])
            assert got[f"v_{tag}"][g] == pytest.approx(expected, rel=1e-9, abs=1e-9)


arrivals = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]),
        st.integers(0, 12),  # sequence numbers: duplicates, gaps and disorder
        st.integers(0, 8).map(lambda t: T + t * MS),  # reception: ties on purpose
    ),
    min_size=1,
    max_size=60,
)


def _arrivals_frame(rows: list[tuple[str, int, int]]) -> nw.LazyFrame[Any]:
    frame = pl.DataFrame(
        [(g, seq, ns, i) for i, (g, seq, ns) in enumerate(rows)],
        schema={
            "g": pl.String,
            "sequence_number": pl.Int64,
            "reception_ns": pl.Int64,
            "event_index": pl.Int64,
        },
        orient="row",
    )
    return nw.from_native(frame.lazy())


def _sorted(frame: nw.LazyFrame[Any]) -> pl.DataFrame:
    native = frame.collect().to_native()
    assert isinstance(native, pl.DataFrame)
    return native.sort("g").select(sorted(native.columns))


@settings(max_examples=80, deadline=None)
@given(rows=arrivals)
def test_polars_kernels_equal_the_narwhals_definitions(rows: list[tuple[str, int, int]]) -> None:
    """The polars-only kernels (per-group sorts) give what the narwhals definitions
    (windows, Spark's plan) give, on groups with ties, duplicates, gaps and disorder."""
    frame = _arrivals_frame(rows)
    kernel = _sorted(analysis.sequence_counts(frame, ["g"]))
    generic = _sorted(analysis.sequence_counts_generic(frame, ["g"]))
    assert_frame_equal(kernel, generic, check_dtypes=False)
    args = (["g"], "reception_ns", "gap_ms", 1_000_000)
    kernel = _sorted(analysis.gap_percentiles(frame, *args))
    generic = _sorted(analysis.gap_percentiles_generic(frame, *args))
    assert_frame_equal(kernel, generic, check_exact=False, rel_tol=1e-12, abs_tol=0)
    # And by hand, for one group: reordered arrivals and gaps between distinct numbers.
    g, *_ = rows[0]
    mine = sorted((ns, i, seq) for i, (h, seq, ns) in enumerate(rows) if h == g)
    numbers = [seq for _, _, seq in mine]
    distinct = sorted(set(numbers))
    counts = (
        _sorted(analysis.sequence_counts(frame, ["g"])).filter(pl.col("g") == g).row(0, named=True)
    )
    assert counts["reordered"] == sum(b < a for a, b in itertools.pairwise(numbers))
    assert counts["gaps"] == sum(b - a > 1 for a, b in itertools.pairwise(distinct))
    assert counts["distinct"] == len(distinct) and counts["received"] == len(numbers)


def test_empty_session_gives_empty_tables(tmp_path: Path) -> None:
    path = tmp_path / "empty"
    from mailbus.sessions.recorder import Recorder

    Recorder(path).stop()
    tables = analysis.analyze([path])
    assert set(tables) == set(analysis.TABLES)
    assert all(frame.height == 0 for frame in tables.values())
    assert tables["topics"].schema == pl.Schema(analysis.TOPIC_SCHEMA)


@pytest.mark.slow
def test_timeseries_and_plot(tiny_session: Path, tmp_path: Path) -> None:
    from mailbus.sessions.plot import plot_timeseries, save

    series = analysis.timeseries([tiny_session], bin_s=0.02)
    a = series.filter(pl.col("topic") == "a")
    # receptions at 1, 12, 23, 45 ms from the session's first: bins 0, 0, 1, 2
    assert a["t_s"].to_list() == pytest.approx([0.0, 0.02, 0.04])
    assert a["messages"].to_list() == [2, 1, 1]
    chart = plot_timeseries(series, "rate_hz")
    rows = next(iter(chart.to_dict()["datasets"].values()))
    assert {row["topic"] for row in rows} == {"a", "b"}
    assert len(rows) == series.drop_nulls("rate_hz").height
    svg = save(chart, tmp_path / "p.svg").read_text()
    assert svg.startswith("<svg") and ">a</text>" in svg and ">b</text>" in svg
    with pytest.raises(ValueError, match="no column"):
        plot_timeseries(series, "nope")


@pytest.mark.spark
def test_parity_polars_and_spark(
    spark: Any, sample_sessions: list[Path], tiny_session: Path
) -> None:
    """Every table, on the sample sessions and the tiny one, equal on both engines
    (rows sorted by key, floats to 1e-12 relative); the tiny one as computed by hand."""
    paths = [*sample_sessions, tiny_session]
    on_polars = analysis.analyze(paths)
    on_spark = analysis.analyze(analysis.load(paths, engine="spark", spark=spark))
    assert set(on_spark) == set(on_polars)
    for name, frame in on_polars.items():
        assert frame.height > 0, f"{name} is empty: the samples should exercise it"
        assert_frame_equal(on_spark[name], frame, check_exact=False, rel_tol=1e-12, abs_tol=0)
    check_tiny(on_spark)
    # The samples show what they are for: orphans, late answers, gaps and reordering.
    services = on_polars["services"].filter(pl.col("session") == "slow_service")
    assert services["orphans"].sum() > 0 and services["late"].sum() > 0
    gaps = on_polars["sequences"].filter(pl.col("session") == "gaps")
    assert gaps["missing"].sum() > 0 and gaps["reordered"].sum() > 0


@pytest.mark.spark
def test_cli_analyze_on_spark(
    spark: Any, tiny_session: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`mailbus analyze --engine spark` (it reuses the running SparkSession)."""
    from mailbus.cli import main

    command = ["analyze", str(tiny_session), "--engine", "spark", "--table", "services"]
    assert main([*command, "--format", "json"]) == 0  # one table: Spark queries are slow
    captured = capsys.readouterr()
    tables = json.loads(captured.out)
    assert "analyze (spark)" in captured.err
    assert [row["rtt_ms_p50"] for row in tables["services"]] == [pytest.approx(20.0)]
    assert [row["orphans"] for row in tables["services"]] == [1]


def test_sessions_over_the_memory_budget_are_analysed_in_batches(
    sample_sessions: list[Path], tiny_session: Path
) -> None:
    """Sessions that together exceed the memory budget are analysed a batch at a time
    (none kept in memory all at once) and give the same tables as all in memory."""
    paths = [*sample_sessions, tiny_session]
    whole = analysis.analyze(paths)
    opened = analysis.load(paths, cache=False)
    biggest = max(s.rows for s in opened.sessions)
    budget = biggest * analysis.BYTES_PER_EVENT  # about one session per batch
    batched = analysis.load(paths, memory_budget_bytes=budget)
    assert 1 < len(batched.batches) <= len(paths)
    assert [s.name for group in batched.batches for s in group] == [s.name for s in opened.sessions]
    assert all(
        sum(s.rows for s in group) * analysis.BYTES_PER_EVENT <= budget
        for group in batched.batches
        if len(group) > 1
    )
    seen: list[tuple[str, int, int]] = []
    tables = analysis.analyze(batched, progress=lambda *args: seen.append(args))
    for name, frame in whole.items():
        assert_frame_equal(tables[name], frame, check_exact=False, rel_tol=1e-12, abs_tol=0)
    # Progress runs over every batch's tables, never backwards, and ends full.
    done = [d for _, d, _ in seen]
    assert done == sorted(done) and seen[-1][1] == seen[-1][2]
    assert len(seen) == len(analysis.TABLES) * len(batched.batches) + 1
    # One session larger than the budget is a batch of its own, streamed from disk.
    assert analysis.batches(list(opened.sessions), 1) == tuple((s,) for s in opened.sessions)


@pytest.mark.spark
def test_spark_writes_the_tables_from_its_executors(
    spark: Any, sample_sessions: list[Path], tmp_path: Path
) -> None:
    """`--format parquet --out DIR` on Spark: each table is a directory of part files
    written by Spark (no table is collected to the driver), and reads back, with polars,
    as the tables polars computes."""
    from mailbus.cli import main

    paths = [str(p) for p in sample_sessions[:2]]
    target = tmp_path / "out"
    from pyspark.sql import DataFrame

    def refused(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a table went through the driver")

    with pytest.MonkeyPatch.context() as patch:
        for method in ("collect", "toArrow", "toPandas", "toLocalIterator", "take"):
            patch.setattr(DataFrame, method, refused)
        command = ["analyze", *paths, "--engine", "spark", "--format", "parquet"]
        assert main([*command, "--out", str(target)]) == 0
    expected = analysis.analyze(paths)
    for name, frame in expected.items():
        written = target / f"{name}.parquet"
        assert written.is_dir() and list(written.glob("part-*.parquet")), name
        assert (written / "_SUCCESS").exists()
        back = pl.read_parquet(written / "*.parquet").sort(
            analysis.TABLE_KEYS[name], nulls_last=True
        )
        assert_frame_equal(back, frame, check_exact=False, rel_tol=1e-12, abs_tol=0)


def test_the_topics_table_without_the_polars_kernel_is_the_same(
    sample_sessions: list[Path], tiny_session: Path
) -> None:
    """The topics table's definition (one window, one group-by: Spark's plan) run on
    polars gives what polars' kernel plan gives."""
    from mailbus.sessions import tables

    frame = analysis.load([*sample_sessions, tiny_session]).frame
    schema, keys = analysis.TOPIC_SCHEMA, analysis.TABLE_KEYS["topics"]
    kernel = analysis._collect(tables.topics(frame), schema, keys)
    generic = analysis._collect(tables.topics(frame, kernels=False), schema, keys)
    assert kernel.height > 0 and kernel["interarrival_ms_p50"].null_count() < kernel.height
    assert_frame_equal(generic, kernel, check_exact=False, rel_tol=1e-12, abs_tol=0)
