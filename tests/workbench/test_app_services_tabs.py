"""A click on a tab shows its screen and gives it the keys (the same
in Chromium is in test_serve_browser.py)."""

from __future__ import annotations

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.screens import HelpScreen
from textual.widgets import Input
from wb_helpers import until
from workbench_fixtures.events import fixed_app

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow


async def test_a_tab_click_gives_the_keys_to_its_view() -> None:
    app = fixed_app()
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.pause()
        for view_id, _, _ in WorkbenchApp.VIEWS[1:]:
            await pilot.click(f"#--content-tab-{view_id}")
            await pilot.pause()
            assert app.active_view_id == view_id
            focused = app.focused
            assert focused is not None and app.view(view_id) in focused.ancestors, focused
        await pilot.click("#--content-tab-services")
        await until(pilot, lambda: app.active_view_id == "services", "the Services tab")
        await pilot.press("question_mark")
        await until(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        assert "Every request is paired" in help_screen.markdown
        assert app.main_screen.query_one("#topic-filter", Input).value == ""
