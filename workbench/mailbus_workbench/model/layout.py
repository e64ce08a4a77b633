"""A workbench layout: what a user arranged (the open view, the plot's series and axes,
the filters, Find queries, pane widths, pinned topics), as plain data and as TOML.

Pure: `layout_from_toml` reads text (tomllib) and refuses a bad file with a `LayoutError`
naming the key and the problem; `layout_to_toml` writes text that reads back equal. Files
and names are `mailbus_workbench.layouts`' business.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from mailbus.errors import ConfigError, InvalidNameError
from mailbus.names import check_name

from mailbus_workbench.model.settings import toml_str

FORMAT_VERSION = 1
MAX_SERIES = 32
MAX_FIND_QUERIES = 20
MAX_PINNED = 100
MAX_TEXT = 1_000  # a filter, a query or a series is a line typed by a person
MIN_WIDTH, MAX_WIDTH = 8, 1_000
MIN_WINDOW_S, MAX_WINDOW_S = 0.1, 86_400.0
AXES = ("shared", "per-unit", "stacked")
# Panes whose width a layout keeps (the ids of the views' resizable left panes).
PANES = ("topics-left", "services-left", "plot-left")
# Views with a filter box a layout keeps.
FILTERED_VIEWS = ("topics", "services")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


class LayoutError(ConfigError):
    """A layout file or name that cannot be used; `key` says where, `problem` what."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(key, problem)
        self.args = (f"{key}: {problem}",)  # a file and a key, not an option's name

    def __str__(self) -> str:
        return str(self.args[0])


@dataclass(frozen=True, slots=True)
class Layout:
    view: str = "topics"
    plot_series: tuple[str, ...] = ()
    plot_window_s: float = 30.0
    plot_axes: str = "shared"
    filters: Mapping[str, str] = field(default_factory=dict)  # view id -> filter text
    find_queries: tuple[str, ...] = ()  # newest first
    widths: Mapping[str, int] = field(default_factory=dict)  # pane id -> cells
    pinned: tuple[str, ...] = ()  # topics


def remember_query(queries: tuple[str, ...], query: str) -> tuple[str, ...]:
    """`query` as the newest of Find's queries (kept once, at most MAX_FIND_QUERIES)."""
    if not query:
        return queries
    return (query, *(q for q in queries if q != query))[:MAX_FIND_QUERIES]


def check_layout_name(name: str) -> str:
    """A layout's name becomes a file name: letters, digits, `_`, `.`, `-`, at most 64,
    starting with a letter or digit."""
    if not isinstance(name, str) or not _NAME.match(name) or ".." in name:
        raise LayoutError(
            "layout",
            f"{name!r} is not a layout name: use letters, digits, '_', '.' or '-' "
            "(at most 64, starting with a letter or digit)",
        )
    return name


