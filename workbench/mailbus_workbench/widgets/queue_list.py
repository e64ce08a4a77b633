"""The outbox's entries as the Queues view lists them, one line each, with a cursor.

Drawn with Textual's line API, like the message list: only the visible lines are
rendered, each straight from its row's strings, so a new listing of thousands of entries
costs nothing until painted. A DataTable rendered every visible cell through Rich again
on each switch to the view (its cell cache is keyed on the focus), 25-35 ms of the UI
thread's CPU with 500 entries (bench/workbench.py)."""

from __future__ import annotations

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip

from mailbus_workbench.widgets.cursor_list import CursorList

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


class QueueList(CursorList):
    class Highlighted(Message):
        """The cursor is on another entry (or on none: `entry_id` empty)."""

        def __init__(self, entry_id: str) -> None:
            super().__init__()
            self.entry_id = entry_id

    ANNOUNCE_MOVES = False  # Highlighted only when the entry under the cursor changes

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._ids: list[str] = []
        self._rows: list[Row] = []

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
        self.scroll_to_row(self.cursor_row)
        if announce or self.selected_id() != before:
            self.post_message(self.Highlighted(self.selected_id()))

    # -- drawing ----------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            titles = tuple(title for title, _ in COLUMNS)
            return _strip(titles, self.header_style(), width, color=False)
        row = self.list_row(y)
        if row >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        # The state column in its colour, except under the cursor (whose colours say where it is).
        style = self.row_style(row)
        return _strip(self._rows[row], style, width, color=row != self.cursor_row)


def _cell(text: str, width: int) -> str:
    if width <= 0:
        return f" {text}"
    inner = width - 2
    shown = text if len(text) <= inner else text[: max(0, inner - 1)] + "…"
    return f" {shown}".ljust(width)


def _strip(cells: Row, style: Style, width: int, *, color: bool) -> Strip:
    first = _cell(cells[0], COLUMNS[0][1])
    rest = "".join(_cell(c, w) for c, (_, w) in zip(cells[1:], COLUMNS[1:], strict=False))
    state = style + STATE_STYLE[cells[0]] if color and cells[0] in STATE_STYLE else style
    return Strip([Segment(first, state), Segment(rest, style)]).crop_extend(0, width, style)
