"""A table's rows are painted at their columns' measured widths even when a frame drew
them before the table measured them (under load the screen paints first: the Sessions
snapshot pictured "message.published" as "mess" three times in clean-clone runs)."""

from __future__ import annotations

import pytest
from mailbus_workbench.textual_internals import MeasuredTable
from textual.app import App, ComposeResult
from textual.geometry import Region
from textual.widgets import DataTable

ROW = ("0.000", "message.published", "robot/pose", "39", '{"x": 0.9988}')


class OneTable(App[None]):
    # A table of a fixed height, as in the Sessions view: a table sized by its rows is
    # resized by them, and a resize draws every row again anyway.
    CSS = "#table { height: 1fr; }"

    def compose(self) -> ComposeResult:
        yield MeasuredTable(id="table")

    def fill(self, *, painted_first: bool) -> None:
        table = self.query_one("#table", DataTable)
        table.clear(columns=True)
        for label in ("t (s)", "what", "topic / service", "bytes", "body"):
            table.add_column(label)
        table.add_row(*ROW)
        if painted_first:  # a frame before the table's idle, as the screen may paint
            table.render_lines(Region(0, 0, table.size.width, 2))


def painted_row(table: DataTable[str]) -> str:
    """The first row as the screen paints it (through the widget's line cache)."""
    return table.render_lines(Region(0, 1, table.size.width, 1))[0].text


@pytest.mark.parametrize("painted_first", [False, True])
async def test_rows_are_painted_whole_once_measured(painted_first: bool) -> None:
    app = OneTable()
    async with app.run_test(size=(100, 6)) as pilot:
        table = app.query_one("#table", DataTable)
        app.fill(painted_first=painted_first)
        await pilot.pause()
        await pilot.pause()
        assert [c.content_width for c in table.ordered_columns] == [5, 17, 15, 5, 13]
        assert painted_row(table).split() == [*ROW[:4], *ROW[4].split()]


async def test_a_cell_updated_wider_is_painted_whole() -> None:
    app = OneTable()
    async with app.run_test(size=(100, 6)) as pilot:
        table = app.query_one("#table", DataTable)
        app.fill(painted_first=False)
        await pilot.pause()
        row = table.coordinate_to_cell_key((0, 0)).row_key
        column = table.ordered_columns[2].key
        table.update_cell(row, column, "sensors/temperature/long", update_width=True)
        table.render_lines(Region(0, 0, table.size.width, 2))  # painted before measured
        await pilot.pause()
        await pilot.pause()
        assert "sensors/temperature/long" in painted_row(table)
