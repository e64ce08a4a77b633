"""Services: every request paired with its response, as a list and a waterfall; each
service's latency percentiles and the selected one's histogram; a filter of the calls."""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Static

from mailbus_workbench.model import export, trace_filter
from mailbus_workbench.model.services import Trace, TraceStatus
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.share_screens import ExportScreen
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.divider import Divider
from mailbus_workbench.widgets.email_pair import EmailPair
from mailbus_workbench.widgets.latency_histogram import LatencyHistogram
from mailbus_workbench.widgets.service_stats import ServiceStats
from mailbus_workbench.widgets.text_update import update_text
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
between the two receptions. The waterfall shows the last 10 seconds; hover a row for
the call's full name.
The table above the calls gives each service's p50/p90/p99 latency over its last
1,000 answered calls; the histogram shows the highlighted service's (log buckets, four
per decade).
The filter narrows the calls: words in the service name, `service=NAME`,
`client=GID` (the start of the client's GID), `client~part`, `status=timed-out`, or a
request header (`Header=value`, `Header~part`) as in Topics.
Select a call to see the request and the response side by side.

- **/** filter the calls (escape leaves the filter)
- **x** clear the traces
- **s** save the selected call's service's calls (every call when none is selected) as
  CSV, JSON Lines or Parquet (the file name's suffix says which)
- **[** / **]** narrow / widen the list
"""

    BINDINGS = [
        Binding("slash", "filter", "Filter", id="services.filter"),
        Binding("x", "clear", "Clear", id="services.clear"),
        Binding("s", "export_calls", "Save calls", show=False, id="services.export_calls"),
        Binding("t", "save_test", "Save as test", show=False, id="services.save_test"),
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
    #services-filter { margin: 0; }
    #latency-histogram { height: 8; border-bottom: solid $panel; }
    #email-pair { height: 1fr; }
    """

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.trace_filter = trace_filter.TraceFilter()
        self.service: str | None = None  # the histogram's
        self.filter_error = ""  # why the filter's text was not taken

    def compose(self) -> ComposeResult:
        with Horizontal(id="services-top"):
            with Vertical(id="services-left"):
                yield Input(
                    placeholder="filter calls: service, client=GID, status=…  /",
                    id="services-filter",
                )
                yield ServiceStats(id="service-stats")
                yield TraceList(id="trace-list")
            yield Divider("services-left")
            with Vertical(id="services-right"):
                yield Static("", id="services-counts")
                yield LatencyHistogram(id="latency-histogram")
                yield Waterfall(id="waterfall")
        yield EmailPair(id="email-pair")

    def listed(self, now: float) -> list[Trace]:
        """The calls the filter lets through, oldest first."""
        store = self.parts.model.services
        wanted = self.trace_filter
        if not wanted.active:
            return store.traces()
        timeout_s = store.timeout_s
        return [t for t in store.traces() if wanted.matches(t, t.status(now, timeout_s))]

    def refresh_view(self, now: float) -> None:
        store = self.parts.model.services
        listed = self.listed(now)
        self.query_one(TraceList).show(store, now, listed)
        self.query_one(Waterfall).show(listed, store.timeout_s, now)
        stats = self.query_one(ServiceStats)
        wanted = self.trace_filter
        services = store.latencies.services()
        if wanted.active:
            services = [s for s in services if wanted.lists_service(s)]
        stats.show_services(store.latencies, services)
        if self.service not in stats.services:
            self.service = stats.selected()
        self.query_one(LatencyHistogram).show(store.latencies, self.service)
        counts = store.counts(now)
        items = [Text(f"{s.value} {counts[s]}", style=STATUS_STYLE[s]) for s in TraceStatus]
        line = fmt.pack_items(items, self.query_one("#services-counts").size.width)
        if wanted.active:
            line.append(f"  · {len(listed)} listed", style="bold")
        if self.filter_error:
            line.append(f"\nfilter: {self.filter_error}", style="bold red")
        update_text(self.query_one("#services-counts", Static), line)

    @on(TraceList.TraceChosen)
    def _chosen(self, event: TraceList.TraceChosen) -> None:
        self.query_one(EmailPair).show(event.trace, self.parts.raw_date, event.replaces)
        self.query_one(ServiceStats).select(event.trace.service)

    @on(ServiceStats.ServiceHighlighted)
    def _service_highlighted(self, event: ServiceStats.ServiceHighlighted) -> None:
        self.service = event.service
        self.query_one(LatencyHistogram).show(self.parts.model.services.latencies, self.service)

    @on(Input.Changed, "#services-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        try:
            wanted = trace_filter.parse(event.value)
        except trace_filter.FilterError as exc:
            self.filter_error = str(exc)
            event.input.add_class("-invalid")
            self.refresh_view(self.parts.model.clock())
            return  # the last good filter stays
        self.filter_error = ""
        event.input.remove_class("-invalid")
        if wanted != self.trace_filter:
            self.trace_filter = wanted
            self.query_one(TraceList).reset()  # rows come back in order
        self.refresh_view(self.parts.model.clock())

    @on(Input.Submitted, "#services-filter")
    def _filter_done(self) -> None:
        self.query_one(TraceList).focus()

    def action_filter(self) -> None:
        self.query_one("#services-filter", Input).focus()

    def action_clear(self) -> None:
        store = self.parts.model.services
        store.clear()
        self.query_one(TraceList).reset()
        self.query_one(EmailPair).show(None)
        self.refresh_view(self.parts.model.clock())

    def action_resize(self, delta: int) -> None:
        left = self.query_one("#services-left")
        left.styles.width = max(20, min((left.size.width or 78) + delta, self.size.width - 20))

    def action_save_test(self) -> None:
        from mailbus_workbench.views import save_test

        trace = self.query_one(TraceList).selected()
        if trace is None or trace.request is None or trace.response is None:
            self.notify("Select an answered call to save as a test", severity="warning")
            return
        request, response = trace.request.body or "", trace.response.body or ""
        source = save_test.call_source(
            self.parts, trace.service, request, response, seen=trace.request
        )
        save_test.offer(self, self.parts, f"a call to {trace.service}", trace.service, source)

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
