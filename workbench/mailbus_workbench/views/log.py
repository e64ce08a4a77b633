"""Log: what went wrong, as the engine reported it: emails skipped (malformed or
foreign), responses discarded, transport errors and Stem's addressing errors, missing
methods and undeliverable messages, each with what it carried (a Stem message's dump)."""

from __future__ import annotations

from mailbus.trace import TraceEvent
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt


class LogView(View):
    DEFAULT_FOCUS = "#log-table"
    HELP = """\
## Log
The last 200 notices, newest at the bottom: skipped emails (malformed, foreign,
oversized), discarded responses, transport errors, participant announcements that
cannot be read (`participant.invalid`, saying why), and Stem's addressing errors,
missing methods, failing cells and undeliverable messages. Select one to see what it
carried. `x` clears the log.
"""
    BINDINGS = [("x", "clear", "Clear")]
    DEFAULT_CSS = """
    #log-table { height: 1fr; }
    #log-detail-box { height: 12; border-top: solid $panel; }
    """

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.shown: list[TraceEvent] = []
        self.detail_text = ""

    def compose(self) -> ComposeResult:
        yield MeasuredTable(id="log-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="log-detail-box"):
            yield Static("Nothing went wrong yet.", id="log-detail", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#log-table", DataTable)
        for label in ("time (UTC)", "kind", "name", "detail"):
            table.add_column(label, key=label)

    def refresh_view(self, now: float) -> None:
        notices = list(self.parts.model.notices)
        if notices == self.shown:
            return
        table = self.query_one("#log-table", DataTable)
        following = table.row_count == 0 or table.cursor_row >= table.row_count - 1
        table.clear()
        for event in notices:
            table.add_row(
                fmt.clock_time(event.time_ns / 1e9),
                fmt.plain(event.kind),
                fmt.plain(fmt.preview(event.name, 40)),
                fmt.plain(fmt.preview(event.detail, 120)),
            )
        self.shown = notices
        if notices and following:
            table.move_cursor(row=len(notices) - 1, animate=False)
        self._show(table.cursor_row if notices else None)

    @on(DataTable.RowHighlighted, "#log-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show(event.cursor_row)

    def _show(self, row: int | None) -> None:
        detail = self.query_one("#log-detail", Static)
        if row is None or not 0 <= row < len(self.shown):
            self.detail_text = ""
            detail.update("Nothing went wrong yet.")
            return
        event = self.shown[row]
        lines = [f"{event.kind}  {event.name}", event.detail]
        if event.message_id:
            lines.append(f"Message-ID: {event.message_id}")
        if event.body:
            lines += ["", event.body]
        self.detail_text = fmt.printable("\n".join(lines), lines=True)
        detail.update(Text(self.detail_text))

    def action_clear(self) -> None:
        self.parts.model.notices.clear()
        self.refresh_view(self.parts.model.clock())
