"""The analysis screen's progress and cancel on polars (real pipeline, real session): one
progress message per table, the UI stays live while a table is computed, and Cancel
stops the run between tables."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from mailbus.sessions import analysis
from mailbus_workbench.views.analysis import AnalysisScreen
from textual.widgets import Button, DataTable, Input, ProgressBar, Static
from wb_helpers import Posted, until
from workbench_fixtures.events import fixed_app

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 40)
SESSION = Path(__file__).parents[2] / "sample_sessions" / "demo"


def _progress(posted: Posted) -> list[tuple[str, int, int]]:
    return [
        (m.table, m.done, m.total)  # type: ignore[attr-defined]
        for m in posted.of(AnalysisScreen.Progress)
    ]


async def test_progress_per_table_then_the_tables() -> None:
    posted = Posted()
    app = fixed_app()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await app.push_screen(AnalysisScreen(str(SESSION)))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen)
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(AnalysisScreen.Done), "the analysis")
        assert not screen.error
        names = list(analysis.TABLES)
        expected = [(n, i, len(names)) for i, n in enumerate(names)] + [("", 5, 5)]
        assert _progress(posted) == expected
        assert screen.query_one("#analysis-progress", ProgressBar).progress == len(names)
        assert screen.query_one("#analysis-cancel", Button).disabled
        rows = screen.query_one("#analysis-table-topics", DataTable).row_count
        assert rows == screen.tables["topics"].height > 0


async def test_cancel_stops_between_tables_and_the_ui_stays_live(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`services` is held until the test lets it go: meanwhile the screen answers keys
    and shows the table being computed; Cancel then stops before `calls`."""
    entered, release = threading.Event(), threading.Event()
    collect = analysis._collect

    def held(frame: Any, schema: Any, keys: Any) -> Any:
        if schema is analysis.SERVICE_SCHEMA:  # the services table is being computed
            entered.set()
            assert release.wait(30), "the test never released the table"
        return collect(frame, schema, keys)

    monkeypatch.setattr(analysis, "_collect", held)
    posted = Posted()
    app = fixed_app()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await app.push_screen(AnalysisScreen(str(SESSION)))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen)
        await pilot.press("f5")
        try:
            await until(pilot, entered.is_set, "the services table")
            await until(pilot, lambda: len(_progress(posted)) == 2, "two progress messages")
            # The UI thread is free while the worker computes: typing reaches the field.
            remote = screen.query_one("#analysis-remote", Input)
            remote.focus()
            await pilot.press("s", "c")
            assert remote.value == "sc"
            status = screen.query_one("#analysis-status", Static)
            assert "computing services" in str(status.render())
            await pilot.click("#analysis-cancel")
            assert "cancelling" in str(status.render())
        finally:
            release.set()
        await until(pilot, lambda: posted.of(AnalysisScreen.Done), "the cancelled run")
        assert screen.error == "cancelled" and screen.tables == {}
        assert [t for t, _, _ in _progress(posted)] == ["topics", "services"]
        assert screen.query_one("#analysis-progress", ProgressBar).progress == 1
        assert "cancelled" in str(screen.query_one("#analysis-status", Static).render())
        assert not screen.query_one("#analysis-run", Button).disabled
        assert screen.query_one("#analysis-table-topics", DataTable).row_count == 0


async def test_a_bad_remote_is_reported_not_raised() -> None:
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(AnalysisScreen(str(SESSION)))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen)
        screen.query_one("#analysis-remote", Input).value = "http://nowhere"
        await pilot.press("f5")
        await until(pilot, lambda: screen.error, "the refusal")
        assert "not a sc://HOST:PORT URL" in screen.error


async def test_closing_during_a_run_cancels_it_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    """Escape while a table is computed: the screen goes, the run stops at the next
    table, and its late reports do not touch the closed screen (the app keeps running)."""
    entered, release = threading.Event(), threading.Event()
    collect = analysis._collect
    computed: list[str] = []

    def held(frame: Any, schema: Any, keys: Any) -> Any:
        if schema is analysis.SERVICE_SCHEMA:  # the services table is being computed
            entered.set()
            assert release.wait(30), "the test never released the table"
        elif schema is analysis.CALL_SCHEMA:
            computed.append("calls")
        return collect(frame, schema, keys)

    monkeypatch.setattr(analysis, "_collect", held)
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(AnalysisScreen(str(SESSION)))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen)
        await pilot.press("f5")
        try:
            await until(pilot, entered.is_set, "the services table")
            await pilot.press("escape")
            await until(pilot, lambda: app.screen is not screen, "the screen to close")
        finally:
            release.set()
        await until(pilot, lambda: not screen.running, "the run to end")
        await pilot.pause()
        assert screen.error == "cancelled" and computed == []
        assert app.is_running and not isinstance(app.screen, AnalysisScreen)
