"""RowTable draws cells literally: control characters as pictures (counted in the
column's width), Rich styles kept, a cell too wide for a fixed column cut with "…"."""

from __future__ import annotations

from mailbus_workbench.widgets.row_table import RowTable
from rich.text import Text
from textual.app import App, ComposeResult


class OneTable(App[None]):
    def compose(self) -> ComposeResult:
        yield RowTable([("name", None), ("x", 3)], id="table")


async def test_cells_are_drawn_literally_and_fitted_to_their_columns() -> None:
    app = OneTable()
    async with app.run_test(size=(40, 6)) as pilot:
        table = app.query_one(RowTable)
        name = Text("demo\x1b[2J", style="bold")
        name.append(" (this)", style="dim")
        table.show({"a": (name, "abcdef"), "b": ("[red]x[/]", "1")})
        await pilot.pause()
        lines = [table.render_line(y).text.rstrip() for y in range(3)]
        assert lines == [
            " name             x",
            " demo\u241b[2J (this)  ab…",
            " [red]x[/]        1",
        ]
        segments = list(table.render_line(1))
        assert any(s.text == " (this)" and s.style and s.style.dim for s in segments)
        assert all("\x1b" not in s.text for s in segments)
