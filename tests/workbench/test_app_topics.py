"""Pilot tests of the start-up and the Topics view."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.trace import TraceEvent
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.screens import NumberPrompt
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.widgets import Input, Static, TabbedContent
from wb_helpers import Posted, until
from workbench_fixtures.clock import T0, FrozenClock
from workbench_fixtures.events import fixed_app, fixed_model, message_event

SIZE = (140, 42)


async def test_new_user_sees_live_demo_topics_at_once() -> None:
    app = WorkbenchApp(engine=EngineHost(seed=3))
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: len(app.model.topics.stats) >= 3, "demo topics")
        view = app.query_one(TopicsView)
        await until(pilot, lambda: view.topic is not None, "a topic to be selected")
        messages = app.query_one(MessageList)
        await until(pilot, lambda: messages.row_count > 0, "messages of the topic")
        tree = app.query_one(TopicTree)
        assert {"robot/pose", "sensors/temperature"} <= set(tree._topic_nodes)
        status = str(app.query_one("#status", Static).render())
        assert "msgs" in status and "topics" in status
    assert not app.engine.context.is_initialized  # type: ignore[union-attr]


async def test_select_topic_and_inspect_message() -> None:
    app = fixed_app()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        tree = app.query_one(TopicTree)
        assert tree.select_topic("sensors/temperature")
        await pilot.pause()
        view = app.query_one(TopicsView)
        assert view.topic == "sensors/temperature"
        assert [m.topic for m in posted.of(TopicTree.TopicSelected)][-1] == "sensors/temperature"
        messages = app.query_one(MessageList)
        assert messages.row_count == app.model.topics.stats["sensors/temperature"].count
        messages.focus()
        await pilot.press("up")
        chosen = posted.of(MessageList.MessageChosen)[-1].record  # type: ignore[attr-defined]
        inspector = app.query_one(Inspector)
        assert inspector.record is chosen
        texts = inspector.texts
        assert '"celsius"' in texts["body"] and "\n" in texts["body"]  # pretty JSON
        assert "Subject: sensors/temperature" in texts["raw"]
        assert "Publisher-GID:" in texts["raw"]
        assert texts["diff"].startswith("--- previous")
        assert "Source-Timestamp" in texts["headers"]
        inspector.show_tab("raw")
        await pilot.pause()
        assert app.query_one("#inspector-tabs", TabbedContent).active == "inspector-raw"


async def test_fuzzy_filter_narrows_the_tree() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("slash")
        assert app.focused is app.query_one("#topic-filter", Input)
        await pilot.press(*"rbps")
        tree = app.query_one(TopicTree)
        assert list(tree._topic_nodes) == ["robot/pose"]
        await pilot.press("enter")
        assert app.focused is tree
        app.query_one("#topic-filter", Input).value = ""
        await pilot.pause()
        assert len(tree._topic_nodes) == 4


@pytest.mark.slow
async def test_pause_freezes_lists_and_clear_forgets() -> None:
    app = fixed_app()
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        app.query_one(TopicTree).focus()
        await pilot.press("p")
        assert app.model.paused
        assert posted.of(TopicsView.PauseChanged)[-1].paused is True  # type: ignore[attr-defined]
        summary = str(app.query_one("#summary-text", Static).render())
        assert "PAUSED" in summary
        # Paused, the list holds the whole history kept, older than the live window.
        tree = app.query_one(TopicTree)
        tree.select_topic("robot/pose")
        await pilot.pause()
        messages = app.query_one(MessageList)
        assert messages.row_count == app.model.topics.stats["robot/pose"].count == 121
        await pilot.press("p")
        assert messages.row_count == 50  # live again: the newest 50
        assert messages.get_row_at(49)[0] == "121"
        tree.focus()
        assert not app.model.paused
        await pilot.press("x")
        assert posted.of(TopicsView.Cleared)
        assert app.model.topics.total == 0
        assert app.query_one(MessageList).row_count == 0
        assert app.query_one(TopicTree)._topic_nodes == {}


@pytest.mark.slow
async def test_history_cap_prompt_validates_and_applies() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(TopicTree).focus()
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, NumberPrompt), "the prompt")
        prompt_input = app.screen.query_one("#prompt-input", Input)
        prompt_input.value = "0"
        await pilot.press("enter")
        assert isinstance(app.screen, NumberPrompt)
        assert "whole number" in str(app.screen.query_one("#prompt-error", Static).render())
        prompt_input.value = "5"
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, NumberPrompt), "the prompt to close")
        assert app.model.topics.history_cap == 5
        assert len(app.model.topics.history("robot/pose")) == 5
        await pilot.pause()
        assert app.query_one(MessageList).row_count <= 5
        await pilot.press("h")
        await until(pilot, lambda: isinstance(app.screen, NumberPrompt), "the prompt")
        await pilot.press("escape")
        assert app.model.topics.history_cap == 5


@pytest.mark.slow
async def test_panes_resize_by_key_and_mouse() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        left = app.query_one("#topics-left")
        before = left.size.width
        app.query_one(TopicTree).focus()
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert left.size.width == before + 4
        divider = app.query_one("#topics-divider")
        x = divider.region.x
        await pilot.mouse_down("#topics-divider")
        await pilot.hover("#topics-divider", offset=(-10, 0))
        await pilot.mouse_up("#topics-divider")
        await pilot.pause()
        assert left.size.width < before + 4
        assert divider.region.x < x


async def test_keymap_file_and_theme_from_settings(tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keys]\n"topics.pause" = "z"\n')
    settings = Settings(
        theme="gruvbox", keymap_file=keymap, templates_file=tmp_path / "templates.toml"
    )
    app = fixed_app(settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.theme == "gruvbox"
        app.query_one(TopicTree).focus()
        await pilot.press("z")
        assert app.model.paused


async def test_bad_keymap_file_is_reported_not_fatal(tmp_path: Path) -> None:
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keys]\n"no.such" = "z"\n')
    app = fixed_app(keymap_file=keymap)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        assert any("no such binding" in n.message for n in textual_internals.notifications(app))
        app.query_one(TopicTree).focus()
        await pilot.press("p")
        assert app.model.paused


def test_paused_summary_counts_the_shown_topic_and_names_the_total_apart() -> None:
    from mailbus_workbench.widgets.topic_summary import TopicSummary

    summary = TopicSummary()
    texts: list[str] = []
    summary._update = lambda text, rates: texts.append(text)  # type: ignore[method-assign]
    summary.show(None, 0.0, paused=True, cap=500, new=3, new_total=809)
    summary.show(None, 0.0, paused=True, cap=500, new=5, new_total=5)
    summary.show(None, 0.0, paused=False, cap=500, new=5, new_total=5)
    assert "3 new, listed on resume (809 on all topics)" in texts[0]
    assert "5 new, listed on resume" in texts[1] and "all topics" not in texts[1]
    assert "PAUSED" not in texts[2]


@pytest.mark.slow
async def test_the_panes_follow_the_filter_and_a_click_selects_the_only_row() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view, tree = app.query_one(TopicsView), app.query_one(TopicTree)
        tree.select_topic("robot/pose")
        await until(pilot, lambda: view.topic == "robot/pose", "robot/pose shown")
        app.query_one("#topic-filter", Input).value = "temperature"
        await until(pilot, lambda: tree.shown_topics == ("sensors/temperature",), "the filter")
        await until(pilot, lambda: view.topic == "sensors/temperature", "the panes to follow")
        messages = app.query_one(MessageList)
        assert messages.row_count > 0
        assert all(r.event.name == "sensors/temperature" for r in view._listed())
        view._choose(None)  # as if the user had moved away: a click on the row selects it
        tree.select_node(tree._topic_nodes["sensors/temperature"])
        await until(pilot, lambda: view.topic == "sensors/temperature", "the clicked row")
        app.query_one("#topic-filter", Input).value = "no-such-topic-at-all"
        await until(pilot, lambda: tree.shown_topics == (), "nothing left")
        await until(pilot, lambda: view.topic is None, "the panes to empty")
        assert messages.row_count == 0


@pytest.mark.slow
async def test_large_json_folds_into_a_tree_and_small_json_stays_a_listing() -> None:
    import dataclasses
    import json

    from mailbus_workbench.model.topics import MessageRecord
    from textual.widgets import Tree

    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        inspector = app.query_one(Inspector)
        # The list chooses its first row on its own; let it, or it lands after show(big).
        await until(pilot, lambda: inspector.record is not None, "the first message shown")
        small = app.model.topics.history("robot/pose")[0]
        big_body = json.dumps({"robots": [{"id": i, "pose": {"x": i, "y": -i}} for i in range(50)]})
        big = MessageRecord(2, dataclasses.replace(small.event, body=big_body))
        inspector.show(big, None)
        await pilot.pause()
        assert inspector.folded
        tree = inspector.query_one("#inspector-body-tree", Tree)
        robots = tree.root.children[0]
        assert len(robots.children) == 50 and not robots.is_expanded  # folded below the top
        assert json.loads(inspector.texts["body"]) == json.loads(big_body)  # copy: all of it
        inspector.show(small, None)
        await pilot.pause()
        assert not inspector.folded and not tree.root.children


def new_topic_events(names: list[str], n0: int = 90_000) -> list[TraceEvent]:
    t = T0 + 13.0
    return [
        message_event(name, f"first on {name}", t + i * 0.01, n0 + i)
        for i, name in enumerate(names)
    ]


@pytest.mark.slow
async def test_the_tree_highlight_stays_on_the_selected_topic_when_topics_arrive() -> None:
    """Issue 19 item 3: new topics rebuild the tree; highlight and list stay together."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view, tree = app.query_one(TopicsView), app.query_one(TopicTree)
        messages = app.query_one(MessageList)
        tree.focus()
        assert tree.select_topic("system/heartbeat")
        await until(pilot, lambda: view.topic == "system/heartbeat", "the topic shown")
        # Topics that sort before it, so that its line moves down.
        app.model.feed_events(new_topic_events(["aaa/one", "aab/two", "abc/three"]))
        app.refresh_now()
        await pilot.pause()
        assert tree.cursor_node is not None and tree.cursor_node.data == "system/heartbeat"
        assert view.topic == "system/heartbeat" and messages.topic == "system/heartbeat"
        assert all(r.event.name == "system/heartbeat" for r in messages._rows)
        await pilot.press("up", "up")  # the keys go on from the highlighted topic
        await until(pilot, lambda: view.topic == "sensors/temperature", "the topic above")
        assert tree.cursor_node is not None and tree.cursor_node.data == view.topic


