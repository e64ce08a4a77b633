"""Keys that arrive together, as a browser's or a fast typist's do (textual-serve hands
the app a burst of keys in one message): Tab moves the focus before the keys after it are
read, so a body typed right after Tab never lands in the topic field (2 of 3 tries in a
browser put part of the body there)."""

from __future__ import annotations

import pytest
from textual import events
from textual.widgets import Input, TextArea
from wb_helpers import until
from workbench_fixtures.events import fixed_app

SIZE = (140, 42)
TOPIC = "lab/burst"
BODY = '{"n": 42}'


def key_event(key: str) -> events.Key:
    named = {"tab": "\t", "space": " ", "backspace": "\x7f"}
    character = named.get(key, key if len(key) == 1 else None)
    return events.Key(key, character)


async def test_a_body_typed_right_after_tab_goes_to_the_body() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("escape", "4")
        topic = app.query_one("#publish-topic", Input)
        await until(pilot, lambda: app.focused is topic, "the topic field")
        topic.value = ""
        keys = [*TOPIC, "tab", *BODY]
        # All at once, no pause between them: what a burst of typed keys is to the app.
        for key in keys:
            app.post_message(key_event(key))
        body = app.query_one("#publish-body", TextArea)
        await until(pilot, lambda: body.text == BODY, "the body typed")
        assert topic.value == TOPIC
        assert app.focused is body


@pytest.mark.slow
async def test_backspace_in_a_burst_of_letters_deletes_where_it_was_typed() -> None:
    """In the Plot box: letters, backspace, letters, arriving together."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("escape", "P")
        box = app.query_one("#plot-add", Input)
        await until(pilot, lambda: app.focused is box, "the series box")
        await pilot.pause()
        keys = [*"robot/posx", "backspace", *".x", "backspace", "backspace", *".y"]
        for key in keys:
            app.post_message(key_event(key))
        await until(pilot, lambda: box.value == "robot/pos.y", "the text as typed")


async def test_a_key_that_comes_as_the_app_closes_is_dropped_without_an_error() -> None:
    """A key still queued when the last screen has gone (a fast typist quitting, a
    benchmark ending) raised ScreenStackError from the app's key handling, and that
    error replaced whatever had ended the run."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
    assert not app.screen_stack
    await app.on_event(key_event("home"))
    await app.on_event(key_event("tab"))
