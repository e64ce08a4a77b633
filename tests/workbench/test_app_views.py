"""Pilot tests of the Services, Wait sets, Publish and Call views and the app's actions."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.launch import run_app
from mailbus_workbench.model.services import TraceStatus
from mailbus_workbench.model.settings import Settings, Template, load_templates, save_templates
from mailbus_workbench.screens import HelpScreen
from mailbus_workbench.views.caller import CallerView
from mailbus_workbench.views.participants import ParticipantsView
from mailbus_workbench.views.publish import PublishView
from mailbus_workbench.views.waitsets import WaitSetsView
from mailbus_workbench.widgets.email_pair import EmailPair
from mailbus_workbench.widgets.trace_list import TraceList
from mailbus_workbench.widgets.waterfall import Waterfall
from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input, Select, Static, TabbedContent, TextArea
from wb_helpers import Posted, until
from workbench_fixtures.events import fixed_app, fixed_model

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


def live_app(engine: EngineHost, tmp_path: Path) -> WorkbenchApp:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    return WorkbenchApp(engine=engine, settings=settings)


async def test_services_pair_requests_and_show_both_emails() -> None:
    app = fixed_app()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("2")
        assert app.active_view_id == "services"
        traces = app.query_one(TraceList)
        assert traces.row_count == len(app.model.services)
        assert app.focused is traces
        counts = str(app.query_one("#services-counts", Static).render())
        for status in TraceStatus:
            assert status.value in counts
        traces.move_cursor(row=0)
        await pilot.pause()
        chosen = posted.of(TraceList.TraceChosen)[-1].trace  # type: ignore[attr-defined]
        assert chosen.status(app.model.clock(), 2.0) is TraceStatus.ANSWERED
        pair = app.query_one(EmailPair)
        assert pair.shown is chosen
        assert "In-Reply-To: " + chosen.request.message_id in pair.texts["response"]
        assert "Request-Sequence-Number: 1" in pair.texts["request"]
        # In-process calls carry no bytes: the pane says its source is rebuilt.
        for side in ("request", "response"):
            shown = str(app.query_one(f"#pair-{side}-text", Static).render())
            assert shown.startswith("Rebuilt from the message"), shown[:80]
        waterfall = str(app.query_one(Waterfall).render())
        assert "demo/add#" in waterfall
        await pilot.press("x")
        assert len(app.model.services) == 0 and traces.row_count == 0
        assert pair.shown is None


async def test_wait_sets_view_lists_entities_and_timeline() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("3")
        table = app.query_one("#waitset-table", DataTable)
        assert table.row_count == 4  # this process's two, then two announced by others
        assert [str(table.get_row_at(i)[1]) for i in range(2)] == ["controller", "demo/server"]
        assert {str(table.get_row_at(i)[0]) for i in range(2)} == {"this process"}
        view = app.query_one(WaitSetsView)
        assert "subscription robot/pose ready" in view.detail_text
        await pilot.press("down")
        await pilot.pause()
        assert "server demo/add -" in view.detail_text  # follows the cursor, no refresh
        app.refresh_now()
        assert table.get_row_at(1)[4].startswith("waiting")


async def test_publish_once_reaches_the_topic_and_bad_topics_are_refused(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("4")
        assert app.focused is app.query_one("#publish-topic", Input)
        await pilot.press(*"lab/one")
        app.query_one("#publish-body", TextArea).text = '{"v": 1}'
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(PublishView.Published), "the publish")
        await until(pilot, lambda: "lab/one" in app.model.topics.stats, "the topic to appear")
        history = app.model.topics.history("lab/one")
        assert [r.body for r in history] == ['{"v": 1}']
        app.query_one("#publish-topic", Input).value = "bad\ntopic"
        await pilot.press("f5")
        assert "control character" in posted.of(PublishView.Failed)[-1].error  # type: ignore[attr-defined]


async def test_topic_completion_from_seen_topics(engine: EngineHost, tmp_path: Path) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        engine.publish("sensors/humidity", "1")
        await until(pilot, lambda: "sensors/humidity" in app.model.topics.stats, "the topic")
        await pilot.press("4")
        await pilot.press(*"sens")
        topic = app.query_one("#publish-topic", Input)
        await until(
            pilot,
            lambda: textual_internals.suggestion(topic) == "sensors/humidity",
            "the suggestion",
        )
        await pilot.press("right")
        assert topic.value == "sensors/humidity"


async def test_refresh_tick_after_exit_is_harmless(engine: EngineHost, tmp_path: Path) -> None:
    # The live refresh timer can tick once more after exit has popped every screen
    # (seen in CI as an IndexError); that late tick must paint nothing and raise nothing.
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.active_view_id == "topics"
    assert app.screen_stack == []
    seen = app.model.events_seen
    app.refresh_now()
    assert app.model.events_seen == seen


async def test_publish_at_rate_starts_and_stops(engine: EngineHost, tmp_path: Path) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("4")
        view = app.query_one(PublishView)
        app.query_one("#publish-topic", Input).value = "lab/rate"
        app.query_one("#publish-rate", Input).value = "200"
        await pilot.press("f6")
        assert view.publishing_at_rate
        await until(pilot, lambda: view.sent_at_rate >= 20, "20 messages at rate")
        await pilot.press("f6")
        assert not view.publishing_at_rate
        sent = view.sent_at_rate
        await until(
            pilot,
            lambda: (
                app.model.topics.stats.get("lab/rate") is not None
                and app.model.topics.stats["lab/rate"].count >= sent
            ),
            "all to arrive",
        )
        app.query_one("#publish-rate", Input).value = "-5"
        await pilot.press("f6")
        assert not view.publishing_at_rate
        assert "rate must be" in str(app.query_one("#publish-status", Static).render())


async def test_templates_save_and_fill_the_form(engine: EngineHost, tmp_path: Path) -> None:
    save_templates(tmp_path / "templates.toml", [Template("warm", "sensors/t", '{"c": 30}')])
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("4")
        select = app.query_one("#publish-template", Select)
        select.value = "warm"
        await pilot.pause()
        assert app.query_one("#publish-topic", Input).value == "sensors/t"
        assert app.query_one("#publish-body", TextArea).text == '{"c": 30}'
        app.query_one("#publish-template-name", Input).value = "cold"
        app.query_one("#publish-body", TextArea).text = '{"c": -5}'
        await pilot.click("#publish-save")
        saved = load_templates(tmp_path / "templates.toml")
        assert [t.name for t in saved] == ["warm", "cold"]
        assert saved[1] == Template("cold", "sensors/t", '{"c": -5}')


async def test_call_shows_response_latency_history_and_resend(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("5")
        view = app.query_one(CallerView)
        await pilot.press(*"echo")
        app.query_one("#call-body", TextArea).text = "hello"
        await pilot.press("f5")
        await until(pilot, lambda: len(view.history) == 1, "the response")
        first = posted.of(CallerView.Finished)[-1].record  # type: ignore[attr-defined]
        assert first.ok and first.response == "olleh" and first.latency_s is not None
        assert "olleh" in str(app.query_one("#call-response", Static).render())
        app.query_one("#call-history", DataTable).focus()
        await pilot.press("r")
        await until(pilot, lambda: len(view.history) == 2, "the re-sent call")
        assert view.history[1].body == "hello" and view.history[1].ok
        app.query_one("#call-service", Input).value = "silent"
        app.query_one("#call-timeout", Input).value = "0.1"
        await pilot.press("f5")
        await until(pilot, lambda: len(view.history) == 3, "the time-out")
        assert not view.history[2].ok and "no response within 0.1 s" in view.history[2].response
        await until(pilot, lambda: len(app.model.services) >= 3, "the traces")
        app.query_one("#call-timeout", Input).value = "abc"
        assert not view.call("echo", "x", -1)
        assert not view.call("bad\nname", "x", 1)
        assert len(view.history) == 3


async def test_forms_without_engine_say_so() -> None:
    app = fixed_app(model=fixed_model(announcements=False))  # no broker anywhere
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("4")
        app.query_one("#publish-topic", Input).value = "a/b"
        await pilot.press("f5")
        assert posted.of(PublishView.Failed)[-1].error == "no engine"  # type: ignore[attr-defined]
        await pilot.press("escape", "5")
        assert app.active_view_id == "call"
        assert not app.query_one(CallerView).call("demo/add", "[1]", 1.0)
        assert isinstance(app.focused, Input)
        await pilot.press("7")  # typed into the field
        assert app.active_view_id == "call"
        await pilot.press("escape", "7")  # leave the field, then switch: no broker
        assert "No broker" in str(app.query_one("#broker-summary", Static).render())


async def test_palette_help_screenshot_and_theme(tmp_path: Path) -> None:
    app = fixed_app(screenshot_dir=tmp_path / "shots")
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("colon")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"Show Wait")
        await until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "a match")
        await pilot.press("enter")
        await until(pilot, lambda: app.active_view_id == "waitsets", "the wait sets view")
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        assert "## Wait sets" in app.screen.markdown and "topics.pause" in app.screen.markdown
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("f12")
        saved = posted.of(WorkbenchApp.ScreenshotSaved)
        assert saved and Path(saved[-1].path).read_text().startswith("<svg")  # type: ignore[attr-defined]
        app.theme = "nord"
        await pilot.pause()
        assert app.current_theme.name == "nord"
        assert app.query_one("#views", TabbedContent).active == "waitsets"


async def test_ctrl_p_opens_the_palette_also_from_a_text_field() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press("escape")
        await until(pilot, lambda: not isinstance(app.screen, CommandPalette), "palette closed")
        await pilot.press("4")
        await until(pilot, lambda: app.active_view_id == "publish", "the publish view")
        app.query_one(PublishView).query_one(Input).focus()
        await pilot.pause()
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")


def test_run_app_refuses_a_bad_options_file(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "bad.toml"
    path.write_text('transport = "inprocess"\n[workbench]\nhistory-cap = 0\n')
    assert run_app(str(path)) == 2
    assert "history-cap" in capsys.readouterr().err
    assert run_app(str(tmp_path / "missing.toml")) == 2


async def test_call_tab_goes_from_the_service_to_the_body_never_to_the_timeout() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("5")
        await until(pilot, lambda: app.active_view_id == "call", "the call view")
        view = app.query_one(CallerView)
        view.query_one("#call-service", Input).focus()
        await pilot.pause()
        await pilot.press("tab")
        assert app.focused is view.query_one("#call-body", TextArea)
        await pilot.press(*"[7]")  # typed into the body, the timeout keeps its value
        assert "[7]" in view.query_one("#call-body", TextArea).text
        assert view.query_one("#call-timeout", Input).value == "2"


async def test_an_empty_name_says_to_type_one_not_that_a_shown_example_is_empty() -> None:
    app = fixed_app()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        call = app.query_one(CallerView)
        topic = app.query_one("#publish-topic", Input)
        service = call.query_one("#call-service", Input)
        for field in (topic, service):  # the grey text reads as an example, not a value
            assert field.value == "" and "e.g." in field.placeholder
        assert not call.call("", "[1]", 1.0)
        assert "Type a service name" in str(call.query_one("#call-response", Static).render())
        assert app.query_one(PublishView)._form() is None
        await until(pilot, lambda: bool(posted.of(PublishView.Failed)), "the refusal")
        assert "Type a topic" in posted.of(PublishView.Failed)[-1].error  # type: ignore[attr-defined]


async def test_f12_saves_a_screenshot_over_help_and_the_palette_and_says_where(
    tmp_path: Path,
) -> None:
    app = fixed_app(screenshot_dir=tmp_path / "shots")
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("f1")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "help")
        await pilot.press("f12")
        await until(pilot, lambda: len(posted.of(WorkbenchApp.ScreenshotSaved)) == 1, "a shot")
        await pilot.press("escape", "ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press("f12")
        await until(pilot, lambda: len(posted.of(WorkbenchApp.ScreenshotSaved)) == 2, "a shot")
        paths = [Path(m.path) for m in posted.of(WorkbenchApp.ScreenshotSaved)]  # type: ignore[attr-defined]
        assert all(p.is_absolute() and p.parent == tmp_path / "shots" for p in paths)
        assert all(p.read_text().startswith("<svg") for p in paths)


async def test_empty_broker_and_wait_set_views_say_what_the_user_can_do() -> None:
    app = fixed_app(model=fixed_model(announcements=False))  # no broker anywhere
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("7")
        await until(pilot, lambda: app.active_view_id == "broker", "the broker view")
        summary = str(app.query_one("#broker-summary", Static).render())
        assert "No broker" in summary and "mailbus gateway run" in summary
        waitsets = app.query_one(WaitSetsView)
        waitsets._detail(None)
        assert "own process" in waitsets.detail_text and "--config" in waitsets.detail_text
        participants = app.query_one(ParticipantsView)
        participants._detail(None)
        assert "announce-period-s" in participants.detail_text


async def test_at_80x24_every_tab_shows_and_services_keep_their_columns() -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.has_class("-narrow")
        views = app.query_one("#views", TabbedContent)
        tabs = [views.get_tab(view_id) for view_id, _, _ in WorkbenchApp.VIEWS]
        assert all(tab.region.right <= 80 and tab.region.width > 0 for tab in tabs)
        await pilot.press("2")
        await until(pilot, lambda: app.active_view_id == "services", "the services view")
        assert not app.query_one(Waterfall).display
        assert app.query_one(TraceList).region.width >= 70  # "answered" stays a word
    app = fixed_app()
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause()
        assert not app.has_class("-narrow")
        assert str(app.query_one("#views", TabbedContent).get_tab("waitsets").label) == "Wait sets"
