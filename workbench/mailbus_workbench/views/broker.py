"""Broker: the modules of each broker in this process (state, queue depth against
capacity, back-pressure, counts) and the links between them; then the modules other
processes announce (state and queue depth, as of their last announcement)."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt

STATE_STYLE = {"running": "green", "stopping": "yellow", "stopped": "dim", "failed": "bold red"}


NO_BROKER = (
    "No broker in this process. This view shows the brokers that run inside the "
    "workbench's own process, and those of other processes that announce themselves "
    "(`announce-period-s` in their options): their modules' state and queue depth. "
    "`mailbus gateway run FILE.json --stats-every 1` prints every count of a broker in "
    "another process, and the topics it bridges show in Topics."
)
THIS_PROCESS = "this process"


def _depth(depth: int, capacity: int) -> Text:
    full = depth / capacity if capacity else 0.0
    return Text(
        f"{depth}/{capacity}", style="red" if full > 0.8 else "yellow" if full > 0.5 else ""
    )


def _problems(failed: int, dropped: int, refused: int, blocked: int) -> Text:
    """Only the counts that are not zero, so the table fits 120 columns while all is
    well and says plainly what went wrong when something did."""
    counts = ((failed, "failed"), (dropped, "dropped"), (refused, "refused"), (blocked, "blocked"))
    said = [f"{n} {what}" for n, what in counts if n]
    return Text(" · ".join(said), style="red") if said else Text("none", style="dim")


class BrokerView(View):
    DEFAULT_FOCUS = "#broker-modules"
    HELP = """\
## Broker
Each module broker of this process (`mailbus.broker`; the embedded demo runs one with
two bridges from demo topics into a tally module): per module its state, queue depth
against capacity, what it does when full (its back-pressure policy), messages it sent
(published as a source) and that were delivered to it,
and its problems: what failed, was dropped or refused, and publishers blocked right now
(only the counts that are not zero; "none" when all are); then the links
(`*` links every other module). Read once a second from `Broker.snapshot()`. Brokers of
other processes that announce themselves follow (the process column names them): state
and queue depth as of their last announcement, `-` for what they do not announce.
"""
    REFRESH_EVERY_S = 1.0
    DEFAULT_CSS = """
    #broker-summary { height: auto; padding: 0 1; color: $text-muted; }
    #broker-modules { height: 2fr; }
    #broker-links { height: 1fr; border-top: solid $panel; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="broker-summary", markup=False)
        yield MeasuredTable(id="broker-modules", cursor_type="row", zebra_stripes=True)
        yield MeasuredTable(id="broker-links", cursor_type="row")

    def on_mount(self) -> None:
        modules = self.query_one("#broker-modules", DataTable)
        for label in (
            "process",
            "broker",
            "module",
            "kind",
            "state",
            "queue",
            "when full",
            "sent",
            "delivered",
            "problems",
        ):
            modules.add_column(label, key=label)
        links = self.query_one("#broker-links", DataTable)
        for label in ("broker", "source", "sink", "when full"):
            links.add_column(label, key=label)

    def refresh_view(self, now: float) -> None:
        brokers = self.parts.brokers
        modules = self.query_one("#broker-modules", DataTable)
        links = self.query_one("#broker-links", DataTable)
        cursor = modules.cursor_row
        modules.clear()
        links.clear()
        lines = []
        for name, broker in sorted(brokers.items()):
            snap = broker.snapshot()
            queued = sum(m.queue_depth for m in snap.modules)
            lines.append(
                f"{name}: {len(snap.modules)} modules, {len(snap.links)} links, "
                f"{queued} queued" + ("  (destroyed)" if snap.destroyed else "")
            )
            for m in snap.modules:
                modules.add_row(
                    THIS_PROCESS,
                    fmt.plain(name),
                    fmt.plain(m.name),
                    fmt.plain(m.kind),
                    Text(m.state, style=STATE_STYLE.get(m.state, "")),
                    _depth(m.queue_depth, m.capacity),
                    fmt.plain(m.backpressure),
                    str(m.published),
                    str(m.delivered),
                    _problems(m.failed, m.dropped, m.refused, m.blocked_publishers),
                )
            for link in snap.links:
                links.add_row(
                    *map(fmt.plain, (name, link.source, link.sink, link.backpressure or "(sink's)"))
                )
        remote = self.parts.model.participants.remote_brokers()
        for process, info in remote:
            lines.append(f"{process} {info.name}: {len(info.modules)} modules")
            for module in info.modules:
                modules.add_row(
                    *map(fmt.plain, (process, info.name, module.name, module.kind)),
                    Text(module.state, style=STATE_STYLE.get(module.state, "")),
                    _depth(module.queue_depth, module.capacity),
                    *("-",) * 4,
                )
        self.query_one("#broker-summary", Static).update("  ·  ".join(lines) or NO_BROKER)
        if modules.row_count:
            modules.move_cursor(row=min(cursor, modules.row_count - 1), animate=False)
