"""The Plot view as a user meets its edges: a series that names nothing is refused with a
message (`rate()`, a field no message has), and plots never get too flat to read: seven
scales at 120x36 made seven one-row plots, and at 80x24 plotext drew its y labels upside
down ("0.00" above "1.00") around no plot area."""

from __future__ import annotations

import json

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.views.plot import PlotView
from textual.pilot import Pilot
from textual.widgets import Input, Static
from wb_helpers import until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import fixed_app, message_event

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

FOUR_SCALES = (
    "robot/pose.x",
    "sensors/temperature.celsius",
    "rate(robot/pose)",
    "latency(demo/add)",
)
SEVEN_SCALES = (*FOUR_SCALES, "lab/a.v", "lab/b.v", "lab/c.v")


def plots_drawn(app: WorkbenchApp) -> list[list[float]]:
    """Each plot's y tick labels, top to bottom, read from the drawn chart (plots side by
    side are read column by column)."""
    lines = str(app.query_one("#plot-chart").render()).splitlines()
    found: list[list[float]] = []
    tops = sorted(
        {line.find("┌", at) for line in lines for at in range(len(line)) if line.find("┌", at) >= 0}
    )
    for left in tops:
        current: list[float] | None = None
        for line in lines:
            corner = line[left : left + 1]
            if corner == "┌":
                current = []
                found.append(current)
            elif current is not None and corner == "└":
                current = None
            elif current is not None and corner == "┤":
                label = line[:left].split("┤")[-1].split("│")[-1].strip()
                current.append(float(label))
    return found


async def open_plot(app: WorkbenchApp, pilot: Pilot[object]) -> tuple[PlotView, Input]:
    await pilot.pause()
    await pilot.press("P")
    box = app.query_one("#plot-add", Input)
    await until(pilot, lambda: app.focused is box, "the series box")
    return app.query_one(PlotView), box


async def type_series(pilot: Pilot[object], *names: str) -> None:
    for name in names:
        await pilot.press(*name, "enter")


def feed_lab_topics(app: WorkbenchApp) -> None:
    n = 9000
    for t in range(40):
        for k, scale in (("a", 1), ("b", 20), ("c", 300)):
            n += 1
            body = json.dumps({"v": t * scale})
            app.model.feed_events([message_event(f"lab/{k}", body, T0 + t * 0.25, n)])
    app.model.pump()


async def test_rate_without_a_topic_and_a_field_no_message_has_are_refused() -> None:
    app = fixed_app()
    async with app.run_test(size=(120, 36)) as pilot:
        view, box = await open_plot(app, pilot)
        empty = app.query_one("#plot-empty", Static)
        assert empty.display and "Nothing plotted yet" in str(empty.render())
        await type_series(pilot, "rate()")
        error = str(app.query_one("#plot-error", Static).render())
        assert "rate() needs a topic: rate(robot/pose)" in error
        assert box.value == "rate()" and len(app.model.plots) == 0
        box.value = ""
        await type_series(pilot, "robot/pose.nofield")
        error = str(app.query_one("#plot-error", Static).render())
        assert "no message kept on robot/pose has a number at .nofield" in error, error
        assert "try robot/pose.x, robot/pose.y, robot/pose.theta" in error, error
        assert len(app.model.plots) == 0
        box.value = ""
        await type_series(pilot, "robot/pose.x")  # the fix the message offers
        assert [s.name for s in app.model.plots] == ["robot/pose.x"] and view.error == ""


async def test_seven_scales_at_120x36_are_plots_tall_enough_to_read() -> None:
    app = fixed_app()
    async with app.run_test(size=(120, 36)) as pilot:
        feed_lab_topics(app)
        view, _ = await open_plot(app, pilot)
        await type_series(pilot, *SEVEN_SCALES)
        assert len(app.model.plots) == 7, view.error
        view.redraw()
        await pilot.pause()
        drawn = plots_drawn(app)
        assert len(drawn) == 7
        for labels in drawn:
            assert len(labels) >= 3, drawn  # rows of data, not a line
            assert labels == sorted(labels, reverse=True), drawn
        assert "left out" not in str(app.query_one("#plot-status", Static).render())


async def test_at_80x24_every_plot_drawn_has_an_area_and_labels_the_right_way_up() -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        view, _ = await open_plot(app, pilot)
        await type_series(pilot, *FOUR_SCALES)
        assert len(app.model.plots) == 4, view.error
        view.redraw()
        await pilot.pause()
        drawn = plots_drawn(app)
        assert drawn, "no plot drawn"
        for labels in drawn:
            assert len(labels) >= 3, drawn
            assert labels == sorted(labels, reverse=True), drawn
        status = str(app.query_one("#plot-status", Static).render())
        assert f"{4 - len(drawn)} of 4 plots left out: too small" in status, status
        # Smaller still: no plot fits, and the view says so instead of drawing.
        await pilot.resize_terminal(80, 12)
        await until(pilot, lambda: not app.query_one("#plot-chart").display, "the chart hidden")
        assert "Too small to plot" in str(app.query_one("#plot-empty", Static).render())
