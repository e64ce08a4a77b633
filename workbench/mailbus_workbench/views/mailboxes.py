"""Mailboxes: the PostOffice daemon's mailboxes with their letter counts, read from its
store file (read-only, safe while the daemon runs), once a second off the UI; the
selected box's letters; emptying and removing a box, after a confirmation."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final

from mailbus.postoffice.paths import default_store
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.screens import Confirm
from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt

LETTERS_SHOWN = 200  # of the selected box, oldest first


def _when(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%d %H:%M:%S")


def _state(box: Any) -> str:
    if not box.live:
        return "-"
    if box.holder:
        return f"held by {box.holder}"
    return "idle" if box.idle_s is None else f"idle {box.idle_s:.0f} s"


class MailboxesView(View):
    DEFAULT_FOCUS = "#mailbox-table"
    BINDINGS = [
        Binding("e", "empty", "Empty", id="mailboxes.empty"),
        Binding("x", "remove", "Remove", id="mailboxes.remove"),
    ]
    HELP = """\
## Mailboxes
The PostOffice daemon's mailboxes (`mailbus postoffice serve`): name, letters waiting,
their bytes, letters dropped at the box's cap, who holds it or how long it has been
idle, and when it was created. Read from the daemon's store file (read-only) and its
admin socket, once a second: `[workbench] postoffice-store` in the options file, else
`$XDG_DATA_HOME/mailbus/postoffice.db` (the daemon's default).

The lower pane lists the selected box's letters (oldest first, at most 200).
`e` empties the selected box, `x` removes it (both ask first; a box a participant has
checked out is not removed: stop it first, or empty the box).
"""
    REFRESH_EVERY_S = 1.0
    DEFAULT_CSS = """
    #mailbox-summary { height: auto; padding: 0 1; color: $text-muted; }
    #mailbox-table { height: 1fr; }
    #letter-title { height: 1; padding: 0 1; background: $boost; }
    #letter-table { height: 1fr; }
    """

    class MailboxesListed(Message):
        """The store was read (the listing worker's result): its boxes and the letters of
        the box selected when the read began (`error`: why nothing could be read)."""

        def __init__(
            self,
            store: Path,
            boxes: list[Any],
            error: str,
            selected: str | None,
            letters: list[Any],
        ) -> None:
            super().__init__()
            self.store: Final = store
            self.boxes: Final = boxes
            self.error: Final = error
            self.selected: Final = selected
            self.letters: Final = letters

    class MailboxChanged(Message):
        """A box was emptied or removed (`op`), `deleted` letters with it, or could not be
        (`error`): the changing worker's result."""

        def __init__(self, op: str, name: str, deleted: int, error: str = "") -> None:
            super().__init__()
            self.op: Final = op
            self.name: Final = name
            self.deleted: Final = deleted
            self.error: Final = error

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.boxes: list[Any] = []
        self.letters: list[Any] = []
        self.shown_box = ""
        self.error = ""
        self.loads = 0
        self.changes = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="mailbox-summary", markup=False)
        yield MeasuredTable(id="mailbox-table", cursor_type="row", zebra_stripes=True)
        yield Static("letters: select a mailbox", id="letter-title", markup=False)
        yield MeasuredTable(id="letter-table", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        table = self.query_one("#mailbox-table", DataTable)
        for label in ("mailbox", "letters", "bytes", "dropped", "state", "created (UTC)"):
            table.add_column(label, key=label)
        letters = self.query_one("#letter-table", DataTable)
        for label in ("id", "received (UTC)", "from", "bytes", "subject"):
            letters.add_column(label, key=label)

    @property
    def store(self) -> Path:
        return self.parts.settings.postoffice_store or default_store()

    @property
    def selected(self) -> str | None:
        table = self.query_one("#mailbox-table", DataTable)
        if not self.boxes or table.cursor_row < 0 or table.cursor_row >= len(self.boxes):
            return None
        return str(self.boxes[table.cursor_row].name)

    def refresh_view(self, now: float) -> None:
        self._load(self.store, self.selected)

    @work(thread=True, exclusive=True, group="mailboxes")
    def _load(self, store: Path, selected: str | None) -> None:
        from mailbus.postoffice.admin import AdminError, list_boxes, show_letters

        letters: list[Any] = []
        try:
            boxes, error = list_boxes(store), ""
            if selected is not None and any(b.name == selected for b in boxes):
                letters = show_letters(store, selected, LETTERS_SHOWN)
        except (AdminError, OSError) as exc:
            boxes, error = [], str(exc)
        self.post_message(self.MailboxesListed(store, boxes, error, selected, letters))

    @on(MailboxesListed)
    def _show(self, listed: MailboxesListed) -> None:
        store, boxes, error = listed.store, listed.boxes, listed.error
        self.boxes = boxes
        self.error = error
        self.loads += 1
        waiting = sum(b.letters for b in boxes)
        self.query_one("#mailbox-summary", Static).update(
            Text(f"{store}  ·  {error}", style="red")
            if error
            else f"{store}  ·  {len(boxes)} mailboxes, {waiting} letters waiting"
        )
        table = self.query_one("#mailbox-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for box in boxes:
            table.add_row(
                fmt.plain(box.name),
                Text(str(box.letters), style="bold" if box.letters else "dim"),
                fmt.size(box.payload_bytes),
                Text(str(box.dropped), style="yellow" if box.dropped else "dim"),
                _state(box),
                _when(box.created_ns),
                key=box.name,
            )
        if boxes:
            table.move_cursor(row=min(cursor, len(boxes) - 1), animate=False)
        self._show_letters(listed.selected or "", listed.letters)

    def _show_letters(self, box: str, letters: list[Any]) -> None:
        self.shown_box, self.letters = box, letters
        title = self.query_one("#letter-title", Static)
        title.update(
            f"letters in {box}: {len(letters)} shown (oldest first)"
            if box
            else "letters: select a mailbox"
        )
        table = self.query_one("#letter-table", DataTable)
        table.clear()
        for letter in letters:
            table.add_row(
                str(letter.letter_id),
                _when(letter.received_ns),
                fmt.plain(letter.sender),
                fmt.size(letter.size),
                fmt.plain(letter.subject or "(not an email)"),
            )

    @on(DataTable.RowHighlighted, "#mailbox-table")
    def _highlighted(self) -> None:
        if self.selected != self.shown_box:
            self._load(self.store, self.selected)

    def _confirm_then(self, op: str) -> None:
        name = self.selected
        if name is None:
            self.notify("No mailbox selected.", severity="warning")
            return
        box = next(b for b in self.boxes if b.name == name)
        question = (
            f"Delete the {box.letters} letters waiting in {name}?"
            if op == "empty"
            else f"Remove mailbox {name} and its {box.letters} letters?"
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._change(op, self.store, name)

        self.app.push_screen(Confirm(question), answered)

    def action_empty(self) -> None:
        self._confirm_then("empty")

    def action_remove(self) -> None:
        self._confirm_then("remove")

    @work(thread=True, group="mailbox-change")
    def _change(self, op: str, store: Path, name: str) -> None:
        from mailbus.postoffice.admin import AdminError, empty_box, remove_box

        try:
            count = (empty_box if op == "empty" else remove_box)(store, name)
        except (AdminError, OSError) as exc:
            self.post_message(self.MailboxChanged(op, name, 0, str(exc)))
            return
        self.post_message(self.MailboxChanged(op, name, count))

    @on(MailboxChanged)
    def _changed(self, changed: MailboxChanged) -> None:
        self.changes += 1
        op, name = changed.op, changed.name
        if changed.error:
            self.notify(f"Cannot {op} {name}: {changed.error}", severity="error")
        else:
            self.notify(f"{op}: {name} ({changed.deleted} letters deleted)")
        self._load(self.store, self.selected)
