"""A status updated four times a second asks for the screen's layout only when its
height can change: same lines, none wider than the widget, redraw only; a line more, or
one that wraps, lays it out again (and it grows)."""

from __future__ import annotations

from typing import Any

from mailbus_workbench.widgets.steady_static import SteadyStatic
from rich.text import Text
from textual.app import App, ComposeResult


class StatusApp(App[None]):
    CSS = "SteadyStatic { width: 40; }"

    def compose(self) -> ComposeResult:
        yield SteadyStatic("starting", markup=False)


async def test_a_status_of_the_same_shape_is_redrawn_without_a_layout() -> None:
    app = StatusApp()
    async with app.run_test(size=(60, 10)) as pilot:
        status = app.query_one(SteadyStatic)
        layouts: list[bool] = []
        refresh = status.refresh

        def spy(*regions: Any, **kwargs: Any) -> Any:
            layouts.append(bool(kwargs.get("layout", False)))
            return refresh(*regions, **kwargs)

        status.refresh = spy  # type: ignore[method-assign]
        status.update(Text("playing at 1.00 s"))
        await pilot.pause()
        status.update(Text("playing at 1.25 s"))  # same shape as the last: no layout
        await pilot.pause()
        assert layouts[-1] is False
        assert "playing at 1.25 s" in str(status.render())

        status.update(Text("paused at 2.00 s\nCannot play: a part is corrupt"))
        await pilot.pause()
        assert layouts[-1] is True  # a line more: laid out again
        assert status.size.height == 2

        status.update(Text("x" * 60))  # wider than the widget: it wraps, so laid out
        await pilot.pause()
        assert layouts[-1] is True
        assert status.size.height == 2
        status.update(Text("y" * 60))  # still wrapping: its height is Textual's to find
        await pilot.pause()
        assert layouts[-1] is True

        status.update("short")
        await pilot.pause()
        assert layouts[-1] is True and status.size.height == 1
