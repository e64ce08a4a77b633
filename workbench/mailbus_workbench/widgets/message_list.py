"""The messages of the selected topic, newest at the bottom, following new ones."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from mailbus_workbench.model.topics import MessageRecord
from mailbus_workbench.widgets import format as fmt

REBUILD_AFTER = 20  # rows to drop beyond which a rebuild is cheaper


class MessageList(DataTable[str | Text]):
    class MessageChosen(Message):
        def __init__(self, record: MessageRecord) -> None:
            super().__init__()
            self.record = record

    DEFAULT_CSS = "MessageList { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.topic: str | None = None
        self._records: dict[str, MessageRecord] = {}
        self._last = 0
        self._first = 0

    def on_mount(self) -> None:
        self.add_column("#", key="n", width=7)
        self.add_column("time (UTC)", key="time", width=12)
        self.add_column("size", key="size", width=8)
        self.add_column("body", key="body")

    def show(self, topic: str | None, history: list[MessageRecord]) -> None:
        """Show `history` of `topic`: rows are added and dropped incrementally; when
        older messages appear (pause shows the whole history) or many rows go (a flood),
        the table is rebuilt, which is cheaper than removing rows one by one."""
        following = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        keep = {str(r.number) for r in history}
        gone = [k for k in self._records if k not in keep]
        older = bool(history) and bool(self._records) and history[0].number < self._first
        if topic != self.topic or older or len(gone) > REBUILD_AFTER:
            self.topic = topic
            self.clear()
            self._records = {}
            self._last = 0
            gone = []
        for key in gone:  # fell out of the cap or the live window
            self.remove_row(key)
            del self._records[key]
        for record in history:
            if record.number <= self._last:
                continue
            key = str(record.number)
            self._records[key] = record
            self.add_row(
                str(record.number),
                fmt.clock_time(record.time_s),
                fmt.size(record.event.size),
                fmt.plain(fmt.preview(record.body, 200)),
                key=key,
            )
            self._last = record.number
        self._first = history[0].number if history else 0
        if following and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)

    @property
    def newest(self) -> int:
        """Number of the newest message listed (0 when none)."""
        return self._last

    def selected(self) -> MessageRecord | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return self._records.get(key or "")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        record = self._records.get(event.row_key.value or "")
        if record is not None:
            self.post_message(self.MessageChosen(record))
