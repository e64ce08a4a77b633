"""A list drawn with Textual's line API: a header line, rows, a cursor, the keys and the
mouse to move it. Only the visible lines are rendered, each straight from its row, so a
new list of thousands of rows costs nothing until painted (a DataTable rendered every
visible cell through Rich again; bench/workbench.py). The message list and the Queues
list are two of these; each says what a row is and how it is drawn."""

from __future__ import annotations

from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.scroll_view import ScrollView

from mailbus_workbench.textual_internals import FixedPlace


# Rows come and go at each refresh under a flow; a list's place never depends on them.
class CursorList(FixedPlace, ScrollView, can_focus=True):
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
    ]
    COMPONENT_CLASSES = {"cursor-list--header", "cursor-list--cursor", "cursor-list--even-row"}

    DEFAULT_CSS = """
    CursorList {
        height: 1fr;
        overflow-x: hidden;
        overflow-y: scroll;  /* always a scrollbar: scrolling works before the next layout */
        background: $surface;
        color: $foreground;
        &:focus {
            background-tint: $foreground 5%;
            & > .cursor-list--cursor {
                background: $block-cursor-background;
                color: $block-cursor-foreground;
                text-style: $block-cursor-text-style;
            }
        }
        & > .cursor-list--header { text-style: bold; background: $panel; color: $foreground; }
        & > .cursor-list--even-row { background: $surface-lighten-1 50%; }
        &:dark > .cursor-list--even-row { background: $surface-darken-1 40%; }
        & > .cursor-list--cursor {
            background: $block-cursor-blurred-background;
            color: $block-cursor-blurred-foreground;
            text-style: $block-cursor-blurred-text-style;
        }
    }
    """
    # Whether a key or a click that moves the cursor announces the row even when it is
    # the one already chosen (the message list re-shows it; the Queues list need not).
    ANNOUNCE_MOVES = True

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.cursor_row = 0

    @property
    def row_count(self) -> int:
        raise NotImplementedError

    def move_cursor(self, *, row: int, announce: bool = True) -> None:
        raise NotImplementedError

    def scroll_to_row(self, row: int, *, animate: bool = False) -> None:
        """Scroll so that `row` is visible (below the header) and repaint."""
        visible = max(1, self.scrollable_content_region.height - 1)
        top = int(self.scroll_y)
        if row < top:
            self.scroll_to(y=row, animate=animate, immediate=True)
        elif row >= top + visible:
            self.scroll_to(y=row - visible + 1, animate=animate, immediate=True)
        self.refresh()

    def action_cursor(self, delta: int) -> None:
        self.move_cursor(row=self.cursor_row + delta, announce=self.ANNOUNCE_MOVES)

    def action_page(self, direction: int) -> None:
        page = max(1, self.scrollable_content_region.height - 2)
        self.move_cursor(row=self.cursor_row + direction * page, announce=self.ANNOUNCE_MOVES)

    def action_jump(self, row: int) -> None:
        last = self.row_count - 1
        self.move_cursor(row=row if row >= 0 else last, announce=self.ANNOUNCE_MOVES)

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None or offset.y == 0:  # the header
            return
        row = int(self.scroll_y) + offset.y - 1
        if 0 <= row < self.row_count:
            self.move_cursor(row=row, announce=self.ANNOUNCE_MOVES)

    # -- drawing ----------------------------------------------------------------------
    def header_style(self) -> Style:
        return self.rich_style + self.get_component_rich_style("cursor-list--header")

    def list_row(self, y: int) -> int:
        """The row drawn on line `y` (1 and below; line 0 is the header)."""
        return int(self.scroll_y) + y - 1

    def row_style(self, row: int) -> Style:
        base = self.rich_style
        if row == self.cursor_row:
            return base + self.get_component_rich_style("cursor-list--cursor")
        if row % 2:
            return base + self.get_component_rich_style("cursor-list--even-row")
        return base
