"""The first ten minutes of a new user on the demo, with keys and clicks only: start,
pick a topic, plot a field, publish, call a service, find the message published, export
it and record a session (offered for replay). Each step asserts on what the screen shows."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.find_screen import FindScreen
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.sessions import SessionsView, sessions_available
from mailbus_workbench.widgets.message_list import MessageList
from textual.widgets import DataTable, Input, Static
from waiting import until

SIZE = (120, 40)


def response(app: WorkbenchApp) -> str:
    """The Call view's response pane as drawn (JSON is shown highlighted)."""
    content = app.query_one("#call-response", Static).content
    return str(getattr(content, "code", content))


def shown(app: WorkbenchApp, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


async def test_a_new_user_walks_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MAILBUS_WORKBENCH_DIR", str(tmp_path / "config"))
    monkeypatch.chdir(tmp_path)
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=EngineHost(seed=3), settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        # Start: the demo's topics come in; pick one through the filter.
        await until(pilot, lambda: "robot/pose" in app.model.topics.stats, "the demo's traffic")
        await pilot.press("1", "slash", *"robot/pose", "enter")
        await until(pilot, lambda: "robot/pose" in shown(app, "#summary-text"), "the topic")

        # Plot a field of it.
        await pilot.press("P", *"robot/pose.x", "enter")
        await until(
            pilot,
            lambda: (
                "points" in str(app.query_one("#plot-series").render_line(1).text)
                and len(app.model.plots.series["robot/pose.x"].points) > 0
            ),
            "robot/pose.x plotted",
        )

        # Publish a message of their own.
        await pilot.press("escape", "4", *"lab/hello", "tab", *'{"hello": 1}', "f5")
        await until(
            pilot, lambda: "published on lab/hello" in shown(app, "#publish-status"), "publish"
        )

        # Call the demo's service.
        await pilot.press("escape", "5")
        await pilot.click("#call-service")
        await pilot.press(*"demo/add", "f5")  # the body offered: [1, 2, 3]
        await until(pilot, lambda: '"sum": 6' in response(app), "the answer")

        # Find the message published, and land on it.
        await pilot.press("ctrl+f", *"hello>0", "enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "Find")
        table = app.screen.query_one("#find-results", DataTable)
        await until(pilot, lambda: table.row_count == 1, "the one result")
        await pilot.press("enter")
        await until(pilot, lambda: app.active_view_id == "topics", "back in Topics")
        messages = app.query_one(MessageList)
        assert messages.get_row_at(messages.cursor_row)[3] == '{"hello": 1}'

        # Export it as an email.
        await pilot.press("e")
        await until(pilot, lambda: list(tmp_path.glob("lab_hello-*.eml")), "the .eml")

        if not sessions_available():
            return
        # Record a few seconds of the demo; the session is offered for replay.
        await pilot.press("9")
        view = app.query_one(SessionsView)
        await pilot.click("#rec-dir")
        await pilot.press("end", *["backspace"] * len(app.query_one("#rec-dir", Input).value))
        await pilot.press(*os.fspath(tmp_path / "rec"))
        await pilot.press("f5")
        await until(pilot, lambda: "recording to" in shown(app, "#rec-status"), "recording")
        await until(
            pilot,
            lambda: (
                "written" in shown(app, "#rec-status")
                and " 0 written" not in shown(app, "#rec-status")
            ),
            "events written",
        )
        await pilot.press("f5")
        await until(pilot, lambda: "Recorded " in shown(app, "#rec-status"), "the recording")
        await until(pilot, lambda: view.last_manifest is not None, "the session written")
        assert str(tmp_path / "rec") in app.query_one("#play-path", Input).value
