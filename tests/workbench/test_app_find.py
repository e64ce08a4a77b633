"""Find, copy and export in the workbench, on fixed data."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.find_screen import FindScreen
from mailbus_workbench.model import export
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.screens import Confirm, HelpScreen
from mailbus_workbench.share_screens import ExportScreen, HeaderPicker
from mailbus_workbench.views.topic_share import Copied
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.command import CommandList, CommandPalette
from textual.widgets import DataTable, Input
from wb_helpers import Posted, until
from workbench_fixtures.events import fixed_app

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (130, 38)


def expected_warm(app: object) -> list[tuple[str, int]]:
    """What `celsius>22.5` must find, read straight from the kept bodies."""
    model = app.model  # type: ignore[attr-defined]
    return [
        (r.event.name, r.number)
        for r in model.topics.history("sensors/temperature")
        if json.loads(r.body)["celsius"] > 22.5
    ]


async def test_find_lists_exactly_the_matches_and_jumps_to_one(tmp_path: Path) -> None:
    posted = Posted()
    app = fixed_app()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "the Find screen")
        screen = app.screen
        assert isinstance(screen, FindScreen)
        await pilot.press("f1")  # the query language
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "Find's help")
        assert "## Find" in app.screen.markdown and "celsius>25" in app.screen.markdown
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen, "back in Find")
        # A bad query: a clear error, the screen stays and nothing is listed.
        await pilot.press(*"/(/", "enter")
        await until(pilot, lambda: posted.of(FindScreen.Searched), "the search")
        assert "Cannot search: /(/: not a regular expression" in screen.status
        assert isinstance(app.screen, FindScreen)
        query = app.screen.query_one("#find-query", Input)
        query.value = ""
        await pilot.press(*"celsius>22.5", "enter")
        await until(pilot, lambda: len(posted.of(FindScreen.Searched)) == 2, "the search")
        searched = posted.of(FindScreen.Searched)[-1]
        assert isinstance(searched, FindScreen.Searched)
        expected = expected_warm(app)
        assert searched.found == len(expected) > 0 and searched.error == ""
        table = app.screen.query_one("#find-results", DataTable)
        listed = [
            (str(table.get_row_at(row)[0]), int(table.get_row_at(row)[1]))
            for row in range(table.row_count)
        ]
        assert listed == expected
        # The first result is older than the live list's 50 rows? Jump to it anyway.
        table.move_cursor(row=0)
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, FindScreen), "the jump")
        view = app.view("topics")
        assert isinstance(view, TopicsView)
        assert app.active_view_id == "topics" and view.topic == "sensors/temperature"
        record = app.query_one(Inspector).record
        assert record is not None and record.number == expected[0][1]
        selected = app.query_one(MessageList).selected()
        assert selected is not None and selected.number == expected[0][1]
        assert app.query_one(TopicTree).cursor_node.data == "sensors/temperature"  # type: ignore[union-attr]
        # The query is offered again.
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "Find again")
        assert app.screen.query_one("#find-query", Input).value == "celsius>22.5"
        # s on the results saves them; the Parquet file holds what was listed.
        app.screen.search("celsius>22.5")
        await until(pilot, lambda: len(posted.of(FindScreen.Searched)) == 3, "the results")
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        path_input = app.screen.query_one("#export-path", Input)
        assert path_input.value.startswith("./find-") and path_input.value.endswith(".csv")
        target = tmp_path / "warm.parquet"
        path_input.value = str(target)
        await pilot.press("enter")
        await until(pilot, lambda: posted.of(ExportScreen.Exported), "the export")
        frame = pl.read_parquet(target)
        assert list(zip(frame["topic"], frame["number"], strict=True)) == expected
        # A message older than the live list's 50 rows: the lists pause to show it.
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "back in Find")
        assert not app.model.paused
        app.screen.search("robot/pose.x>0.999")
        await until(pilot, lambda: len(posted.of(FindScreen.Searched)) == 4, "the old one")
        table = app.screen.query_one("#find-results", DataTable)
        assert [int(table.get_row_at(row)[1]) for row in range(table.row_count)] == [1, 64]
        table.move_cursor(row=0)
        await pilot.press("enter")
        await until(pilot, lambda: not isinstance(app.screen, FindScreen), "the second jump")
        assert app.model.paused and view.topic == "robot/pose"
        selected = app.query_one(MessageList).selected()
        assert selected is not None and selected.number == 1
        assert app.query_one(Inspector).record == selected


async def test_copy_body_header_and_raw_and_find_from_the_palette() -> None:
    posted = Posted()
    app = fixed_app()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        app.query_one(TopicTree).select_topic("robot/pose")
        await pilot.pause()
        messages = app.query_one(MessageList)
        messages.focus()
        messages.move_cursor(row=messages.row_count - 3)
        chosen = messages.selected()
        assert chosen is not None and chosen.event.name == "robot/pose"
        await until(pilot, lambda: app.query_one(Inspector).record == chosen, "inspecting")
        record = chosen
        await pilot.press("c")
        await until(pilot, lambda: posted.of(Copied), "the copy")
        assert app.clipboard == record.body
        await pilot.press("R")
        await until(pilot, lambda: len(posted.of(Copied)) == 2, "the raw copy")
        assert app.clipboard == app.query_one(Inspector).texts["raw"]
        assert "Subject: robot/pose" in app.clipboard and record.body in app.clipboard
        await pilot.press("C")
        await until(pilot, lambda: isinstance(app.screen, HeaderPicker), "the header picker")
        picker = app.screen
        assert isinstance(picker, HeaderPicker)
        wanted = [name for name, _ in picker.rows].index("Publisher-GID")
        for _ in range(wanted):
            await pilot.press("down")
        await pilot.press("enter")
        await until(pilot, lambda: len(posted.of(Copied)) == 3, "the header copy")
        copied = posted.of(Copied)[-1]
        assert isinstance(copied, Copied) and copied.what == "header Publisher-GID"
        assert app.clipboard == record.event.source_gid
        # Find is in the palette too.
        await pilot.press("ctrl+p")
        await until(pilot, lambda: isinstance(app.screen, CommandPalette), "the palette")
        await pilot.press(*"Find messages")
        await until(pilot, lambda: app.screen.query_one(CommandList).option_count > 0, "a match")
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "Find from the palette")


async def test_exporting_a_topic_asks_before_overwriting_and_reports_bad_paths(
    tmp_path: Path,
) -> None:
    posted = Posted()
    app = fixed_app()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        app.query_one(TopicTree).select_topic("robot/log")
        await pilot.pause()
        view = app.view("topics")
        assert isinstance(view, TopicsView) and view.topic == "robot/log"

        async def export_to(path: str) -> ExportScreen:
            if not isinstance(app.screen, ExportScreen):
                await pilot.press("s")
                await until(pilot, lambda: isinstance(app.screen, ExportScreen), "the dialog")
            screen = app.screen
            assert isinstance(screen, ExportScreen)
            screen.query_one("#export-path", Input).value = path
            await pilot.press("enter")
            await pilot.pause()
            return screen

        screen = await export_to(str(tmp_path / "missing" / "log.csv"))
        assert "no folder" in screen.error and app.screen is screen
        screen = await export_to(str(tmp_path / "log.txt"))
        assert "must end with .csv, .jsonl, .parquet" in screen.error
        kept = tmp_path / "log.csv"
        kept.write_text("precious")
        screen = await export_to(str(kept))
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the overwrite question")
        await pilot.press("n")
        await until(pilot, lambda: app.screen is screen, "back to the dialog")
        assert "not overwritten" in screen.error and kept.read_text() == "precious"
        await export_to(str(kept))
        await until(pilot, lambda: isinstance(app.screen, Confirm), "the question again")
        await pilot.press("y")
        await until(pilot, lambda: posted.of(ExportScreen.Exported), "the export")
        assert not isinstance(app.screen, ExportScreen | Confirm)
        back = export.read_table(kept, export.MESSAGE_SCHEMA)
        assert back.equals(export.frame(export.message_rows(view.exportable()), back.schema))
        assert back["body"].to_list() == [r.body for r in app.model.topics.history("robot/log")]
        # A service's calls as JSON Lines.
        await pilot.press("2")
        await pilot.pause()
        await pilot.press("s")
        await until(pilot, lambda: isinstance(app.screen, ExportScreen), "the calls dialog")
        calls = tmp_path / "calls.jsonl"
        app.screen.query_one("#export-path", Input).value = str(calls)
        await pilot.press("enter")
        await until(pilot, lambda: len(posted.of(ExportScreen.Exported)) == 2, "the calls")
        rows = [json.loads(line) for line in calls.read_text().splitlines()]
        assert rows and {row["service"] for row in rows} == {"demo/add"}
        assert len(rows) == len(app.model.services.traces("demo/add"))


async def test_enter_on_a_result_stays_on_that_message_while_more_arrive(
    engine: EngineHost, tmp_path: Path
) -> None:
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=engine, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        ids = [engine.publish("lab/find", f'{{"n": {n}}}') for n in range(6)]
        await until(pilot, lambda: len(app.model.topics.history("lab/find")) == 6, "the six")
        await pilot.press("ctrl+f")
        await until(pilot, lambda: isinstance(app.screen, FindScreen), "the Find screen")
        await pilot.press(*"n>4.5", "enter")
        table = app.screen.query_one("#find-results", DataTable)
        await until(pilot, lambda: table.row_count == 1, "the one result")
        await pilot.press("enter")
        await until(pilot, lambda: app.active_view_id == "topics", "Topics")
        messages = app.query_one(MessageList)

        def under_cursor() -> str:
            return messages.get_row_at(messages.cursor_row)[3]

        assert under_cursor() == '{"n": 5}'
        for n in range(6, 9):
            engine.publish("lab/find", f'{{"n": {n}}}')
        await until(pilot, lambda: messages.row_count == 9, "the newer messages listed")
        await pilot.pause()
        assert under_cursor() == '{"n": 5}'
        assert ids[5] in app.query_one(Inspector).texts["headers"]
