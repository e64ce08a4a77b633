"""Plot: numeric fields of topics' JSON bodies, topics' rates and services' latencies
over a sliding time window (Foxglove's plot panel, rqt_plot), live and during replay."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option
from textual_plotext import PlotextPlot

from mailbus_workbench.model.plot_layout import (
    MIN_PANEL_COLUMNS,
    MIN_PANEL_ROWS,
    function_problem,
    grid,
    load_axes_mode,
    panels,
    plot_settings_file,
    save_axes_mode,
)
from mailbus_workbench.model.plot_paths import PathError, SeriesKind, parse
from mailbus_workbench.model.series import MAX_SERIES, POINTS_PER_SERIES, Point, Series
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.suggest import NameSuggester

# Time windows the zoom keys step through, in seconds.
WINDOWS = (1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
DEFAULT_WINDOW = 30.0
CURSOR_STEPS = 50  # one cursor step is this fraction of the window
# Points drawn per column of the chart (braille: two dots a cell); more are thinned, as
# plotext's cost grows with the points and a terminal shows no more.
DRAWN_PER_COLUMN = 2
# One colour per series, the same in the list, the readout and the plot (RGB: plotext's
# named colours are not Rich's).
PALETTE = (
    (46, 196, 214),
    (224, 90, 168),
    (230, 180, 34),
    (92, 184, 92),
    (232, 104, 74),
    (111, 140, 255),
)
CURSOR_DARK = (235, 235, 235)
CURSOR_LIGHT = (40, 40, 40)


def rgb(i: int) -> tuple[int, int, int]:
    return PALETTE[i % len(PALETTE)]


def style(i: int) -> str:
    return "rgb({},{},{})".format(*rgb(i))


NO_SERIES = (
    "Nothing plotted yet. Type a series in the box (completion: → accepts):\n"
    "  robot/pose.x  a numeric field of a topic's JSON bodies\n"
    "  rate(robot/pose)  a topic's messages per second\n"
    "  latency(demo/add)  a service's answered calls, in ms"
)


def thin(points: list[Point], most: int) -> list[Point]:
    """At most `most` points, evenly picked, the last one kept."""
    if len(points) <= most:
        return points
    step = len(points) / most
    picked = [points[int(i * step)] for i in range(most - 1)]
    picked.append(points[-1])
    return picked


def format_value(value: float | None) -> str:
    return "-" if value is None else f"{value:.6g}"


class PlotView(View):
    DEFAULT_FOCUS = "#plot-series"
    HELP = f"""\
## Plot
Numbers over time: a numeric field of a topic's JSON bodies, a topic's rate or a
service's latency, live and while a session is replayed (replayed messages come in like
live ones). Type a series in the box and press enter; completion (→ accepts) offers
every numeric field seen in the kept messages, each topic's rate and each service's
latency. Series syntax:

- `robot/pose.x`, `sensors/imu.accel[2]`, `lab/cfg["gain.k"]` (quote a key that holds
  `.`, `[`, `]`, `"` or a space), `sensors/level` (a body that is a bare number)
- `rate(robot/pose)`: messages per second, one point a second
- `latency(demo/add)`: each answered call's latency in milliseconds

A new series starts with what the workbench still holds (the kept messages and calls).
Each series keeps its newest {POINTS_PER_SERIES} points; at most {MAX_SERIES} series.
Messages without a number at the path are counted beside the series, not plotted.

Series of different scales never share a y axis: a topic's fields share one, each rate
and latency unit has its own. **s** switches between a plot per scale, stacked, and two
scales a plot (left and right axis); the choice is kept in `plot.toml` beside the
templates file. A series that cannot be read is refused with the reason; one on a topic
not seen yet is added with a hint (it fills when a message comes).

- **a** add a series (the box keeps the keys after enter: type the next one)
- **x** or **delete** remove the selected series
- **p** pause / resume the plot (the series keep filling)
- **+** / **-** zoom the time window in / out ({WINDOWS[0]:g} s to {WINDOWS[-1]:g} s)
- **left** / **right** move the cursor in time; the readout shows each series' value
  there (the last point at or before it); right past the end puts it back on "latest"
