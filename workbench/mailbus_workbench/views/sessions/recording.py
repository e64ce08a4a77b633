"""The recording pane: record the observed context to a session directory (Parquet parts
and a manifest) with the live count of events written, queued and dropped."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Button, Input, Label, Static

from mailbus_workbench.model import session_control
from mailbus_workbench.parts import WorkbenchParts

if TYPE_CHECKING:
    from mailbus.sessions.recorder import Recorder


class RecordingPane(Vertical):
    DEFAULT_CSS = "RecordingPane { height: auto; width: 1fr; }"

    class RecordingChanged(Message):
        """A recording started or stopped (or could not start: `error`); a stopped one
        carries the manifest written."""

        def __init__(
            self,
            recording: bool,
            directory: str,
            error: str = "",
            manifest: dict[str, Any] | None = None,
        ) -> None:
            super().__init__()
            self.recording = recording
            self.directory = directory
            self.error = error
            self.manifest = manifest or {}

    class _Started(Message):  # the starting worker's result
        def __init__(self, recorder: Recorder | None, directory: str, error: str) -> None:
            super().__init__()
            self.recorder = recorder
            self.directory = directory
            self.error = error

    class _Stopped(Message):  # the stopping worker's result
        def __init__(self, directory: str, manifest: dict[str, Any], error: str) -> None:
            super().__init__()
            self.directory = directory
            self.manifest = manifest
            self.error = error

    def __init__(self, parts: WorkbenchParts) -> None:
        super().__init__()
        self.parts = parts
        self.recorder: Recorder | None = None
        self.stopping = False  # a stop is writing the last events and the manifest

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Label("record to")
            yield Input(session_control.default_directory(), id="rec-dir")
            yield Button("Record (F5)", id="rec-toggle", variant="error")
        yield Static("Not recording.", id="rec-status", classes="status", markup=False)

    @on(Button.Pressed, "#rec-toggle")
    def toggle(self) -> None:
        engine = self.parts.engine
        if engine is None:
            self.show_status(Text("No engine: nothing to record.", style="red"))
            return
        if self.recorder is None:
            directory = self.query_one("#rec-dir", Input).value.strip()
            if not directory:
                self.show_status(Text("Name a directory for the session.", style="red"))
                return
            self._start(directory)
        elif not self.stopping:
            self.stopping = True
            self._stop(self.recorder)

    @work(thread=True, exclusive=True, group="recorder")
    def _start(self, directory: str) -> None:
        engine = self.parts.engine
        assert engine is not None
        try:
            recorder = session_control.start_recorder(directory, engine.context)
        except Exception as exc:  # RecorderError, OSError, ValueError: shown, not fatal
            self.post_message(self._Started(None, directory, str(exc)))
            return
        self.post_message(self._Started(recorder, directory, ""))

    @on(_Started)
    def _started(self, result: _Started) -> None:
        self.recorder = result.recorder
        started = result.recorder is not None
        self.query_one("#rec-toggle", Button).label = "Stop (F5)" if started else "Record (F5)"
        if result.error:
            self.show_status(Text(f"Cannot record: {result.error}", style="red"))
        self.post_message(self.RecordingChanged(started, result.directory, result.error))

    @work(thread=True, exclusive=True, group="recorder")
    def _stop(self, recorder: Recorder) -> None:
        try:
            manifest, error = recorder.stop(), ""
        except Exception as exc:  # the writer's own error, shown
            manifest, error = {}, str(exc)
        self.post_message(self._Stopped(str(recorder.directory), manifest, error))

    @on(_Stopped)
    def _stopped(self, result: _Stopped) -> None:
        self.recorder = None
        self.stopping = False
        self.query_one("#rec-toggle", Button).label = "Record (F5)"
        counts = result.manifest.get("counts", {})
        self.show_status(
            Text(f"Stopped: {result.error}", style="red")
            if result.error
            else f"Recorded {counts.get('events', 0)} events to {result.directory} "
            f"({len(result.manifest.get('parts', []))} parts, "
            f"{counts.get('dropped', 0)} dropped)."
        )
        self.query_one("#rec-dir", Input).value = session_control.default_directory()
        self.post_message(
            self.RecordingChanged(False, result.directory, result.error, result.manifest)
        )

    def show_status(self, text: str | Text) -> None:
        self.query_one("#rec-status", Static).update(text)

    def refresh_status(self) -> None:
        recorder = self.recorder
        if recorder is not None:
            s = recorder.status()
            self.show_status(
                f"● recording to {recorder.directory}: {s['written']} written, "
                f"{s['queued']} queued, {s['dropped']} dropped, {s['parts']} parts"
            )

    def on_unmount(self) -> None:
        if self.recorder is not None:
            self.recorder.stop()
