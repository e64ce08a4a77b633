"""Altair charts over the analysis frames: rates, latency percentiles, RTT histograms and
sequence gaps (needs the `notebook` extra: altair, vl-convert-python).

A chart renders itself in Jupyter, VS Code and browsers; `save(chart, "x.svg")` (or
.png) exports a static file through vl-convert, without a browser.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mailbus.extras import needs_extra, require

with needs_extra("mailbus.sessions"):
    import polars as pl

if TYPE_CHECKING:
    import altair as alt

# Analysis frames are small (one row per bin, call or publisher), but a chart embeds its
# data: refuse more rows than this rather than build a huge notebook output by accident.
MAX_ROWS = 100_000
EXPORT_FORMATS = ("svg", "png")


@cache
def _altair() -> Any:
    """Altair, imported on first use (the `notebook` extra)."""
    altair = require("altair", "notebook", "mailbus.sessions.plot")
    # Charts go out as the Vega-Lite mimetype, which JupyterLab, Notebook 7 and VS Code
    # render themselves; Altair's html renderer would fetch vega-embed from a CDN.
    if altair.renderers.active == "default":
        altair.renderers.enable("mimetype")
    return altair


def _require(frame: pl.DataFrame, *columns: str) -> None:
    for column in columns:
        if column not in frame.columns:
            raise ValueError(f"no column {column!r} in the frame ({', '.join(frame.columns)})")
    if frame.height > MAX_ROWS:
        raise ValueError(f"{frame.height} rows is more than a chart embeds ({MAX_ROWS}); bin first")


def plot_timeseries(
    frame: pl.DataFrame,
    y: str = "rate_hz",
    *,
    x: str = "t_s",
    series: str = "topic",
    title: str | None = None,
    width: int = 560,
    height: int = 260,
) -> alt.Chart:
    """A line per `series` value of `y` against `x` (rate_hz, latency_ms_mean or
    latency_ms_max from analysis.timeseries, or any frame with those columns)."""
    _require(frame, x, y, series)
    data = frame.select(x, y, series).drop_nulls().sort(series, x)
    altair = _altair()
    chart: alt.Chart = (
        altair.Chart(data, title=title if title is not None else f"{y} over {x}")
        .mark_line()
        .encode(
            x=altair.X(x, type="quantitative"), y=altair.Y(y, type="quantitative"), color=series
        )
        .properties(width=width, height=height)
    )
    return chart


def plot_rates(frame: pl.DataFrame, *, title: str = "messages per second") -> alt.Chart:
    """Message rate per topic over time (analysis.timeseries)."""
    return plot_timeseries(frame, "rate_hz", title=title)


def plot_latency_percentiles(
    frame: pl.DataFrame, *, name: str = "service", title: str = "round trip percentiles (ms)"
) -> alt.Chart:
    """Bars of the p50/p90/p99 columns per service (analysis.service_stats; with
    name="topic" and latency_ms_* columns, analysis.topic_stats)."""
    _require(frame, name)
    wanted = [c for c in frame.columns if c.endswith(("_p50", "_p90", "_p99"))]
    if not wanted:
        raise ValueError("the frame has no *_p50/_p90/_p99 percentile columns")
    long = (
        frame.select(name, *wanted)
        .unpivot(index=name, variable_name="percentile", value_name="ms")
        .with_columns(pl.col("percentile").str.extract(r"(p\d+)$"))
        .drop_nulls()
    )
    altair = _altair()
    chart: alt.Chart = (
        altair.Chart(long, title=title)
        .mark_bar()
        .encode(
            x=altair.X("percentile", type="nominal"),
            y=altair.Y("ms", type="quantitative"),
            color=altair.Color("percentile", type="nominal"),
            column=altair.Column(name, type="nominal"),
        )
    )
    return chart


def plot_rtt_histogram(
    frame: pl.DataFrame, *, bins: int = 30, title: str = "round trip times (ms)"
) -> alt.Chart:
    """Histogram of answered calls' rtt_ms per service (analysis.service_calls or
    Monitor.services)."""
    _require(frame, "rtt_ms", "service")
    data = frame.select("service", "rtt_ms").drop_nulls()
    altair = _altair()
    chart: alt.Chart = (
        altair.Chart(data, title=title)
        .mark_bar()
        .encode(
            x=altair.X("rtt_ms", type="quantitative", bin=altair.Bin(maxbins=bins)),
            y=altair.Y("count()", type="quantitative"),
            color=altair.Color("service", type="nominal"),
        )
    )
    return chart


def plot_sequence_gaps(
    frame: pl.DataFrame, *, title: str = "missing sequence numbers"
) -> alt.Chart:
    """Missing and reordered messages per publisher (analysis.sequence_stats)."""
    _require(frame, "name", "missing", "reordered")
    long = frame.select("name", "missing", "reordered").unpivot(
        index="name", variable_name="problem", value_name="messages"
    )
    altair = _altair()
    chart: alt.Chart = (
        altair.Chart(long, title=title)
        .mark_bar()
        .encode(
            y=altair.Y("name", type="nominal"),
            x=altair.X("messages", type="quantitative"),
            color=altair.Color("problem", type="nominal"),
        )
    )
    return chart


def save(chart: alt.TopLevelMixin, path: str | Path, *, scale: float = 1.0) -> Path:
    """Export a static .svg or .png through vl-convert (no browser involved)."""
    vlc = require("vl_convert", "notebook", "saving a chart")

    target = Path(path)
    kind = target.suffix.lstrip(".").lower()
    if kind not in EXPORT_FORMATS:
        raise ValueError(f"export to .svg or .png, not {target.name!r}")
    spec: dict[str, Any] = chart.to_dict()
    if kind == "svg":
        target.write_text(vlc.vegalite_to_svg(spec), encoding="utf-8")
    else:
        target.write_bytes(vlc.vegalite_to_png(spec, scale=scale))
    return target
