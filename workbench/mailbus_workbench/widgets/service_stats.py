"""One row per service: answered calls and p50/p90/p99 latency over its recent calls.
The highlighted row is the service the latency histogram shows."""

from __future__ import annotations

from textual.message import Message

from mailbus_workbench.model.latency import LatencyBook, LatencySummary
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.row_table import Row, RowTable

SERVICE_W = 30  # longer names are elided in the middle (the histogram shows them whole)
COLUMNS = (("service", SERVICE_W), ("calls", 7), ("p50", 8), ("p90", 8), ("p99", 8))


class ServiceStats(RowTable):
    """Drawn line by line (a DataTable measured every cell of 500 new services before
    the first frame of the view)."""

    DEFAULT_CSS = "ServiceStats { height: auto; max-height: 6; }"

    class ServiceHighlighted(Message):
        def __init__(self, service: str) -> None:
            super().__init__()
            self.service = service

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(COLUMNS, id=id)
        self._shown: tuple[int, tuple[str, ...]] | None = None
        self.services: list[str] = []

    def show_services(self, book: LatencyBook, services: list[str]) -> None:
        """Rows for `services` (those the filter lets through); redrawn only when a
        latency was added or the services listed changed."""
        key = (book.version, tuple(services))
        if key == self._shown:
            return
        self._shown = key
        summaries = {s.service: s for s in book.summaries()}
        rows = {s: self._cells(summaries[s]) for s in services if s in summaries}
        self.services = list(rows)
        self.show(rows)

    @staticmethod
    def _cells(row: LatencySummary) -> Row:
        return (
            fmt.elide_middle(row.service, SERVICE_W),
            str(row.calls),
            fmt.latency(row.p50_s),
            fmt.latency(row.p90_s),
            fmt.latency(row.p99_s),
        )

    def selected(self) -> str | None:
        return self.selected_key() or None

    def select(self, service: str) -> None:
        if service in self.services:
            self.move_cursor(row=self.services.index(service), announce=False)

    def on_row_table_highlighted(self, event: RowTable.Highlighted) -> None:
        event.stop()
        if event.key:
            self.post_message(self.ServiceHighlighted(event.key))
