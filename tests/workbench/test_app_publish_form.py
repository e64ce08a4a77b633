"""The Publish form: F5/F6 from the body, text typed on the template
list goes to the body (never to the command palette), a header editor checked with the
engine's rules, and a body that looks like JSON but is not is flagged and needs a
second key press."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.errors import InvalidNameError
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.publish_form import json_problem, parse_headers
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.publish import PublishView
from textual.command import CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input, Select, Static, TextArea
from wb_helpers import Posted, until

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


def live_app(engine: EngineHost, tmp_path: Path) -> WorkbenchApp:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    return WorkbenchApp(engine=engine, settings=settings)


async def open_publish(app: WorkbenchApp, pilot: Pilot[object], topic: str) -> PublishView:
    await pilot.pause()
    await pilot.press("4")
    app.query_one("#publish-topic", Input).value = topic
    return app.query_one(PublishView)


def status(app: WorkbenchApp) -> str:
    return str(app.query_one("#publish-status", Static).render())


async def test_f5_and_f6_work_while_the_body_has_the_focus(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        view = await open_publish(app, pilot, "lab/keys")
        body = app.query_one("#publish-body", TextArea)
        body.focus()
        await pilot.press(*"42")
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(PublishView.Published), "the publish")
        await pilot.press("f6")
        assert view.publishing_at_rate
        await until(pilot, lambda: view.sent_at_rate >= 2, "messages at the rate")
        await pilot.press("f6")
        assert not view.publishing_at_rate
        assert app.focused is body and body.text == "42"


async def test_text_typed_on_the_template_list_goes_to_the_body(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await open_publish(app, pilot, "lab/t")
        app.query_one("#publish-template", Select).focus()
        await pilot.pause()
        await pilot.press(*'{"v": 1}')
        await pilot.pause()
        assert not isinstance(app.screen, CommandPalette)
        body = app.query_one("#publish-body", TextArea)
        assert body.text == '{"v": 1}' and app.focused is body


async def test_headers_are_sent_and_bad_ones_refused_before_sending(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await open_publish(app, pilot, "lab/h")
        headers = app.query_one("#publish-headers", TextArea)
        headers.text = "Lab-Run: 7\n\nLab-Note: two words"
        await pilot.press("f5")
        await until(pilot, lambda: "lab/h" in app.model.topics.stats, "the message")
        event = app.model.topics.history("lab/h")[-1].event
        assert event.headers["Lab-Run"] == "7" and event.headers["Lab-Note"] == "two words"
        for bad, why in (
            ("Lab Run: 1", "not a valid RFC 5322 field name"),
            ("Subject: x", "set by Mailbus"),
            ("Source-Timestamp: 1", "set by Mailbus"),
            ("just text", "expected 'Name: value'"),
        ):
            headers.text = f"Ok: 1\n{bad}"
            await pilot.press("f5")
            assert "header line 2" in status(app) and why in status(app), bad
        assert len(posted.of(PublishView.Published)) == 1


async def test_a_body_that_is_not_json_is_flagged_and_needs_a_second_press(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await open_publish(app, pilot, "lab/j")
        body = app.query_one("#publish-body", TextArea)
        body.text = '{"v": 1,}'
        await pilot.pause()
        check = app.query_one("#publish-check", Static)
        assert "not JSON: line 1 column 9" in str(check.render())
        await pilot.press("f5")
        assert "not valid JSON" in status(app) and "again" in status(app)
        assert not posted.of(PublishView.Published)
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(PublishView.Published), "the confirmed publish")
        await until(pilot, lambda: "lab/j" in app.model.topics.stats, "the message")
        assert [r.body for r in app.model.topics.history("lab/j")] == ['{"v": 1,}']
        body.text = '{"v": 2}'
        await pilot.pause()
        assert str(check.render()) == "valid JSON"


def test_header_lines_follow_the_engine_rules() -> None:
    assert parse_headers("A: 1\n  \nB-c:  x y ") == {"A": "1", "B-c": "x y"}
    with pytest.raises(InvalidNameError, match="line 2: header 'a' is given twice"):
        parse_headers("A: 1\na: 2")
    with pytest.raises(InvalidNameError, match="control character"):
        parse_headers("A: 1\x00")


def test_plain_text_bodies_are_not_json_checked() -> None:
    assert json_problem("hello") is None
    assert json_problem("[1, 2]") is None
    assert json_problem("[1, 2") is not None


async def test_tab_follows_the_form_and_digits_typed_stay_in_it(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("4")
        await pilot.pause()
        assert app.focused is app.query_one("#publish-topic", Input)
        await pilot.press(*"lab/x", "tab", *"ab 1 cd")
        await pilot.pause()
        assert app.active_view_id == "publish"
        body = app.query_one("#publish-body", TextArea)
        assert app.focused is body and body.text == "ab 1 cd"
        await pilot.press("tab", "tab")
        assert app.focused is app.query_one("#publish-once")
        app.query_one("#publish-template", Select).focus()
        await pilot.press(*"23")
        await pilot.pause()
        assert app.active_view_id == "publish" and body.text.endswith("23")
