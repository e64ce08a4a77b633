"""Save as test and the Tests view, as a person uses them on the embedded demo: a message
and a call saved with keys run green as saved (in a subprocess, and in the Tests view
with their timings on the screen); a test whose where= cannot match is listed as failed
with its near-miss diff; a missing folder, a collection error and a stopped run are said
plainly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.services import ServicesView
from mailbus_workbench.views.sessions import SessionsView
from mailbus_workbench.views.tests import TestsView
from mailbus_workbench.views.topics import TopicsView
from mailbus_workbench.widgets.inspector import Inspector
from mailbus_workbench.widgets.trace_list import TraceList
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static
from wb_helpers import until

SIZE = (150, 44)
RUN_TIMEOUT_S = 180.0


def make_app(tmp_path: Path, folder: Path, engine: EngineHost | None) -> WorkbenchApp:
    settings = Settings(
        keymap_file=tmp_path / "keymap.toml",
        templates_file=tmp_path / "templates.toml",
        tests_folder=folder,
    )
    return WorkbenchApp(engine=engine, settings=settings)


def drawn(app: WorkbenchApp, selector: str) -> str:
    return str(app.query_one(selector, Static).render())


def table_text(app: WorkbenchApp) -> str:
    table = app.query_one("#tests-table", DataTable)
    rows = [table.get_row_at(i) for i in range(table.row_count)]
    return "\n".join("  ".join(str(cell) for cell in row) for row in rows)


async def save_with_keys(pilot: Pilot[object], key: str) -> Path:
    """`key` opens the save dialog; Enter takes the name it derived."""
    app = pilot.app
    await pilot.press(key)
    await until(pilot, lambda: len(app.screen_stack) > 1, "the save dialog")
    path = Path(app.screen.query_one("#export-path", Input).value)
    await pilot.press("enter")
    await until(pilot, lambda: len(app.screen_stack) == 1, "the dialog to close")
    return path


async def run_in_view(pilot: Pilot[object], key: str) -> TestsView:
    app = pilot.app
    assert isinstance(app, WorkbenchApp)
    view = app.query_one(TestsView)
    before = view.result
    await pilot.press(key)
    await until(pilot, lambda: view.running_since is not None, "the run to start")
    await until(pilot, lambda: view.result is not before, "the run to end", RUN_TIMEOUT_S)
    return view


@pytest.fixture
def demo_engine(monkeypatch: pytest.MonkeyPatch) -> EngineHost:
    monkeypatch.delenv("MAILBUS_CONFIG_FILE", raising=False)
    return EngineHost.from_config(None)


@pytest.mark.slow
async def test_saved_tests_of_the_demo_pass_as_saved_and_in_the_tests_view(
    tmp_path: Path, demo_engine: EngineHost
) -> None:
    folder = tmp_path / "tests"
    app = make_app(tmp_path, folder, demo_engine)
    async with app.run_test(size=SIZE) as pilot:
        # Topics: the temperature topic, paused, its first message clicked, then t.
        topics = app.query_one(TopicsView)
        await until(pilot, lambda: topics.topic is not None, "traffic")
        await pilot.press("escape")  # from wherever the focus is, to the tree
        await pilot.press("slash", *"temperature", "enter")
        await until(pilot, lambda: topics.topic == "sensors/temperature", "the topic")
        await until(
            pilot, lambda: len(app.model.topics.history("sensors/temperature")) >= 3, "messages"
        )
        await pilot.press("p")
        await pilot.click("#message-list", offset=(4, 1))
        await until(pilot, lambda: app.query_one(Inspector).record is not None, "a message")
        message_test = await save_with_keys(pilot, "t")
        assert message_test == folder / "test_sensors_temperature.py"
        source = message_test.read_text()
        # Only the fields that stayed the same: the reading and the time change.
        assert "expect.topic('sensors/temperature', where={'sensor': 't1'}" in source
        assert "system.start('python -m mailbus.demo', ready=" in source
        # The same name again is refused, and nothing is replaced.
        await pilot.press("t")
        await until(pilot, lambda: len(app.screen_stack) > 1, "the save dialog")
        app.screen.query_one("#export-path", Input).value = str(message_test)
        await pilot.press("enter")
        refusal = "exists: not overwritten"
        await until(
            pilot, lambda: refusal in str(app.screen.query_one("#export-error").render()), refusal
        )
        await pilot.press("escape")
        assert message_test.read_text() == source

        # Services: an answered call of the demo's client, clicked, then t.
        await pilot.press("2")
        services = app.query_one(ServicesView)
        traces = services.query_one(TraceList)
        await until(pilot, lambda: traces.row_count >= 2, "calls", 15)
        await pilot.click("#trace-list", offset=(4, 1))
        await until(
            pilot,
            lambda: (s := traces.selected()) is not None and s.response is not None,
            "an answered call",
        )
        call_test = await save_with_keys(pilot, "t")
        assert call_test == folder / "test_demo_add.py"
        assert "expect.service('demo/add').responds(where={'sum':" in call_test.read_text()

        # (a) As saved, in a subprocess.
        done = subprocess.run(
            [sys.executable, "-m", "mailbus", "test", str(folder)],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "2 passed" in done.stdout

        # (b) In the Tests view, with keys: both pass, with their timings on the screen.
        await pilot.press("T")
        view = await run_in_view(pilot, "r")
        assert view.result is not None and view.result.status == 0
        assert "2 passed" in drawn(app, "#tests-status")
        rows = table_text(app)
        assert "✔ test_sensors_temperature" in rows and "✔ test_demo_add" in rows
        assert "✔ topic sensors/temperature" in rows and "✔ service demo/add" in rows
        assert " ms" in rows or " s" in rows  # durations and observed latencies

        # A test whose where= cannot match: failed, with the near-miss diff shown.
        failing = source.replace("{'sensor': 't1'}", "{'sensor': 'nope'}").replace(
            "def test_sensors_temperature", "def test_never_matches"
        )
        (folder / "test_never.py").write_text(failing.replace("within=10.0", "within=1.0"))
        view = await run_in_view(pilot, "r")
        assert view.result is not None and view.result.status == 1
        assert "2 passed, 1 failed" in drawn(app, "#tests-status")
        assert "✘ test_never_matches" in table_text(app)
        detail = drawn(app, "#tests-detail")  # the failed test is selected
        assert "expected 1 message on 'sensors/temperature'" in detail
        assert "nearest misses" in detail and 'got "t1"' in detail

        # Rerun failed: only that one runs.
        view = await run_in_view(pilot, "f")
        assert "1 failed" in drawn(app, "#tests-status")
        assert "passed" not in drawn(app, "#tests-status")
        # Open: its source, with its file and line.
        await pilot.press("o")
        assert "test_never.py:" in drawn(app, "#tests-detail")
        assert "def test_never_matches" in drawn(app, "#tests-detail")


async def test_a_missing_folder_is_said_and_nothing_runs(tmp_path: Path) -> None:
    app = make_app(tmp_path, tmp_path / "no-such-folder", None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()  # the first frame: the keys go to a view from then on
        await pilot.press("T")
        await pilot.press("r")
        view = app.query_one(TestsView)
        assert view.running_since is None
        assert "No folder" in drawn(app, "#tests-status")
        assert "no-such-folder" in drawn(app, "#tests-detail")


@pytest.mark.slow
async def test_a_collection_error_and_a_stopped_run_are_said(tmp_path: Path) -> None:
    folder = tmp_path / "tests"
    folder.mkdir()
    (folder / "test_broken.py").write_text("def test_x(:\n")
    app = make_app(tmp_path, folder, None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()  # the first frame: the keys go to a view from then on
        await pilot.press("T")
        view = await run_in_view(pilot, "r")
        assert view.result is not None and view.result.status == 2
        assert "could not be collected" in drawn(app, "#tests-status")
        assert "SyntaxError" in drawn(app, "#tests-detail")  # the run's output

        (folder / "test_broken.py").write_text(
            "import threading\n\ndef test_slow():\n    threading.Event().wait(120)\n"
        )
        await pilot.press("r")
        await until(pilot, lambda: "test_broken.py" in view._last_output_line(), "the run", 60)
        before = view.result
        await pilot.press("s")
        await until(pilot, lambda: view.result is not before, "the stop", 30)
        assert view.result is not None and view.result.stopped
        assert "Run stopped" in drawn(app, "#tests-status")


@pytest.mark.slow
async def test_an_open_session_is_saved_as_a_golden_test_with_f4(tmp_path: Path) -> None:
    session = Path(__file__).resolve().parents[2] / "sample_sessions" / "demo"
    folder = tmp_path / "tests"
    app = make_app(tmp_path, folder, None)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("9")
        await pilot.press("f4")  # nothing open yet: said, no dialog
        assert len(app.screen_stack) == 1
        view = app.query_one(SessionsView)
        view.open_path(str(session))
        await until(pilot, lambda: view.session is not None, "the session", 30)
        saved = await save_with_keys(pilot, "f4")
    assert saved == folder / "test_demo.py"
    assert f"golden.check({str(session)!r}, order='topic')" in saved.read_text()
