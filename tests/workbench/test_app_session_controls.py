"""Sessions controls that do what they say: a session's events listed a page at a time
without playing it (paged by keys past the edge, and to the time of a seek), a session
picked from the recent ones or a directory tree, the loop switch applied to the replay
under way, and a counter that reads true across passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model import recent_sessions
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.views.session_picker import SessionPicker
from mailbus_workbench.views.sessions import SessionsView
from textual.widgets import DataTable, DirectoryTree, Input, Label, OptionList, Static, Switch
from wb_helpers import Posted, until

# Every test here runs the workbench for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 40)
SAMPLES = Path(__file__).resolve().parents[2] / "sample_sessions"


def settings(tmp_path: Path) -> Settings:
    return Settings(keymap_file=tmp_path / "k.toml", templates_file=tmp_path / "t.toml")


async def test_open_lists_messages_remembers_it_and_the_picker_offers_it(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = WorkbenchApp(engine=engine, settings=settings(tmp_path))
    posted = Posted()
    demo = SAMPLES / "demo"
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        app.query_one("#play-path", Input).value = str(demo)
        await pilot.press("f6")
        await until(pilot, lambda: view.listed > 0, "the session's messages")
        table = app.query_one("#session-messages", DataTable)
        assert table.row_count == view.listed <= 100
        assert str(table.border_title).startswith(f"events 1-{view.listed} of ")
        assert view.player is None  # listed, not played
        recent = recent_sessions.load(view.recent_file)
        assert recent == [str(demo.resolve())]
        # With no path typed, F6 offers the recent sessions and a directory tree.
        app.query_one("#play-path", Input).value = ""
        await pilot.press("f6")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        picker = app.screen
        assert picker.query_one("#picker-recent", OptionList).option_count == 1
        assert picker.query_one("#picker-tree", DirectoryTree) is not None
        opened = len(posted.of(SessionsView.SessionOpened))
        await pilot.press("enter")  # the highlighted recent session
        await until(pilot, lambda: len(posted.of(SessionsView.SessionOpened)) > opened, "open")
        assert app.query_one("#play-path", Input).value == str(demo.resolve())


async def test_a_listing_that_comes_late_from_a_session_opened_before_is_not_shown(
    engine: EngineHost, tmp_path: Path
) -> None:
    from mailbus_workbench.views.sessions.playback import PlaybackPane

    app = WorkbenchApp(engine=engine, settings=settings(tmp_path))
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        table = app.query_one("#session-messages", DataTable)
        path = app.query_one("#play-path", Input)
        path.value = str(SAMPLES / "demo")
        await pilot.press("f6")
        await until(pilot, lambda: view.listed > 0, "the demo's messages")
        demo_listing = posted.of(PlaybackPane._Listed)[-1]
        demo_shown = [table.get_row_at(i) for i in range(table.row_count)]
        path.value = str(SAMPLES / "slow_service")
        await pilot.press("f6")
        await until(pilot, lambda: len(posted.of(PlaybackPane._Listed)) == 2, "the second list")
        await pilot.pause()
        shown = [table.get_row_at(i) for i in range(table.row_count)]
        assert shown and shown != demo_shown  # the second session is listed
        # The first session's worker answering late (as under load) changes nothing.
        view.playback.post_message(demo_listing)
        await pilot.pause()
        await pilot.pause()
        assert [table.get_row_at(i) for i in range(table.row_count)] == shown
        assert view.listed == len(shown)


def test_the_recent_list_is_bounded_newest_first_and_survives_a_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "recent.json"
    path.write_text("{broken")
    assert recent_sessions.load(path) == []
    for n in range(15):
        recent_sessions.remember(path, str(tmp_path / f"s{n}"))
    saved = json.loads(path.read_text())
    assert len(saved) == recent_sessions.MAX_RECENT and saved[0] == str(tmp_path / "s14")
    recent_sessions.remember(path, str(tmp_path / "s10"))  # again: moves to the front once
    assert recent_sessions.load(path)[:2] == [str(tmp_path / "s10"), str(tmp_path / "s14")]


async def test_loop_switch_applies_to_the_replay_under_way(
    engine: EngineHost, tmp_path: Path
) -> None:
    app = WorkbenchApp(engine=engine, settings=settings(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        app.query_one("#play-path", Input).value = str(SAMPLES / "demo")
        await pilot.press("f6")
        await until(pilot, lambda: view.session is not None, "the session")
        app.query_one("#play-rate", Input).value = "1000"
        await pilot.press("f8")  # a paused player, one email sent: the replay under way
        await until(pilot, lambda: view.player is not None and view.player.sent == 1, "a step")
        assert view.player.loop is False
        app.query_one("#play-loop", Switch).value = True  # now, not before the play
        await until(pilot, lambda: view.player.loop, "the switch reaching the player")
        await pilot.press("f7")
        await until(pilot, lambda: view.player.loops >= 1, "a second pass", timeout=60)
        status = str(app.query_one("#play-status", Static).render())
        assert "pass" in status and "sent in all" in status
        assert f"of {view.player.total}" in status
        assert view.player.pass_position <= view.player.total
        app.query_one("#play-loop", Switch).value = False
        await until(pilot, lambda: view.player.state == "finished", "the end", timeout=60)
        view.player.stop()


async def test_a_session_without_an_index_opens_pages_by_keys_and_follows_a_seek(
    engine: EngineHost, tmp_path: Path
) -> None:
    from mailbus.sessions.index import INDEX_FILE
    from mailbus.sessions.reader import open_session
    from mailbus_workbench.model.session_messages import PAGE_ROWS as N
    from mailbus_workbench.views.sessions.playback import PlaybackPane

    from bench.sessions import synthetic_session

    session = tmp_path / "big"
    synthetic_session(session, 3_000, part_rows=1_000)  # three parts, no index
    assert not (session / INDEX_FILE).exists()
    total = open_session(session).rows  # from the parts' footers
    app = WorkbenchApp(engine=engine, settings=settings(tmp_path))
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        table = app.query_one("#session-messages", DataTable)
        app.query_one("#play-path", Input).value = str(session)
        await pilot.press("f6")
        await until(pilot, lambda: view.listed > 0, "the first page")
        status = str(app.query_one("#play-status", Static).render())
        assert f"{total:,} events" in status and "3 parts" in status  # how big it is
        assert "no index: built it" in status  # built once, said so, kept beside the parts
        assert (session / INDEX_FILE).exists()
        assert str(table.border_title).startswith(f"events 1-{N} of {total:,}")
        first_page = [table.get_row_at(i) for i in range(table.row_count)]

        def listed() -> int:
            return len(posted.of(PlaybackPane._Listed))

        # Down past the last row reads the next page, up past the first the one before.
        table.focus()
        await pilot.press("ctrl+end")
        await until(pilot, lambda: table.cursor_row == table.row_count - 1, "the last row")
        pages = listed()
        await pilot.press("down")
        await until(pilot, lambda: listed() > pages, "the next page")
        assert str(table.border_title).startswith(f"events {N + 1}-{2 * N:,} of {total:,}")
        assert table.cursor_row == 0
        pages = listed()
        await pilot.press("up")
        await until(pilot, lambda: listed() > pages, "the page before")
        assert str(table.border_title).startswith(f"events 1-{N} of {total:,}")
        assert table.cursor_row == table.row_count - 1  # the row just above the one left
        assert [table.get_row_at(i) for i in range(table.row_count)] == first_page

        # A seek lists the events from that time on.
        duration = view.playback.opened.duration_s  # type: ignore[union-attr]
        seek = app.query_one("#play-seek", Input)
        seek.value = f"{duration / 2:.3f}"
        seek.focus()
        pages = listed()
        await pilot.press("enter")
        await until(pilot, lambda: listed() > pages, "the page at the seek")
        assert not str(table.border_title).startswith(f"events 1-{N} ")
        assert float(str(table.get_row_at(0)[0])) >= duration / 2 - 0.001


async def test_a_first_seek_builds_a_player_that_reads_only_from_there(
    engine: EngineHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first seek of an open session (End on the timeline, no player yet) builds a
    paused player sought before it starts: its reader reads the row groups at the end,
    never the first one (which a player started at 0 and sought afterwards would read)."""
    import threading

    from mailbus.sessions.pages import RowGroupReader
    from mailbus_workbench.widgets.timeline import TimelineBar

    from bench.sessions import synthetic_session

    session = tmp_path / "three"
    synthetic_session(session, 3_000, part_rows=1_000)  # three parts: three row groups
    read_by_player: list[tuple[int, int]] = []
    table = RowGroupReader._table  # every read of a row group passes here

    def spy(self: RowGroupReader, parquet: object, group: object, *args: object) -> object:
        if threading.current_thread().name == "mailbus-player-reader":
            read_by_player.append((group.part, group.number))  # type: ignore[attr-defined]
        return table(self, parquet, group, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(RowGroupReader, "_table", spy)
    app = WorkbenchApp(engine=engine, session=str(session), settings=settings(tmp_path))
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(SessionsView)
        bar = app.query_one(TimelineBar)
        await until(pilot, lambda: bar.timeline is not None, "the timeline", timeout=60)
        bar.focus()
        await pilot.press("end")
        await until(
            pilot,
            lambda: (
                view.player is not None
                and view.player.state == "paused"
                and view.player.buffered > 0
            ),
            "the player at the end",
            timeout=60,
        )
        player = view.player
        assert player is not None
        assert player.position_s == player.duration_s == bar.cursor_s  # at the last email
        assert read_by_player, "the player read nothing"
        assert (0, 0) not in read_by_player  # the first part's row group: never read
        player.stop()


async def test_the_picker_opens_an_mcap_file_and_names_what_is_not_a_session(
    engine: EngineHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F6 with no path: in the picker's tree (rooted where recordings go), Enter on an
    .mcap file opens it (as `mailbus open FILE.mcap` does); Enter on another file says
    what a session is and keeps the picker open."""
    from mailbus.sessions.mcap_export import export_mcap
    from mailbus.sessions.reader import open_session

    root = tmp_path / "sessions"  # where recordings go, under the working directory
    root.mkdir()
    export_mcap(open_session(SAMPLES / "demo"), root / "demo.mcap")
    (root / "notes.txt").write_text("not a session")
    monkeypatch.chdir(tmp_path)
    app = WorkbenchApp(engine=engine, settings=settings(tmp_path / "config"))
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        await pilot.pause()
        await pilot.press("9")
        view = app.query_one(SessionsView)
        app.query_one("#play-path", Input).value = ""
        await pilot.press("f6")
        await until(pilot, lambda: isinstance(app.screen, SessionPicker), "the picker")
        await until(pilot, lambda: app.screen.query("#picker-tree"), "the picker's tree")
        tree = app.screen.query_one("#picker-tree", DirectoryTree)
        await until(pilot, lambda: tree.last_line >= 2, "the tree's files")
        lines = {tree.get_node_at_line(i).data.path.name: i for i in range(3)}  # type: ignore[union-attr]
        assert set(lines) == {"sessions", "demo.mcap", "notes.txt"}
        tree.focus()
        tree.cursor_line = lines["notes.txt"]
        await pilot.press("enter")
        hint = app.screen.query_one("#picker-hint", Label)
        await until(pilot, lambda: "is not a session" in str(hint.render()), "the hint")
        assert "an .mcap file" in str(hint.render())
        tree.cursor_line = lines["demo.mcap"]
        await pilot.press("enter")
        await until(pilot, lambda: view.listed > 0, "the MCAP file's events", timeout=60)
        assert not isinstance(app.screen, SessionPicker)
        assert Path(app.query_one("#play-path", Input).value) == (root / "demo.mcap").resolve()
        assert not posted.of(SessionsView.SessionOpened)[-1].error  # type: ignore[attr-defined]
