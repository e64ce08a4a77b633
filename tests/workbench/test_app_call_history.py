"""The Call view after a call: the panel title follows what it shows,
the focus leaves the form so that view keys switch views, and the history comes back
after a restart, read from the file beside the templates."""

from __future__ import annotations

from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.call_history import (
    CallRecord,
    call_history_file,
    load_call_history,
    save_call_history,
)
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.caller import CallerView
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static, TextArea
from wb_helpers import until

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 42)


def live_app(engine: EngineHost, tmp_path: Path) -> WorkbenchApp:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml", templates_file=tmp_path / "templates.toml"
    )
    return WorkbenchApp(engine=engine, settings=settings)


def title(app: WorkbenchApp) -> str:
    return str(app.query_one("#call-response-box").border_title)


async def call_echo(app: WorkbenchApp, pilot: Pilot[object], body: str, count: int) -> None:
    await pilot.pause()
    await pilot.press("5")
    app.query_one("#call-service", Input).value = "echo"
    app.query_one("#call-body", TextArea).text = body
    app.query_one("#call-service", Input).focus()
    await pilot.press("f5")
    view = app.query_one(CallerView)
    await until(pilot, lambda: len(view.history) == count, "the response")


async def test_title_never_keeps_an_earlier_response_over_an_error(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await call_echo(app, pilot, "abc", 1)
        assert title(app).startswith("response #1 ")
        app.query_one("#call-service", Input).value = "bad\nname"
        app.query_one("#call-service", Input).focus()
        await pilot.press("f5")
        assert "control character" in str(app.query_one("#call-response", Static).render())
        assert title(app) == "call not sent"


async def test_after_a_call_view_keys_switch_views_instead_of_typing(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await call_echo(app, pilot, "abc", 1)
        await pilot.pause()
        assert app.focused is app.query_one("#call-history", DataTable)
        await pilot.press("1")
        assert app.active_view_id == "topics"
        assert app.query_one("#call-service", Input).value == "echo"


async def test_history_is_kept_beside_the_templates_and_restored(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await call_echo(app, pilot, "first", 1)
        await call_echo(app, pilot, "second", 2)
    path = call_history_file(tmp_path / "templates.toml")
    assert path.parent == tmp_path
    assert [r.body for r in load_call_history(path)] == ["first", "second"]
    again = live_app(engine, tmp_path)
    async with again.run_test(size=SIZE) as pilot:
        await pilot.pause()
        view = again.query_one(CallerView)
        assert [(r.service, r.body, r.response) for r in view.history] == [
            ("echo", "first", "tsrif"),
            ("echo", "second", "dnoces"),
        ]
        assert again.query_one("#call-history", DataTable).row_count == 2
        # Nothing of an earlier session is shown as this one's response until selected.
        assert title(again) == "response"
        assert "2 calls from earlier sessions" in str(
            again.query_one("#call-response", Static).render()
        )
        await call_echo(again, pilot, "third", 3)
        assert view.history[-1].number == 3
    assert len(load_call_history(path)) == 3


async def test_a_bad_history_file_is_reported_and_not_written_over(
    engine: EngineHost, tmp_path: Path
) -> None:
    path = call_history_file(tmp_path / "templates.toml")
    path.write_text('[[call]]\nservice = "bad name\\n"\nbody = ""\ntimeout_s = 1\nok = true\n')
    before = path.read_bytes()
    app = live_app(engine, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        shown = str(app.query_one("#call-response", Static).render())
        assert "call 1" in shown and "not saved" in shown
        await call_echo(app, pilot, "x", 1)
    assert path.read_bytes() == before


def test_history_file_round_trips_text_that_needs_escaping(tmp_path: Path) -> None:
    path = tmp_path / "h.toml"
    records = [
        CallRecord(1, "a/b", 'say "hi"\n\\', 0.5, True, "ok\t", 0.001),
        CallRecord(2, "a/b", "", 2.0, False, "no response within 2 s", None),
    ]
    save_call_history(path, records)
    assert load_call_history(path) == records