- From the Topics inspector's Body tab, **g** plots the field under the cursor
"""

    BINDINGS = [
        Binding("a", "add", "Add", id="plot.add"),
        Binding("x,delete", "remove", "Remove", id="plot.remove"),
        Binding("p", "pause", "Pause", id="plot.pause"),
        Binding("s", "axes", "Stacked/axes", id="plot.axes"),
        Binding("plus,equals_sign", "zoom(-1)", "Zoom in", id="plot.zoom_in"),
        Binding("minus", "zoom(1)", "Zoom out", id="plot.zoom_out"),
        Binding("left", "cursor(1)", "Cursor back", show=False, id="plot.cursor_back"),
        Binding("right", "cursor(-1)", "Cursor on", show=False, id="plot.cursor_on"),
    ]

    # A plotext drawing costs tens of ms: twice a second is enough for a sliding window.
    REFRESH_EVERY_S = 0.5
    DEFAULT_CSS = """
    #plot-left { width: 36; }
    #plot-add { margin: 0; }
    #plot-error { color: $error; height: auto; }
    #plot-series { height: 1fr; }
    #plot-readout { height: auto; max-height: 50%; border-top: solid $panel; }
    #plot-right { width: 1fr; }
    #plot-status { height: 1; color: $text-muted; padding: 0 1; }
    #plot-empty { padding: 1 2; color: $text-muted; }
    """

    class SeriesAdded(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    class SeriesRemoved(Message):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    class PauseChanged(Message):
        def __init__(self, paused: bool) -> None:
            super().__init__()
            self.paused = paused

    class WindowChanged(Message):
        def __init__(self, window_s: float) -> None:
            super().__init__()
            self.window_s = window_s

    class CursorMoved(Message):
        def __init__(self, back_s: float | None) -> None:
            super().__init__()
            self.back_s = back_s  # seconds before the window's end; None: latest

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.window_s = DEFAULT_WINDOW
        self.paused_at: float | None = None  # the window's end while paused
        self.cursor_back_s: float | None = None
        self.end_s = 0.0  # the window's end at the last drawing
        self.readout: list[tuple[str, float | None]] = []  # (series, value) shown
        self.error = ""
        self._listed: list[str] = []
        self._drawn: object = None  # what the chart shows (to skip a drawing of the same)
        self._axes_file = plot_settings_file(parts.settings.templates_file)
        self.axes_mode = load_axes_mode(self._axes_file)

    def compose(self) -> ComposeResult:
        model = self.parts.model
        with Horizontal():
            with Vertical(id="plot-left"):
                yield Input(
                    placeholder="add: topic.field, rate(…)  a",
                    id="plot-add",
                    suggester=NameSuggester(
                        lambda: model.plots.candidates(model.topics, model.services)
                    ),
                )
                yield Static("", id="plot-error", markup=False)
                yield OptionList(id="plot-series")
                yield Static("", id="plot-readout", markup=False)
            with Vertical(id="plot-right"):
                yield Static("", id="plot-status", markup=False)
                yield Static(NO_SERIES, id="plot-empty", markup=False)
                yield PlotextPlot(id="plot-chart")

    @property
    def paused(self) -> bool:
        return self.paused_at is not None

    # -- series -------------------------------------------------------------------------
    def add_series(self, text: str) -> bool:
        """Plot `text`; a bad one is said under the box and nothing changes."""
        model = self.parts.model
        problem = function_problem(text)
        if problem is not None:
            self._error(problem)
            return False
        try:
            key = parse(text, model.topics.stats)
            model.plots.add(key, model.topics, model.services)
        except PathError as exc:
            self._error(str(exc))
            return False
        if key.kind is not SeriesKind.LATENCY and key.name not in model.topics.stats:
            self._error(
                f"added; no message seen on {key.name} yet: it fills when one comes"
                " (x removes it if the name is wrong)",
                hint=True,
            )
        else:
            self._error("")
        self.post_message(self.SeriesAdded(str(key)))
        self.redraw()
        series = self.query_one("#plot-series", OptionList)
        series.highlighted = series.option_count - 1
        # The box keeps the focus: the next series is typed on, not taken by view keys.
        return True

    def _error(self, text: str, *, hint: bool = False) -> None:
        self.error = text
        self.query_one("#plot-error", Static).update(Text(text, style="yellow") if hint else text)

    def action_axes(self) -> None:
        self.axes_mode = self.axes_mode.other()
        try:
            save_axes_mode(self._axes_file, self.axes_mode)
        except OSError as exc:
            self._error(f"cannot remember the axes choice in {self._axes_file}: {exc}")
        self.redraw()

    @on(Input.Submitted, "#plot-add")
    def _submitted(self, event: Input.Submitted) -> None:
        if self.add_series(event.value):
            event.input.value = ""

    def action_add(self) -> None:
        self.query_one("#plot-add", Input).focus()

    def default_focus_widget(self) -> Widget | None:
        # Nothing plotted yet: the keys go to the box, so the first thing typed is a series.
        if len(self.parts.model.plots):
            return super().default_focus_widget()
        return self.query_one("#plot-add", Input)

    def action_remove(self) -> None:
        listed = self.query_one("#plot-series", OptionList)
        index = listed.highlighted
        if index is None or index >= len(self._listed):
            return
        name = self._listed[index]
        self.parts.model.plots.remove(name)
        self.post_message(self.SeriesRemoved(name))
        self.redraw()

    # -- window, pause, cursor ----------------------------------------------------------
    def action_pause(self) -> None:
        self.paused_at = None if self.paused else self.parts.model.clock()
        self.post_message(self.PauseChanged(self.paused))
        self.redraw()

    def action_zoom(self, direction: int) -> None:
        shorter = [w for w in WINDOWS if w < self.window_s]
        longer = [w for w in WINDOWS if w > self.window_s]
        steps = shorter[-1:] if direction < 0 else longer[:1]
        if not steps:
            return
        self.window_s = steps[0]
        if self.cursor_back_s is not None:
            self.cursor_back_s = min(self.cursor_back_s, self.window_s)
        self.post_message(self.WindowChanged(self.window_s))
        self.redraw()

    def action_cursor(self, steps_back: int) -> None:
        step = self.window_s / CURSOR_STEPS
        back = (self.cursor_back_s or 0.0) + steps_back * step
        back = round(min(back, self.window_s), 9)
        self.cursor_back_s = back if back > 0 else None
        self.post_message(self.CursorMoved(self.cursor_back_s))
        self.redraw()

    # -- drawing ------------------------------------------------------------------------
    def on_resize(self) -> None:
        self.redraw()  # how many plots fit, and where, follows the size

    def refresh_view(self, now: float) -> None:
        self.redraw(now)

    def redraw(self, now: float | None = None) -> None:
        model = self.parts.model
        end = self.paused_at if self.paused_at is not None else now or model.clock()
        self.end_s = end
        start = end - self.window_s
        series = list(model.plots)
        self._list(series)
        cursor_t = end - (self.cursor_back_s or 0.0)
        self.readout = [(s.name, s.at(cursor_t)) for s in series]
        self._show_readout(series, cursor_t)
        state = f"paused at {fmt.clock_time(end)}" if self.paused else "live"
        layout = panels([s.key for s in series], self.axes_mode) or [[]]
        # The chart's room (the pane below the status line; the chart itself has no size
        # while hidden): the plots that fit it, in columns when stacking would flatten them.
        room = self.query_one("#plot-right").size
        width, height = room.width, max(0, room.height - 1)
        rows, columns, fitted = grid(len(layout), width, height)
        left_out = len(layout) - fitted if series else 0
        self.query_one("#plot-status", Static).update(
            (f"{left_out} of {len(layout)} plots left out: too small · " if left_out else "")
            + f"last {self.window_s:g} s · {state} · {self.axes_mode.value} (s)"
            " · +/- zoom · ←/→ cursor"
        )
        chart = self.query_one("#plot-chart", PlotextPlot)
        empty = self.query_one("#plot-empty", Static)
        if series and not fitted:
            empty.update(
                f"Too small to plot: {width}x{height} cells here, a plot needs"
                f" {MIN_PANEL_COLUMNS}x{MIN_PANEL_ROWS}. A larger terminal draws it;"
                " the readout beside still shows each value."
            )
        elif not series:
            empty.update(NO_SERIES)
        empty.display = not series or not fitted
        chart.display = bool(series) and bool(fitted)
        drawing = (
            end,
            self.window_s,
            self.cursor_back_s,
            [(s.name, len(s.points), s.points[-1] if s.points else None) for s in series],
            self.app.current_theme.dark,
            self.axes_mode,
            (rows, columns, fitted),
        )
        if drawing == self._drawn:
            return  # paused and nothing new: no repaint
        self._drawn = drawing
        if not fitted:
            return
        most = max(2, DRAWN_PER_COLUMN * (chart.size.width or 80) // columns)
        figure = chart.plt
        figure.clear_figure()
        figure.subplots(rows, columns)
        for n, panel in enumerate(layout[:fitted]):
            # Down each column first: the order of the list beside reads the same way.
            row, column = n % rows + 1, n // rows + 1
            plt = figure.subplot(row, column)
            for i, side in panel:
                points = thin(series[i].between(start, end), most)
                if points:
                    # No legend: the list beside names each colour; a legend hides data.
                    plt.plot(
                        [t - end for t, _ in points],
                        [v for _, v in points],
                        color=rgb(i),
                        marker="braille",
                        yside=side,
                    )
            for side in dict.fromkeys(side for _, side in panel):
                units = dict.fromkeys(self._scale_label(series[i]) for i, s in panel if s == side)
                plt.ylabel(", ".join(units), yside=side)  # type: ignore[call-arg]
            plt.xlim(-self.window_s, 0)
            if row == rows or n == fitted - 1:  # the lowest plot of its column
                plt.xlabel("seconds before " + ("the pause" if self.paused else "now"))
            if self.cursor_back_s is not None:
                plt.vline(
                    -self.cursor_back_s,
                    CURSOR_DARK if self.app.current_theme.dark else CURSOR_LIGHT,
                )
        for n in range(fitted, rows * columns):  # the grid's spare cells stay blank
            blank = figure.subplot(n % rows + 1, n // rows + 1)
            blank.frame(False)
            blank.xticks([])
            blank.yticks([])
        chart.refresh()

    @staticmethod
    def _scale_label(series: Series) -> str:
        return series.key.unit or series.key.name

    def _list(self, series: list[Series]) -> None:
        listed = self.query_one("#plot-series", OptionList)
        names = [s.name for s in series]
        options = []
        for i, s in enumerate(series):
            label = Text("● ", style=style(i))
            label.append(fmt.printable(s.name))
            if s.key.unit:
                label.append(f" {s.key.unit}", style="dim")
            label.append(f"\n  {len(s.points)} points", style="dim")
            if s.missing:
                label.append(f", {s.missing} without a number", style="dim")
            options.append(Option(label))
        highlighted = listed.highlighted
        if names != self._listed:
            self._listed = names
            listed.clear_options()
            listed.add_options(options)
            if names:
                listed.highlighted = min(highlighted or 0, len(names) - 1)
        else:
            for i, option in enumerate(options):
                listed.replace_option_prompt_at_index(i, option.prompt)

    def _show_readout(self, series: list[Series], cursor_t: float) -> None:
        readout = self.query_one("#plot-readout", Static)
        if not series:
            readout.update("")
            return
        where = (
            "latest"
            if self.cursor_back_s is None
            else f"cursor -{self.cursor_back_s:.3g} s ({fmt.clock_time(cursor_t)})"
        )
        text = Text(where + "\n", style="bold")
        for i, (s, (_, value)) in enumerate(zip(series, self.readout, strict=True)):
            text.append("● ", style=style(i))
            text.append(f"{format_value(value)} {s.key.unit}".rstrip())
            text.append(f"  {fmt.printable(s.name)}\n", style="dim")
        readout.update(text)
