"""A session picked from the recent ones or from a directory tree, instead of typing
its path: a directory holding a `manifest.json` is a session, and so is an MCAP file
(recorded here and exported, or by rosbag2 or Foxglove)."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Label, OptionList

NOT_A_SESSION = "is not a session (a directory with a manifest.json, or an .mcap file)"


def is_session(path: Path) -> bool:
    return (path / "manifest.json").is_file()


def is_mcap(path: Path) -> bool:
    return path.suffix.lower() == ".mcap" and path.is_file()


class SessionPicker(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    SessionPicker { align: center middle; }
    SessionPicker > Vertical { width: 90%; height: 90%; border: thick $primary;
                               background: $surface; padding: 0 1; }
    #picker-recent { height: auto; max-height: 12; }
    #picker-tree { height: 1fr; }
    #picker-hint { color: $text-muted; }
    """

    def __init__(self, recent: list[str], root: Path) -> None:
        super().__init__()
        self.recent = recent
        self.root = root

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Recent sessions (Enter opens one)")
            yield OptionList(*self.recent, id="picker-recent")
            yield Label(f"Or a session or .mcap file under {self.root} (Enter on one opens it)")
            yield DirectoryTree(self.root, id="picker-tree")
            yield Label("", id="picker-hint")

    def on_mount(self) -> None:
        self.query_one("#picker-recent" if self.recent else "#picker-tree").focus()

    @on(OptionList.OptionSelected, "#picker-recent")
    def _recent_chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(self.recent[event.option_index])

    @on(DirectoryTree.DirectorySelected)
    def _directory_chosen(self, event: DirectoryTree.DirectorySelected) -> None:
        if is_session(event.path):
            self.dismiss(str(event.path))
        else:
            self.query_one("#picker-hint", Label).update(f"{event.path} {NOT_A_SESSION}")

    @on(DirectoryTree.FileSelected)
    def _file_chosen(self, event: DirectoryTree.FileSelected) -> None:
        if is_mcap(event.path):
            self.dismiss(str(event.path))
        else:
            self.query_one("#picker-hint", Label).update(f"{event.path} {NOT_A_SESSION}")

    def action_cancel(self) -> None:
        self.dismiss(None)
