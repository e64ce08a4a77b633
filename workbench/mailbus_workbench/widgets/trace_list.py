"""Service traces as a table: time, service, client, sequence, latency, status."""

from __future__ import annotations

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from mailbus_workbench.model.services import ServiceStore, Trace, TraceStatus
from mailbus_workbench.textual_internals import FixedTable
from mailbus_workbench.widgets import format as fmt

SERVICE_W = 14  # longer names are elided in the middle
SHOWN = 100  # newest traces listed (the store holds more): each row costs a render
STATUS_STYLE = {
    TraceStatus.ANSWERED: "green",
    TraceStatus.LATE: "dark_orange",
    TraceStatus.PENDING: "yellow",
    TraceStatus.TIMED_OUT: "bold red",
    TraceStatus.ORPHANED: "magenta",
    TraceStatus.DUPLICATE: "bold magenta",
}


class TraceList(FixedTable[str | Text]):
    class TraceChosen(Message):
        """`trace` is highlighted; `replaces` is the call that was highlighted before
        it left the list (trimmed from the top), if that is why."""

        def __init__(self, trace: Trace, replaces: Trace | None = None) -> None:
            super().__init__()
            self.trace = trace
            self.replaces = replaces

    DEFAULT_CSS = "TraceList { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._traces: dict[str, Trace] = {}
        self._status: dict[str, TraceStatus] = {}
        self._version = -1
        # The highlighted call was trimmed: (key of the row shown instead, the call gone).
        self._replaced: tuple[str, Trace] | None = None
        # The call last announced as chosen, and its status then.
        self._announced: tuple[str, TraceStatus] | None = None

    def on_mount(self) -> None:
        self.add_column("time (UTC)", key="time", width=12)
        self.add_column("service", key="service", width=SERVICE_W)
        self.add_column("client", key="client", width=8)
        self.add_column("seq", key="seq", width=5)
        self.add_column("latency", key="latency", width=9)
        self.add_column("status", key="status", width=10)

    def show(self, store: ServiceStore, now: float, listed: list[Trace] | None = None) -> None:
        """The newest SHOWN of `listed` (the filtered calls), else of the store's."""
        # Each row removed or cursor moved here makes Textual highlight a row again, and
        # each highlight drew the chosen call's two emails: 64 times a refresh under 200
        # calls/s. The rows change silently; the call highlighted at the end is announced
        # once, if it or its status changed.
        with self.prevent(DataTable.RowHighlighted):
            replaced = self._update(store, now, listed)
        shown = self.selected()
        if shown is None:
            return
        if replaced is not None:
            self._replaced = (shown.key, replaced)
        elif self._replaced is not None and self._replaced[0] != shown.key:
            self._replaced = None  # another call is highlighted: the notice is over
        if replaced is not None or self._announced != (shown.key, self._status[shown.key]):
            self._announce(shown, self._replaced[1] if self._replaced else None)

    def _update(self, store: ServiceStore, now: float, listed: list[Trace] | None) -> Trace | None:
        """The rows made the newest SHOWN calls; the call held that left the list, if any."""
        traces = (store.traces() if listed is None else listed)[-SHOWN:]
        following = self.row_count == 0 or self.cursor_row >= self.row_count - 1
        # Removing rows above the cursor leaves it on the same row number, which is then
        # another call: remember the call, to put the cursor back on it.
        held = None if following else self.selected()
        wanted = {t.key for t in traces}
        for key in [k for k in self._traces if k not in wanted]:
            self.remove_row(key)
            del self._traces[key]
            self._status.pop(key, None)
        for trace in traces:
            status = trace.status(now, store.timeout_s)
            if trace.key not in self._traces:
                self._traces[trace.key] = trace
                self._status[trace.key] = status
                self.add_row(
                    fmt.clock_time(trace.started_s),
                    fmt.plain(fmt.elide_middle(trace.service, SERVICE_W)),
                    fmt.plain(trace.client_gid[:8]),
                    str(trace.sequence),
                    fmt.latency(trace.latency_s),
                    Text(status.value, style=STATUS_STYLE[status]),
                    key=trace.key,
                )
            elif self._status[trace.key] != status:  # pending -> answered / timed out
                self._status[trace.key] = status
                self.update_cell(trace.key, "latency", fmt.latency(trace.latency_s))
                self.update_cell(
                    trace.key, "status", Text(status.value, style=STATUS_STYLE[status])
                )
        if following and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)
        elif held is not None and held.key in self._traces:
            self.move_cursor(row=self.get_row_index(held.key), animate=False)
        elif held is not None and self.row_count:
            # The call left the list: highlight the oldest one kept, and say so.
            self.move_cursor(row=0, animate=False)
            return held
        return None

    def _announce(self, trace: Trace, replaces: Trace | None = None) -> None:
        self._announced = (trace.key, self._status[trace.key])
        self.post_message(self.TraceChosen(trace, replaces))

    def reset(self) -> None:
        self.clear()
        self._replaced = None
        self._announced = None
        self._traces.clear()
        self._status.clear()

    def selected(self) -> Trace | None:
        if not self.row_count:
            return None
        key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return self._traces.get(key or "")

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        trace = self._traces.get(event.row_key.value or "")
        if trace is None:
            return
        replaced = self._replaced
        if replaced is not None and replaced[0] == trace.key:
            # The row shown for a trimmed call, highlighted again: keep its notice.
            self._announce(trace, replaced[1])
            return
        self._replaced = None
        self._announce(trace)
