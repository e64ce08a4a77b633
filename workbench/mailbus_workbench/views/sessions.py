"""Sessions: record the observed context to Parquet (with the live count), open a
recorded session and play it back into the same context (so the Topics and Services
screens show it like live traffic) with pause, step, seek, rate and loop; and an
analysis screen that runs the sessions pipeline on the engine the user picks."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import (
    Button,
    DataTable,
    Input,
    Label,
    ProgressBar,
    Static,
    Switch,
)

from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.views.analysis import AnalysisScreen
from mailbus_workbench.views.base import View
from mailbus_workbench.widgets import format as fmt

MAX_RATE = 1000.0
LISTED_MESSAGES = 500  # of an open session, listed without playing it
__all__ = ["AnalysisScreen", "SessionsView", "default_directory", "sessions_available"]


def sessions_available() -> bool:
    """Whether the sessions part (mailbus.sessions) is installed."""
    import importlib.util

    return importlib.util.find_spec("mailbus.sessions") is not None


def default_directory(now: float | None = None) -> str:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(now))
    return f"sessions/run-{stamp}"


class SessionsView(View):
    DEFAULT_FOCUS = "#play-toggle"
    HELP = """\
## Sessions
**Record** the traffic this workbench observes into a session directory (Parquet parts
and a manifest, see docs/sessions.md): **F5** starts and stops; the count of events
written, queued and dropped is live.

**Open** a session (**F6**) and play it back into the observed context: its emails are
sent again with their recorded timing (new Message-IDs and GIDs), so the Topics and
Services screens show them like live traffic. **F7** play / pause, **F8** one email
while paused, seek to a second of the session with the seek field (Enter); rate
(Enter) and the loop switch apply at once, to the replay under way. **ctrl+o** (or F6
with no path) picks a session from a directory tree or the recent sessions. An open
session's messages are listed below without playing it (the first 500).

