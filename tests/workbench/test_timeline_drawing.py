"""The timeline keeps each row's drawn density between frames (a seek moves only the
cursor) and draws it again when the timeline or its width changes."""

from __future__ import annotations

from mailbus_workbench.model.timeline import BINS, Timeline, TimelineRow
from mailbus_workbench.widgets.timeline import LABEL_WIDTH, LEVELS, TimelineBar
from textual.app import App, ComposeResult


class BarApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TimelineBar()


def one_row(bins: list[int]) -> Timeline:
    return Timeline(10.0, (TimelineRow("topic", sum(bins), tuple(bins)),))


def track(bar: TimelineBar) -> str:
    return bar.render().plain.split("\n")[0][LABEL_WIDTH:]


async def test_the_density_is_drawn_again_for_a_new_timeline_and_a_new_width() -> None:
    app = BarApp()
    async with app.run_test(size=(80, 10)) as pilot:
        bar = app.query_one(TimelineBar)
        early = [0] * BINS
        early[0] = 5  # all at the start
        bar.show(one_row(early))
        bar.move_cursor(10.0)  # the cursor at the end, away from the busy column
        await pilot.pause()
        drawn = track(bar)
        assert len(drawn) == bar.track_columns == 80 - LABEL_WIDTH - 2
        assert drawn[0] == LEVELS[-1] and drawn[-1] == "│"  # busy start, cursor at the end

        bar.move_cursor(5.0)  # a seek: the same density, the cursor moved
        await pilot.pause()
        moved = track(bar)
        assert moved[0] == LEVELS[-1] and moved[-1] == LEVELS[0]
        assert moved.index("│") == round(0.5 * (len(moved) - 1))

        late = [0] * BINS
        late[-1] = 5  # another session: all at the end
        bar.show(late_timeline := one_row(late))
        await pilot.pause()
        assert bar.timeline is late_timeline
        redrawn = track(bar)
        assert redrawn[0] == "│" and redrawn[-1] == LEVELS[-1]  # its own density

        await pilot.resize_terminal(60, 10)
        await pilot.pause()
        narrow = track(bar)
        assert len(narrow) == bar.track_columns == 60 - LABEL_WIDTH - 2
        assert narrow[-1] == LEVELS[-1]
