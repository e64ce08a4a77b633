"""A waterfall of the latest service traces over a time window: one bar per call."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from mailbus_workbench.model.services import ServiceStore, TraceStatus
from mailbus_workbench.widgets.trace_list import STATUS_STYLE

WINDOW_S = 10.0


def render_waterfall(
    store: ServiceStore, now: float, width: int, height: int, window_s: float = WINDOW_S
) -> Text:
    """Rows `service#seq |   ███   |` placed on [now - window, now]."""
    label_w = 16
    bar_w = max(10, width - label_w - 2)
    text = Text()
    start = now - window_s
    header = f"{'':{label_w}}|{'-' * (bar_w - 2)}|"
    text.append(header[:width] + "\n", style="dim")
    traces = [t for t in store.traces() if t.started_s >= start][-max(1, height - 2) :]
    for trace in traces:
        status = trace.status(now, store.timeout_s)
        begin = trace.started_s
        latency = trace.latency_s
        end = (
            begin + latency
            if latency is not None
            else (now if status is TraceStatus.PENDING else begin + store.timeout_s)
        )
        a = int((begin - start) / window_s * bar_w)
        b = max(a + 1, int((min(end, now) - start) / window_s * bar_w))
        a, b = max(0, min(a, bar_w - 1)), max(1, min(b, bar_w))
        label = f"{trace.service[-10:]}#{trace.sequence}"
        text.append(f"{label:>{label_w}} ", style="bold" if status is TraceStatus.PENDING else "")
        text.append(" " * a)
        text.append("█" * (b - a), style=STATUS_STYLE[status])
        text.append("\n")
    if not traces:
        text.append(f"no service calls in the last {window_s:.0f} s\n", style="dim")
    return text


class Waterfall(Widget):
    """Renders at its own size on every repaint, so bars never wrap."""

    DEFAULT_CSS = "Waterfall { height: 1fr; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._store: ServiceStore | None = None
        self._now = 0.0

    def show(self, store: ServiceStore, now: float) -> None:
        self._store = store
        self._now = now
        self.refresh()

    def render(self) -> Text:
        if self._store is None:
            return Text("")
        text = render_waterfall(self._store, self._now, self.size.width, self.size.height)
        text.no_wrap = True
        text.overflow = "crop"
        return text
