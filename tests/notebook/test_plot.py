"""Altair charts over the analysis frames, and their static export through vl-convert."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from mailbus.sessions import analysis, plot

SAMPLES = Path(__file__).parents[2] / "sample_sessions"
SESSIONS = [str(SAMPLES / name) for name in ("demo", "slow_service", "gaps")]


@pytest.mark.slow
def test_each_chart_exports_svg_and_png_with_its_data(tmp_path: Path) -> None:
    charts = {
        "rates": plot.plot_rates(analysis.timeseries(SESSIONS[:1], bin_s=0.5)),
        "latency": plot.plot_latency_percentiles(analysis.service_stats(SESSIONS)),
        "rtt": plot.plot_rtt_histogram(analysis.service_calls(SESSIONS)),
        "gaps": plot.plot_sequence_gaps(analysis.sequence_stats(SESSIONS)),
    }
    for name, chart in charts.items():
        spec = chart.to_dict()
        rows = next(iter(spec["datasets"].values()))
        assert rows, name
        svg = plot.save(chart, tmp_path / f"{name}.svg").read_text()
        assert svg.startswith("<svg") and "</svg>" in svg
    png = plot.save(charts["gaps"], tmp_path / "gaps.png").read_bytes()
    assert png.startswith(b"\x89PNG")
    gaps = next(iter(charts["gaps"].to_dict()["datasets"].values()))
    assert sum(r["messages"] for r in gaps if r["problem"] == "missing") == (
        analysis.sequence_stats(SESSIONS)["missing"].sum()
    )


def test_bad_frames_and_formats_get_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no column 'rate_hz'"):
        plot.plot_timeseries(pl.DataFrame({"t_s": [1.0], "topic": ["a"]}))
    with pytest.raises(ValueError, match="no \\*_p50"):
        plot.plot_latency_percentiles(pl.DataFrame({"service": ["s"]}))
    with pytest.raises(ValueError, match="bin first"):
        plot.plot_timeseries(
            pl.DataFrame({"t_s": range(plot.MAX_ROWS + 1), "rate_hz": 1.0, "topic": "a"})
        )
    chart = plot.plot_rates(analysis.timeseries(SESSIONS[:1]))
    with pytest.raises(ValueError, match=r"export to \.svg or \.png"):
        plot.save(chart, tmp_path / "x.pdf")
    assert not (tmp_path / "x.pdf").exists()
