"""What `e` and `j` export in Topics: the message the user selected, also after newer
messages pushed it out of the live window (it was trimmed about 2.5 s later at 20 Hz,
and the inspector, `e` and `j` jumped to another message); and with every header of the
bytes the email arrived with."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.share_screens import ExportScreen
from mailbus_workbench.views.topics import LIVE_ROWS, TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.pilot import Pilot
from wb_helpers import screen_text, until
from workbench_fixtures.events import RAW_DATE, T0, fixed_app, imap_bytes, message_event

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)
TOPIC = "robot/pose"


async def arrive(app: WorkbenchApp, pilot: Pilot[object], first: int, count: int) -> None:
    """`count` new messages on TOPIC, each followed by a refresh, as at 20 Hz."""
    for n in range(first, first + count):
        event = message_event(TOPIC, json.dumps({"n": n}), T0 + 20 + n / 20, n)
        app.model.feed_events([event])
        app.model.pump()
        app.refresh_now()
        await pilot.pause()


def drawn_cursor_number(app: WorkbenchApp) -> str:
    messages = app.query_one(MessageList)
    return messages.get_row_at(messages.cursor_row)[0]


async def select_a_message(app: WorkbenchApp, pilot: Pilot[object]) -> int:
    await pilot.pause()
    app.query_one(TopicTree).select_topic(TOPIC)
    view = app.query_one(TopicsView)
    await until(pilot, lambda: view.topic == TOPIC, "the topic shown")
    messages = app.query_one(MessageList)
    await pilot.click(MessageList, offset=(3, 5))  # a row a few lines down the list
    chosen = int(drawn_cursor_number(app))
    assert app.query_one(Inspector).record.number == chosen  # type: ignore[union-attr]
    assert messages.cursor_row < messages.row_count - 1  # not the newest: held
    return chosen


async def test_a_selected_message_stays_selected_and_inspected_as_newer_ones_come() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        chosen = await select_a_message(app, pilot)
        await arrive(app, pilot, 50_000, 2 * LIVE_ROWS)  # the live window turns over twice
        assert drawn_cursor_number(app) == str(chosen)
        assert app.query_one(Inspector).record.number == chosen  # type: ignore[union-attr]
        # The user moves: the hold goes with the cursor, to the next row listed.
        await pilot.press("down")
        moved = int(drawn_cursor_number(app))
        assert moved != chosen
        assert app.query_one(Inspector).record.number == moved  # type: ignore[union-attr]
        await pilot.press("end")  # following the newest again: nothing held
        await arrive(app, pilot, 60_000, 3)
        messages = app.query_one(MessageList)
        assert '"n": 60002' in messages.get_row_at(messages.cursor_row)[3]
        assert messages.row_count == LIVE_ROWS


async def test_e_and_j_export_the_selected_message_after_it_left_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        chosen = await select_a_message(app, pilot)
        await arrive(app, pilot, 50_000, LIVE_ROWS + 10)
        await pilot.press("e")
        assert [p.name for p in tmp_path.glob("*.eml")] == [f"robot_pose-{chosen}.eml"]
        await pilot.press("j")
        await until(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        await pilot.press("enter")
        await until(pilot, lambda: list(tmp_path.glob("*.json")), "the JSON file")
        (written,) = tmp_path.glob("*.json")
        assert json.loads(written.read_text())["number"] == chosen


async def test_j_exports_every_header_of_the_bytes_that_arrived(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The JSON export had the Mailbus headers only, no Date, From, MIME-Version or
    Content-Type, though the bytes the email arrived with were kept."""
    monkeypatch.chdir(tmp_path)
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        event = message_event("lab/imap", '{"a": 1}', T0 + 12.5, 7001)
        app.model.feed_events([dataclasses.replace(event, raw=imap_bytes(event))])
        app.model.pump()
        app.refresh_now()
        app.query_one(TopicTree).select_topic("lab/imap")
        await until(pilot, lambda: app.query_one(TopicsView).topic == "lab/imap", "the topic")
        await pilot.click(MessageList, offset=(3, 1))
        await until(pilot, lambda: app.query_one(Inspector).record is not None, "inspected")
        await pilot.press("j")
        await until(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        await pilot.press("enter")
        await until(pilot, lambda: list(tmp_path.glob("*.json")), "the JSON file")
        (written,) = tmp_path.glob("*.json")
        headers = json.loads(written.read_text())["headers"]
        assert headers["Date"] == RAW_DATE
        assert headers["MIME-Version"] == "1.0"
        assert headers["Content-Type"].startswith("text/plain")
        assert "@" in headers["From"]
        assert headers["Delivered-To"] == "lab@mailbus.test"
        assert headers["Received"].startswith("from mx.mailbus.test")  # unfolded, whole
        assert RAW_DATE in headers["Received"]
        assert headers["Subject"] == "lab/imap" and headers["Source-Timestamp"]


async def test_the_save_test_dialog_is_whole_at_120_columns() -> None:
    app = fixed_app()
    async with app.run_test(size=(120, 34)) as pilot:
        await pilot.pause()
        app.query_one(TopicTree).select_topic("sensors/temperature")
        await pilot.pause()
        await pilot.click(MessageList, offset=(3, 2))
        await pilot.press("t")
        await until(pilot, lambda: isinstance(app.screen, ExportScreen), "the save dialog")
        await pilot.pause()
        text = screen_text(app)
        assert "Save a test of a message on sensors/temperature" in text, text
        assert "existing file is never replaced." in text, text  # was cut at "an exist"
