"""Call: a service (completed from seen services), a request body and a time-out; the
response with its latency, and a history of calls that can be sent again."""

from __future__ import annotations

from typing import Final

from mailbus.errors import ConfigError, MailbusError, ServiceTimeoutError
from mailbus.names import check_name
from rich.markup import escape
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Label, Static, TextArea

from mailbus_workbench.model.call_history import (
    HISTORY,
    CallRecord,
    call_history_file,
    load_call_history,
    save_call_history,
)
from mailbus_workbench.model.inspect import pretty_body
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.suggest import NameSuggester

MAX_TIMEOUT_S = 3600.0
# The form's widgets: after a call from one of them the focus goes to the history, so
# that view keys switch views instead of typing into the form.
FORM_IDS = {"call-service", "call-body", "call-timeout", "call-send"}


class CallerView(View):
    DEFAULT_FOCUS = "#call-service"
    HOME_FOCUS = "#call-history"
    HELP = """\
## Call
Pick a service (Tab or → accepts the completion from the services seen), write the
request body and a time-out in seconds, and call (**F5**). The response, its latency and
the outcome go to the history below (kept beside the templates, as
`call-history.toml`, and back after a restart); after a call the focus is on the
history: select a call there and press **r** to send the same request again, or **t**
to save it as a test (the Tests view's folder, **T**). Calls of earlier sessions are
listed dimmed and shown only when selected, marked "an earlier session": a new session
starts with no response, not with an old failure.
"""
    BINDINGS = [
        Binding("f5", "call", "Call", id="call.send"),
        Binding("r", "resend", "Re-send", id="call.resend"),
        Binding("t", "save_test", "Save as test", id="call.save_test"),
    ]
    DEFAULT_CSS = """
    CallerView Horizontal { height: auto; }
    CallerView Label { padding: 1 1 0 0; }
    #call-service { width: 1fr; }
    #call-timeout { width: 12; }
    #call-body { height: 6; }
    #call-response-box { height: 1fr; border: round $panel; }
    #call-history { height: 1fr; }
    """

    class Finished(Message):
        """A call ended: answered, timed out or failed (the calling worker's result)."""

        def __init__(self, record: CallRecord) -> None:
            super().__init__()
            self.record: Final = record

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.history: list[CallRecord] = []
        self._earlier = 0  # records numbered up to this one come from earlier sessions
        self._shown: CallRecord | None = None  # what the response panel shows, if any
        self._numbers = 0
        # False when the history file could not be read: it is not written over.
        self.keep_history = True

    def compose(self) -> ComposeResult:
        # Tab goes service -> body -> timeout -> Call: the body, not the numeric timeout,
        # follows the name (a JSON body typed into the timeout became "21" seconds).
        with Horizontal():
            yield Label("service")
            yield Input(
                placeholder="service name to call, e.g. demo/add (tab: complete)",
                id="call-service",
                suggester=NameSuggester(self._service_names),
            )
        yield TextArea("[1, 2, 3]", id="call-body", soft_wrap=True)
        with Horizontal():
            yield Label("timeout s")
            yield Input("2", id="call-timeout", type="number")
            yield Button("Call (F5)", id="call-send", variant="primary")
        with VerticalScroll(id="call-response-box") as box:
            box.border_title = "response"
            yield Static("No call yet.", id="call-response", markup=False)
        yield MeasuredTable(id="call-history", cursor_type="row", zebra_stripes=True)

    def _service_names(self) -> list[str]:
        return self.parts.model.services.services()

    def on_mount(self) -> None:
        table = self.query_one("#call-history", DataTable)
        for label, key in (
            ("#", "n"),
            ("service", "service"),
            ("latency", "latency"),
            ("outcome", "outcome"),
            ("request", "request"),
        ):
            table.add_column(label, key=key)
        # JSON colours depend on the theme: show the response again in the new one.
        self.watch(self.app, "theme", self._theme_changed, init=False)
        path = call_history_file(self.parts.settings.templates_file)
        try:
            records = load_call_history(path)
        except ConfigError as exc:
            self.keep_history = False
            self._message(f"{exc} (the history is not saved until the file is fixed)")
            return
        self._earlier = len(records)
        for record in records:
            table = self._add(record)
            table.move_cursor(row=table.row_count - 1, animate=False)
        self._numbers = len(records)
        if records:
            # Past calls are history, not this session's outcome: nothing is shown as
            # the response (an old failure in red greeted a user who had done nothing).
            self._message(
                f"No call in this session yet. The history below holds {len(records)} "
                "calls from earlier sessions: select one to see its response; r sends "
                "it again.",
                title="response",
                style="dim",
            )

    @on(Button.Pressed, "#call-send")
    def action_call(self) -> None:
        service = self.query_one("#call-service", Input).value.strip()
        body = self.query_one("#call-body", TextArea).text
        try:
            timeout = float(self.query_one("#call-timeout", Input).value)
        except ValueError:
            timeout = -1.0
        self.call(service, body, timeout)

    def call(self, service: str, body: str, timeout: float) -> bool:
        """Validate and start a call in a worker; False (and a message) if invalid."""
        if not service:
            self._message("Type a service name to call first.")
            return False
        try:
            check_name(service, "service")
        except MailbusError as exc:
            self._message(str(exc))
            return False
        if not 0 < timeout <= MAX_TIMEOUT_S:
            self._message(f"timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} s")
            return False
        if self.parts.engine is None:
            self._message("No engine: this workbench shows recorded data only.")
            return False
        self._numbers += 1
        self._message(f"calling {service} …", title=f"call #{self._numbers} …", style="dim")
        self._call(self._numbers, service, body, timeout)
        return True

    def _theme_changed(self) -> None:
        table = self.query_one("#call-history", DataTable)
        if table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            record = self._record(key)
            if record is not None and record is self._shown:
                self._show(record)

    def _message(self, text: str, *, title: str = "call not sent", style: str = "red") -> None:
        """A message in the response panel, under a title of its own (never the title of
        an earlier response)."""
        self.query_one("#call-response-box").border_title = title
        self.query_one("#call-response", Static).update(Text(text, style=style))
        self._shown = None

    @work(thread=True, group="call")
    def _call(self, number: int, service: str, body: str, timeout: float) -> None:
        engine = self.parts.engine
        assert engine is not None
        try:
            result = engine.call(service, body, timeout)
            record = CallRecord(
                number, service, body, timeout, True, result.response.body, result.latency_s
            )
        except ServiceTimeoutError:
            record = CallRecord(
                number, service, body, timeout, False, f"no response within {timeout:g} s", None
            )
        except MailbusError as exc:
            record = CallRecord(number, service, body, timeout, False, str(exc), None)
        self.post_message(self.Finished(record))

    @on(Finished)
    def _call_finished(self, finished: Finished) -> None:
        self._finished(finished.record)

    def _finished(self, record: CallRecord) -> None:
        table = self._add(record)
        table.move_cursor(row=table.row_count - 1, animate=False)
        self._show(record)
        focused = self.app.focused
        if focused is not None and focused.id in FORM_IDS:
            table.focus()
        if self.keep_history:
            path = call_history_file(self.parts.settings.templates_file)
            try:
                save_call_history(path, self.history)
            except OSError as exc:
                self.notify(f"cannot save the call history: {exc}", severity="warning")

    def _add(self, record: CallRecord) -> DataTable[object]:
        self.history.append(record)
        del self.history[:-HISTORY]
        table: DataTable[object] = self.query_one("#call-history", DataTable)
        table.add_row(
            str(record.number),
            fmt.plain(record.service),
            fmt.latency(record.latency_s),
            Text("ok" if record.ok else "failed", style=self._outcome_style(record)),
            fmt.plain(fmt.preview(record.body, 60)),
            key=str(record.number),
        )
        while table.row_count > HISTORY:
            table.remove_row(next(iter(table.rows)))
        return table

    def _earlier_session(self, record: CallRecord) -> bool:
        return record.number <= self._earlier

    def _outcome_style(self, record: CallRecord) -> str:
        style = "green" if record.ok else "red"
        return f"dim {style}" if self._earlier_session(record) else style

    def _show(self, record: CallRecord) -> None:
        self._shown = record
        box = self.query_one("#call-response-box")
        box.border_title = (
            f"response #{record.number}  {fmt.latency(record.latency_s)}"
            if record.ok
            else f"call #{record.number} failed"
        ) + ("  (an earlier session)" if self._earlier_session(record) else "")
        widget = self.query_one("#call-response", Static)
        if not record.ok:
            widget.update(Text(fmt.printable(record.response, lines=True), style="red"))
            return
        is_json, text = pretty_body(record.response)
        widget.update(
            fmt.json_syntax(text, dark=self.app.current_theme.dark)
            if is_json
            else Text(fmt.printable(text, lines=True))
        )

    @on(DataTable.RowHighlighted, "#call-history")
    def _history_row(self, event: DataTable.RowHighlighted) -> None:
        record = self._record(event.row_key.value)
        # A past call is shown when the user selects it, not when the loaded history
        # puts the cursor on it.
        if record is None or (self._earlier_session(record) and not event.data_table.has_focus):
            return
        self._show(record)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """The history focused with a past call under its cursor: the user looks at it."""
        table = self.query_one("#call-history", DataTable)
        if event.widget is table and self._shown is None and table.row_count:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            record = self._record(key)
            if record is not None:
                self._show(record)

    def _record(self, key: str | None) -> CallRecord | None:
        for record in self.history:
            if str(record.number) == key:
                return record
        return None

    def action_resend(self) -> None:
        table = self.query_one("#call-history", DataTable)
        if not table.row_count:
            self.notify("No call to send again yet.", severity="warning")
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        record = self._record(key)
        if record is not None:
            self.query_one("#call-service", Input).value = record.service
            self.query_one("#call-body", TextArea).text = record.body
            self.query_one("#call-timeout", Input).value = f"{record.timeout_s:g}"
            self.call(record.service, record.body, record.timeout_s)

    def action_save_test(self) -> None:
        from mailbus_workbench.views import save_test

        table = self.query_one("#call-history", DataTable)
        record = None
        if table.row_count:
            record = self._record(
                table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
            )
        if record is None or not record.ok:
            self.notify("Select an answered call to save as a test", severity="warning")
            return
        source = save_test.call_source(self.parts, record.service, record.body, record.response)
        save_test.offer(self, self.parts, f"a call to {record.service}", record.service, source)

    def status_markup(self) -> str:
        return escape(f"{len(self.history)} calls")
