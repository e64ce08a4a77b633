"""Services: every request paired with its response, as a list and a waterfall."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from mailbus_workbench.model import export
from mailbus_workbench.model.services import TraceStatus
from mailbus_workbench.share_screens import ExportScreen
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets.divider import Divider
from mailbus_workbench.widgets.email_pair import EmailPair
from mailbus_workbench.widgets.trace_list import STATUS_STYLE, TraceList
from mailbus_workbench.widgets.waterfall import Waterfall


class ServicesView(View):
    DEFAULT_FOCUS = "#trace-list"
    HELP = """\
## Services
Every request is paired with its response through `In-Reply-To`/`References`.
Status: **answered**, **pending**, **timed out** (no response within the service
time-out, `[workbench] service-timeout`), **orphaned** (a response to a request never
seen) and **duplicate** (a second response to one request). Latency is measured
between the two receptions. The waterfall shows the last 10 seconds.
Select a call to see the request and the response side by side.

- **x** clear the traces
- **s** save the selected call's service's calls (every call when none is selected) as
  CSV, JSON Lines or Parquet (the file name's suffix says which)
- **[** / **]** narrow / widen the list
"""

    BINDINGS = [
        Binding("x", "clear", "Clear", id="services.clear"),
        Binding("s", "export_calls", "Save calls", show=False, id="services.export_calls"),
        Binding(
            "left_square_bracket", "resize(-4)", "Narrower", show=False, id="services.narrower"
        ),
        Binding("right_square_bracket", "resize(4)", "Wider", show=False, id="services.wider"),
    ]
    REFRESH_EVERY_S = 0.25

    DEFAULT_CSS = """
    #services-top { height: 1fr; }
    #services-left { width: 78; }
    #services-right { width: 1fr; }
    #services-counts { height: auto; }
    #email-pair { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        with Horizontal(id="services-top"):
            with Vertical(id="services-left"):
                yield TraceList(id="trace-list")
            yield Divider("services-left")
            with Vertical(id="services-right"):
                yield Static("", id="services-counts")
                yield Waterfall(id="waterfall")
        yield EmailPair(id="email-pair")

    def refresh_view(self, now: float) -> None:
        store = self.parts.model.services
        self.query_one(TraceList).show(store, now)
        self.query_one(Waterfall).show(store, now)
        counts = store.counts(now)
        self.query_one("#services-counts", Static).update(
            "  ".join(f"[{STATUS_STYLE[s]}]{s.value} {counts[s]}[/]" for s in TraceStatus)
        )

    @on(TraceList.TraceChosen)
    def _chosen(self, event: TraceList.TraceChosen) -> None:
        self.query_one(EmailPair).show(event.trace, self.parts.raw_date, event.replaces)

    def action_clear(self) -> None:
        store = self.parts.model.services
        store.clear()
        self.query_one(TraceList).reset()
        self.query_one(EmailPair).show(None)
        self.refresh_view(self.parts.model.clock())

    def action_resize(self, delta: int) -> None:
        left = self.query_one("#services-left")
        left.styles.width = max(20, min((left.size.width or 78) + delta, self.size.width - 20))

    def action_export_calls(self) -> None:
        store = self.parts.model.services
        selected = self.query_one(TraceList).selected()
        service = selected.service if selected is not None else None
        now = self.parts.model.clock()
        rows = export.call_rows(store.traces(service), now, store.timeout_s)
        if not rows:
            self.notify("No calls to export.", severity="warning", timeout=3)
            return

        def write(path: Path, overwrite: bool) -> str:
            count = export.write_table(rows, export.CALL_SCHEMA, path, overwrite=overwrite)
            return f"{count} calls"

        self.app.push_screen(
            ExportScreen(
                f"Export the {len(rows)} calls of {service or 'every service'}",
                export.suggest_path(service or "calls", now, ".csv"),
                write,
                "The format follows the suffix: .csv, .jsonl or .parquet.",
            )
        )
