"""Replay on a timeline: the timeline bar of an open session seeks the
real player by key and by mouse, and the replay runs under `replay/` with each email's
recorded source timestamp, marked as replayed in Topics."""

from __future__ import annotations

import bisect
from pathlib import Path

import pytest
from mailbus import headers as H
from mailbus.sessions.player import replay_events
from mailbus.sessions.reader import open_session
from mailbus_workbench.app import WorkbenchApp
from mailbus_workbench.engine import EngineHost
from mailbus_workbench.model.settings import Settings
from mailbus_workbench.model.timeline import offset_at
from mailbus_workbench.views.sessions import SessionsView
from mailbus_workbench.widgets.message_list import MessageList
from mailbus_workbench.widgets.timeline import LABEL_WIDTH, TimelineBar
from mailbus_workbench.widgets.topic_tree import TopicTree
from textual import events
from textual.message import Message
from wb_helpers import Posted, until

# Every test here runs the workbench (or a process) for seconds: not in the quick tier.
pytestmark = pytest.mark.slow

SIZE = (140, 40)
DEMO = Path(__file__).resolve().parents[2] / "sample_sessions" / "demo"


async def test_the_timeline_seeks_by_key_and_mouse_and_the_replay_stays_apart(
    engine: EngineHost, tmp_path: Path
) -> None:
    expected = replay_events(open_session(DEMO))
    offsets = [e.offset_ns for e in expected]
    duration = offsets[-1] / 1e9

    def next_email_at(offset_s: float) -> float:
        """Where the player stands after a seek to `offset_s`: the next email."""
        return offsets[bisect.bisect_left(offsets, int(offset_s * 1e9))] / 1e9

    app = WorkbenchApp(
        engine=engine,
        session=str(DEMO),
        settings=Settings(keymap_file=tmp_path / "k", templates_file=tmp_path / "t"),
    )
    posted = Posted()
    async with app.run_test(size=SIZE, message_hook=posted.hook) as pilot:
        view = app.query_one(SessionsView)
        bar = app.query_one(TimelineBar)
        await until(pilot, lambda: bar.timeline is not None, "the timeline", timeout=60)
        assert bar.timeline is not None
        assert bar.timeline.duration_s == duration and bar.timeline.total == len(expected)
        assert {row.name for row in bar.timeline.rows} <= {e.name for e in expected} | {"other"}

        def seeked() -> float:
            return posted.of(TimelineBar.Seeked)[-1].offset_s  # type: ignore[attr-defined,no-any-return]

        async def player_at(offset_s: float, what: str) -> None:
            await until(
                pilot,
                lambda: view.player is not None and view.player.position_s == offset_s,
                what,
                timeout=60,
            )

        # Keys: End, Home, a big step and a small one; a paused player, nothing sent.
        # The initial tab switch focuses the view's default widget: let it settle first.
        await until(pilot, lambda: app.active_view_id == "sessions", "the Sessions view")
        await pilot.pause()
        bar.focus()
        await until(pilot, lambda: app.focused is bar, "the focus on the timeline")
        await pilot.press("end")
        assert seeked() == duration
        await player_at(duration, "the seek to the end")
        assert view.player is not None and view.player.state == "paused"
        await pilot.press("home")
        await player_at(0.0, "the seek to the start")
        await pilot.press("shift+right")
        assert abs(seeked() - 0.1 * duration) < 1e-9
        await player_at(next_email_at(seeked()), "the big step")
        # The cursor follows the play position (the email the player stands on) ...
        here = next_email_at(seeked())
        await until(pilot, lambda: bar.cursor_s == here, "the cursor on the play position")
        await pilot.press("right")  # ... and a step goes on from there
        assert abs(seeked() - (here + 0.01 * duration)) < 1e-9
        await player_at(next_email_at(seeked()), "the small step")
        assert view.player.sent == 0

        # Mouse: a click seeks to the column under it; a drag to where it is let go.
        columns = bar.track_columns
        x0 = bar.gutter.left + LABEL_WIDTH
        await pilot.click(TimelineBar, offset=(x0 + columns // 2, 0))
        assert seeked() == offset_at(columns // 2, duration, columns)
        await player_at(next_email_at(seeked()), "the click")
        await pilot.mouse_down(TimelineBar, offset=(x0 + 2, 1))
        await pilot.hover(TimelineBar, offset=(x0 + columns // 4, 1))
        await pilot.mouse_up(TimelineBar, offset=(x0 + columns // 4, 1))
        assert seeked() == offset_at(columns // 4, duration, columns)
        await player_at(next_email_at(seeked()), "the drag")
        assert not bar.dragging

        # Replay one email from the start: under replay/, with its recorded time.
        await pilot.press("home")
        await player_at(0.0, "the seek back")
        await pilot.press("f8")
        first = expected[0]
        topic = f"replay/{first.name}"
        await until(pilot, lambda: topic in app.model.topics.stats, "the replayed message")
        assert first.name not in app.model.topics.stats  # never mixed with live traffic
        record = app.model.topics.history(topic)[-1]
        assert record.event.headers[H.REPLAY_SOURCE_TIMESTAMP] == str(first.source_ns)
        assert record.replayed and app.model.topics.stats[topic].replayed == 1
        await pilot.press("1")
        tree = app.query_one(TopicTree)

        def label() -> str:
            node = tree._topic_nodes.get(topic)
            return str(node.label) if node is not None else ""

        await until(pilot, lambda: "⟲ replay" in label(), "the topic's replay marker")
        assert tree.select_topic(topic)
        messages = app.query_one(MessageList)
        await until(pilot, lambda: messages.row_count == 1, "the replayed message's row")
        assert messages.get_row_at(0)[-1].startswith("⟲ ")
        assert view.player is not None
        view.player.stop()


async def test_a_key_right_after_a_seek_steps_from_the_cursor_not_the_old_position(
    engine: EngineHost, tmp_path: Path
) -> None:
    """The status refresh shows the play position on the timeline. Run between a key's
    seek and the view handing it to the player (a timer firing there, as it does under
    load), it put the cursor back on the old position, and the next key stepped from
    there: Home, shift+→, → sought 0, 10 %, then 1 % of the session, not 11 %."""
    expected = replay_events(open_session(DEMO))
    duration = expected[-1].offset_ns / 1e9
    app = WorkbenchApp(
        engine=engine,
        session=str(DEMO),
        settings=Settings(keymap_file=tmp_path / "k", templates_file=tmp_path / "t"),
    )
    posted = Posted()
    view: SessionsView | None = None

    def hook(message: Message) -> None:
        # Called as a node takes a message: a key here reaches the bar while the seeks
        # of the keys before it wait in the queue for the view.
        posted.hook(message)
        if isinstance(message, events.Key) and view is not None and view.is_mounted:
            view.playback.refresh_status()  # the timer, before the view takes the seek

    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        view = app.query_one(SessionsView)
        bar = app.query_one(TimelineBar)
        await until(pilot, lambda: bar.timeline is not None, "the timeline", timeout=60)
        await until(pilot, lambda: app.active_view_id == "sessions", "the Sessions view")
        await pilot.pause()
        bar.focus()
        await until(pilot, lambda: app.focused is bar, "the focus on the timeline")
        await pilot.press("end")  # a paused player, standing at the end
        await until(
            pilot,
            lambda: view.player is not None and view.player.position_s == duration,
            "the seek to the end",
            timeout=60,
        )
        # As a terminal delivers fast keys: all three before the view takes any seek.
        before = len(posted.of(TimelineBar.Seeked))
        for key in ("home", "shift+right", "right"):
            app.post_message(events.Key(key, None))
        await until(pilot, lambda: len(posted.of(TimelineBar.Seeked)) == before + 3, "3 seeks")
        offsets = [m.offset_s for m in posted.of(TimelineBar.Seeked)]  # type: ignore[attr-defined]
        assert offsets[-3] == 0.0
        assert abs(offsets[-2] - 0.1 * duration) < 1e-9
        # From the cursor at 10 %, or at the email the player landed on there (the
        # cursor follows it once the view has taken both seeks): never from the old place.
        landed = next(e.offset_ns for e in expected if e.offset_ns >= 0.1 * duration * 1e9)
        assert 0.11 * duration - 1e-9 <= offsets[-1] <= landed / 1e9 + 0.01 * duration + 1e-9
        await until(
            pilot,
            lambda: view.player is not None and view.player.position_s >= offsets[-1] - 1e-9,
            "the last seek landed",
            timeout=60,
        )
        assert view.player is not None
        view.player.stop()
