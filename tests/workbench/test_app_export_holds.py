"""Exports of one message, driven with keys: the `.eml` of an in-process message (no
bytes kept) carries its send time as Date, the JSON export the raw header values, and
each says what it holds."""

from __future__ import annotations

import json
from email import message_from_bytes
from email.utils import parsedate_to_datetime
from pathlib import Path

import pytest
from mailbus_workbench import textual_internals
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.share_screens import ExportScreen
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual.widgets import Input
from wb_helpers import until
from workbench_fixtures.events import fixed_model

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (130, 38)


def app_on_fixed_data(tmp_path: Path) -> WorkbenchApp:
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    return WorkbenchApp(model=fixed_model(), settings=settings, live=False)


async def test_eml_date_is_the_send_time_and_json_headers_are_raw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = app_on_fixed_data(tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        app.query_one(TopicTree).select_topic("sensors/temperature")
        await pilot.pause()
        app.query_one(MessageList).focus()
        await pilot.press("end", "enter")
        await pilot.pause()
        record = app.query_one(MessageList).selected()
        assert record is not None and record.event.raw is None
        await pilot.press("e")
        await until(pilot, lambda: list(tmp_path.glob("*.eml")), "the .eml file")
        (eml,) = tmp_path.glob("*.eml")
        date = parsedate_to_datetime(message_from_bytes(eml.read_bytes())["Date"])
        sent = (record.event.source_timestamp_ns or record.event.time_ns) / 1e9
        assert abs(date.timestamp() - sent) < 1.0
        assert any(
            "Date is its send time" in n.message for n in textual_internals.notifications(app)
        )

        await pilot.press("j")
        await until(pilot, lambda: isinstance(app.screen, ExportScreen), "the export dialog")
        assert "raw values" in str(app.screen.query_one("#export-hint").render())
        app.screen.query_one("#export-path", Input).value = str(tmp_path / "m.json")
        await pilot.press("enter")
        await until(pilot, lambda: (tmp_path / "m.json").exists(), "the JSON file")
        headers = json.loads((tmp_path / "m.json").read_text())["headers"]
        assert headers["Source-Timestamp"] == record.event.headers["Source-Timestamp"]
        assert headers["Source-Timestamp"].isdigit()
