"""The Plot view (Pilot): series added by typing with completion, bad ones refused, the
window paused, zoomed and read at a cursor, a field plotted from the inspector, and
`robot/pose.x` plotted while sample_sessions/demo is replayed into a real engine."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.plot import PlotView
from mailbus_workbench.views.sessions import SessionsView
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.field_prompt import FieldPrompt
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.widgets import Input, OptionList, Tree
from wb_helpers import Posted, until
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import fixed_app, fixed_model, message_event

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (130, 38)
END = T0 + 12.0  # the fixed model's clock


def pose_x(model: object, at: float) -> float:
    """robot/pose.x in force at `at`, read from the kept messages (not the series)."""
    records = model.topics.history("robot/pose")  # type: ignore[attr-defined]
    return float(json.loads([r for r in records if r.time_s <= at][-1].body)["x"])


async def test_series_are_added_by_typing_with_completion_and_removed() -> None:
    app = fixed_app()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("P")
        await until(pilot, lambda: app.active_view_id == "plot", "the Plot view")
        view = app.query_one(PlotView)
        box = app.query_one("#plot-add", Input)
        assert app.focused is box  # nothing plotted: what is typed goes to the box
        await pilot.press("escape", "1")  # leaving the box gives the view keys back
        await until(pilot, lambda: app.active_view_id == "topics", "the Topics view")
        await pilot.press("P")
        await until(pilot, lambda: app.focused is box, "the box again")
        await pilot.press(*"robot/pose.th")
        await until(
            pilot, lambda: textual_internals.suggestion(box) == "robot/pose.theta", "the completion"
        )
        await pilot.press("right", "enter")
        await until(pilot, lambda: posted.of(PlotView.SeriesAdded), "the series")
        assert [m.name for m in posted.of(PlotView.SeriesAdded)] == ["robot/pose.theta"]  # type: ignore[attr-defined]
        assert box.value == "" and app.focused is box
        series = app.model.plots.series["robot/pose.theta"]
        assert len(series.points) == len(app.model.topics.history("robot/pose"))

        # Bad input: said under the box, nothing added, the text kept to fix.
        for bad, says in (("robot/pose.x[", "cannot read"), ("robot/pose.theta", "already")):
            await pilot.press("a")
            box.value = bad
            await pilot.press("enter")
            assert says in view.error
            assert box.value == bad and len(app.model.plots) == 1
        assert len(posted.of(PlotView.SeriesAdded)) == 1

        box.value = "rate(robot/pose)"
        await pilot.press("enter")
        assert view.error == ""
        await pilot.press("escape", "x")  # the newest is highlighted
        assert [s.name for s in app.model.plots] == ["robot/pose.theta"]
        assert [m.name for m in posted.of(PlotView.SeriesRemoved)] == ["rate(robot/pose)"]  # type: ignore[attr-defined]
        assert app.query_one("#plot-series", OptionList).option_count == 1


async def test_pause_zoom_and_cursor_readout() -> None:
    clock = FrozenClock(END)
    model = fixed_model(clock, announcements=False)
    app = fixed_app(model=model)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("P")
        view = app.query_one(PlotView)
        assert view.add_series("robot/pose.x") and view.add_series("sensors/temperature.celsius")
        await pilot.press("escape")  # out of the box, which keeps the keys after a series
        latest = dict(view.readout)
        assert latest["robot/pose.x"] == pose_x(model, END)

        await pilot.press("plus")  # 30 s -> 10 s
        assert view.window_s == 10.0
        await pilot.press("minus", "minus")
        assert view.window_s == 60.0
        await pilot.press("plus", "plus")
        assert [m.window_s for m in posted.of(PlotView.WindowChanged)] == [10, 30, 60, 30, 10]  # type: ignore[attr-defined]

        # Five steps back at a 10 s window: the cursor 1 s before the end.
        await pilot.press(*["left"] * 5)
        assert view.cursor_back_s == 1.0
        assert posted.of(PlotView.CursorMoved)[-1].back_s == 1.0  # type: ignore[attr-defined]
        at = dict(view.readout)
        assert at["robot/pose.x"] == pose_x(model, END - 1.0) != latest["robot/pose.x"]
        assert "cursor -1 s (08:00:11.000)" in str(app.query_one("#plot-readout").render())
        await pilot.press(*["right"] * 5)
        assert view.cursor_back_s is None  # back on "latest"

        # Paused: the window stands still while the series keep filling.
        await pilot.press("p")
        assert posted.of(PlotView.PauseChanged)[-1].paused  # type: ignore[attr-defined]
        before = len(model.plots.series["robot/pose.x"].points)
        clock.advance(5)
        model.feed_events([message_event("robot/pose", '{"x": 42}', clock.now, 10_000)])
        app.refresh_now()
        await pilot.pause()
        assert view.end_s == END and dict(view.readout)["robot/pose.x"] != 42.0
        assert len(model.plots.series["robot/pose.x"].points) == before + 1
        await pilot.press("p")
        assert not posted.of(PlotView.PauseChanged)[-1].paused  # type: ignore[attr-defined]
        assert view.end_s == END + 5 and dict(view.readout)["robot/pose.x"] == 42.0


async def test_the_inspector_plots_a_field_by_prompt_or_under_the_tree_cursor() -> None:
    model = fixed_model(announcements=False)
    big = {"name": "arm", "joints": [{"angle": i / 10, "label": f"j{i}"} for i in range(30)]}
    model.feed_events([message_event("robot/arm", json.dumps(big), END, 9_999)])
    model.pump()
    app = fixed_app(model=model)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        topics = app.query_one(TopicsView)
        inspector = app.query_one(Inspector)

        # A small body: a prompt lists its numeric fields, fuzzy narrowed as one types.
        app.query_one(TopicTree).select_topic("robot/pose")
        await pilot.pause()
        messages = app.query_one(MessageList)
        topics.inspect(model.topics.history("robot/pose")[-1])
        messages.focus()
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, FieldPrompt), "the prompt")
        assert app.screen.fields == ["robot/pose.x", "robot/pose.y", "robot/pose.theta"]  # type: ignore[attr-defined]
        await pilot.press(*"thta", "enter")
        await until(pilot, lambda: app.active_view_id == "plot", "the Plot view")
        assert [m.series for m in posted.of(Inspector.PlotRequested)] == ["robot/pose.theta"]  # type: ignore[attr-defined]
        assert list(model.plots.series) == ["robot/pose.theta"]

        # A large body folds into a tree: the number under its cursor is plotted.
        await pilot.press("1")
        app.query_one(TopicTree).select_topic("robot/arm")
        await pilot.pause()
        topics.inspect(model.topics.history("robot/arm")[-1])
        await pilot.pause()
        assert inspector.folded
        tree = app.query_one("#inspector-body-tree", Tree)
        tree.focus()
        joints = tree.root.children[1]
        joints.expand()
        joints.children[2].expand()
        await pilot.pause()
        tree.move_cursor(joints.children[2].children[0])  # joints[2].angle
        await pilot.press("g")
        await until(pilot, lambda: "robot/arm.joints[2].angle" in model.plots.series, "the field")
        assert app.active_view_id == "plot"
        assert list(model.plots.series["robot/arm.joints[2].angle"].points) == [(END, 0.2)]

        # Not a number under the cursor (a text): the prompt instead.
        await pilot.press("1")
        tree.focus()
        tree.move_cursor(joints.children[2].children[1])
        await pilot.press("g")
        await until(pilot, lambda: isinstance(app.screen, FieldPrompt), "the prompt")
        await pilot.press("escape")
        assert len(model.plots) == 2


async def test_robot_pose_x_is_plotted_during_a_replay(engine: EngineHost, tmp_path: Path) -> None:
    session = Path(__file__).parents[2] / "sample_sessions" / "demo"
    frame = pl.read_parquet(session / "part-00001.parquet").filter(
        (pl.col("kind") == "message.published") & (pl.col("name") == "robot/pose")
    )
    recorded = sorted(json.loads(body)["x"] for body in frame["body"].to_list())
    app = WorkbenchApp(
        engine=engine,
        session=str(session),
        settings=Settings(keymap_file=tmp_path / "k", templates_file=tmp_path / "t"),
    )
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await until(pilot, lambda: posted.of(SessionsView.SessionOpened), "the open", 30)
        await pilot.press("P")
        view = app.query_one(PlotView)
        # The workbench replays under replay/ by default: apart from live robot/pose.
        assert view.add_series("replay/robot/pose.x")
        app.query_one("#play-rate", Input).value = "20"
        await pilot.press("escape", "9", "f7")
        player = app.query_one(SessionsView)
        await until(
            pilot,
            lambda: player.player is not None and player.player.state == "finished",
            "the replay to finish",
            timeout=60,
        )
        series = app.model.plots.series["replay/robot/pose.x"]
        await until(pilot, lambda: len(series.points) == len(recorded), "every pose plotted", 30)
        assert sorted(v for _, v in series.points) == recorded
        await pilot.press("P")
        await pilot.pause()
        assert dict(view.readout)["replay/robot/pose.x"] == series.points[-1][1]
        assert app.query_one("#plot-chart").display


def chart_text(app: WorkbenchApp) -> str:
    return str(app.query_one("#plot-chart").render())


async def test_series_are_typed_one_after_another_each_scale_on_its_own_axis(
    tmp_path: Path,
) -> None:
    templates = tmp_path / "templates.toml"
    app = fixed_app(templates_file=templates)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("P")
        view = app.query_one(PlotView)
        box = app.query_one("#plot-add", Input)
        await until(pilot, lambda: app.focused is box, "the box")
        await pilot.press(*"robot/pose.x", "enter", *"sensors/temperature.celsius", "enter")
        await pilot.pause()
        assert [s.name for s in app.model.plots] == ["robot/pose.x", "sensors/temperature.celsius"]
        assert not view.paused and app.focused is box
        # Two scales: a plot each, each with its own y axis named.
        view.redraw()
        await pilot.pause()
        assert "stacked (s)" in str(app.query_one("#plot-status").render())
        drawn = chart_text(app)
        assert "robot/pose" in drawn and "sensors/temperature" in drawn

        # A function that is not one: refused with the reason, nothing added.
        await pilot.press(*"te(robot/pose)", "enter")
        await pilot.pause()
        shown = str(app.query_one("#plot-error").render())
        assert "te(…) is not a series function" in shown and len(app.model.plots) == 2
        # A topic never seen: added with a hint that says so.
        box.value = ""
        await pilot.press(*"nosuch/topic.x", "enter")
        await pilot.pause()
        assert "no message seen on nosuch/topic yet" in str(app.query_one("#plot-error").render())

        # The axes choice, switched by key, is remembered for the next start.
        await pilot.press("escape", "s")
        await pilot.pause()
        assert "axes (s)" in str(app.query_one("#plot-status").render())
    again = fixed_app(templates_file=templates)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("P")
        await pilot.pause()
        assert again.query_one(PlotView).axes_mode.value == "axes"
        assert "axes (s)" in str(again.query_one("#plot-status").render())