def layout_from_toml(text: str, *, source: str, views: Collection[str]) -> Layout:
    """Parse a layout file's text; `source` names it in errors, `views` are the view ids
    the workbench has. Unknown keys, wrong types and out-of-range values are refused."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise LayoutError(source, f"not valid TOML: {exc}") from None
    return layout_from_dict(data, source=source, views=views)


def layout_from_dict(data: Mapping[str, Any], *, source: str, views: Collection[str]) -> Layout:
    reader = _Reader(source)
    reader.keys(data, "", {"version", "view", "find", "pinned", "plot", "filters", "widths"})
    version = data.get("version", FORMAT_VERSION)
    if version != FORMAT_VERSION:
        raise LayoutError(f"{source}: version", f"this workbench reads version {FORMAT_VERSION}")
    view = data.get("view", "topics")
    if not isinstance(view, str) or view not in views:
        raise LayoutError(f"{source}: view", f"{view!r} is no view (one of {', '.join(views)})")
    plot = reader.table(data, "plot")
    reader.keys(plot, "plot.", {"series", "window_s", "axes"})
    series = reader.texts(plot, "plot.series", MAX_SERIES)
    window = plot.get("window_s", 30.0)
    if (
        isinstance(window, bool)
        or not isinstance(window, int | float)
        or not math.isfinite(window)
        or not MIN_WINDOW_S <= window <= MAX_WINDOW_S
    ):
        raise LayoutError(
            f"{source}: plot.window_s", f"expected seconds from {MIN_WINDOW_S} to {MAX_WINDOW_S:g}"
        )
    axes = plot.get("axes", "shared")
    if axes not in AXES:
        raise LayoutError(f"{source}: plot.axes", f"expected one of {', '.join(AXES)}")
    filters = reader.table(data, "filters")
    reader.keys(filters, "filters.", set(FILTERED_VIEWS))
    for key, value in filters.items():
        reader.text(value, f"filters.{key}")
    widths = reader.table(data, "widths")
    reader.keys(widths, "widths.", set(PANES))
    for key, value in widths.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise LayoutError(f"{source}: widths.{key}", "expected a whole number of cells")
        if not MIN_WIDTH <= value <= MAX_WIDTH:
            raise LayoutError(
                f"{source}: widths.{key}", f"expected {MIN_WIDTH} to {MAX_WIDTH} cells"
            )
    pinned = reader.texts(data, "pinned", MAX_PINNED)
    for topic in pinned:
        try:
            check_name(topic, "topic")
        except InvalidNameError as exc:
            raise LayoutError(f"{source}: pinned", str(exc)) from None
    return Layout(
        view=view,
        plot_series=series,
        plot_window_s=float(window),
        plot_axes=str(axes),
        filters=dict(filters),
        find_queries=reader.texts(data, "find", MAX_FIND_QUERIES),
        widths=dict(widths),
        pinned=pinned,
    )


class _Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def keys(self, table: Mapping[str, Any], prefix: str, known: set[str]) -> None:
        unknown = sorted(set(table) - known)
        if unknown:
            raise LayoutError(
                f"{self.source}: {prefix}{unknown[0]}",
                f"unknown key (known: {', '.join(sorted(known))})",
            )

    def table(self, data: Mapping[str, Any], key: str) -> dict[str, Any]:
        value = data.get(key, {})
        if not isinstance(value, dict):
            raise LayoutError(f"{self.source}: {key}", "expected a table")
        return value

    def text(self, value: object, key: str) -> str:
        if not isinstance(value, str) or len(value) > MAX_TEXT:
            raise LayoutError(f"{self.source}: {key}", f"expected text of at most {MAX_TEXT}")
        if any(ch < " " or ch == "\x7f" for ch in value):
            raise LayoutError(f"{self.source}: {key}", "holds a control character")
        return value

    def texts(self, data: Mapping[str, Any], key: str, most: int) -> tuple[str, ...]:
        value = data.get(key.rpartition(".")[2], [])
        if not isinstance(value, list) or len(value) > most:
            raise LayoutError(f"{self.source}: {key}", f"expected a list of at most {most}")
        return tuple(self.text(item, key) for item in value)


def layout_to_toml(layout: Layout) -> str:
    def strings(values: Collection[str]) -> str:
        return "[" + ", ".join(toml_str(v) for v in values) + "]"

    lines = [
        "# A Mailbus workbench layout (mailbus --layout NAME; docs/workbench.md, Layouts)",
        f"version = {FORMAT_VERSION}",
        f"view = {toml_str(layout.view)}",
        f"find = {strings(layout.find_queries)}",
        f"pinned = {strings(layout.pinned)}",
        "",
        "[plot]",
        f"series = {strings(layout.plot_series)}",
        f"window_s = {float(layout.plot_window_s)!r}",
        f"axes = {toml_str(layout.plot_axes)}",
        "",
        "[filters]",
        *(f"{key} = {toml_str(value)}" for key, value in sorted(layout.filters.items())),
        "",
        "[widths]",
        *(f"{key} = {int(value)}" for key, value in sorted(layout.widths.items())),
        "",
    ]
    return "\n".join(lines)