**F9** opens the analysis of the open session (topics, services, calls, orphans,
sequences) on the engine you pick: polars, or Spark (slow to start, for big sessions).
Opening, playing and analysing run in workers: the screen never freezes.
"""
    BINDINGS = [
        Binding("f5", "toggle_record", "Record", id="sessions.record"),
        Binding("f6", "open_session", "Open", id="sessions.open"),
        Binding("ctrl+o", "pick_session", "Pick a session", id="sessions.pick"),
        Binding("f7", "play_pause", "Play/pause", id="sessions.play"),
        Binding("f8", "step", "Step", id="sessions.step"),
        Binding("f9", "analyze", "Analyze", id="sessions.analyze"),
    ]
    REFRESH_EVERY_S = 0.25
    DEFAULT_CSS = """
    SessionsView Horizontal { height: auto; }
    SessionsView Label { padding: 1 1 0 0; }
    #rec-dir, #play-path { width: 1fr; }
    #play-rate, #play-seek { width: 12; }
    .status { height: auto; padding: 0 1 1 1; }
    #play-progress { padding: 0 1; }
    #session-messages { height: 1fr; }
    """

    class RecordingChanged(Message):
        def __init__(self, recording: bool, directory: str, error: str = "") -> None:
            super().__init__()
            self.recording = recording
            self.directory = directory
            self.error = error

    class SessionOpened(Message):
        def __init__(self, path: str, events: int, error: str = "") -> None:
            super().__init__()
            self.path = path
            self.events = events
            self.error = error

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.available = sessions_available()
        self.recorder: Any = None
        self.session: Any = None
        self.player: Any = None
        self.last_manifest: dict[str, Any] = {}
        self.listed = 0
        self.last_error = ""

    def compose(self) -> ComposeResult:
        with Vertical():
            with Horizontal():
                yield Label("record to")
                yield Input(default_directory(), id="rec-dir")
                yield Button("Record (F5)", id="rec-toggle", variant="error")
            yield Static("Not recording.", id="rec-status", classes="status", markup=False)
            with Horizontal():
                yield Label("session")
                yield Input(placeholder="path of a session directory", id="play-path")
                yield Button("Open (F6)", id="play-open")
                yield Button("Analyze (F9)", id="play-analyze")
            with Horizontal():
                yield Button("Play (F7)", id="play-toggle", variant="primary")
                yield Button("Step (F8)", id="play-step")
                yield Label("seek s")
                yield Input("0", id="play-seek", type="number")
                yield Label("rate")
                yield Input("1", id="play-rate", type="number")
                yield Label("loop")
                yield Switch(False, id="play-loop")
            yield ProgressBar(total=1, id="play-progress", show_eta=False)
            yield Static("No session open.", id="play-status", classes="status", markup=False)
            yield DataTable(id="session-messages", cursor_type="row", zebra_stripes=True)

    def on_mount(self) -> None:
        if not self.available:
            for button in self.query(Button):
                button.disabled = True
            self._rec_status(
                Text("The sessions part (mailbus.sessions) is not installed.", style="red")
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Without the sessions part the keys are shown disabled.
        return self.available or None

    # -- recording ------------------------------------------------------------------------
    @on(Button.Pressed, "#rec-toggle")
    def action_toggle_record(self) -> None:
        engine = self.parts.engine
        if engine is None:
            self._rec_status(Text("No engine: nothing to record.", style="red"))
            return
        if self.recorder is None:
            directory = self.query_one("#rec-dir", Input).value.strip()
            if not directory:
                self._rec_status(Text("Name a directory for the session.", style="red"))
                return
            self._start_recording(directory)
        else:
            self._stop_recording()

    @work(thread=True, exclusive=True, group="recorder")
    def _start_recording(self, directory: str) -> None:
        from mailbus.sessions.recorder import Recorder

        engine = self.parts.engine
        assert engine is not None
        try:
            recorder = Recorder(directory, context=engine.context)
        except Exception as exc:  # RecorderError, OSError, ValueError: shown, not fatal
            self.app.call_from_thread(self._recording, None, directory, str(exc))
            return
        self.app.call_from_thread(self._recording, recorder, directory, "")

    def _recording(self, recorder: Any, directory: str, error: str) -> None:
        self.recorder = recorder
        self.query_one("#rec-toggle", Button).label = "Stop (F5)" if recorder else "Record (F5)"
        if error:
            self._rec_status(Text(f"Cannot record: {error}", style="red"))
        self.post_message(self.RecordingChanged(recorder is not None, directory, error))

    @work(thread=True, exclusive=True, group="recorder")
    def _stop_recording(self) -> None:
        recorder = self.recorder
        try:
            manifest = recorder.stop()
            error = ""
        except Exception as exc:  # the writer's own error, shown
            manifest, error = {}, str(exc)
        self.app.call_from_thread(self._stopped, str(recorder.directory), manifest, error)

    def _stopped(self, directory: str, manifest: dict[str, Any], error: str) -> None:
        self.recorder = None
        self.last_manifest = manifest
        self.query_one("#rec-toggle", Button).label = "Record (F5)"
        counts = manifest.get("counts", {})
        self._rec_status(
            Text(f"Stopped: {error}", style="red")
            if error
            else f"Recorded {counts.get('events', 0)} events to {directory} "
            f"({len(manifest.get('parts', []))} parts, {counts.get('dropped', 0)} dropped)."
        )
        self.query_one("#play-path", Input).value = directory
        self.query_one("#rec-dir", Input).value = default_directory()
        self.post_message(self.RecordingChanged(False, directory, error))

    def _rec_status(self, text: str | Text) -> None:
        self.query_one("#rec-status", Static).update(text)

    # -- playback -------------------------------------------------------------------------
    @on(Button.Pressed, "#play-open")
    def action_open_session(self) -> None:
        path = self.query_one("#play-path", Input).value.strip()
        if not path:
            self.action_pick_session()
            return
        self.open_path(path)

    @property
    def recent_file(self) -> Path:
        return self.parts.settings.templates_file.parent / "recent-sessions.json"

    def action_pick_session(self) -> None:
        from mailbus_workbench.model import recent_sessions
        from mailbus_workbench.views.session_picker import SessionPicker

        root = Path(default_directory()).parent.resolve()  # where recordings go
        if not root.is_dir():
            root = Path.cwd()

        def picked(path: str | None) -> None:
            if path:
                self.open_path(path)

        self.app.push_screen(SessionPicker(recent_sessions.load(self.recent_file), root), picked)

    def open_path(self, path: str) -> None:
        self._play_status(Text(f"opening {path} …", style="dim"))
        self._open(path)

    @work(thread=True, exclusive=True, group="session-open")
    def _open(self, path: str) -> None:
        from mailbus.sessions.reader import open_session

        try:
            session = open_session(path)
            rows = session.rows  # reads each part's footer: off the UI thread
            error = ""
        except Exception as exc:  # SessionError and OSError name the file
            session, rows, error = None, 0, str(exc)
        self.app.call_from_thread(self._opened, path, session, rows, error)

    def _opened(self, path: str, session: Any, rows: int, error: str) -> None:
        if self.player is not None:
            self.player.stop()
            self.player = None
        self.session = session
        if error:
            self._play_status(Text(f"Cannot open {path}: {error}", style="red"))
            self.post_message(self.SessionOpened(path, 0, error))
            return
        self.query_one("#play-path", Input).value = path
        from mailbus_workbench.model import recent_sessions

        with contextlib.suppress(OSError):  # the list is a convenience; opening worked
            recent_sessions.remember(self.recent_file, path)
        manifest = session.manifest
        self._play_status(
            f"{session.name}: {rows} events, {len(session.parts)} parts, "
            f"status {manifest.get('status', '?')}"
        )
        self.post_message(self.SessionOpened(path, rows))
        self._list_messages(session)

    @work(thread=True, exclusive=True, group="session-list")
    def _list_messages(self, session: Any) -> None:
        from mailbus_workbench.model.session_messages import first_messages

        try:
            listing, error = first_messages(session, LISTED_MESSAGES), ""
        except Exception as exc:  # a part that cannot be read: say so, keep the session
            listing, error = None, str(exc)
        self.app.call_from_thread(self._listed, listing, error)

    def _listed(self, listing: Any, error: str) -> None:
        table = self.query_one("#session-messages", DataTable)
        table.clear(columns=True)
        if listing is None:
            self._play_status(Text(f"Cannot list the session's messages: {error}", style="red"))
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

    def _player_options(self) -> tuple[float, bool] | None:
        try:
            rate = float(self.query_one("#play-rate", Input).value)
        except ValueError:
            rate = 0.0
        if not 0 < rate <= MAX_RATE:
            self._play_status(
                Text(f"rate must be more than 0 and at most {MAX_RATE:g}", style="red")
            )
            return None
        return rate, self.query_one("#play-loop", Switch).value

    @on(Button.Pressed, "#play-toggle")
    def action_play_pause(self) -> None:
        player = self.player
        if player is not None and player.state in ("playing", "paused"):
            player.pause() if player.state == "playing" else player.resume()
            return
        self._new_player(paused=False, then=None)

    def _with_player(self, then: Callable[[Any], None]) -> None:
        """Run `then` with a started player: the one playing or paused, else a new
        paused one (built off the UI thread)."""
        if self.player is not None and self.player.state in ("playing", "paused"):
            then(self.player)
        else:
            self._new_player(paused=True, then=then)

    def _new_player(self, *, paused: bool, then: Callable[[Any], None] | None) -> None:
        self.last_error = ""
        engine = self.parts.engine
        if self.session is None or engine is None:
            self._play_status(
                Text("Open a session first." if engine else "No engine to play into.", style="red")
            )
            return
        options = self._player_options()
        if options is None:
            return
        rate, loop = options
        self._play_status(Text("loading the session's events …", style="dim"))
        self._build_player(self.session, engine.context, rate, loop, paused, then)

    @work(thread=True, exclusive=True, group="player")
    def _build_player(
        self,
        session: Any,
        context: Any,
        rate: float,
        loop: bool,
        paused: bool,
        then: Callable[[Any], None] | None,
    ) -> None:
        # Reading and ordering every event of a large session takes seconds.
        from mailbus.sessions.player import Player

        try:
            player = Player(session, context, rate=rate, loop=loop)
        except Exception as exc:  # ValueError of the options, SessionError: shown
            self.app.call_from_thread(self._play_status, Text(f"Cannot play: {exc}", style="red"))
            return
        self.app.call_from_thread(self._player_built, player, paused, then)

    def _player_built(self, player: Any, paused: bool, then: Callable[[Any], None] | None) -> None:
        if self.player is not None:
            self.player.stop()
        self.player = player
        player.start(paused=paused)
        if then is not None:
            then(player)

    @on(Button.Pressed, "#play-step")
    def action_step(self) -> None:
        def step(player: Any) -> None:
            if player.state == "playing":
                player.pause()
            player.step()

        self._with_player(step)

    @on(Input.Submitted, "#play-seek")
    def _seek(self, event: Input.Submitted) -> None:
        try:
            offset = float(event.value)
        except ValueError:
            offset = -1.0
        if not math.isfinite(offset) or offset < 0:  # "1e999" and "nan" parse as floats
            self._play_status(Text("seek to a second of the session, 0 or more", style="red"))
            return
        self._with_player(lambda player: player.seek(offset))

    @on(Switch.Changed, "#play-loop")
    def _loop_changed(self, event: Switch.Changed) -> None:
        if self.player is not None:
            self.player.loop = event.value  # read at the end of each pass

    @on(Input.Submitted, "#play-rate")
    def _rate(self) -> None:
        options = self._player_options()
        player = self.player
        if options is not None and player is not None and player.state in ("playing", "paused"):
            player.rate = options[0]
            player.seek(player.position_s)  # re-anchor the schedule at the new rate

    def _play_status(self, text: str | Text) -> None:
        if isinstance(text, Text) and text.style == "red":
            self.last_error = text.plain  # kept under the player's line until the next one
        self.query_one("#play-status", Static).update(text)

    def refresh_view(self, now: float) -> None:
        recorder = self.recorder
        if recorder is not None:
            s = recorder.status()
            self._rec_status(
                f"● recording to {recorder.directory}: {s['written']} written, "
                f"{s['queued']} queued, {s['dropped']} dropped, {s['parts']} parts"
            )
        player = self.player
        if player is not None:
            duration = player.events[-1].offset_ns / 1e9 if player.events else 0.0
            bar = self.query_one("#play-progress", ProgressBar)
            done = duration if player.state == "finished" else player.position_s
            bar.update(total=max(duration, 0.001), progress=min(done, duration))
            self.query_one("#play-toggle", Button).label = (
                "Pause (F7)" if player.state == "playing" else "Play (F7)"
            )
            line = Text(
                f"{player.state}  at {player.position_s:.2f} s  email "
                f"{player.pass_position} of {player.total}"
                + (f"  pass {player.loops + 1}, {player.sent} sent in all" if player.loop else "")
                + f"  rate {player.rate:g}"
            )
            if self.last_error:
                line.append(f"\n{self.last_error}", style="red")
            self.query_one("#play-status", Static).update(line)

    @on(Button.Pressed, "#play-analyze")
    def action_analyze(self) -> None:
        if self.session is None:
            self._play_status(Text("Open a session first.", style="red"))
            return
        self.app.push_screen(AnalysisScreen(str(self.session.path)))

    def on_unmount(self) -> None:
        if self.player is not None:
            self.player.stop()
        if self.recorder is not None:
            self.recorder.stop()
