"""A small plot helper for notebooks: rates and latency over time as an SVG line chart.

No plotting library is a dependency of Mailbus; an SVG string renders in Jupyter
(`_repr_svg_`), in a browser and in files, and is easy to test. Frames come from
`analysis.timeseries`; any polars frame with an x column, a y column and a series
column works.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from pathlib import Path

import polars as pl

_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f")


@dataclass(frozen=True)
class SvgPlot:
    svg: str
    title: str = ""

    def _repr_svg_(self) -> str:
        return self.svg

    def save(self, path: str | Path) -> Path:
        target = Path(path)
        target.write_text(self.svg, encoding="utf-8")
        return target


def _fmt(value: float) -> str:
    return f"{value:.3g}"


def plot_timeseries(
    frame: pl.DataFrame,
    y: str = "rate_hz",
    *,
    x: str = "t_s",
    series: str = "topic",
    title: str | None = None,
    width: int = 720,
    height: int = 320,
) -> SvgPlot:
    """A line per `series` value of `y` against `x` (e.g. rate_hz or latency_ms_mean
    from analysis.timeseries)."""
    for column in (x, y, series):
        if column not in frame.columns:
            raise ValueError(f"no column {column!r} in the frame ({', '.join(frame.columns)})")
    title = title if title is not None else f"{y} over {x}"
    data = frame.select(x, y, series).drop_nulls().sort(series, x)
    left, right, top, bottom = 60, 170, 30, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<text x="{left}" y="18" font-size="13">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" '
        'fill="none" stroke="#999"/>',
    ]
    if data.height == 0:
        parts.append(f'<text x="{left + 10}" y="{top + 20}">no data</text></svg>')
        return SvgPlot("".join(parts), title)
    x_lo, x_hi = float(data[x].min()), float(data[x].max())  # type: ignore[arg-type]
    y_lo, y_hi = min(0.0, float(data[y].min())), float(data[y].max())  # type: ignore[arg-type]
    x_span = (x_hi - x_lo) or 1.0
    y_span = (y_hi - y_lo) or 1.0

    def px(value: float) -> float:
        return left + (value - x_lo) / x_span * plot_w

    def py(value: float) -> float:
        return top + plot_h - (value - y_lo) / y_span * plot_h

    parts += [
        f'<text x="{left - 5}" y="{top + 4}" text-anchor="end">{_fmt(y_hi)}</text>',
        f'<text x="{left - 5}" y="{top + plot_h}" text-anchor="end">{_fmt(y_lo)}</text>',
        f'<text x="{left}" y="{height - 20}">{_fmt(x_lo)}</text>',
        f'<text x="{left + plot_w}" y="{height - 20}" text-anchor="end">{_fmt(x_hi)}</text>',
        f'<text x="{left + plot_w / 2}" y="{height - 6}" text-anchor="middle">{escape(x)}</text>',
    ]
    names = data[series].unique(maintain_order=True).to_list()
    for i, name in enumerate(names):
        colour = _COLOURS[i % len(_COLOURS)]
        rows = data.filter(pl.col(series) == name)
        points = " ".join(
            f"{px(float(a)):.1f},{py(float(b)):.1f}" for a, b in zip(rows[x], rows[y], strict=True)
        )
        parts.append(
            f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{points}"/>'
        )
        ly = top + 12 + i * 16
        parts.append(
            f'<line x1="{left + plot_w + 10}" y1="{ly - 4}" x2="{left + plot_w + 28}" '
            f'y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>'
            f'<text x="{left + plot_w + 32}" y="{ly}">{escape(str(name))}</text>'
        )
    parts.append("</svg>")
    return SvgPlot("".join(parts), title)
