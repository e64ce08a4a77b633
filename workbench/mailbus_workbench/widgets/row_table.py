"""A table of rows by key, drawn with Textual's line API like the Queues list: only the
visible lines are rendered, each from its row's cells, so a new table of hundreds of
rows costs nothing until painted. A DataTable measured every cell of every new row
before the next frame: the first switch to Participants with 200 participants (2,400
cells) took 1.2-2.0 s, to Services with 500 services 0.4-0.6 s (bench/workbench_names.py).

Columns have a fixed width or (width None) the width of their widest cell, as a
DataTable's; cells are strings or Rich Text (its styles kept), shown literally with
control characters as pictures."""

from __future__ import annotations

from collections.abc import Sequence

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip

from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.cursor_list import CursorList

Cell = str | Text
Row = tuple[Cell, ...]
PADDING = 1  # a space each side of a cell, as a DataTable's


class RowTable(CursorList):
    class Highlighted(Message):
        """The cursor is on another row (or on none: `key` empty)."""

        def __init__(self, table: RowTable, key: str) -> None:
            super().__init__()
            self.table = table
            self.key = key

        @property
        def control(self) -> RowTable:
            return self.table

    ANNOUNCE_MOVES = False  # Highlighted only when the row under the cursor changes
    # Wider than the screen: scrolled sideways with the keys, as a DataTable's rows.
    BINDINGS = [
        Binding("left", "scroll_left", "Left", show=False),
        Binding("right", "scroll_right", "Right", show=False),
    ]
    DEFAULT_CSS = "RowTable { overflow-x: auto; overflow-y: auto; }"

    def __init__(self, columns: Sequence[tuple[str, int | None]], *, id: str | None = None) -> None:
        """`columns`: (title, content width, or None for the widest cell's)."""
        super().__init__(id=id)
        self.titles = tuple(title for title, _ in columns)
        self._fixed = tuple(width for _, width in columns)
        self._widths = [cell_len(t) if w is None else w for t, w in columns]
        self._keys: list[str] = []
        self._rows: list[Row] = []
        # Lines drawn, by row, whether the cursor is on it and whether the table has the focus.
        self._lines: dict[tuple[int, bool, bool], Strip] = {}

    # -- content --------------------------------------------------------------------
    def show(self, rows: dict[str, Row]) -> None:
        """List `rows` (by key, in order); the cursor stays on its row's key if it is
        still listed, else on its row number. Repaints only if something changed."""
        keys, values = list(rows), list(rows.values())
        if keys == self._keys and values == self._rows:
            return
        current = self.selected_key()
        self._keys, self._rows = keys, values
        for i, fixed in enumerate(self._fixed):
            if fixed is None:
                widest = max((_width(row[i]) for row in values), default=0)
                self._widths[i] = max(cell_len(self.titles[i]), widest)
        self._lines.clear()
        self.virtual_size = Size(self._total_width(), len(values) + 1)  # +1: the header
        row = keys.index(current) if current and current in rows else self.cursor_row
        self.move_cursor(row=row, announce=False)
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def keys(self) -> list[str]:
        return list(self._keys)

    def selected_key(self) -> str:
        return self._keys[self.cursor_row] if self._keys else ""

    def get_row_at(self, row: int) -> Row:
        return self._rows[row]

    # -- cursor -----------------------------------------------------------------------
    def move_cursor(self, *, row: int, announce: bool = True) -> None:
        """Put the cursor on `row` (clamped) and scroll it into view; post Highlighted
        when it is on another row (or when `announce`)."""
        before = self.selected_key()
        self.cursor_row = max(0, min(row, len(self._rows) - 1))
        self.scroll_to_row(self.cursor_row)
        if announce or self.selected_key() != before:
            self.post_message(self.Highlighted(self, self.selected_key()))

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._lines.clear()

    # -- drawing ----------------------------------------------------------------------
    def _total_width(self) -> int:
        return sum(w + 2 * PADDING for w in self._widths)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        left = int(self.scroll_x)
        if y == 0:
            header = self._strip(self.titles, self.header_style())
            return header.crop_extend(left, left + width, self.header_style())
        row = self.list_row(y)
        if row >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        key = (row, row == self.cursor_row, self.has_focus)
        style = self.row_style(row)
        drawn = self._lines.get(key)
        if drawn is None:
            drawn = self._lines[key] = self._strip(self._rows[row], style)
        return drawn.crop_extend(left, left + width, style)

    def _strip(self, cells: Row, style: Style) -> Strip:
        """The whole row, every column (cropped to the screen by the caller)."""
        segments: list[Segment] = []
        pad = " " * PADDING
        for cell, inner in zip(cells, self._widths, strict=False):
            if isinstance(cell, Text) and (cell.spans or cell.style):
                shown = Text(fmt.printable(cell.plain), style=cell.style, spans=cell.spans)
                shown.truncate(inner, overflow="ellipsis", pad=True)
                segments.append(Segment(pad, style))
                segments += Segment.apply_style(shown.render(self.app.console), style)
                segments.append(Segment(pad, style))
            else:
                text = fmt.printable(cell.plain if isinstance(cell, Text) else cell)
                segments.append(Segment(f"{pad}{_fit(text, inner)}{pad}", style))
        return Strip(segments)


def _width(cell: Cell) -> int:
    """The cells `cell` takes as drawn (a control character: one, as its picture)."""
    return cell_len(fmt.printable(cell.plain if isinstance(cell, Text) else cell))


def _fit(text: str, width: int) -> str:
    """`text` cut with an ellipsis or padded to `width` cells."""
    if cell_len(text) <= width:
        return text + " " * (width - cell_len(text))
    shown = Text(text)
    shown.truncate(width, overflow="ellipsis")
    return shown.plain
