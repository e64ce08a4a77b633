"""A waterfall of the latest service traces over a time window: one bar per call."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual import events
from textual.widget import Widget

from mailbus_workbench.model.services import Trace, TraceStatus
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.trace_list import STATUS_STYLE

WINDOW_S = 10.0
MIN_BAR_W = 10


def trace_label(trace: Trace) -> str:
    # A name from the wire: control characters drawn as pictures, never sent raw.
    return f"{fmt.printable(trace.service)}#{trace.sequence}"


def fit_label(trace: Trace, width: int) -> str:
    """The label in `width` characters: the service name elided in its middle, the call's
    number always whole (it tells the calls apart)."""
    label = trace_label(trace)
    if len(label) <= width:
        return label
    number = f"#{trace.sequence}"
    service = fmt.printable(trace.service)
    return fmt.elide_middle(service, max(1, width - len(number))) + number


def window_traces(
    traces: Sequence[Trace], now: float, rows: int, window_s: float = WINDOW_S
) -> list[Trace]:
    """The newest `rows` traces started within the window, oldest first."""
    start = now - window_s
    shown: list[Trace] = []
    for trace in reversed(traces):  # newest first: stop at the window's start or when full
        if len(shown) >= rows or trace.started_s < start:
            break
        shown.append(trace)
    shown.reverse()
    return shown


def render_waterfall(
    traces: Sequence[Trace],
    timeout_s: float,
    now: float,
    width: int,
    height: int,
    window_s: float = WINDOW_S,
) -> Text:
    """Rows `service#seq |   ███   |` placed on [now - window, now]. The labels take the
    width the longest needs, up to half the width (then elided in the middle)."""
    text = Text()
    start = now - window_s
    shown = window_traces(traces, now, max(1, height - 2), window_s)
    longest = max((len(trace_label(t)) for t in shown), default=8)
    label_w = max(4, min(longest, (width - 1) // 2, width - 1 - MIN_BAR_W))
    bar_w = max(MIN_BAR_W, width - label_w - 1)
    header = f"{'':{label_w}}|{'-' * (bar_w - 2)}|"
    text.append(header[:width] + "\n", style="dim")
    for trace in shown:
        status = trace.status(now, timeout_s)
        begin = trace.started_s
        latency = trace.latency_s
        end = (
            begin + latency
            if latency is not None
            else (now if status is TraceStatus.PENDING else begin + timeout_s)
        )
        a = int((begin - start) / window_s * bar_w)
        b = max(a + 1, int((min(end, now) - start) / window_s * bar_w))
        a, b = max(0, min(a, bar_w - 1)), max(1, min(b, bar_w))
        label = fit_label(trace, label_w)
        text.append(f"{label:>{label_w}} ", style="bold" if status is TraceStatus.PENDING else "")
        text.append(" " * a)
        text.append("█" * (b - a), style=STATUS_STYLE[status])
        text.append("\n")
    if not shown:
        text.append(f"no service calls in the last {window_s:.0f} s\n", style="dim")
    return text


class Waterfall(Widget):
    """Renders at its own size on every repaint, so bars never wrap. Hovering a row
    shows the call's full label (a long service name is elided in the middle)."""

    DEFAULT_CSS = "Waterfall { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._traces: Sequence[Trace] = ()
        self._timeout_s = 1.0
        self._now = 0.0

    def show(self, traces: Sequence[Trace], timeout_s: float, now: float) -> None:
        self._traces = traces
        self._timeout_s = timeout_s
        self._now = now
        self.refresh()

    def shown(self) -> list[Trace]:
        """The calls drawn now, top row first."""
        return window_traces(self._traces, self._now, max(1, self.size.height - 2))

    def render(self) -> Text:
        text = render_waterfall(
            self._traces, self._timeout_s, self._now, self.size.width, self.size.height
        )
        text.no_wrap = True
        text.overflow = "crop"
        return text

    def on_mouse_move(self, event: events.MouseMove) -> None:
        shown = self.shown()
        row = event.y - 1  # under the header line
        self.tooltip = trace_label(shown[row]) if 0 <= row < len(shown) else None
