"""The analysis launch pane: open the analysis of the session the playback pane has open
(topics, services, calls, orphans, sequences) on the engine picked there."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button


class AnalysisLaunch(Horizontal):
    DEFAULT_CSS = "AnalysisLaunch { height: auto; width: auto; }"

    class AnalyzeRequested(Message):
        """The user asked for the analysis of the open session."""

    def compose(self) -> ComposeResult:
        yield Button("Analyze (F9)", id="play-analyze")

    @on(Button.Pressed, "#play-analyze")
    def request(self) -> None:
        self.post_message(self.AnalyzeRequested())
