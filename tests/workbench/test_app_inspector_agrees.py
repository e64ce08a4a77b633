"""The inspector shows the message of the highlighted row, always, while messages flow
(it once showed #43 with #45 highlighted: the list moved with new rows at once, the
inspector only when the list's message reached it, and a frame could fall between)."""

from __future__ import annotations

import json

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.pilot import Pilot
from wb_helpers import until
from workbench_fixtures.events import T0, fixed_app, message_event

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)
TOPIC = "robot/pose"


def disagreement(app: WorkbenchApp) -> str | None:
    """What the highlighted row and the inspector show, if they differ."""
    messages = app.query_one(MessageList)
    inspector = app.query_one(Inspector)
    if not messages.row_count:
        return None
    highlighted = messages.get_row_at(messages.cursor_row)[0]  # the "#" drawn
    inspected = inspector.record.number if inspector.record is not None else None
    if highlighted != str(inspected):
        return f"row #{highlighted} highlighted, the inspector shows #{inspected}"
    return None


async def flow(app: WorkbenchApp, pilot: Pilot[object], count: int, seen: list[str]) -> None:
    """`count` messages arrive one by one, each followed by a refresh of the screen;
    after each refresh the two panes are compared before anything else runs."""
    model = app.model
    for _ in range(count):
        flow.n += 1  # type: ignore[attr-defined]
        n = flow.n  # type: ignore[attr-defined]
        model.feed_events([message_event(TOPIC, json.dumps({"n": n}), T0 + 20 + n / 100, n)])
        model.pump()
        app.refresh_now()
        problem = disagreement(app)
        if problem is not None:
            seen.append(problem)
        await pilot.pause()


flow.n = 10_000  # type: ignore[attr-defined]


async def test_the_inspector_agrees_with_the_highlighted_row_under_flowing_messages() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = app.query_one(TopicsView)
        view.query_one("#topic-tree").focus()
        await pilot.pause()

        app.query_one(TopicTree).select_topic(TOPIC)
        await until(pilot, lambda: view.topic == TOPIC, "the topic shown")
        messages = app.query_one(MessageList)
        messages.focus()
        seen: list[str] = []
        await flow(app, pilot, 5, seen)  # following the newest
        await pilot.press("up", "up")  # a message a little back
        await flow(app, pilot, 5, seen)
        await pilot.press("end")  # following again
        await flow(app, pilot, 5, seen)
        await pilot.click(MessageList, offset=(3, 3))  # a click on a row
        await flow(app, pilot, 5, seen)
        await until(pilot, lambda: disagreement(app) is None, "the panes to settle")
        assert seen == []
