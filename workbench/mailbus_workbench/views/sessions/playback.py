"""The playback pane: open a recorded session (drawing its timeline from its index and
paging through its events without playing it) and play it back into the observed
context, under the replay prefix by default, with pause, step, seek (field, keys or mouse
on the timeline), rate and loop.

Whatever the session's size, the UI thread only draws: opening (and building the index
of a session recorded without one), reading a page and building the streaming player run
in workers, and each reads only what it shows."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, ProgressBar, Switch

from mailbus_workbench.model import recent_sessions, session_control
from mailbus_workbench.model.session_control import (
    DEFAULT_REPLAY_PREFIX,
    MAX_RATE,
    OpenedSession,
    ReplayOptions,
)
from mailbus_workbench.model.session_messages import SessionPage, page, page_at
from mailbus_workbench.model.timeline import Timeline
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.textual_internals import FixedInput, FixedTable
from mailbus_workbench.widgets import format as fmt
from mailbus_workbench.widgets.steady_static import SteadyStatic
from mailbus_workbench.widgets.timeline import TimelineBar

if TYPE_CHECKING:
    from mailbus.sessions.player import Player
    from mailbus.sessions.reader import Session

LIVE = ("playing", "paused")
PROGRESS_EVERY_S = 0.25  # the index being built: the status is updated this often
LIST_AFTER_SEEK_S = 1.0  # at most this long the list waits for a seek's player to land


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def _span(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min" if hours else f"{minutes} min {secs:02d} s"


def within(player: Player, offset_s: float) -> float:
    """A seek's offset kept on the player's last email: the timeline's end can lie past
    it (a received copy recorded after the email the player sends), and a paused player
    sought past its last email finishes, where End should stand on that email."""
    return min(offset_s, player.duration_s)


class EventTable(FixedTable[str | Text]):
    """One page of the session's events; moving past its first or last row asks for the
    page before or after (`PageWanted`), so the list pages through any session. Its place
    is fixed (1fr): a new page redraws the list, never the screen's layout."""

    class PageWanted(Message):
        def __init__(self, direction: int) -> None:
            super().__init__()
            self.direction = direction  # -1 the page before, 1 the page after

    def action_cursor_down(self) -> None:
        if self.row_count and self.cursor_row >= self.row_count - 1:
            self.post_message(self.PageWanted(1))
            return
        super().action_cursor_down()

    def action_cursor_up(self) -> None:
        if self.row_count and self.cursor_row <= 0:
            self.post_message(self.PageWanted(-1))
            return
        super().action_cursor_up()

    def action_page_down(self) -> None:
        if self.row_count and self.cursor_row >= self.row_count - 1:
            self.post_message(self.PageWanted(1))
            return
        super().action_page_down()

    def action_page_up(self) -> None:
        if self.row_count and self.cursor_row <= 0:
            self.post_message(self.PageWanted(-1))
            return
        super().action_page_up()


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

    class _Indexing(Message):  # the opening worker building the index: how far
        def __init__(self, path: str, done: int, total: int) -> None:
            super().__init__()
            self.path = path
            self.done = done
            self.total = total

    class _Listed(Message):  # the paging worker's result
        def __init__(
            self,
            session: Session,
            listing: SessionPage | None,
            error: str,
            cursor: int,
            asked: int = 0,
        ) -> None:
            super().__init__()
            self.session = session
            self.asked = asked  # which request this answers: an older one is not shown
            self.listing = listing
            self.error = error
            self.cursor = cursor  # the row to put the cursor on: 0, or -1 for the last

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
        self.opened: OpenedSession | None = None
        self.player: Player | None = None
        self.listed = 0
        self.page: SessionPage | None = None
        self._opening = ""  # the path being opened: its indexing progress is shown
        self._pages_asked = 0  # a drag asks for many pages: only the last is drawn
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
            yield FixedInput("0", id="play-seek", type="number")
            yield Label("rate")
            yield Input("1", id="play-rate", type="number")
            yield Label("loop")
            yield Switch(False, id="play-loop")
            yield Label(f"under {DEFAULT_REPLAY_PREFIX}")
            yield Switch(True, id="play-prefix", tooltip="replay apart from live traffic")
        yield ProgressBar(total=1, id="play-progress", show_eta=False)
        yield SteadyStatic("No session open.", id="play-status", classes="status", markup=False)
        yield TimelineBar(id="play-timeline")
        yield EventTable(id="session-messages", cursor_type="row", zebra_stripes=True)

    @property
    def session(self) -> Session | None:
        return self.opened.session if self.opened is not None else None

    # -- opening --------------------------------------------------------------------------
    @property
    def recent_file(self) -> Path:
        return self.parts.settings.templates_file.parent / "recent-sessions.json"

    def open_path(self, path: str) -> None:
        self.show_status(Text(f"opening {path} …", style="dim"))
        self._opening = path
        self._open(path)

    @work(thread=True, exclusive=True, group="session-open")
    def _open(self, path: str) -> None:
        shown = 0.0

        def progress(done: int, total: int) -> None:
            nonlocal shown
            now = time.monotonic()
            if now - shown >= PROGRESS_EVERY_S:
                shown = now
                self.post_message(self._Indexing(path, done, total))

        early = self.parts.take_early_open(path)
        try:
            if early is not None:
                opened, error = early.result(progress), ""
            else:
                opened, error = session_control.open_session(path, progress), ""
        except Exception as exc:  # SessionError and OSError name the file
            opened, error = None, str(exc)
        self.post_message(self._Opened(path, opened, error))

    @on(_Indexing)
    def _indexing(self, event: _Indexing) -> None:
        if event.path == self._opening:
            share = event.done / event.total if event.total else 0.0
            self.show_status(
                Text(
                    f"indexing {event.path} (once; recorded without an index): "
                    f"{event.done:,} of {event.total:,} events ({share:.0%}) …",
                    style="dim",
                )
            )

    @on(_Opened)
    def _opened(self, result: _Opened) -> None:
        if self.player is not None:
            self.player.stop()
            self.player = None
        opened, path = result.opened, result.path
        if path == self._opening:
            self._opening = ""
        self.opened = opened
        self.page = None
        self.query_one(TimelineBar).show(None)
        if opened is None:
            self.show_status(Text(f"Cannot open {path}: {result.error}", style="red"))
            self.post_message(self.SessionOpened(path, 0, result.error))
            return
        self.query_one("#play-path", Input).value = path
        with contextlib.suppress(OSError):  # the list is a convenience; opening worked
            recent_sessions.remember(self.recent_file, path)
        session = opened.session
        line = Text(
            f"{session.name}: {opened.rows:,} events over {_span(opened.duration_s)}, "
            f"{len(session.parts)} part{'' if len(session.parts) == 1 else 's'}, "
            f"{_size(opened.size_bytes)}, "
            f"status {session.manifest.get('status', '?')}"
        )
        for note in opened.index.notes:  # built, extended, rebuilt or kept in memory
            line.append(f"\n{note}", style="dim")
        self.show_status(line)
        self.post_message(self.SessionOpened(path, opened.rows))
        self._list_page(opened, 0, 0)
        self._read_timeline(opened)

    @work(thread=True, exclusive=True, group="session-timeline")
    def _read_timeline(self, opened: OpenedSession) -> None:
        try:
            timeline, error = session_control.session_timeline(opened), ""
        except Exception as exc:  # an index that cannot be used: say so, keep the session
            timeline, error = None, str(exc)
        self.post_message(self._TimelineRead(opened.session, timeline, error))

    @on(_TimelineRead)
    def _timeline_read(self, result: _TimelineRead) -> None:
        if result.session is not self.session:
            return  # another session was opened meanwhile
        if result.timeline is None:
            self.show_status(Text(f"Cannot read the session's timeline: {result.error}", "red"))
            return
        self.query_one(TimelineBar).show(result.timeline)

    def _list_page(
        self,
        opened: OpenedSession,
        first_row: int,
        cursor: int,
        at_ns: int | None = None,
        after: Player | None = None,
    ) -> None:
        self._pages_asked += 1
        self._read_page(opened, first_row, cursor, at_ns, self._pages_asked, after)

    @work(thread=True, exclusive=True, group="session-list")
    def _read_page(
        self,
        opened: OpenedSession,
        first_row: int,
        cursor: int,
        at_ns: int | None,
        asked: int,
        after: Player | None,
    ) -> None:
        # exclusive: a page asked for while another is read (a drag) replaces it
        if after is not None:
            # A seek's player reads the same row groups: it lands first (what plays),
            # then the list is read, rather than both at half speed on a busy machine.
            after.wait_landed(LIST_AFTER_SEEK_S)
        try:
            if at_ns is not None:
                listing = page_at(opened.index, at_ns, origin_ns=opened.origin_ns)
            else:
                listing = page(opened.index, first_row, origin_ns=opened.origin_ns)
            error = ""
        except Exception as exc:  # a part that cannot be read: say so, keep the session
            listing, error = None, str(exc)
        self.post_message(self._Listed(opened.session, listing, error, cursor, asked))

    @on(EventTable.PageWanted)
    def _page_wanted(self, event: EventTable.PageWanted) -> None:
        event.stop()
        current, opened = self.page, self.opened
        if current is None or opened is None:
            return
        if event.direction > 0 and current.last_row < current.total:
            self._list_page(opened, current.last_row, 0)
        elif event.direction < 0 and current.first_row > 0:
            self._list_page(opened, current.first_row - len(current.rows), -1)

    def list_at(self, offset_s: float) -> None:
        """Page the event list to the events at `offset_s` of the session (a seek)."""
        opened, player = self.opened, self.player
        if opened is not None:
            after = player if player is not None and player.state in LIVE else None
            self._list_page(opened, 0, 0, opened.origin_ns + int(offset_s * 1e9), after)

    @on(_Listed)
    def _listed(self, result: _Listed) -> None:
        if result.session is not self.session or result.asked < self._pages_asked:
            return  # another session or page was asked for meanwhile (its listing follows)
        table = self.query_one("#session-messages", EventTable)
        listing = result.listing
        if listing is None:
            table.clear(columns=True)
            self.show_status(Text(f"Cannot list the session's events: {result.error}", "red"))
            return
        if not table.columns:
            for label in ("t (s)", "what", "topic / service", "bytes", "body"):
                table.add_column(label)
        table.clear()
        for row in listing.rows:
            table.add_row(
                fmt.plain(f"{row.offset_s:.3f}"),
                fmt.plain(row.what),
                fmt.plain(row.name),
                fmt.plain(row.size),
                fmt.plain(row.preview),
            )
        self.page = listing
        self.listed = len(listing.rows)
        if listing.rows:
            table.move_cursor(row=len(listing.rows) - 1 if result.cursor < 0 else 0)
            table.border_title = (
                f"events {listing.first_row + 1:,}-{listing.last_row:,} of {listing.total:,}"
                " (↑/↓ past the edge for more)"
            )
        else:
            table.border_title = "no events"

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

    def seek_to(self, offset_s: float) -> None:
        """Seek the player (a new paused one, sought before it reads, when none is live;
        while one is being built, it is sought once built)."""
        player = self.player
        if player is not None and player.state in LIVE:
            player.seek(within(player, offset_s))
        elif self._building:
            self._pending_seek = offset_s  # a drag: one player, sought when built
        else:
            self._new_player(paused=True, then=None, at_s=offset_s)

    def _new_player(
        self,
        *,
        paused: bool,
        then: Callable[[Player], None] | None,
        at_s: float | None = None,
    ) -> None:
        self.last_error = ""
        engine = self.parts.engine
        if self.opened is None or engine is None:
            self.show_status(
                Text("Open a session first." if engine else "No engine to play into.", "red")
            )
            return
        options = self._options()
        if options is None:
            return
        self.show_status(Text("starting the player …", style="dim"))
        self._building = True
        self._build_player(self.opened, options, paused, then, at_s)

    @work(thread=True, exclusive=True, group="player")
    def _build_player(
        self,
        opened: OpenedSession,
        options: ReplayOptions,
        paused: bool,
        then: Callable[[Player], None] | None,
        at_s: float | None,
    ) -> None:
        # The player streams from the index: cheap, but off the UI thread all the same.
        engine = self.parts.engine
        assert engine is not None
        try:
            player = session_control.build_player(opened, engine.context, options)
            if at_s is not None:  # before it starts: it reads from there, not from 0 first
                player.seek(within(player, at_s))
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
            player.seek(within(player, pending))

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
        self.seek_to(offset)
        self.list_at(offset)

    @on(TimelineBar.Seeked)
    def _seek_timeline(self, event: TimelineBar.Seeked) -> None:
        offset = event.offset_s
        self.query_one("#play-seek", Input).value = f"{offset:.2f}"
        self.seek_to(offset)  # first: the player's read starts before the list's
        # Only now does the player's position say where the cursor was put.
        self.query_one(TimelineBar).seek_taken()
        self.list_at(offset)

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
        self.query_one("#play-status", SteadyStatic).update(text)

    def refresh_status(self) -> None:
        player = self.player
        if player is None:
            return
        duration = player.duration_s
        bar = self.query_one("#play-progress", ProgressBar)
        done = duration if player.state == "finished" else player.position_s
        bar.update(total=max(duration, 0.001), progress=min(done, duration))
        timeline = self.query_one(TimelineBar)
        if not (timeline.dragging or self._building):  # a new player: sought once built
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
        self.query_one("#play-status", SteadyStatic).update(line)

    def on_unmount(self) -> None:
        if self.player is not None:
            self.player.stop()
