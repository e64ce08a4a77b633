"""The playback pane: open a recorded session (listing its messages and drawing its
timeline without playing it) and play it back into the observed context, under the
replay prefix by default, with pause, step, seek (field, keys or mouse on the timeline),
rate and loop."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, DataTable, Input, Label, ProgressBar, Static, Switch

from mailbus_workbench.model import recent_sessions, session_control
from mailbus_workbench.model.session_control import (
    DEFAULT_REPLAY_PREFIX,
    MAX_RATE,
    OpenedSession,
    ReplayOptions,
)
from mailbus_workbench.model.session_messages import SessionMessages, first_messages
from mailbus_workbench.model.timeline import Timeline
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.textual_internals import MeasuredTable
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.timeline import TimelineBar

if TYPE_CHECKING:
    from mailbus.sessions.player import Player
    from mailbus.sessions.reader import Session

LISTED_MESSAGES = 500  # of an open session, listed without playing it
LIVE = ("playing", "paused")


class PlaybackPane(Vertical):
    DEFAULT_CSS = """
    PlaybackPane { height: 1fr; }
    #play-progress { padding: 0 1; }
    #session-messages { height: 1fr; }
    """

    class SessionOpened(Message):
        def __init__(self, path: str, events: int, error: str = "") -> None:
            super().__init__()
            self.path = path
            self.events = events
            self.error = error

    class _Opened(Message):  # the opening worker's result
        def __init__(self, path: str, opened: OpenedSession | None, error: str) -> None:
            super().__init__()
            self.path = path
            self.opened = opened
            self.error = error

    class _Listed(Message):  # the listing worker's result
        def __init__(self, session: Session, listing: SessionMessages | None, error: str) -> None:
            super().__init__()
            self.session = session
            self.listing = listing
            self.error = error

    class _TimelineRead(Message):  # the timeline worker's result
        def __init__(self, session: Session, timeline: Timeline | None, error: str) -> None:
            super().__init__()
            self.session = session
            self.timeline = timeline
            self.error = error

    class _PlayerBuilt(Message):  # the building worker's result
        def __init__(
            self,
            player: Player | None,
            paused: bool,
            then: Callable[[Player], None] | None,
            error: str = "",
        ) -> None:
            super().__init__()
            self.player = player
            self.paused = paused
            self.then = then
            self.error = error

    def __init__(self, parts: WorkbenchParts) -> None:
        super().__init__()
        self.parts = parts
        self.session: Session | None = None
        self.player: Player | None = None
        self.listed = 0
        self.last_error = ""
        self._building = False  # a player is being built: timeline seeks wait for it
        self._pending_seek: float | None = None

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label("session")
            yield Input(placeholder="path of a session directory", id="play-path")
            yield Button("Open (F6)", id="play-open")
        with Horizontal():
            yield Button("Play (F7)", id="play-toggle", variant="primary")
            yield Button("Step (F8)", id="play-step")
            yield Label("seek s")
            yield Input("0", id="play-seek", type="number")
            yield Label("rate")
            yield Input("1", id="play-rate", type="number")
            yield Label("loop")
            yield Switch(False, id="play-loop")
            yield Label(f"under {DEFAULT_REPLAY_PREFIX}")
            yield Switch(True, id="play-prefix", tooltip="replay apart from live traffic")
        yield ProgressBar(total=1, id="play-progress", show_eta=False)
        yield Static("No session open.", id="play-status", classes="status", markup=False)
        yield TimelineBar(id="play-timeline")
        yield MeasuredTable(id="session-messages", cursor_type="row", zebra_stripes=True)

    # -- opening --------------------------------------------------------------------------
    @property
    def recent_file(self) -> Path:
        return self.parts.settings.templates_file.parent / "recent-sessions.json"

    def open_path(self, path: str) -> None:
        self.show_status(Text(f"opening {path} …", style="dim"))
        self._open(path)

    @work(thread=True, exclusive=True, group="session-open")
    def _open(self, path: str) -> None:
        try:
            opened, error = session_control.open_session(path), ""
        except Exception as exc:  # SessionError and OSError name the file
            opened, error = None, str(exc)
        self.post_message(self._Opened(path, opened, error))

    @on(_Opened)
    def _opened(self, result: _Opened) -> None:
        if self.player is not None:
            self.player.stop()
            self.player = None
        opened, path = result.opened, result.path
        self.session = opened.session if opened is not None else None
        self.query_one(TimelineBar).show(None)
        if opened is None:
            self.show_status(Text(f"Cannot open {path}: {result.error}", style="red"))
            self.post_message(self.SessionOpened(path, 0, result.error))
            return
        self.query_one("#play-path", Input).value = path
        with contextlib.suppress(OSError):  # the list is a convenience; opening worked
            recent_sessions.remember(self.recent_file, path)
        session = opened.session
        self.show_status(
            f"{session.name}: {opened.rows} events, {len(session.parts)} parts, "
            f"status {session.manifest.get('status', '?')}"
        )
        self.post_message(self.SessionOpened(path, opened.rows))
        self._list_messages(session)
        self._read_timeline(session)

    @work(thread=True, exclusive=True, group="session-timeline")
    def _read_timeline(self, session: Session) -> None:
        try:
            timeline, error = session_control.session_timeline(session), ""
        except Exception as exc:  # a part that cannot be read: say so, keep the session
            timeline, error = None, str(exc)
        self.post_message(self._TimelineRead(session, timeline, error))

    @on(_TimelineRead)
    def _timeline_read(self, result: _TimelineRead) -> None:
        if result.session is not self.session:
            return  # another session was opened meanwhile
        if result.timeline is None:
            self.show_status(Text(f"Cannot read the session's timeline: {result.error}", "red"))
            return
        self.query_one(TimelineBar).show(result.timeline)

    @work(thread=True, exclusive=True, group="session-list")
    def _list_messages(self, session: Session) -> None:
        try:
            listing, error = first_messages(session, LISTED_MESSAGES), ""
        except Exception as exc:  # a part that cannot be read: say so, keep the session
            listing, error = None, str(exc)
        self.post_message(self._Listed(session, listing, error))

    @on(_Listed)
    def _listed(self, result: _Listed) -> None:
        if result.session is not self.session:
            return  # another session was opened meanwhile (its own listing follows)
        table = self.query_one("#session-messages", DataTable)
        table.clear(columns=True)
        listing = result.listing
        if listing is None:
            self.show_status(Text(f"Cannot list the session's messages: {result.error}", "red"))
            return
        for label in ("t (s)", "what", "topic / service", "bytes", "body"):
            table.add_column(label)
        for row in listing.rows:
            table.add_row(
                f"{row.offset_s:.3f}",
                row.what,
                fmt.plain(row.name),
                str(row.size),
                fmt.plain(row.preview),
            )
        self.listed = len(listing.rows)
        table.border_title = f"messages: the first {len(listing.rows)} of {listing.total}"

    # -- playing --------------------------------------------------------------------------
    def _options(self) -> ReplayOptions | None:
        try:
            rate = float(self.query_one("#play-rate", Input).value)
        except ValueError:
            rate = 0.0
        if not 0 < rate <= MAX_RATE:
            self.show_status(Text(f"rate must be more than 0 and at most {MAX_RATE:g}", "red"))
            return None
        prefix = DEFAULT_REPLAY_PREFIX if self.query_one("#play-prefix", Switch).value else ""
        return ReplayOptions(rate, self.query_one("#play-loop", Switch).value, prefix)

    @on(Button.Pressed, "#play-toggle")
    def play_pause(self) -> None:
        player = self.player
        if player is not None and player.state in LIVE:
            player.pause() if player.state == "playing" else player.resume()
            return
        self._new_player(paused=False, then=None)

    def with_player(self, then: Callable[[Player], None]) -> None:
        """Run `then` with a started player: the one playing or paused, else a new
        paused one (built off the UI thread)."""
        if self.player is not None and self.player.state in LIVE:
            then(self.player)
        else:
            self._new_player(paused=True, then=then)

    def _new_player(self, *, paused: bool, then: Callable[[Player], None] | None) -> None:
        self.last_error = ""
        engine = self.parts.engine
        if self.session is None or engine is None:
            self.show_status(
                Text("Open a session first." if engine else "No engine to play into.", "red")
            )
            return
        options = self._options()
        if options is None:
            return
        self.show_status(Text("loading the session's events …", style="dim"))
        self._building = True
        self._build_player(self.session, options, paused, then)

    @work(thread=True, exclusive=True, group="player")
    def _build_player(
        self,
        session: Session,
        options: ReplayOptions,
        paused: bool,
        then: Callable[[Player], None] | None,
    ) -> None:
        # Reading and ordering every event of a large session takes seconds.
        engine = self.parts.engine
        assert engine is not None
        try:
            player = session_control.build_player(session, engine.context, options)
        except Exception as exc:  # ValueError of the options, SessionError: shown
            self.post_message(self._PlayerBuilt(None, paused, None, str(exc)))
            return
        self.post_message(self._PlayerBuilt(player, paused, then))

    @on(_PlayerBuilt)
    def _player_built(self, result: _PlayerBuilt) -> None:
        self._building = False
        player, pending = result.player, self._pending_seek
        self._pending_seek = None
        if player is None:
            self.show_status(Text(f"Cannot play: {result.error}", style="red"))
            return
        if self.player is not None:
            self.player.stop()
        self.player = player
        player.start(paused=result.paused)
        if result.then is not None:
            result.then(player)
        if pending is not None:  # the cursor moved on while the player was built
            player.seek(pending)

    @on(Button.Pressed, "#play-step")
    def step(self) -> None:
        def step(player: Player) -> None:
            if player.state == "playing":
                player.pause()
            player.step()

        self.with_player(step)

    @on(Input.Submitted, "#play-seek")
    def _seek_field(self, event: Input.Submitted) -> None:
        try:
            offset = float(event.value)
        except ValueError:
            offset = -1.0
        if not math.isfinite(offset) or offset < 0:  # "1e999" and "nan" parse as floats
            self.show_status(Text("seek to a second of the session, 0 or more", style="red"))
            return
        self.with_player(lambda player: player.seek(offset))

    @on(TimelineBar.Seeked)
    def _seek_timeline(self, event: TimelineBar.Seeked) -> None:
        offset = event.offset_s
        self.query_one("#play-seek", Input).value = f"{offset:.2f}"
        if self._building and (self.player is None or self.player.state not in LIVE):
            self._pending_seek = offset  # a drag: one player, sought when built
            return
        self.with_player(lambda player: player.seek(offset))

    @on(Switch.Changed, "#play-loop")
    def _loop_changed(self, event: Switch.Changed) -> None:
        if self.player is not None:
            self.player.loop = event.value  # read at the end of each pass

    @on(Input.Submitted, "#play-rate")
    def _rate(self) -> None:
        options = self._options()
        player = self.player
        if options is not None and player is not None and player.state in LIVE:
            player.rate = options.rate
            player.seek(player.position_s)  # re-anchor the schedule at the new rate

    def show_status(self, text: str | Text) -> None:
        if isinstance(text, Text) and text.style == "red":
            self.last_error = text.plain  # kept under the player's line until the next one
        self.query_one("#play-status", Static).update(text)

    def refresh_status(self) -> None:
        player = self.player
        if player is None:
            return
        duration = player.events[-1].offset_ns / 1e9 if player.events else 0.0
        bar = self.query_one("#play-progress", ProgressBar)
        done = duration if player.state == "finished" else player.position_s
        bar.update(total=max(duration, 0.001), progress=min(done, duration))
        timeline = self.query_one(TimelineBar)
        if not timeline.dragging:
            timeline.move_cursor(done)
        self.query_one("#play-toggle", Button).label = (
            "Pause (F7)" if player.state == "playing" else "Play (F7)"
        )
        line = Text(
            f"{player.state}  at {player.position_s:.2f} s  email "
            f"{player.pass_position} of {player.total}"
            + (f"  pass {player.loops + 1}, {player.sent} sent in all" if player.loop else "")
            + f"  rate {player.rate:g}"
            + (f"  under {player.prefix}" if player.prefix else "")
        )
        if self.last_error:
            line.append(f"\n{self.last_error}", style="red")
        self.query_one("#play-status", Static).update(line)

    def on_unmount(self) -> None:
        if self.player is not None:
            self.player.stop()
