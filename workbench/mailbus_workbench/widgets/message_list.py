"""The messages of the selected topic, newest at the bottom, following new ones.

Drawn with Textual's line API: only the visible lines are rendered, each straight from
its record, so replacing the whole list costs nothing until it is painted. A DataTable
measured every cell of every new row and rendered each cell through Rich; under a
flood, or when pausing loads the whole history, that held the UI loop for 100-200 ms
(bench/workbench.py)."""

from __future__ import annotations

from bisect import bisect_left

from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip

from mailbus_workbench.model.session_control import REPLAY_MARK
from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.cursor_list import CursorList

# (title, width); the body takes the rest of the line.
COLUMNS = (("#", 9), ("time (UTC)", 14), ("size", 10))
BODY_PREVIEW = 400  # characters of the body kept on a line (wider than any terminal)


class MessageList(CursorList):
    class MessageChosen(Message):
        def __init__(self, record: MessageRecord) -> None:
            super().__init__()
            self.record = record

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.topic: str | None = None
        self._rows: list[MessageRecord] = []
        self._numbers: list[int] = []  # ascending, for finding a record again
        self._chosen: int | None = None  # number of the message under the cursor
        # Find put the cursor on a message: it stays there, even on the last row (which
        # otherwise follows new messages), until the user moves it.
        self._pinned = False

    # -- content --------------------------------------------------------------------
    def show(self, topic: str | None, history: list[MessageRecord]) -> None:
        """Show `history` of `topic`. A list whose cursor is on its last row follows new
        messages; otherwise the cursor stays on the message it was on."""
        pinned = self._pinned
        following = not pinned and (not self._rows or self.cursor_row >= len(self._rows) - 1)
        chosen = self._chosen
        if topic != self.topic:  # numbers restart: whatever was chosen is gone
            following, chosen, pinned = True, None, False
            self._chosen = None
        self.topic = topic
        self._rows = list(history)
        self._numbers = [r.number for r in self._rows]
        self.virtual_size = Size(0, len(self._rows) + 1)  # +1: the header line
        if not self._rows:
            self.cursor_row, self._chosen = 0, None
        elif following or chosen is None:
            self.move_cursor(row=len(self._rows) - 1, announce=False)
        else:
            at = bisect_left(self._numbers, chosen)
            self.move_cursor(row=min(at, len(self._rows) - 1), announce=False)
        self._pinned = pinned
        self.refresh()

    @property
    def row_count(self) -> int:
        return len(self._rows)

    @property
    def newest(self) -> int:
        """Number of the newest message listed (0 when none)."""
        return self._numbers[-1] if self._numbers else 0

    def get_row_at(self, row: int) -> list[str]:
        """The cells of `row` as shown: number, time, size, body preview."""
        record = self._rows[row]
        return [
            str(record.number),
            fmt.clock_time(record.time_s),
            fmt.size(record.event.size),
            REPLAY_MARK + fmt.preview(record.body, BODY_PREVIEW)
            if record.replayed
            else fmt.preview(record.body, BODY_PREVIEW),
        ]

    def select_number(self, number: int) -> bool:
        """Put the cursor on message `number` if listed (Find's jump); False if not."""
        at = bisect_left(self._numbers, number)
        if at >= len(self._numbers) or self._numbers[at] != number:
            return False
        self.move_cursor(row=at)
        self._pinned = True
        return True

    def selected(self) -> MessageRecord | None:
        return self._rows[self.cursor_row] if self._rows else None

    def held(self) -> MessageRecord | None:
        """The message the user put the cursor on, when it is not following the newest
        (the last row follows; any other row, or Find's jump, holds its message)."""
        if not self._rows or (not self._pinned and self.cursor_row >= len(self._rows) - 1):
            return None
        return self._rows[self.cursor_row]

    # -- cursor -----------------------------------------------------------------------
    def move_cursor(self, *, row: int, animate: bool = False, announce: bool = True) -> None:
        """Put the cursor on `row` (clamped), scroll it into view and, when it moved to
        another message, post MessageChosen."""
        self._pinned = False
        if not self._rows:
            return
        row = max(0, min(row, len(self._rows) - 1))
        before = self._chosen
        self.cursor_row = row
        self._chosen = self._rows[row].number
        self.scroll_to_row(row, animate=animate)
        if announce or self._chosen != before:  # a move onto the same message is silent
            self.post_message(self.MessageChosen(self._rows[row]))

    # -- drawing ----------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._strip(
                [*(title for title, _ in COLUMNS), "body"], self.header_style(), width
            )
        row = self.list_row(y)
        if row >= len(self._rows):
            return Strip.blank(width, self.rich_style)
        return self._strip(self.get_row_at(row), self.row_style(row), width)

    @staticmethod
    def _strip(cells: list[str], style: Style, width: int) -> Strip:
        parts = [f" {cell[: w - 2]}".ljust(w) for cell, (_, w) in zip(cells, COLUMNS, strict=False)]
        line = "".join(parts) + " " + cells[-1]  # cells are printable (fmt.preview)
        return Strip([Segment(line, style)]).crop_extend(0, width, style)
