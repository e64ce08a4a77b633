"""Participants: every context that announces itself (`ros2 node list` and `node info`
for Mailbus): one row per participant, and the selected one's entities, wait sets,
broker modules and outbox in detail."""

from __future__ import annotations

from collections import Counter

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import DataTable, Static

from mailbus_workbench.model.participants import MISSED_PERIODS, Participant
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt

COLUMNS = (
    ("participant", "name"),
    ("host", "host"),
    ("pid", "pid"),
    ("transport", "transport"),
    ("pub", "publishers"),
    ("sub", "subscriptions"),
    ("srv", "servers"),
    ("cli", "clients"),
    ("wait sets", "wait_sets"),
    ("modules", "modules"),
    ("outbox", "outbox"),
    ("seen", "seen"),
)

NO_PARTICIPANTS = (
    "No participant has announced itself yet. A process announces itself when its "
    "options set `announce-period-s` (say 10; 0, the default, is off): its name, host, "
    "pid, transport, entities, wait sets, broker modules and outbox depth then show here "
    "within one period. The embedded demo (`mailbus` without --config) announces itself."
)


def counts(participant: Participant) -> Counter[str]:
    return Counter(e.kind for e in participant.announcement.entities)


class ParticipantsView(View):
    DEFAULT_FOCUS = "#participants-table"
    HELP = f"""\
## Participants
Every process (every context) that announces itself on `_mailbus/participants`: name,
host, pid, transport and how many publishers, subscriptions, servers, clients, wait sets
and broker modules it has, its outbox depth, and how long ago it was last heard of.
Below, the selected participant in full. A participant that shuts down says goodbye
and goes at once; one that dies goes after {MISSED_PERIODS} missed periods. Its wait sets
and broker modules also show in the Wait sets and Broker views. Turn announcements on
with `announce-period-s` in a process's options (off by default).
"""
    REFRESH_EVERY_S = 0.5
    DEFAULT_CSS = """
    #participants-table { height: 1fr; }
    #participant-detail-box { height: 2fr; border-top: solid $panel; padding: 0 1; }
    """

    detail_text = ""  # the detail pane as plain text

    def compose(self) -> ComposeResult:
        yield DataTable(id="participants-table", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="participant-detail-box"):
            yield Static(NO_PARTICIPANTS, id="participant-detail", markup=False)

    def on_mount(self) -> None:
        self._cells_shown: dict[str, tuple[str | Text, ...]] = {}  # by participant, as drawn
        table = self.query_one("#participants-table", DataTable)
        for label, key in COLUMNS:
            table.add_column(label, key=key)

    def _cells(self, p: Participant, now: float) -> tuple[str | Text, ...]:
        a = p.announcement
        kinds = counts(p)
        own = p.gid == self.parts.model.participants.own_gid
        name = Text(a.name, style="bold") if own else fmt.plain(a.name)
        if own:
            name.append(" (this)", style="dim")
        return (
            name,
            fmt.plain(a.host),
            str(a.pid),
            fmt.plain(a.transport),
            str(kinds["publisher"]),
            str(kinds["subscription"]),
            str(kinds["server"]),
            str(kinds["client"]),
            str(len(a.wait_sets)),
            str(sum(len(b.modules) for b in a.brokers)),
            "-" if a.outbox_depth is None else str(a.outbox_depth),
            fmt.age(now - p.last_seen),
        )

    def refresh_view(self, now: float) -> None:
        table = self.query_one("#participants-table", DataTable)
        rows = self.parts.model.participants.ordered()
        keys = [p.gid for p in rows]
        if keys != [k.value for k in table.rows]:
            cursor = table.cursor_row
            table.clear()
            self._cells_shown = {}
            for p in rows:
                cells = self._cells(p, now)
                self._cells_shown[p.gid] = cells
                table.add_row(*cells, key=p.gid)
            if rows:
                table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)
        else:
            # Only the cells that changed: 200 participants are 2,400 cells, most of them
            # the same from one refresh to the next (each update repaints its cell).
            for p in rows:
                cells = self._cells(p, now)
                before = self._cells_shown.get(p.gid, ())
                for i, ((_, column), value) in enumerate(zip(COLUMNS, cells, strict=True)):
                    if i >= len(before) or before[i] != value:
                        table.update_cell(p.gid, column, value)
                self._cells_shown[p.gid] = cells
        self._detail(rows[table.cursor_row] if rows and table.cursor_row < len(rows) else None)

    @on(DataTable.RowHighlighted, "#participants-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._detail(self.parts.model.participants.participants.get(str(event.row_key.value)))

    def _detail(self, p: Participant | None) -> None:
        detail = self.query_one("#participant-detail", Static)
        if p is None:
            self.detail_text = NO_PARTICIPANTS
            detail.update(NO_PARTICIPANTS)
            return
        a = p.announcement
        lines = [
            f"{a.name}  {a.host}:{a.pid}  {a.transport}  {a.address or '-'}",
            f"gid {a.gid}  every {a.period_s:g} s  announcement {a.sequence}",
        ]
        entities = [
            f"{e.kind} {e.name}" + (f" ({e.queued} queued)" if e.queued else "") for e in a.entities
        ]
        lines += entities or ["no entities"]
        for w in a.wait_sets:
            state = "waiting" if w.waiting else "idle"
            members = ", ".join(
                f"{e.kind} {e.name}" + (" ready" if e.ready else "") for e in w.entities
            )
            lines.append(
                f"wait set {w.name or '-'}: {state}, {w.waits} waits, {w.timeouts} time-outs;"
                f" {members or 'empty'}"
            )
        for b in a.brokers:
            for m in b.modules:
                lines.append(
                    f"broker {b.name} module {m.name} ({m.kind}) {m.state} "
                    f"queue {m.queue_depth}/{m.capacity}"
                )
        if a.outbox_depth is not None:
            lines.append(f"outbox: {a.outbox_depth} waiting")
        if a.omitted:
            lines.append(f"({a.omitted} more items left out of the announcement)")
        self.detail_text = fmt.printable("\n".join(lines), lines=True)
        grid = Table.grid(padding=(0, 1))
        grid.add_column()
        grid.add_row(Text(lines[0], style="bold underline"))
        for line in lines[1:]:
            grid.add_row(Text(fmt.printable(line)))
        detail.update(grid)
