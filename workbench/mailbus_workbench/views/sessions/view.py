"""The Sessions view: the recording, playback and analysis-launch panes side by side with
the keys that drive them. It holds no session logic of its own: it routes keys to the
panes and what one pane says to another."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input

from mailbus_workbench.model import recent_sessions
from mailbus_workbench.model.session_control import default_directory, sessions_available
from mailbus_workbench.parts import WorkbenchParts
from mailbus_workbench.views.analysis import AnalysisScreen
from mailbus_workbench.views.base import View
from mailbus_workbench.views.sessions.analysis_launch import AnalysisLaunch
from mailbus_workbench.views.sessions.playback import PlaybackPane
from mailbus_workbench.views.sessions.recording import RecordingPane

if TYPE_CHECKING:
    from mailbus.sessions.player import Player
    from mailbus.sessions.reader import Session
    from mailbus.sessions.recorder import Recorder


class SessionsView(View):
    DEFAULT_FOCUS = "#play-toggle"
    HELP = """\
## Sessions
**Record** the traffic this workbench observes into a session directory (Parquet parts
and a manifest, see docs/sessions.md): **F5** starts and stops; the count of events
written, queued and dropped is live.

**Open** a session (**F6**; a recording just stopped is offered, even while it is still
being written) and play it back into the observed context: its emails are sent again
with their recorded timing (new Message-IDs and GIDs) under `replay/` (the
**under replay/** switch; off: under the recorded names), so the Topics and Services
screens show them apart from live traffic, each keeping its recorded time in the
`Replay-Source-Timestamp` header. **F7** play / pause, **F8** one email while paused.
**Seek** on the timeline (one row per topic or service, the cursor at the play
position): click or drag it, or focus it and press **←/→** (shift: bigger steps),
**Home** and **End**; or type a second in the seek field (Enter). Rate (Enter) and the
loop switch apply at once, to the replay under way. **ctrl+o** (or F6 with no path)
picks a session from a directory tree or the recent sessions (a stopped recording is the
first of them). An open session's events are listed below without playing it, a page
at a time: **↑/↓** past the first or last row reads the page before or after, and a
seek lists the events at that time. The timeline and the player read the session's
index (built once for a session recorded without one), so a session of any size opens,
plays and seeks at once.

**F9** opens the analysis of the open session (topics, services, calls, orphans,
sequences) on the engine you pick: polars, or Spark (slow to start, for big sessions).
Opening, playing and analysing run in workers: the screen never freezes.

**F4** saves the open session as a golden test (the Tests view's folder, **T**): its
inputs replayed into the attached system, its outputs compared with the recording.
"""
    BINDINGS = [
        Binding("f5", "toggle_record", "Record", id="sessions.record"),
        Binding("f6", "open_session", "Open", id="sessions.open"),
        Binding("ctrl+o", "pick_session", "Pick a session", id="sessions.pick"),
        Binding("f7", "play_pause", "Play/pause", id="sessions.play"),
        Binding("f8", "step", "Step", id="sessions.step"),
        Binding("f9", "analyze", "Analyze", id="sessions.analyze"),
        Binding("f4", "save_test", "Save as test", show=False, id="sessions.save_test"),
    ]
    REFRESH_EVERY_S = 0.25
    DEFAULT_CSS = """
    SessionsView Horizontal { height: auto; }
    SessionsView Label { padding: 1 1 0 0; }
    #rec-dir, #play-path { width: 1fr; }
    #play-rate, #play-seek { width: 12; }
    SessionsView .status { height: auto; padding: 0 1 1 1; }
    """

    # What the panes post, under the names the app and the tests know.
    RecordingChanged = RecordingPane.RecordingChanged
    SessionOpened = PlaybackPane.SessionOpened

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(parts, id=id)
        self.available = sessions_available()
        self.recording = RecordingPane(parts)
        self.playback = PlaybackPane(parts)
        self.last_manifest: dict[str, Any] = {}
        self._open_when_stopped = False

    def compose(self) -> ComposeResult:
        with Vertical():
            with Horizontal():
                yield self.recording
                yield AnalysisLaunch()
            yield self.playback

    # The panes' state, read by the app and the tests through the view.
    @property
    def recorder(self) -> Recorder | None:
        return self.recording.recorder

    @property
    def session(self) -> Session | None:
        return self.playback.session

    @property
    def player(self) -> Player | None:
        return self.playback.player

    @player.setter
    def player(self, player: Player | None) -> None:
        self.playback.player = player

    @property
    def listed(self) -> int:
        return self.playback.listed

    @property
    def last_error(self) -> str:
        return self.playback.last_error

    @last_error.setter
    def last_error(self, error: str) -> None:
        self.playback.last_error = error

    @property
    def recent_file(self) -> Path:
        return self.playback.recent_file

    def on_mount(self) -> None:
        if not self.available:
            for button in self.query(Button):
                button.disabled = True
            self.recording.show_status(
                Text("The sessions part (mailbus.sessions) is not installed.", style="red")
            )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Without the sessions part the keys are shown disabled.
        return self.available or None

    def action_save_test(self) -> None:
        from mailbus_workbench.views import save_test

        session = self.session
        if session is None:
            self.notify("Open a session (F6) to save it as a test", severity="warning")
            return
        source = save_test.session_source(self.parts, session.path)
        save_test.offer(self, self.parts, f"the recording {session.name}", session.name, source)

    def action_toggle_record(self) -> None:
        self.recording.toggle()

    @on(RecordingPane.RecordingChanged)
    def _recording_changed(self, event: RecordingPane.RecordingChanged) -> None:
        open_it, self._open_when_stopped = self._open_when_stopped, False
        if not event.recording and not event.error:  # stopped: offer it for playback
            self.query_one("#play-path", Input).value = event.directory
            self.last_manifest = event.manifest
            # The picker lists it among the recent sessions, wherever it was recorded.
            with contextlib.suppress(OSError):  # the list is a convenience
                recent_sessions.remember(self.recent_file, event.directory)
            if open_it:
                self.open_path(event.directory)

    def action_open_session(self) -> None:
        if self.recording.stopping:
            # F6 right after F5: the recording being written is the session meant (its
            # path is not offered yet: the picker, or the path typed before, would open).
            self._open_when_stopped = True
            self.playback.show_status(Text("opening the recording once written …", "dim"))
            return
        path = self.query_one("#play-path", Input).value.strip()
        if not path:
            self.action_pick_session()
            return
        self.open_path(path)

    def open_path(self, path: str) -> None:
        self.playback.open_path(path)

    def action_pick_session(self) -> None:
        from mailbus_workbench.views.session_picker import SessionPicker

        root = Path(default_directory()).parent.resolve()  # where recordings go
        if not root.is_dir():
            root = Path.cwd()

        def picked(path: str | None) -> None:
            if path:
                self.open_path(path)

        self.app.push_screen(SessionPicker(recent_sessions.load(self.recent_file), root), picked)

    @on(Button.Pressed, "#play-open")
    def _open_pressed(self) -> None:
        self.action_open_session()

    def action_play_pause(self) -> None:
        self.playback.play_pause()

    def action_step(self) -> None:
        self.playback.step()

    @on(AnalysisLaunch.AnalyzeRequested)
    def action_analyze(self) -> None:
        session = self.playback.session
        if session is None:
            self.playback.show_status(Text("Open a session first.", style="red"))
            return
        self.app.push_screen(AnalysisScreen(str(session.path)))

    def refresh_view(self, now: float) -> None:
        self.recording.refresh_status()
        self.playback.refresh_status()
