"""The Sessions screen against the real recorder, player and analysis: record what the
engine carries, open it, play it back into the same views, step, seek, analyse."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.sessions import AnalysisScreen, SessionsView
from textual.widgets import DataTable, Input, Select, Switch
from wb_helpers import Posted, until
from workbench_fixtures.events import fixed_app

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 40)


async def test_record_open_play_step_seek_and_analyze(engine: EngineHost, tmp_path: Path) -> None:
    settings = Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")
    app = WorkbenchApp(engine=engine, settings=settings)
    posted = Posted()
    directory = tmp_path / "run1"
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        app.query_one("#rec-dir", Input).value = str(directory)
        await pilot.press("f5")
        await until(pilot, lambda: view.recorder is not None, "the recorder")
        for i in range(5):
            engine.publish("lab/rec", f'{{"i": {i}}}')
        # The first Parquet write loads pyarrow's writer: 11 s seen on a loaded machine.
        await until(
            pilot, lambda: view.recorder.status()["written"] >= 5, "5 events written", timeout=60
        )
        assert "recording to" in str(app.query_one("#rec-status").render())
        await pilot.press("f5")
        await until(pilot, lambda: view.recorder is None and view.last_manifest, "the stop")
        assert view.last_manifest["status"] == "complete"
        assert app.query_one("#play-path", Input).value == str(directory)

        await pilot.press("f6")
        await until(pilot, lambda: posted.of(SessionsView.SessionOpened), "the session")
        opened = posted.of(SessionsView.SessionOpened)[-1]
        assert opened.error == "" and opened.events >= 5  # type: ignore[attr-defined]

        before = app.model.topics.stats["lab/rec"].count
        app.query_one("#play-rate", Input).value = "50"
        app.query_one("#play-prefix", Switch).value = False  # under the recorded names
        await pilot.press("f7")
        await until(
            pilot,
            lambda: view.player is not None and view.player.state == "finished",
            "the replay to finish",
        )
        await until(
            pilot,
            lambda: app.model.topics.stats["lab/rec"].count == before + 5,
            "the replayed messages in the Topics model",
        )

        # Step: a new paused player sends exactly one email per step.
        view.player = None
        await pilot.press("f8")
        await until(pilot, lambda: view.player is not None and view.player.sent == 1, "a step")
        assert view.player.state == "paused"
        seek = app.query_one("#play-seek", Input)
        seek.focus()
        for bad in ("-1", "1e999", "nan", "soon"):
            view.last_error = ""
            seek.value = bad
            await pilot.press("enter")
            assert "0 or more" in view.last_error, bad
            assert app.is_running
        seek.value = "0"
        await pilot.press("enter")
        assert view.player.position_s == 0.0

        await pilot.press("f9")
        await until(pilot, lambda: isinstance(app.screen, AnalysisScreen), "the analysis")
        await pilot.press("f5")
        await until(pilot, lambda: app.screen.tables, "the tables", timeout=60)
        topics = app.screen.tables["topics"]
        assert "lab/rec" in topics["topic"].to_list()
        table = app.screen.query_one("#analysis-table-topics", DataTable)
        assert table.row_count == len(topics)
        await pilot.press("escape")
        assert not isinstance(app.screen, AnalysisScreen)
        view.player.stop()


async def test_open_refuses_what_is_not_a_session(engine: EngineHost, tmp_path: Path) -> None:
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "manifest.json").write_text("{not json")
    app = WorkbenchApp(
        engine=engine,
        session=str(tmp_path / "junk"),
        settings=Settings(keymap_file=tmp_path / "k", templates_file=tmp_path / "t"),
    )
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        # Bounds for a loaded machine (a cold polars import alone took 9 s under load 30).
        await until(pilot, lambda: posted.of(SessionsView.SessionOpened), "the open", timeout=60)
        # The tab switch settles in messages of its own: waited for, not one pause.
        await until(pilot, lambda: app.active_view_id == "sessions", "the Sessions view")
        assert posted.of(SessionsView.SessionOpened)[-1].error  # type: ignore[attr-defined]
        assert app.query_one(SessionsView).session is None
        app.query_one("#rec-dir", Input).value = str(tmp_path / "junk")
        await pilot.press("f5")
        await until(pilot, lambda: posted.of(SessionsView.RecordingChanged), "the refusal")
        assert "already holds a session" in posted.of(SessionsView.RecordingChanged)[-1].error  # type: ignore[attr-defined]


async def test_analysis_screen_runs_on_spark_like_on_polars() -> None:
    """The engine picker's Spark choice: real PySpark on Java, same tables as polars."""
    from mailbus.sessions import analysis

    session = Path(__file__).parents[2] / "sample_sessions" / "demo"
    expected = analysis.analyze([session], engine="polars")["topics"]
    app = fixed_app()
    async with app.run_test(size=SIZE) as pilot:
        await app.push_screen(AnalysisScreen(str(session)))
        screen = app.screen
        assert isinstance(screen, AnalysisScreen)
        screen.query_one("#analysis-engine", Select).value = "spark"
        await pilot.press("f5")
        await until(pilot, lambda: screen.tables or screen.error, "Spark", timeout=240)
        assert not screen.error
        topics = screen.tables["topics"]
        assert sorted(topics["topic"].to_list()) == sorted(expected["topic"].to_list())
        by_topic = dict(zip(topics["topic"].to_list(), topics["received"].to_list(), strict=True))
        assert by_topic == dict(
            zip(expected["topic"].to_list(), expected["received"].to_list(), strict=True)
        )
        table = screen.query_one("#analysis-table-topics", DataTable)
        assert table.row_count == len(topics)


async def test_the_player_is_built_off_the_ui_thread(
    engine: EngineHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading a large session's events takes seconds: never on the UI loop."""
    import threading

    from mailbus.sessions import player as player_module

    built_on: list[threading.Thread] = []
    real_init = player_module.Player.__init__

    def recording_init(self: Any, *args: Any, **kwargs: Any) -> None:
        built_on.append(threading.current_thread())
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(player_module.Player, "__init__", recording_init)
    session = Path(__file__).parents[2] / "sample_sessions" / "demo"
    app = WorkbenchApp(
        engine=engine,
        session=str(session),
        settings=Settings(keymap_file=tmp_path / "k", templates_file=tmp_path / "t"),
    )
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await until(pilot, lambda: posted.of(SessionsView.SessionOpened), "the open", timeout=60)
        await until(pilot, lambda: app.active_view_id == "sessions", "the Sessions view")
        view = app.query_one(SessionsView)
        # F8 is the view's key: it reaches the view once the focus is in it (pressed
        # before, under load, it went to the view shown at start and was lost).
        await until(
            pilot,
            lambda: app.focused is not None and view in app.focused.ancestors_with_self,
            "the focus in the Sessions view",
        )
        await pilot.press("f8")  # step: builds a paused player, then sends one email
        await until(
            pilot, lambda: view.player is not None and view.player.sent == 1, "a step", timeout=60
        )
        assert built_on and built_on[0] is not threading.main_thread()
        view.player.stop()
