"""A request and its response side by side, as RFC 5322 source."""

from __future__ import annotations

from mailbus.trace import TraceEvent
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Static

from mailbus_workbench.model.inspect import raw_note, raw_source
from mailbus_workbench.model.services import Trace
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.text_update import update_text


class EmailPair(Horizontal):
    DEFAULT_CSS = """
    EmailPair { height: 1fr; }
    EmailPair VerticalScroll { width: 1fr; border: round $panel; }
    """

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="pair-request") as left:
            left.border_title = "request"
            yield Static("Select a call.", id="pair-request-text", markup=False)
        with VerticalScroll(id="pair-response") as right:
            right.border_title = "response"
            yield Static("", id="pair-response-text", markup=False)

    shown: Trace | None = None
    texts: dict[str, str] = {}

    def show(
        self, trace: Trace | None, date: str | None = None, replaces: Trace | None = None
    ) -> None:
        """Show `trace`; `replaces`: the call selected before, trimmed from the list."""
        self.shown = trace
        self.texts = {}
        title = "request"
        if replaces is not None:
            title += f"  (call #{replaces.sequence} was trimmed: the oldest kept instead)"
        self.query_one("#pair-request", VerticalScroll).border_title = title
        left = self.query_one("#pair-request-text", Static)
        right = self.query_one("#pair-response-text", Static)
        if trace is None:
            update_text(left, "Select a call.")
            update_text(right, "")
            return
        if trace.request is not None:
            self.texts["request"] = raw_source(trace.request, date)
            update_text(left, _with_note(trace.request, self.texts["request"]))
        else:
            update_text(left, Text("(request not seen: orphaned response)", style="magenta"))
        if trace.response is not None:
            self.texts["response"] = raw_source(trace.response, date)
            update_text(right, _with_note(trace.response, self.texts["response"]))
        else:
            update_text(right, Text("(no response yet)", style="yellow"))
        self.query_one("#pair-response", VerticalScroll).border_title = (
            f"response  {fmt.latency(trace.latency_s)}"
            + ("  (duplicate)" if trace.duplicate else "")
        )


def _with_note(event: TraceEvent, raw: str) -> Text:
    """The source under a line saying whether it is the bytes that arrived or a rebuild."""
    shown = Text()
    shown.append(raw_note(event) + "\n\n", style="dim italic")
    shown.append(fmt.printable(raw, lines=True))  # bytes from the wire: never markup
    return shown
