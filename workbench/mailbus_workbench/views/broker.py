"""Broker: the modules of each broker in this process (state, queue depth against
capacity, back-pressure, counts) and the links between them."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt

STATE_STYLE = {"running": "green", "stopping": "yellow", "stopped": "dim", "failed": "bold red"}


NO_BROKER = (
    "No broker in this process. This view shows the brokers that run inside the "
    "workbench's own process. A broker in another process reports its modules itself: "
    "`mailbus gateway run FILE.json --stats-every 1` prints each module's queue depth and "
    "counts, and the topics it bridges show in Topics."
)


class BrokerView(View):
    DEFAULT_FOCUS = "#broker-modules"
    HELP = """\
## Broker
Each module broker of this process (`mailbus.broker`; the embedded demo runs one with
two bridges from demo topics into a tally module): per module its state, queue depth
against capacity, back-pressure policy, messages published as a source, delivered,
failed, dropped and refused, and publishers blocked right now; then the links
(`*` links every other module). Read once a second from `Broker.snapshot()`.
"""
    REFRESH_EVERY_S = 1.0
    DEFAULT_CSS = """
    #broker-summary { height: auto; padding: 0 1; color: $text-muted; }
    #broker-modules { height: 2fr; }
    #broker-links { height: 1fr; border-top: solid $panel; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="broker-summary", markup=False)
        yield DataTable(id="broker-modules", cursor_type="row", zebra_stripes=True)
        yield DataTable(id="broker-links", cursor_type="row")

    def on_mount(self) -> None:
        modules = self.query_one("#broker-modules", DataTable)
        for label in (
            "broker",
            "module",
            "kind",
            "state",
            "queue",
            "back-pressure",
            "published",
            "delivered",
            "failed",
            "dropped",
            "refused",
            "blocked",
        ):
            modules.add_column(label, key=label)
        links = self.query_one("#broker-links", DataTable)
        for label in ("broker", "source", "sink", "back-pressure"):
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
                full = m.queue_depth / m.capacity if m.capacity else 0.0
                modules.add_row(
                    fmt.plain(name),
                    fmt.plain(m.name),
                    fmt.plain(m.kind),
                    Text(m.state, style=STATE_STYLE.get(m.state, "")),
                    Text(
                        f"{m.queue_depth}/{m.capacity}",
                        style="red" if full > 0.8 else "yellow" if full > 0.5 else "",
                    ),
                    fmt.plain(m.backpressure),
                    str(m.published),
                    str(m.delivered),
                    str(m.failed),
                    str(m.dropped),
                    str(m.refused),
                    str(m.blocked_publishers),
                )
            for link in snap.links:
                links.add_row(
                    *map(fmt.plain, (name, link.source, link.sink, link.backpressure or "(sink's)"))
                )
        self.query_one("#broker-summary", Static).update("  ·  ".join(lines) or NO_BROKER)
        if modules.row_count:
            modules.move_cursor(row=min(cursor, modules.row_count - 1), animate=False)
