"""Keys typed right after a press on a view's tab go to that view (Pilot).

The press and the keys are posted together, as a browser or a terminal delivers them to
a fast typist's app: nothing waits for the tab switch in between."""

from __future__ import annotations

import pytest
from mailbus_workbench.app import WorkbenchApp
from textual import events
from textual.widgets import Input, TabbedContent
from wb_helpers import until
from workbench_fixtures.events import fixed_app

SIZE = (140, 42)
KEYS = {"/": "slash", ".": "full_stop"}


def press_tab_and_type(app: WorkbenchApp, view_id: str, text: str) -> None:
    """Post a press on `view_id`'s tab and the keys of `text` (letters, digits and the
    characters named in KEYS) at once."""
    tab = app.query_one("#views", TabbedContent).get_tab(view_id)
    x, y = tab.region.x + 1, tab.region.y
    where = {"x": x, "y": y, "screen_x": x, "screen_y": y}
    mouse = {"widget": None, "delta_x": 0, "delta_y": 0, "button": 1, **where}
    flags = {"shift": False, "meta": False, "ctrl": False}
    app.post_message(events.MouseDown(**mouse, **flags))
    app.post_message(events.MouseUp(**mouse, **flags))
    for character in text:
        app.post_message(events.Key(KEYS.get(character, character), character))


@pytest.mark.slow
async def test_letters_typed_at_once_after_a_click_on_the_plot_tab_reach_its_box() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        box = app.query_one("#plot-add", Input)
        tree = app.query_one("#topic-tree")
        await until(pilot, lambda: app.focused is tree, "the start-up focus")  # deferred
        for _ in range(3):
            # Back to Topics as a terminal or a browser presses (Pilot's `click` posts a
            # Click of its own, which no driver sends for a view's tab: its chain of
            # messages, handled late under load, switched back after the press on Plot).
            press_tab_and_type(app, "topics", "")
            await until(pilot, lambda: app.active_view_id == "topics", "the Topics view")
            press_tab_and_type(app, "plot", "robot/pose.x")
            await until(pilot, lambda: box.value == "robot/pose.x", "the typed series")
            assert app.focused is box
            box.value = ""
            await pilot.press("escape")


async def test_a_press_on_the_shown_tab_then_on_another_ends_on_the_other() -> None:
    """A press on the tab already shown and at once one on Plot (as a browser test
    clicks): Textual's own click on the first, handled late, switched back to it."""
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        box = app.query_one("#plot-add", Input)
        tree = app.query_one("#topic-tree")
        await until(pilot, lambda: app.focused is tree, "the start-up focus")  # deferred
        for _ in range(3):
            press_tab_and_type(app, "topics", "")  # as a driver presses (see above)
            await until(
                pilot,
                lambda: app.active_view_id == "topics" and app.focused is tree,
                "the Topics view with its keys",
            )
            press_tab_and_type(app, "topics", "")
            press_tab_and_type(app, "plot", "robot/pose.y")
            await until(pilot, lambda: box.value == "robot/pose.y", "the typed series")
            for _ in range(5):
                await pilot.pause()
            assert app.active_view_id == "plot" and app.focused is box
            box.value = ""
