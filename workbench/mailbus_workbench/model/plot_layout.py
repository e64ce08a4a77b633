"""How the Plot view lays its series out: series of different scales never share a y
axis. Series are grouped by scale (a rate or a latency by its unit; a topic's fields
together, as fields of one message usually share a scale), and either each group gets
its own stacked plot, or two groups share a plot, one on the left axis and one on the
right. The choice is remembered in `plot.toml` beside the templates file."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path

from mailbus_workbench.model.plot_paths import SeriesKey, SeriesKind

# A function call that is not one of the series functions: `te(robot/pose)`.
_CALL = re.compile(r"^\s*([^\s(]*)\s*\(")
FUNCTIONS = ("rate", "latency")


class AxesMode(StrEnum):
    STACKED = "stacked"  # one plot per scale
    AXES = "axes"  # two scales a plot, on the left and the right axis

    def other(self) -> AxesMode:
        return AxesMode.AXES if self is AxesMode.STACKED else AxesMode.STACKED


def scale_of(key: SeriesKey) -> str:
    if key.kind is SeriesKind.FIELD:
        return f"topic {key.name}"
    return key.unit


def scale_groups(keys: Sequence[SeriesKey]) -> list[list[int]]:
    """The indexes of `keys`, grouped by scale, in the order the scales first appear."""
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(keys):
        groups.setdefault(scale_of(key), []).append(i)
    return list(groups.values())


def panels(keys: Sequence[SeriesKey], mode: AxesMode) -> list[list[tuple[int, str]]]:
    """One list a plot, top to bottom: (series index, "left" or "right" axis)."""
    groups = scale_groups(keys)
    per_panel = 1 if mode is AxesMode.STACKED else 2
    result = []
    for start in range(0, len(groups), per_panel):
        panel = []
        for side, group in zip(("left", "right"), groups[start : start + per_panel], strict=False):
            panel += [(i, side) for i in group]
        result.append(panel)
    return result


def function_problem(text: str) -> str | None:
    """Why `text` is not a series when it calls an unknown function, else None."""
    call = _CALL.match(text)
    if call is None or call.group(1) in FUNCTIONS:
        return None
    name = call.group(1) or "(nothing)"
    return (
        f"{name}(…) is not a series function: use rate(topic) or latency(service), or topic.field"
    )


def plot_settings_file(templates_file: Path) -> Path:
    return templates_file.with_name("plot.toml")


def load_axes_mode(path: Path) -> AxesMode:
    """The remembered mode; stacked when there is none or the file cannot be read."""
    try:
        data = tomllib.loads(path.read_text("utf-8"))
        return AxesMode(data.get("axes", AxesMode.STACKED.value))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError, ValueError):
        return AxesMode.STACKED


def save_axes_mode(path: Path, mode: AxesMode) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(f'axes = "{mode.value}"\n', "utf-8")
    temporary.replace(path)


# The least a plot needs to be read: its frame, three rows of data, the time ticks and
# its axis name (below this plotext draws its labels upside down and no data at all);
# and the width of a y axis's labels with room for a curve.
MIN_PANEL_ROWS = 7
MIN_PANEL_COLUMNS = 30


def grid(count: int, width: int, height: int) -> tuple[int, int, int]:
    """How `count` plots fit a chart of `width` x `height` cells: (rows, columns, plots
    drawn). Stacked in one column while each keeps MIN_PANEL_ROWS, else side by side in
    more columns; the plots that still do not fit are left out (drawn < count), and
    none is drawn when not one fits. A size of 0 (not laid out yet) fits everything."""
    if count <= 0:
        return 1, 1, 0
    if width <= 0 or height <= 0:
        return count, 1, count
    most_rows, most_columns = height // MIN_PANEL_ROWS, width // MIN_PANEL_COLUMNS
    if most_rows == 0 or most_columns == 0:
        return 0, 0, 0
    for columns in range(1, most_columns + 1):
        rows = -(-count // columns)
        if rows <= most_rows:
            return rows, columns, count
    return most_rows, most_columns, most_rows * most_columns