@pytest.mark.slow
async def test_the_highlight_stays_on_a_group_when_topics_arrive() -> None:
    """A rebuild keeps the cursor on a group node too, instead of dropping it on whatever
    topic then sits on its old line (which would change the list under the user)."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view, tree = app.query_one(TopicsView), app.query_one(TopicTree)
        tree.focus()
        assert tree.select_topic("system/heartbeat")
        await until(pilot, lambda: view.topic == "system/heartbeat", "the topic shown")
        await pilot.press("up")  # onto the group `system`
        await until(
            pilot,
            lambda: tree.cursor_line == tree._topic_nodes["system/heartbeat"].line - 1,
            "the group",
        )
        group = tree.cursor_node
        assert group is not None and group.data is None and str(group.label).startswith("system  ")
        app.model.feed_events(new_topic_events(["aaa/one", "aab/two", "abc/three"]))
        app.refresh_now()
        await pilot.pause()
        assert tree.cursor_node is not None and str(tree.cursor_node.label).startswith("system  ")
        assert view.topic == "system/heartbeat"


@pytest.mark.slow
async def test_a_filter_that_hides_every_topic_keeps_their_messages_out_of_the_list() -> None:
    """Issue 19 item 3: a topic the filter hides from the tree shows nothing in the list,
    also when its messages arrive after the filter was typed."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view, tree = app.query_one(TopicsView), app.query_one(TopicTree)
        messages = app.query_one(MessageList)
        app.query_one("#topic-filter", Input).value = "no-such-topic-at-all"
        await until(pilot, lambda: view.topic is None, "the panes to empty")
        app.model.feed_events(new_topic_events(["robot/pose", "sensors/temperature"]))
        app.refresh_now()
        await pilot.pause()
        assert tree.shown_topics == ()
        assert view.topic is None and messages.topic is None and messages.row_count == 0
        # A topic that matches arrives: tree and list show it together.
        app.model.feed_events(new_topic_events(["no-such-topic-at-all"], 95_000))
        app.refresh_now()
        await until(pilot, lambda: view.topic == "no-such-topic-at-all", "the matching topic")
        assert tree.cursor_node is not None and tree.cursor_node.data == view.topic
        assert [r.event.name for r in messages._rows] == ["no-such-topic-at-all"]


@pytest.mark.slow
async def test_messages_that_come_while_paused_are_kept_and_listed_on_resume() -> None:
    clock = FrozenClock(T0 + 12)
    model = fixed_model(clock)
    model.topics.history_cap = 10
    app = fixed_app(model=model)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.query_one(TopicTree)
        tree.select_topic("robot/pose")
        tree.focus()
        await pilot.press("p")
        messages = app.query_one(MessageList)
        assert messages.row_count == 10
        events = [
            message_event("robot/pose", f'{{"x": {n}}}', clock.now + n / 100, 20_000 + n)
            for n in range(12)
        ]
        model.feed_events(events)
        app.refresh_now()
        await pilot.pause()
        summary = str(app.query_one("#summary-text", Static).render())
        assert "PAUSED  12 new, listed on resume, 2 dropped by the history cap" in summary
        assert messages.row_count == 10  # the list on screen stands still
        await pilot.press("p")
        await pilot.pause()
        assert [messages.get_row_at(i)[3] for i in range(10)] == [
            f'{{"x": {n}}}' for n in range(2, 12)
        ]
        assert "PAUSED" not in str(app.query_one("#summary-text", Static).render())
