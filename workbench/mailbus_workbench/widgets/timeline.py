"""The replay timeline: one row per busy name with its density over the session, a cursor
at the play position, moved with keys (left/right, shift for bigger steps, home/end) and
the mouse (click or drag to seek). It only shows and asks: a seek is posted as `Seeked`."""

from __future__ import annotations

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget

from mailbus_workbench.model.timeline import (
    Timeline,
    column_of,
    offset_at,
    resample,
    stepped,
)

LEVELS = " ▁▂▃▄▅▆▇█"
PALETTE = ("cyan", "magenta", "green", "yellow", "bright_blue", "red")
LABEL_WIDTH = 16
STEP = 0.01  # of the session per key press
BIG_STEP = 0.1  # with shift


class TimelineBar(Widget, can_focus=True):
    BINDINGS = [
        Binding("left", "step(-1)", "Back", show=False),
        Binding("right", "step(1)", "On", show=False),
        Binding("shift+left", "step(-10)", "Back more", show=False),
        Binding("shift+right", "step(10)", "On more", show=False),
        Binding("home", "to_end(0)", "Start", show=False),
        Binding("end", "to_end(1)", "End", show=False),
    ]
    DEFAULT_CSS = """
    TimelineBar { height: 3; padding: 0 1; }
    TimelineBar:focus { background: $boost; }
    """

    class Seeked(Message):
        """The user moved the cursor to `offset_s` seconds of the session."""

        def __init__(self, offset_s: float) -> None:
            super().__init__()
            self.offset_s = offset_s

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.timeline: Timeline | None = None
        self.cursor_s = 0.0
        self._dragging = False
        # Seeks posted and not yet taken by the view: the play position shown meanwhile
        # is the one from before them (a key right after another stepped from there).
        self._seeks_in_flight = 0
        self._tracks: tuple[int, list[str]] | None = None  # (columns, a level string per row)

    @property
    def dragging(self) -> bool:
        """The user holds the cursor: the play position does not move it meanwhile."""
        return self._dragging

    def show(self, timeline: Timeline | None) -> None:
        self.timeline = timeline
        self.cursor_s = 0.0
        self._seeks_in_flight = 0
        self._tracks = None
        rows = len(timeline.rows) if timeline is not None else 1
        self.styles.height = max(rows, 1) + 2  # the rows, the axis, the border-less gap
        self.refresh()

    def move_cursor(self, offset_s: float) -> None:
        """Show the play position (no seek is posted); not while a seek of the cursor's
        is on its way to the player."""
        if not self.seeking and offset_s != self.cursor_s:
            self.cursor_s = offset_s
            self.refresh()

    # -- asking for a seek ----------------------------------------------------------------
    def seek(self, offset_s: float) -> None:
        if self.timeline is None:
            return
        self.cursor_s = min(max(offset_s, 0.0), self.timeline.duration_s)
        self.refresh()
        self._seeks_in_flight += 1
        self.post_message(self.Seeked(self.cursor_s))

    @property
    def seeking(self) -> bool:
        """A seek of the cursor's is posted and not yet handed to the player."""
        return self._seeks_in_flight > 0

    def seek_taken(self) -> None:
        """The view has handed a Seeked on to the player: its position follows it now."""
        self._seeks_in_flight = max(self._seeks_in_flight - 1, 0)

    def action_step(self, steps: int) -> None:
        if self.timeline is not None:
            self.seek(stepped(self.cursor_s, self.timeline.duration_s, steps * STEP))

    def action_to_end(self, end: int) -> None:
        if self.timeline is not None:
            self.seek(self.timeline.duration_s if end else 0.0)

    @property
    def track_columns(self) -> int:
        return max(self.content_region.width - LABEL_WIDTH, 1)

    def _seek_at(self, x: int) -> None:
        """Seek to the offset under `x` (the mouse's column in the widget)."""
        if self.timeline is not None:
            column = x - self.gutter.left - LABEL_WIDTH
            self.seek(offset_at(column, self.timeline.duration_s, self.track_columns))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if self.timeline is None or event.x < self.gutter.left + LABEL_WIDTH:
            return  # the names: nothing to seek to
        self.focus()
        self._dragging = True
        self.capture_mouse()
        self._seek_at(event.x)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            self._seek_at(event.x)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()

    # -- drawing --------------------------------------------------------------------------
    def render(self) -> Text:
        timeline = self.timeline
        if timeline is None or not timeline.rows:
            return Text("No session open: its timeline shows here.", style="dim")
        columns = self.track_columns
        cursor = column_of(self.cursor_s, timeline.duration_s, columns)
        out = Text(no_wrap=True, overflow="crop")
        # A seek moves only the cursor: each row is its cached track in three spans (before,
        # under and after the cursor), not a span per column (a seek by keys redraws it).
        tracks = self._levels(columns)
        for index, (row, track) in enumerate(zip(timeline.rows, tracks, strict=True)):
            colour = PALETTE[index % len(PALETTE)]
            name = row.name if len(row.name) < LABEL_WIDTH else row.name[: LABEL_WIDTH - 2] + "…"
            out.append(f"{name:<{LABEL_WIDTH - 1}} ", style=colour)
            out.append(track[:cursor], style=colour)
            under = track[cursor : cursor + 1]
            out.append("│" if under == LEVELS[0] else under, style=f"reverse {colour}")
            out.append(track[cursor + 1 :], style=colour)
            out.append("\n")
        out.append(" " * LABEL_WIDTH)
        out.append(self._axis(columns, cursor, timeline.duration_s), style="dim")
        return out

    def _levels(self, columns: int) -> list[str]:
        """Each row's density as a string of `columns` level characters, kept until the
        timeline or the width changes."""
        if self._tracks is not None and self._tracks[0] == columns:
            return self._tracks[1]
        assert self.timeline is not None
        tracks = []
        for row in self.timeline.rows:
            counts = resample(row.bins, columns)
            top = max(counts, default=0) or 1
            tracks.append(
                "".join(
                    LEVELS[0 if not count else max(1, round(count / top * (len(LEVELS) - 1)))]
                    for count in counts
                )
            )
        self._tracks = (columns, tracks)
        return tracks

    def _axis(self, columns: int, cursor: int, duration_s: float) -> str:
        end = f"{duration_s:.1f} s"
        here = f"▲ {self.cursor_s:.2f} s"
        line = [" "] * columns
        for i, char in enumerate("0 s"):
            if i < columns:
                line[i] = char
        for i, char in enumerate(end):
            at = columns - len(end) + i
            if 0 <= at < columns:
                line[at] = char
        start = min(max(cursor, 0), max(columns - len(here), 0))
        for i, char in enumerate(here):
            if start + i < columns:
                line[start + i] = char
        return "".join(line)
