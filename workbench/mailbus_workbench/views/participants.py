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
from textual.widgets import Static

from mailbus_workbench.model.participants import MISSED_PERIODS, Participant
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.row_table import RowTable

COLUMNS = (
    "participant",
    "host",
    "pid",
    "transport",
    "pub",
    "sub",
    "srv",
    "cli",
    "wait sets",
    "modules",
    "outbox",
    "seen",
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
        yield RowTable([(title, None) for title in COLUMNS], id="participants-table")
        with VerticalScroll(id="participant-detail-box"):
            yield Static(NO_PARTICIPANTS, id="participant-detail", markup=False)

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
        table = self.query_one("#participants-table", RowTable)
        participants = self.parts.model.participants
        table.show({p.gid: self._cells(p, now) for p in participants.ordered()})
        self._detail(participants.participants.get(table.selected_key()))

    @on(RowTable.Highlighted, "#participants-table")
    def _highlighted(self, event: RowTable.Highlighted) -> None:
        self._detail(self.parts.model.participants.participants.get(event.key))

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
