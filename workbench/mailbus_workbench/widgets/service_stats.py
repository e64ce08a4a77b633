"""One row per service: answered calls and p50/p90/p99 latency over its recent calls.
The highlighted row is the service the latency histogram shows."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from mailbus_workbench.model.latency import LatencyBook, LatencySummary
from mailbus_workbench.widgets import format as fmt

COLUMNS = ("service", "calls", "p50", "p90", "p99")
SERVICE_W = 30  # longer names are elided in the middle (the histogram shows them whole)


class ServiceStats(DataTable[str | Text]):
    DEFAULT_CSS = "ServiceStats { height: auto; max-height: 6; }"

    class ServiceHighlighted(Message):
        def __init__(self, service: str) -> None:
            super().__init__()
            self.service = service

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._shown: tuple[int, tuple[str, ...]] | None = None
        self.services: list[str] = []

    def on_mount(self) -> None:
        self.add_column("service", key="service", width=SERVICE_W)
        self.add_column("calls", key="calls", width=7)
        self.add_column("p50", key="p50", width=8)
        self.add_column("p90", key="p90", width=8)
        self.add_column("p99", key="p99", width=8)

    def show(self, book: LatencyBook, services: list[str]) -> None:
        """Rows for `services` (those the filter lets through); rebuilt only when a
        latency was added or the services listed changed."""
        key = (book.version, tuple(services))
        if key == self._shown:
            return
        self._shown = key
        summaries = {s.service: s for s in book.summaries()}
        rows = [summaries[s] for s in services if s in summaries]
        if [r.service for r in rows] != self.services:  # other services: rebuild
            selected = self.selected()
            self.clear()
            self.services = [r.service for r in rows]
            for row in rows:
                self.add_row(*self._cells(row), key=row.service)
            if selected in self.services:
                self.move_cursor(row=self.services.index(selected), animate=False)
            return
        for row in rows:
            for column, cell in zip(COLUMNS, self._cells(row), strict=True):
                self.update_cell(row.service, column, cell)

    @staticmethod
    def _cells(row: LatencySummary) -> tuple[str | Text, ...]:
        return (
            fmt.plain(fmt.elide_middle(row.service, SERVICE_W)),
            str(row.calls),
            fmt.latency(row.p50_s),
            fmt.latency(row.p90_s),
            fmt.latency(row.p99_s),
        )

    def selected(self) -> str | None:
        if not self.row_count:
            return None
        return self.services[min(self.cursor_row, len(self.services) - 1)]

    def select(self, service: str) -> None:
        if service in self.services:
            self.move_cursor(row=self.services.index(service), animate=False)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.ServiceHighlighted(event.row_key.value))
