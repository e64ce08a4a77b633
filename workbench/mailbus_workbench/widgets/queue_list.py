"""The outbox's entries as the Queues view lists them, one line each, with a cursor.

Drawn with Textual's line API, like the message list: only the visible lines are
rendered, each straight from its row's strings, so a new listing of thousands of entries
costs nothing until painted. A DataTable rendered every visible cell through Rich again
on each switch to the view (its cell cache is keyed on the focus), 25-35 ms of the UI
thread's CPU with 500 entries (bench/workbench.py, issue 15 item 8)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

# (title, width); the last column takes the rest of the line.
COLUMNS = (
    ("state", 10),
    ("id", 10),
    ("destination", 24),
    ("attempts", 10),
    ("next attempt", 14),
    ("age", 10),
    ("size", 10),
    ("subject", 32),
    ("last error", 0),
)
STATE_STYLE = {
    "queued": Style(color="yellow"),
    "inflight": Style(color="cyan"),
    "dead": Style(color="red", bold=True),
    "cleanup": Style(dim=True),
    "corrupt": Style(color="magenta"),
}

Row = tuple[str, ...]  # one entry's cells, printable, in COLUMNS order


class QueueList(ScrollView, can_focus=True):
    class Highlighted(Message):
        """The cursor is on another entry (or on none: `entry_id` empty)."""

        def __init__(self, entry_id: str) -> None:
            super().__init__()
            self.entry_id = entry_id

    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
    ]
    COMPONENT_CLASSES = {"queue-list--header", "queue-list--cursor", "queue-list--even-row"}
    DEFAULT_CSS = """
    QueueList {
        height: 1fr;
        overflow-x: hidden;
        overflow-y: scroll;
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .queue-list--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        & > .queue-list--header { text-style: bold; background: $panel; color: $foreground; }
        & > .queue-list--even-row { background: $surface-lighten-1 50%; }
        &:dark > .queue-list--even-row { background: $surface-darken-1 40%; }
        & > .queue-list--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._ids: list[str] = []
        self._rows: list[Row] = []
        self.cursor_row = 0

    # -- content --------------------------------------------------------------------
    def show(self, rows: dict[str, Row]) -> None:
        """List `rows` (by entry id, in order); the cursor stays on its entry if it is
        still listed, else on its row number."""
        current = self.selected_id()
        self._ids = list(rows)
        self._rows = list(rows.values())
        self.virtual_size = Size(0, len(self._rows) + 1)  # +1: the header line
        row = self._ids.index(current) if current and current in rows else self.cursor_row
        self.cursor_row = max(0, min(row, len(self._rows) - 1))
        self.move_cursor(row=row, announce=current != self.selected_id())

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def ids(self) -> list[str]:
        return list(self._ids)

    def selected_id(self) -> str:
        return self._ids[self.cursor_row] if self._ids else ""

    def get_row(self, row: int) -> Row:
        return self._rows[row]

    # -- cursor -----------------------------------------------------------------------
    def move_cursor(self, *, row: int, announce: bool = True) -> None:
        """Put the cursor on `row` (clamped) and scroll it into view; post Highlighted
        when it is on another entry (or when `announce`)."""
        before = self.selected_id()
        self.cursor_row = max(0, min(row, len(self._rows) - 1))
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False, immediate=True)
        elif self.cursor_row >= top + visible:
            self.scroll_to(y=self.cursor_row - visible + 1, animate=False, immediate=True)
        self.refresh()
        if announce or self.selected_id() != before:
            self.post_message(self.Highlighted(self.selected_id()))

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(row=self.cursor_row + delta, announce=False)

    def action_page(self, direction: int) -> None:
        page = max(1, self.scrollable_content_region.height - 2)
        self.move_cursor(row=self.cursor_row + direction * page, announce=False)

    def action_jump(self, row: int) -> None:
        self.move_cursor(row=row if row >= 0 else len(self._rows) - 1, announce=False)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:  # the header
            return
        row = int(self.scroll_y) + offset.y - 1
        if 0 <= row < len(self._rows):
            self.move_cursor(row=row, announce=False)

    # -- drawing ----------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        base = self.rich_style
        if y == 0:
            style = base + self.get_component_rich_style("queue-list--header")
            return _strip(tuple(title for title, _ in COLUMNS), style, width, color=False)
        row = int(self.scroll_y) + y - 1
        if row >= len(self._rows):
            return Strip.blank(width, base)
        if row == self.cursor_row:
            style = base + self.get_component_rich_style("queue-list--cursor")
            return _strip(self._rows[row], style, width, color=False)
        style = base + self.get_component_rich_style("queue-list--even-row") if row % 2 else base
        return _strip(self._rows[row], style, width, color=True)


def _cell(text: str, width: int) -> str:
    if width <= 0:
        return f" {text}"
    inner = width - 2
    shown = text if len(text) <= inner else text[: max(0, inner - 1)] + "…"
    return f" {shown}".ljust(width)


def _strip(cells: Row, style: Style, width: int, *, color: bool) -> Strip:
    # The state column in its colour (not under the cursor, whose colours say where it is).
    first = _cell(cells[0], COLUMNS[0][1])
    rest = "".join(_cell(c, w) for c, (_, w) in zip(cells[1:], COLUMNS[1:], strict=False))
    state = style + STATE_STYLE[cells[0]] if color and cells[0] in STATE_STYLE else style
    return Strip([Segment(first, state), Segment(rest, style)]).crop_extend(0, width, style)
