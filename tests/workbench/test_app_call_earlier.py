"""A new session's Call view shows past calls as history, not an old failure as the
current outcome (it opened on a red error from an earlier run)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.call_history import CallRecord, call_history_file, save_call_history
from mailbus_workbench.model.settings import Settings
from textual.widgets import DataTable, Static
from wb_helpers import until

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


async def test_an_earlier_failure_is_history_until_the_user_selects_it(
    engine: EngineHost, tmp_path: Path
) -> None:
    templates = tmp_path / "templates.toml"
    save_call_history(
        call_history_file(templates),
        [
            CallRecord(1, "echo", "ok", 2.0, True, "ko", 0.01),
            CallRecord(2, "nosuch/svc", "[1]", 2.0, False, "no response within 2 s", None),
        ],
    )
    settings = Settings(keymap_file=tmp_path / "keymap.toml", templates_file=templates)
    app = WorkbenchApp(engine=engine, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("5")
        await until(pilot, lambda: app.active_view_id == "call", "the Call view")
        await pilot.pause()
        panel = app.query_one("#call-response", Static)
        box = app.query_one("#call-response-box")
        shown = str(panel.render())
        assert "no response within" not in shown, shown
        assert "No call in this session yet" in shown
        assert str(box.border_title) == "response"
        # The user looks at the history: the past failure shows, said to be past.
        history = app.query_one("#call-history", DataTable)
        await pilot.click("#call-history")
        await until(pilot, lambda: "no response within" in str(panel.render()), "the call")
        assert history.has_focus
        assert str(box.border_title) == "call #2 failed  (an earlier session)"
        await pilot.press("up")
        await until(pilot, lambda: str(panel.render()).strip() == "ko", "the first call")
        assert str(box.border_title).endswith("(an earlier session)")
