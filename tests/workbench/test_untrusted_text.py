"""Text from the wire is shown literally: Rich markup in a topic name or a body must
neither style the screen nor crash it (a string cell "[/x]" raised MarkupError)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.caller import CallerView
from mailbus_workbench.views.publish import PublishView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.widgets import Input, Static, TextArea
from wb_helpers import Posted, until

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)
TOPIC = "lab/[bold]x"  # parsed as markup, the leaf would read "x"
BODY = "[/oops] closing tag and [bold]not bold[/bold] [link=http://x]y[/link]"


def live_app(engine: EngineHost, tmp_path: Path) -> WorkbenchApp:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    return WorkbenchApp(engine=engine, settings=settings)


async def test_markup_in_topic_and_body_is_shown_literally(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        engine.publish(TOPIC, BODY)
        await until(pilot, lambda: TOPIC in app.model.topics.stats, "the topic")
        tree = app.query_one(TopicTree)
        assert tree.select_topic(TOPIC)
        messages = app.query_one(MessageList)
        await until(pilot, lambda: messages.row_count == 1, "the message row")
        await pilot.pause()  # a render: this is where the markup used to be parsed
        cell = messages.get_row_at(0)[3]
        assert str(cell) == BODY
        labels = [str(node.label) for node in tree.root.children[0].children]
        assert any(label.startswith("[bold]x  ") for label in labels)
        assert BODY in app.query_one("#inspector-body-text", Static).render().plain  # type: ignore[union-attr]


async def test_publish_status_shows_the_topic_literally(engine: EngineHost, tmp_path: Path) -> None:
    app = live_app(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("4")
        app.query_one("#publish-topic", Input).value = TOPIC
        app.query_one("#publish-body", TextArea).text = BODY
        # The body starts like JSON ("[") but is not: it is sent on the second press.
        await pilot.press("f5", "f5")
        await until(pilot, lambda: posted.of(PublishView.Published), "the publish")
        await pilot.pause()
        status = app.query_one("#publish-status", Static).render()
        assert f"published on {TOPIC}" in status.plain  # type: ignore[union-attr]


async def test_a_body_nested_too_deep_for_json_is_shown_raw(
    engine: EngineHost, tmp_path: Path
) -> None:
    deep = "[" * 5000 + "]" * 5000  # json.loads raises RecursionError: it ended the app
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        engine.publish("lab/deep", deep)
        await until(pilot, lambda: "lab/deep" in app.model.topics.stats, "the topic")
        assert app.query_one(TopicTree).select_topic("lab/deep")
        inspector = app.query_one(Inspector)
        await until(pilot, lambda: inspector.record is not None, "the inspector")
        assert inspector.texts["body"] == deep
        await pilot.pause()
        assert app.is_running


async def test_a_response_with_escape_sequences_cannot_drive_the_terminal(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("5")
        view = app.query_one(CallerView)
        # The echo service answers with the body reversed.
        assert view.call("echo", "\x07tuo\x1b]0;owned\x1b", 5.0)
        await until(pilot, lambda: len(view.history) == 1, "the response")
        assert "\x1b" in view.history[0].response
        shown = app.query_one("#call-response", Static).render().plain  # type: ignore[union-attr]
        assert "\x1b" not in shown and "\x07" not in shown
        assert "\u241bdenwo;0]\u241bout\u2407" in shown  # drawn as pictures
