"""The workbench opens an MCAP file made elsewhere as it opens a session: typed in the
Sessions view and opened with F6, its JSON channels' messages listed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.sessions import SessionsView
from mcap.writer import Writer
from textual.widgets import DataTable, Input
from wb_helpers import until

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow


def write_foreign(path: Path) -> dict[str, int]:
    """Two JSON channels (one with a topic that is no Mailbus name) and a protobuf one."""
    with open(path, "wb") as handle:
        writer = Writer(handle, chunk_size=4096)
        writer.start()
        schema = writer.register_schema("P", "jsonschema", b'{"type": "object"}')
        pose = writer.register_channel("/robot/pose", "json", schema)
        odd = writer.register_channel("/odd\ttopic ", "json", 0)
        proto_schema = writer.register_schema("foxglove.Log", "protobuf", b"\x0a\x00")
        proto = writer.register_channel("/camera/log", "protobuf", proto_schema)
        for i in range(30):
            t = 1_750_000_000_000_000_000 + i * 10_000_000
            writer.add_message(pose, t, json.dumps({"x": i}).encode(), t, i + 1)
            writer.add_message(odd, t + 1, b'{"note": "odd"}', t, 0)
            writer.add_message(proto, t + 2, b"\x0a\x03abc", t, 0)
        writer.finish()
    return {"robot/pose": 30, "odd_topic": 30}


async def test_f6_opens_an_mcap_file_and_lists_its_messages(
    engine: EngineHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = tmp_path / "foreign.mcap"
    counts = write_foreign(path)
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=engine, settings=settings)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        app.query_one("#play-path", Input).value = str(path)
        await pilot.press("f6")
        await until(pilot, lambda: view.listed > 0 or bool(view.last_error), "the listing")
        assert not view.last_error
        table = app.query_one("#session-messages", DataTable)
        assert table.row_count == view.listed == sum(counts.values())
        shown = {str(cell) for i in range(table.row_count) for cell in table.get_row_at(i)}
        assert {"robot/pose", "odd_topic"} <= shown
