"""The Log view: what went wrong in the observed system, with what it carried."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus.stem import Hub
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.log import LogView
from textual.widgets import DataTable
from wb_helpers import until

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


async def test_skipped_emails_and_stem_errors_are_listed_with_their_dump(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = WorkbenchApp(
        engine=engine,
        settings=Settings(keymap_file=tmp_path / "k", templates_file=tmp_path / "t"),
    )
    hub = Hub("lab")  # no tracer given: it reports through the context it joins
    hub.listen(engine.context)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            await pilot.press("0")
            assert app.active_view_id == "log"
            view = app.query_one(LogView)
            engine.context.transport.receiver.push_raw(b"\x00\x01 not an email")  # type: ignore[attr-defined]
            hub.send(to="nobody", from_="lab:probe", type="data", data={"x": 1})
            hub.process_queue()
            table = app.query_one("#log-table", DataTable)
            await until(pilot, lambda: table.row_count == 2, "two notices")
            kinds = [str(table.get_row_at(i)[1]) for i in range(2)]
            assert kinds == ["email.skipped", "stem.addressing_error"]
            assert '"to": "nobody"' in view.detail_text  # the newest is shown: the dump
            table.move_cursor(row=0)
            await pilot.pause()
            assert view.detail_text.startswith("email.skipped")
            await pilot.press("x")
            assert table.row_count == 0 and not app.model.notices
    finally:
        hub.close()
