"""Mailboxes: the PostOffice daemon's mailboxes with their letter counts, read from its
store file (read-only, safe while the daemon runs), once a second off the UI."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mailbus.postoffice.paths import default_store
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt


class MailboxesView(View):
    DEFAULT_FOCUS = "#mailbox-table"
    HELP = """\
## Mailboxes
The PostOffice daemon's mailboxes (`mailbus postoffice serve`): name, letters waiting,
their bytes, and when the box was created. Read from the daemon's store file, read-only,
once a second: `[workbench] postoffice-store` in the options file, else
`$XDG_DATA_HOME/mailbus/postoffice.db` (the daemon's default).
"""
    REFRESH_EVERY_S = 1.0
    DEFAULT_CSS = """
    #mailbox-summary { height: auto; padding: 0 1; color: $text-muted; }
    #mailbox-table { height: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.boxes: list[Any] = []
        self.error = ""
        self.loads = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="mailbox-summary", markup=False)
        yield DataTable(id="mailbox-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#mailbox-table", DataTable)
        for label in ("mailbox", "letters", "bytes", "created (UTC)"):
            table.add_column(label, key=label)

    @property
    def store(self) -> Path:
        return self.workbench.settings.postoffice_store or default_store()

    def refresh_view(self, now: float) -> None:
        self._load(self.store)

    @work(thread=True, exclusive=True, group="mailboxes")
    def _load(self, store: Path) -> None:
        from mailbus.postoffice.store import StoreError, list_mailboxes

        try:
            boxes, error = list_mailboxes(store), ""
        except (StoreError, OSError) as exc:
            boxes, error = [], str(exc)
        self.app.call_from_thread(self._show, store, boxes, error)

    def _show(self, store: Path, boxes: list[Any], error: str) -> None:
        self.boxes = boxes
        self.error = error
        self.loads += 1
        letters = sum(b.letters for b in boxes)
        self.query_one("#mailbox-summary", Static).update(
            Text(f"{store}  ·  {error}", style="red")
            if error
            else f"{store}  ·  {len(boxes)} mailboxes, {letters} letters waiting"
        )
        table = self.query_one("#mailbox-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for box in boxes:
            created = datetime.fromtimestamp(box.created_ns / 1e9, UTC).strftime(
                "%Y-%m-%d %H:%M:%S"
            )
            table.add_row(
                fmt.plain(box.name),
                Text(str(box.letters), style="bold" if box.letters else "dim"),
                fmt.size(box.payload_bytes),
                created,
                key=box.name,
            )
        if boxes:
            table.move_cursor(row=min(cursor, len(boxes) - 1), animate=False)
