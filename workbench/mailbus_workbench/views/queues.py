"""Queues: the durable outbox's entries (queued, in flight, dead, cleanup, corrupt) with
ages, attempts and next attempt; retry and purge with confirmation."""

from __future__ import annotations

from pathlib import Path

from mailbus.errors import MailbusError
from mailbus.outbox.listing import QueueItem
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Static

from mailbus_workbench.model import queues
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt

STATE_STYLE = {
    "queued": "yellow",
    "inflight": "cyan",
    "dead": "bold red",
    "cleanup": "dim",
    "corrupt": "magenta",
}


class QueuesView(View):
    DEFAULT_FOCUS = "#queue-table"
    HELP = """\
## Queues
The durable outbox (`[outbox] dir` of the options file or `$MAILBUS_OUTBOX_DIR`): each
entry's state (queued, inflight, dead, cleanup, corrupt), destination, attempts, next
attempt, age, size and last error. The listing is read once a second, off the UI.

- **r** retry the selected entry now (a dead one is revived), after confirmation
- **d** purge the selected entry (it will never be sent), after confirmation

While no sender runs, retry and purge change the queue directly; while one runs, it
carries them out itself (it reads `<dir>/control/` within half a second) and reports.
"""
    BINDINGS = [
        Binding("r", "retry", "Retry", id="queues.retry"),
        Binding("d", "purge", "Purge", id="queues.purge"),
    ]
    REFRESH_EVERY_S = 1.0
    DEFAULT_CSS = """
    #queue-dir { height: 1; padding: 0 1; color: $text-muted; }
    #queue-table { height: 1fr; }
    #queue-detail { height: 5; padding: 0 1; border-top: solid $panel; }
    """

    class Changed(Message):
        def __init__(self, verb: str, ids: list[str], error: str = "") -> None:
            super().__init__()
            self.verb = verb
            self.ids = ids
            self.error = error

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.items: list[QueueItem] = []
        self.error = ""
        self.loads = 0

    def compose(self) -> ComposeResult:
        yield Static("", id="queue-dir", markup=False)
        yield DataTable(id="queue-table", cursor_type="row", zebra_stripes=True)
        yield Static("", id="queue-detail", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#queue-table", DataTable)
        for label, key in (
            ("state", "state"),
            ("id", "id"),
            ("destination", "dest"),
            ("attempts", "attempts"),
            ("next attempt", "next"),
            ("age", "age"),
            ("size", "size"),
            ("subject", "subject"),
            ("last error", "error"),
        ):
            table.add_column(label, key=key)

    @property
    def directory(self) -> Path | None:
        return self.parts.outbox_dir

    def refresh_view(self, now: float) -> None:
        if self.directory is None:
            self.query_one("#queue-dir", Static).update(
                "No outbox: set [outbox] dir in the options file or $MAILBUS_OUTBOX_DIR."
            )
            return
        self.reload()

    def reload(self) -> None:
        if self.directory is not None:
            self._load(self.directory, int(self.parts.model.clock() * 1e9))

    @work(thread=True, exclusive=True, group="queues-load")
    def _load(self, directory: Path, now_ns: int) -> None:
        try:
            items, error = queues.load(directory, now_ns), ""
        except (MailbusError, OSError) as exc:
            items, error = [], str(exc)
        self.app.call_from_thread(self._show, items, error, now_ns)

    def _show(self, items: list[QueueItem], error: str, now_ns: int) -> None:
        self.items = items
        self.error = error
        self.loads += 1
        counts: dict[str, int] = {}
        for item in items:
            counts[item.state] = counts.get(item.state, 0) + 1
        summary = "  ".join(f"{state} {n}" for state, n in sorted(counts.items()))
        self.query_one("#queue-dir", Static).update(
            Text(
                f"{self.directory}  ·  {error or summary or 'empty'}", style="red" if error else ""
            )
        )
        table = self.query_one("#queue-table", DataTable)
        cursor = table.cursor_row
        table.clear()
        for item in items:
            due = item.next_attempt_ns
            next_attempt = (
                "-"
                if item.state in ("cleanup", "corrupt", "dead")
                else "now"
                if due <= now_ns
                else f"in {(due - now_ns) / 1e9:.0f} s"
            )
            table.add_row(
                Text(item.state, style=STATE_STYLE.get(item.state, "")),
                fmt.plain(item.id[:8]),
                fmt.plain(item.destination),
                str(item.attempts),
                next_attempt,
                fmt.age(item.age_s).removesuffix(" ago") if item.age_s else "-",
                fmt.size(item.size),
                fmt.plain(fmt.preview(item.subject, 30)),
                fmt.plain(fmt.preview(item.last_error, 40)),
                key=item.id,
            )
        if items:
            table.move_cursor(row=min(cursor, len(items) - 1), animate=False)
        self._detail()

    def selected(self) -> QueueItem | None:
        table = self.query_one("#queue-table", DataTable)
        if not table.row_count:
            return None
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        return next((i for i in self.items if i.id == key), None)

    @on(DataTable.RowHighlighted, "#queue-table")
    def _detail(self) -> None:
        item = self.selected()
        self.query_one("#queue-detail", Static).update(
            ""
            if item is None
            else f"{item.id}  mail {item.mail}\n{item.message_id}  {item.subject}\n"
            f"last error: {item.last_error or '-'}"
        )

    def _confirm_then(self, verb: str) -> None:
        from mailbus_workbench.screens import Confirm

        item = self.selected()
        directory = self.directory
        if item is None or directory is None:
            self.notify("No entry selected.", severity="warning")
            return
        if item.state in ("cleanup", "corrupt", "inflight") or (
            verb == "retry" and item.state not in ("queued", "dead")
        ):
            self.notify(f"Cannot {verb} an entry that is {item.state}.", severity="warning")
            return
        question = (
            f"Retry {item.id[:8]} ({item.subject}) now?"
            if verb == "retry"
            else f"Purge {item.id[:8]} ({item.subject})? It will never be sent."
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self._change(verb, directory, [item.id])

        self.app.push_screen(Confirm(question), answered)

    def action_retry(self) -> None:
        self._confirm_then("retry")

    def action_purge(self) -> None:
        self._confirm_then("purge")

    @work(thread=True, group="queues-change")
    def _change(self, verb: str, directory: Path, ids: list[str]) -> None:
        try:
            done = (queues.retry if verb == "retry" else queues.purge)(directory, ids)
            error = ""
        except (MailbusError, OSError) as exc:
            done, error = [], str(exc)
        self.app.call_from_thread(self._changed, verb, done, error)

    def _changed(self, verb: str, done: list[str], error: str) -> None:
        if error:
            self.notify(f"{verb} failed: {error}", severity="error", timeout=8, markup=False)
        else:
            self.notify(f"{verb}: {len(done)} entr{'y' if len(done) == 1 else 'ies'}")
        self.post_message(self.Changed(verb, done, error))
        self.reload()
