"""Readable in both themes: JSON punctuation keeps a colour that shows
on the theme's background."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.caller import CallerView
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.topic_tree import OPEN_LINES, TopicTree
from rich.color import Color
from rich.console import Console
from rich.syntax import Syntax
from textual.widgets import Input, Static, TextArea
from wb_helpers import until
from workbench_fixtures.clock import T0
from workbench_fixtures.events import fixed_app, message_event

SIZE = (140, 42)


def punctuation_colours(syntax: Syntax) -> list[Color | None]:
    console = Console(width=80, color_system="truecolor")
    return [
        segment.style.color if segment.style else None
        for segment in console.render(syntax)
        if segment.text.strip() in {"{", "}", ":", ","}
    ]


def visible_on(colour: Color | None, *, dark: bool) -> bool:
    """None is the terminal's foreground: visible on either background."""
    if colour is None:
        return True
    r, g, b = colour.get_truecolor()
    luminance = (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255
    return luminance > 0.4 if dark else luminance < 0.6


def test_json_punctuation_shows_on_either_background() -> None:
    for dark in (True, False):
        colours = punctuation_colours(fmt.json_syntax('{"a": 1, "b": [2]}', dark=dark))
        assert len(colours) >= 4
        assert all(visible_on(c, dark=dark) for c in colours), (dark, colours)


@pytest.mark.slow
async def test_the_call_response_follows_the_theme(engine: EngineHost, tmp_path: Path) -> None:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    app = WorkbenchApp(engine=engine, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "textual-light"
        await pilot.pause()
        await pilot.press("5")
        app.query_one("#call-service", Input).value = "echo"
        app.query_one("#call-body", TextArea).text = '}2 :"a"{'  # echoed reversed: JSON
        await pilot.press("f5")
        view = app.query_one(CallerView)
        await until(pilot, lambda: view.history, "the response")
        shown = app.query_one("#call-response", Static).content
        assert isinstance(shown, Syntax)
        assert all(visible_on(c, dark=False) for c in punctuation_colours(shown))
        app.theme = "textual-dark"
        await pilot.pause()
        shown = app.query_one("#call-response", Static).content
        assert isinstance(shown, Syntax)
        assert all(visible_on(c, dark=True) for c in punctuation_colours(shown))


@pytest.mark.slow
async def test_300_topics_open_collapsed_below_a_size_with_totals_on_groups() -> None:
    app = fixed_app()
    names = [
        f"plant{p}/line{line}/sensor{s}" for p in range(3) for line in range(10) for s in range(10)
    ]
    events = [
        message_event(name, "1", T0 + 13.0 + i * 0.001, 90_000 + i) for i, name in enumerate(names)
    ]
    events.append(message_event("plant0/line0/sensor0", "2", T0 + 14.0, 99_999))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.model.feed_events(events)
        app.refresh_now()
        await pilot.pause()
        tree = app.query_one(TopicTree)
        assert len(tree.shown_topics) >= 300
        assert tree.last_line + 1 <= OPEN_LINES
        plant0 = tree._groups["plant0"][0]
        label = str(plant0.label)
        # 100 sensors with one message each, one with a second: 101 messages.
        assert label.startswith("plant0  101  ") and label.endswith("100 topics")
        line9 = tree._groups["plant2/line9"][0]
        assert not line9.is_expanded and str(line9.label).endswith("10 topics")
        # A topic chosen inside a closed group opens its way to it.
        assert tree.select_topic("plant2/line9/sensor9")
        assert line9.is_expanded
        app.model.feed_events([message_event("zzz/new", "1", T0 + 15.0, 100_000)])
        app.refresh_now()
        await pilot.pause()
        node = tree.cursor_node
        assert node is not None and node.data == "plant2/line9/sensor9"
        assert tree._groups["plant2/line9"][0].is_expanded


@pytest.mark.slow
async def test_a_small_tree_still_opens_whole() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        tree = app.query_one(TopicTree)
        assert tree._groups and all(node.is_expanded for node, _, _ in tree._groups.values())


@pytest.mark.slow
async def test_the_wait_set_timeline_has_one_colour_per_state_and_a_legend() -> None:
    from mailbus_workbench.views.waitsets import TIMELINE_LEGEND, TIMELINE_STYLE, WaitSetsView

    colours = [style for _, style in TIMELINE_STYLE.values()]
    assert len(set(colours)) == len(colours) == len(TIMELINE_LEGEND)
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("3")
        await pilot.pause()
        detail = app.query_one(WaitSetsView).detail_text
        legend = detail.splitlines()[-1]
        for state, meaning in TIMELINE_LEGEND.items():
            assert f"{TIMELINE_STYLE[state][0]} {meaning}" in legend


@pytest.mark.slow
async def test_source_timestamp_shows_a_time_and_keeps_the_raw_nanoseconds() -> None:
    from mailbus import headers as H
    from mailbus_workbench.widgets.inspector import Inspector
    from mailbus_workbench.widgets.message_list import MessageList

    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        messages = app.query_one(MessageList)
        messages.focus()
        await pilot.press("up")
        await pilot.pause()
        inspector = app.query_one(Inspector)
        assert inspector.record is not None
        raw = inspector.record.event.headers[H.SOURCE_TIMESTAMP]
        line = next(
            ln
            for ln in inspector.texts["headers"].splitlines()
            if ln.startswith("Source-Timestamp")
        )
        assert line.endswith(f"UTC  ({raw} ns)")
        stamp = line.split(": ", 1)[1]
        assert stamp[:4].isdigit() and stamp[4] == "-" and stamp[13] == ":"
        assert f"Source-Timestamp: {raw}" in inspector.texts["raw"]  # the email as it came


@pytest.mark.slow
async def test_the_inspectors_json_shows_on_the_light_theme() -> None:
    from mailbus_workbench.widgets.message_list import MessageList
    from mailbus_workbench.widgets.topic_tree import TopicTree
    from workbench_fixtures.events import fixed_app

    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        app.theme = "textual-light"
        await pilot.pause()
        assert app.query_one(TopicTree).select_topic("sensors/temperature")
        await pilot.pause()
        app.query_one(MessageList).focus()
        await pilot.press("up")
        await pilot.pause()
        shown = app.query_one("#inspector-body-text", Static).content
        assert isinstance(shown, Syntax)
        colours = punctuation_colours(shown)
        assert colours and all(visible_on(c, dark=False) for c in colours), colours
