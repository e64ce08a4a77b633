"""The key bar: the keys that act now, one line, clickable."""

from __future__ import annotations

from mailbus_workbench.widgets.key_bar import KeyBar
from wb_helpers import until
from workbench_fixtures.events import fixed_app

SIZE = (140, 42)


def descriptions(bar: KeyBar) -> list[str]:
    return [item.description for item in bar.items]


async def test_keys_follow_the_focused_view() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        bar = app.query_one(KeyBar)
        await until(pilot, lambda: "Pause" in descriptions(bar), "the Topics keys")
        assert "Services" in descriptions(bar) and "Quit" in descriptions(bar)
        line = str(bar.render())
        assert " p Pause " in line and " 2 Services " in line
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
