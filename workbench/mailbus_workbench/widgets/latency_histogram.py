"""The selected service's latency histogram: one column per log-spaced bucket (4 per
decade), over the last calls the model keeps for it, with its p50/p90/p99."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

from mailbus_workbench.model.latency import (
    BUCKET_COUNT,
    BUCKETS_PER_DECADE,
    LOWEST_S,
    LatencyBook,
)
from mailbus_workbench.widgets import format as fmt

BLOCKS = " ▁▂▃▄▅▆▇█"


def decade_label(decade: int) -> str:
    """The lower bound of decade `decade` above LOWEST_S: 10µs, 100µs, 1ms ..."""
    value = LOWEST_S * 10**decade
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6)):
        if value >= scale * 0.999:
            return f"{value / scale:.0f}{unit}"
    return f"{value * 1e9:.0f}ns"


def render_histogram(book: LatencyBook, service: str | None, width: int, height: int) -> Text:
    """A title line, `height - 2` rows of columns and an axis of decades. The columns
    span the decades that hold values, each bucket as wide as the width allows."""
    text = Text(no_wrap=True, overflow="crop")
    entry = book.get(service) if service else None
    summary = book.summary(service) if service else None
    if entry is None or summary is None:
        text.append("no answered calls" + (f" of {service}" if service else ""), style="dim")
        return text
    kept = len(entry.recent())
    title = f"{fmt.printable(service or '')}: last {kept} of {summary.calls} calls"
    text.append(fmt.elide_middle(title, width) + "\n", style="bold")
    counts = entry.histogram()
    filled = [i for i, c in enumerate(counts) if c]
    first = filled[0] // BUCKETS_PER_DECADE * BUCKETS_PER_DECADE
    last = min(BUCKET_COUNT, (filled[-1] // BUCKETS_PER_DECADE + 1) * BUCKETS_PER_DECADE)
    span = counts[first:last]
    column_w = max(1, min(2, width // len(span)))
    rows = max(1, height - 2)
    top = max(span)
    for row in range(rows, 0, -1):  # top row first; each row is 8 eighths of a block
        line = Text()
        for count in span:
            eighths = round(count / top * rows * 8) if count else 0
            level = max(0, min(8, eighths - (row - 1) * 8))
            if count and row == 1 and level == 0:
                level = 1  # a non-empty bucket always shows
            line.append(BLOCKS[level] * column_w, style="green")
        text.append_text(line)
        text.append("\n")
    axis = ""
    for decade in range(first // BUCKETS_PER_DECADE, last // BUCKETS_PER_DECADE):
        label = decade_label(decade)
        cell = BUCKETS_PER_DECADE * column_w
        axis += (label if len(label) < cell else "|").ljust(cell)
    text.append(axis[:width], style="dim")
    return text


class LatencyHistogram(Widget):
    DEFAULT_CSS = "LatencyHistogram { height: 8; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._book: LatencyBook | None = None
        self.service: str | None = None
        self._shown: tuple[int, str | None, int, int] | None = None

    def show(self, book: LatencyBook, service: str | None) -> None:
        """Repaint if the service, its latencies or the size changed."""
        key = (book.version, service, self.size.width, self.size.height)
        self._book, self.service = book, service
        if key != self._shown:
            self._shown = key
            self.refresh()

    def render(self) -> Text:
        if self._book is None:
            return Text("")
        return render_histogram(self._book, self.service, self.size.width, self.size.height)
