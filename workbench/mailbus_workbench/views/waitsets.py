"""Wait sets: each wait set of this process and of the participants that announce
themselves, its entities and a state timeline."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from mailbus_workbench.model.waitsets import WaitSetRow
from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt

# One colour (and mark) per state, shown with a legend under the timeline.
TIMELINE_STYLE = {
    "r": ("█", "green"),
    "w": ("▆", "yellow"),
    "t": ("▇", "red"),
    ".": ("▁", "grey50"),
}
TIMELINE_LEGEND = {"r": "completed wait", "w": "waiting", "t": "time-out", ".": "idle"}


def timeline_legend() -> Text:
    text = Text()
    for state, meaning in TIMELINE_LEGEND.items():
        char, style = TIMELINE_STYLE[state]
        text.append(char, style=style)
        text.append(f" {meaning}   ", style="dim")
    text.rstrip()
    return text


def timeline_text(row: WaitSetRow) -> Text:
    text = Text()
    for state in row.timeline:
        char, style = TIMELINE_STYLE.get(state, ("?", ""))
        text.append(char, style=style)
    return text


COLUMNS = ("process", "name", "entities", "ready", "state", "timeout", "waits", "timeouts")


class WaitSetsView(View):
    DEFAULT_FOCUS = "#waitset-table"
    HELP = """\
## Wait sets
Each wait set in this process (`context.wait_sets`), then those of the other processes
that announce themselves (`announce-period-s`; the process column names them, their
state as of their last announcement): its entities and which are ready,
whether it is waiting now and with which time-out, how many waits and time-outs it has
had. The timeline samples the state at each refresh, one colour per state with a legend
under it: green a completed wait, yellow waiting, red a time-out, grey idle.
"""
    REFRESH_EVERY_S = 0.25

    DEFAULT_CSS = """
    #waitset-table { height: 1fr; }
    #waitset-detail { height: 2fr; border-top: solid $panel; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        yield MeasuredTable(id="waitset-table", cursor_type="row", zebra_stripes=True)
        yield Static("Select a wait set.", id="waitset-detail", markup=False)

    def on_mount(self) -> None:
        table = self.query_one("#waitset-table", DataTable)
        for label, key in (
            ("process", "process"),
            ("wait set", "name"),
            ("entities", "entities"),
            ("ready", "ready"),
            ("state", "state"),
            ("timeout", "timeout"),
            ("waits", "waits"),
            ("time-outs", "timeouts"),
        ):
            table.add_column(label, key=key)

    def refresh_view(self, now: float) -> None:
        table = self.query_one("#waitset-table", DataTable)
        rows = self.parts.model.wait_set_rows()
        keys = [str(r.key) for r in rows]
        if keys != [k.value for k in table.rows]:
            cursor = table.cursor_row
            table.clear()
            for row in rows:
                table.add_row(*self._cells(row), key=str(row.key))
            if rows:
                table.move_cursor(row=min(cursor, len(rows) - 1), animate=False)
        else:
            for row in rows:
                for column, value in zip(
                    COLUMNS,
                    self._cells(row),
                    strict=True,
                ):
                    table.update_cell(str(row.key), column, value)
        self._detail(rows[table.cursor_row] if rows and table.cursor_row < len(rows) else None)

    @on(DataTable.RowHighlighted, "#waitset-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The detail follows the cursor at once, not at the next (throttled) refresh.
        key = event.row_key.value
        rows = self.parts.model.wait_set_rows()
        self._detail(next((r for r in rows if str(r.key) == key), None))

    @staticmethod
    def _cells(row: WaitSetRow) -> tuple[str | Text, ...]:
        ready = sum(1 for e in row.entities if e.ready)
        # An announced wait set's state is as of its announcement: no running clock.
        waited = "" if row.process else f" {row.waiting_for_s:.1f} s"
        state = f"waiting{waited}" if row.waiting else "idle"
        timeout = (
            "forever"
            if row.current_timeout is None and row.waiting
            else f"{row.current_timeout:g} s"
            if row.current_timeout is not None
            else "-"
        )
        return (
            fmt.plain(row.process or "this process"),
            fmt.plain(row.name),
            str(len(row.entities)),
            str(ready),
            state,
            timeout,
            str(row.waits),
            str(row.timeouts),
        )

    detail_text = ""  # the detail pane as plain text

    def _detail(self, row: WaitSetRow | None) -> None:
        detail = self.query_one("#waitset-detail", Static)
        if row is None:
            self.detail_text = (
                "No wait sets yet. This view shows the wait sets of the workbench's own "
                "process (the built-in demo has some: run `mailbus` without --config) and "
                "of every other process that announces itself: set `announce-period-s` "
                "(say 10) in that process's options, and it shows here and in Participants."
            )
            detail.update(self.detail_text)
            return
        self.detail_text = "\n".join(
            [
                f"{row.name} ({row.process or 'this process'})",
                *(f"{e.kind} {e.name} {'ready' if e.ready else '-'}" for e in row.entities),
                "".join(row.timeline),
                timeline_legend().plain,
            ]
        )
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        grid.add_column()
        for entity in row.entities:
            grid.add_row(
                entity.kind,
                entity.name,
                Text("ready", style="green") if entity.ready else Text("-", style="dim"),
            )
        out = Table.grid()
        out.add_row(Text(f"{row.name}", style="bold underline"))
        out.add_row(Text(f"in {row.process or 'this process'}", style="dim"))
        out.add_row(grid)
        out.add_row(Text(f"last ready: {', '.join(row.last_ready) or '-'}"))
        out.add_row(Text("timeline (newest right):", style="dim"))
        out.add_row(timeline_text(row))
        out.add_row(timeline_legend())
        detail.update(out)
