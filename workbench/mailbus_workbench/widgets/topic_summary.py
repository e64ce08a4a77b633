"""Stats of the selected topic with a sparkline of its rate."""

from __future__ import annotations

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Sparkline, Static

from mailbus_workbench.model.topics import TopicStats
from mailbus_workbench.widgets import format as fmt


class TopicSummary(Horizontal):
    DEFAULT_CSS = """
    TopicSummary { height: 3; border-bottom: solid $panel; }
    TopicSummary #summary-text { width: 1fr; height: 2; }
    TopicSummary Sparkline { width: 30; height: 2; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._text = "No topic selected."

    def compose(self) -> ComposeResult:
        yield Static(self._text, id="summary-text")
        yield Sparkline([], id="summary-sparkline")

    def show(
        self,
        stats: TopicStats | None,
        now: float,
        *,
        paused: bool,
        cap: int,
        new: int,
        new_total: int,
        dropped: int = 0,
    ) -> None:
        """`new`: messages of the shown topic that came while paused (kept, listed on
        resume); `new_total`: of every topic (said apart so the count matches the topic
        on screen); `dropped`: the shown topic's that the history cap already dropped."""
        state = ""
        if paused:
            state = f"[b reverse] PAUSED [/] {new} new, listed on resume"
            state += f" ({new_total} on all topics)" if new_total != new else ""
            state += f", {dropped} dropped by the history cap" if dropped else ""
            state += "  "
        if stats is None:
            self._update(f"{state}No topic selected.  history cap {cap}", [])
            return
        self._update(
            f"{state}[b]{escape(stats.name)}[/b]  {stats.count} msgs  {fmt.rate(stats.rate)}  "
            f"{fmt.size(stats.bytes_rate)}/s\n"
            f"last seen {fmt.age(now - stats.last_seen)}  total {fmt.size(stats.bytes)}  "
            f"history cap {cap}",
            list(stats.rate_history) or [0.0],
        )

    def _update(self, text: str, rates: list[float]) -> None:
        # Repaint only what changed, without a layout pass (the summary has a fixed
        # size): under a flood this runs ten times a second.
        if text != self._text:
            self._text = text
            self.query_one("#summary-text", Static).update(text, layout=False)
        spark = self.query_one("#summary-sparkline", Sparkline)
        if rates != spark.data:
            spark.data = rates
