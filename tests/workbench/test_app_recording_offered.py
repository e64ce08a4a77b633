"""A session just recorded is offered: F6 pressed while it is still being written opens it
once written (not the picker), and it is among the picker's recent sessions, recorded
anywhere (not only under the tree the picker shows)."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.session_picker import SessionPicker
from mailbus_workbench.views.sessions import SessionsView
from textual import events
from textual.widgets import Input, OptionList, Static
from wb_helpers import until

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 40)


async def test_a_stopped_recording_is_offered_by_the_picker(tmp_path: Path) -> None:
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=EngineHost(seed=3), settings=settings)  # the demo's traffic
    elsewhere = tmp_path / "elsewhere" / "run"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        app.query_one("#rec-dir", Input).value = str(elsewhere)
        await pilot.press("f5")
        await until(pilot, lambda: view.recorder is not None, "recording")
        recorder = view.recorder
        assert recorder is not None
        # The first batch waits for pyarrow's first table: seconds on a loaded machine.
        await until(pilot, lambda: recorder.status()["written"] > 0, "events written", 30)
        await pilot.press("f5")
        status = app.query_one("#rec-status", Static)
        await until(pilot, lambda: "Recorded " in str(status.render()), "stopped")
        # Later, with another path typed or none: the picker offers the recording.
        app.query_one("#play-path", Input).value = ""
        await pilot.press("ctrl+o")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        recent = app.screen.query_one("#picker-recent", OptionList)
        assert recent.option_count == 1
        assert str(recent.get_option_at_index(0).prompt) == str(elsewhere)
        await pilot.press("enter")
        await until(pilot, lambda: view.session is not None, "the recording open")
        assert app.query_one("#play-path", Input).value == str(elsewhere)
        assert "status complete" in str(app.query_one("#play-status", Static).render())


async def test_f6_right_after_stopping_opens_the_recording(tmp_path: Path) -> None:
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=EngineHost(seed=3), settings=settings)
    directory = tmp_path / "rec"
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        app.query_one("#rec-dir", Input).value = str(directory)
        await pilot.press("f5")
        await until(pilot, lambda: view.recorder is not None, "recording")
        recorder = view.recorder
        assert recorder is not None
        await until(pilot, lambda: recorder.status()["written"] > 0, "events written", 30)
        # F5 then F6 as fast as a person presses them: the app takes F6 before the stop
        # (a worker) has written the session, while its path is not offered yet.
        # (Pilot.press would wait for an idle process between the two keys.)
        app.post_message(events.Key("f5", None))
        app.post_message(events.Key("f6", None))
        await until(pilot, lambda: view.session is not None, "the recording open", 30)
        assert not isinstance(app.screen, SessionPicker)
        assert app.query_one("#play-path", Input).value == str(directory)
        assert "status complete" in str(app.query_one("#play-status", Static).render())
