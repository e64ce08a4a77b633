"""The key bar: the keys that act now, one line, clickable."""

from __future__ import annotations

import pytest
from mailbus_workbench.widgets.key_bar import KeyBar
from textual.widgets import Input, TextArea
from wb_helpers import until
from workbench_fixtures.events import fixed_app

SIZE = (140, 42)


def descriptions(bar: KeyBar) -> list[str]:
    return [item.description for item in bar.items]


@pytest.mark.slow
async def test_keys_follow_the_focused_view() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: "Pause" in descriptions(bar), "the Topics keys")
        assert "Services" in descriptions(bar) and "Quit" in descriptions(bar)
        line = str(bar.render())
        # Too narrow for every view's title beside the Topics keys: the view keys alone.
        assert " p Pause " in line and " 1 2 3 4 5 6 7 8 9 0 N P T views " in line
        await pilot.press("2")
        await until(pilot, lambda: "Pause" not in descriptions(bar), "the Services keys")
        assert "Topics" in descriptions(bar)


async def test_one_item_per_action() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: bool(bar.items), "the keys")
        # "f1" and "?" both run help: shown once, as Textual's footer does.
        assert descriptions(bar).count("Help") == 1


@pytest.mark.slow
async def test_clicking_a_key_presses_it() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: "Services" in descriptions(bar), "the keys")
        bar.render()  # lays the items out in columns
        column = next(
            x for x in range(SIZE[0]) if (item := bar.item_at(x)) and item.description == "Services"
        )
        await pilot.click(KeyBar, offset=(column + 1, 0))
        await until(pilot, lambda: app.active_view_id == "services", "the Services view")
        # A click between items or past the last one does nothing.
        last_end = max(x for x in range(SIZE[0]) if bar.item_at(x) is not None)
        if last_end + 2 < SIZE[0]:
            await pilot.click(KeyBar, offset=(last_end + 2, 0))
            await pilot.pause()
            assert app.active_view_id == "services"


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 120, 175, 200])
async def test_help_quit_and_the_palette_always_fit_and_the_view_keys_where_they_fit(
    width: int,
) -> None:
    """Each view's bar at each width: Help, Quit (where q quits) and ^p always drawn,
    at the end of the line (at 1400 px the bar once ended at "0 Log f1"); every key that
    shows a view, the letters N and P too, on every view from 175 columns (a browser at
    1400 px) and on Topics from 120 (a view with many keys of its own keeps them)."""
    app = fixed_app()
    async with app.run_test(size=(width, 40)) as pilot:
        bar = app.query_one(KeyBar)
        for key in "1234567890NP":
            await pilot.press("escape", key)
            await pilot.pause()
            await until(pilot, lambda: bool(bar.items), "the keys")
            line = str(bar.render())
            assert len(line) <= width, line
            assert line.rstrip().endswith("^p Commands"), line
            assert " f1 Help " in line, line
            drawn = {item.description for _, _, item in bar._spans}
            assert {"Help", "Commands"} <= drawn, line
            if isinstance(app.focused, Input | TextArea):
                continue  # there letters and digits are typed: no view keys, no q
            assert " q Quit " in line, line
            if width >= 175 or (width >= 120 and key == "1"):
                assert " N " in line and " P " in line, line


@pytest.mark.slow
async def test_a_click_on_a_view_key_drawn_without_its_title_shows_that_view() -> None:
    app = fixed_app()
    async with app.run_test(size=(120, 40)) as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: "Participants" in descriptions(bar), "the keys")
        line = str(bar.render())
        column = line.index(" N P T views") + 1
        await pilot.click(KeyBar, offset=(column, 0))
        await until(pilot, lambda: app.active_view_id == "participants", "Participants")


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 120])
async def test_the_views_with_many_keys_still_show_how_to_leave_them(width: int) -> None:
    """Sessions and Tests filled the bar with their own keys and dropped every key that
    shows a view; Plot opens on a field, where the bar showed no way out at all."""
    app = fixed_app()
    async with app.run_test(size=(width, 36)) as pilot:
        bar = app.query_one(KeyBar)
        for key in "9T":
            await pilot.press("escape", key)
            await until(pilot, lambda: "Help" in descriptions(bar), "the keys")
            line = str(bar.render())
            assert " N P T views " in line, line
            assert line.rstrip().endswith("^p Commands"), line
        await pilot.press("escape", "P")
        await until(pilot, lambda: app.active_view_id == "plot", "the Plot view")
        assert isinstance(app.focused, Input)  # Plot opens on its field
        await until(pilot, lambda: "Leave field" in descriptions(bar), "the way out")
        line = str(bar.render())
        assert " esc Leave field " in line, line
        # What the bar says works: escape, then a view key.
        await pilot.press("escape", "1")
        await until(pilot, lambda: app.active_view_id == "topics", "the Topics view")
        assert "Leave field" not in descriptions(bar)  # out of the field: not listed


@pytest.mark.slow
async def test_a_click_on_the_shortest_view_keys_shows_that_view() -> None:
    app = fixed_app()
    async with app.run_test(size=(80, 36)) as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: "Help" in descriptions(bar), "the keys")
        await pilot.press("escape", "9")
        await until(pilot, lambda: "Record" in descriptions(bar), "the Sessions keys")
        line = str(bar.render())
        column = line.index(" 0-9 N P T views") + len(" 0-9 N P ")
        await pilot.click(KeyBar, offset=(column, 0))
        await until(pilot, lambda: app.active_view_id == "tests", "the Tests view")
