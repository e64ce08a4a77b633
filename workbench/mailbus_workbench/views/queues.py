"""Queues: the durable outbox's entries (queued, in flight, dead, cleanup, corrupt) with
ages, attempts and next attempt; retry and purge with confirmation.

Every outbox call (listing, retry, purge) runs in a worker thread, which hands its result
back as a message (`Listed`, `Changed`) handled on the UI thread: a key never waits for
the file system. The rows are formatted in the worker too, and drawn by a line-API list
(`widgets/queue_list.py`) that renders only the visible lines."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from mailbus.errors import MailbusError
from mailbus.outbox.listing import QueueItem
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Static

from mailbus_workbench.model import queues
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.queue_list import QueueList, Row

LISTING_SHARE = 10  # a listing that took t seconds is made again after 10 t at the soonest


def cells(item: QueueItem, now_ns: int) -> Row:
    """One entry's row as shown (made in the worker: formatting thousands of entries is
    no work for the UI thread); every cell printable, whatever the entry holds."""
    due = item.next_attempt_ns
    next_attempt = (
        "-"
        if item.state in ("cleanup", "corrupt", "dead")
        else "now"
        if due <= now_ns
        else f"in {(due - now_ns) / 1e9:.0f} s"
    )
    return (
        item.state,
        fmt.preview(item.id[:8], 8),
        fmt.preview(item.destination, 200),
        str(item.attempts),
        next_attempt,
        fmt.age(item.age_s).removesuffix(" ago") if item.age_s else "-",
        fmt.size(item.size),
        fmt.preview(item.subject, 30),
        fmt.preview(item.last_error, 200),
    )


class QueuesView(View):
    DEFAULT_FOCUS = "#queue-table"
    HELP = """\
## Queues
The durable outbox (`[outbox] dir` of the options file or `$MAILBUS_OUTBOX_DIR`): each
entry's state (queued, inflight, dead, cleanup, corrupt), destination, attempts, next
attempt, age, size and last error. The listing is read off the UI, once a second (a
slow one, of thousands of entries, at most a tenth of the time).

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

    class Listed(Message):
        """A listing of the outbox, read in a worker (`error`: why there is none)."""

        def __init__(
            self,
            sequence: int,
            items: list[QueueItem],
            rows: list[Row],
            error: str,
            seconds: float = 0.0,
        ) -> None:
            super().__init__()
            self.sequence = sequence
            self.items = items
            self.rows = rows
            self.error = error
            self.seconds = seconds  # how long the listing took

    class Changed(Message):
        """A retry or purge carried out in a worker: the ids done, or why none."""

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
        self._requested = 0  # listings asked for; an older one arriving late is dropped
        self._shown = 0
        self._by_id: dict[str, QueueItem] = {}
        self._listed_at = 0.0  # time.monotonic() of the last listing shown
        self._listing_s = 0.0  # how long it took the worker

    def compose(self) -> ComposeResult:
        yield Static("", id="queue-dir", markup=False)
        yield QueueList(id="queue-table")
        yield Static("", id="queue-detail", markup=False)

    @property
    def directory(self) -> Path | None:
        return self.parts.outbox_dir

    def refresh_view(self, now: float) -> None:
        if self.directory is None:
            self.query_one("#queue-dir", Static).update(
                "No outbox: set [outbox] dir in the options file or $MAILBUS_OUTBOX_DIR."
            )
            return
        # No pile-up (a listing on its way), and a slow listing (thousands of entries)
        # made at most a tenth of the time: the worker holds the GIL the UI thread needs.
        due = self._listed_at + max(self.REFRESH_EVERY_S, LISTING_SHARE * self._listing_s)
        if self._shown == self._requested and time.monotonic() >= due:
            self.reload()

    def reload(self) -> None:
        """Ask a worker for a listing (it comes back as `Listed`)."""
        if self.directory is not None:
            self._requested += 1
            self._load(self._requested, self.directory, int(self.parts.model.clock() * 1e9))

    @work(thread=True, group="queues-load")
    def _load(self, sequence: int, directory: Path, now_ns: int) -> None:
        started = time.monotonic()
        try:
            items, error = queues.load(directory, now_ns), ""
        except (MailbusError, OSError) as exc:
            items, error = [], str(exc)
        rows = [cells(i, now_ns) for i in items]
        self.post_message(self.Listed(sequence, items, rows, error, time.monotonic() - started))

    @on(Listed)
    def _listed(self, event: Listed) -> None:
        event.stop()  # the view's own business: the app need not see every listing
        if event.sequence <= self._shown:
            return  # a newer listing is shown already
        self._shown = event.sequence
        self._listed_at, self._listing_s = time.monotonic(), event.seconds
        self.items = event.items
        self.error = event.error
        self.loads += 1
        counts = Counter(item.state for item in event.items)
        summary = "  ".join(f"{state} {n}" for state, n in sorted(counts.items()))
        self.query_one("#queue-dir", Static).update(
            Text(
                f"{self.directory}  ·  {event.error or summary or 'empty'}",
                style="red" if event.error else "",
            )
        )
        self._by_id = {item.id: item for item in event.items}
        rows = {item.id: row for item, row in zip(event.items, event.rows, strict=True)}
        self.query_one(QueueList).show(rows)
        self._detail()

    def selected(self) -> QueueItem | None:
        return self._by_id.get(self.query_one(QueueList).selected_id())

    @on(QueueList.Highlighted)
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
        self.post_message(self.Changed(verb, done, error))

    @on(Changed)
    def _changed(self, event: Changed) -> None:
        # Not stopped: the app (and a test) may want to know that the queue changed.
        if event.error:
            self.notify(
                f"{event.verb} failed: {event.error}", severity="error", timeout=8, markup=False
            )
        else:
            n = len(event.ids)
            self.notify(f"{event.verb}: {n} entr{'y' if n == 1 else 'ies'}")
        self.reload()
