"""Modal screens of Share: the export file dialog and the header picker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList
from textual.widgets.option_list import Option

from mailbus_workbench.model.export import ExportError, ExportExists
from mailbus_workbench.screens import Confirm
from mailbus_workbench.widgets import format as fmt

# Writes the export to the path; `True`: overwrite. Returns what was written ("48
# messages"), raises ExportError.
Writer = Callable[[Path, bool], str]


class ExportScreen(ModalScreen[Path | None]):
    """A path Input prefilled with a suggestion; the format follows the suffix. An
    existing file is overwritten only after a yes; an error keeps the dialog open."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    ExportScreen { align: center middle; }
    ExportScreen > Vertical { width: 80; max-width: 100%; height: auto; border: thick $accent;
                              padding: 1 2; background: $surface; }
    ExportScreen Label { width: 1fr; }  /* a long title or hint wraps, never cut */
    ExportScreen #export-hint { color: $text-muted; }
    ExportScreen #export-error { color: $error; height: auto; }
    """

    class Exported(Message):
        def __init__(self, path: Path, summary: str) -> None:
            super().__init__()
            self.path = path
            self.summary = summary

    def __init__(self, title: str, suggested: str, write: Writer, hint: str) -> None:
        super().__init__()
        self.title_text = title
        self.suggested = suggested
        self.write = write
        self.hint = hint

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.title_text, markup=False)
            yield Input(self.suggested, id="export-path")
            yield Label(self.hint, id="export-hint", markup=False)
            yield Label("", id="export-error", markup=False)

    @property
    def error(self) -> str:
        return str(self.query_one("#export-error", Label).content)

    def _show_error(self, text: str) -> None:
        self.query_one("#export-error", Label).update(text)

    @on(Input.Submitted, "#export-path")
    def _submit(self, event: Input.Submitted) -> None:
        text = event.value.strip()
        if not text:
            self._show_error("Enter a file name.")
            return
        path = Path(text).expanduser()
        try:
            self._export(path, overwrite=False)
        except ExportExists:

            def answered(yes: bool | None) -> None:
                if yes:
                    try:
                        self._export(path, overwrite=True)
                    except ExportError as exc:
                        self._show_error(str(exc))
                else:
                    self._show_error(f"{path} exists: not overwritten. Choose another name.")

            self.app.push_screen(Confirm(f"{path} exists. Overwrite it?"), answered)
        except ExportError as exc:
            self._show_error(str(exc))

    def _export(self, path: Path, *, overwrite: bool) -> None:
        summary = self.write(path, overwrite)
        self.notify(f"Exported {summary} to {path}", timeout=4, markup=False)
        self.post_message(self.Exported(path, summary))
        self.dismiss(path)

    def action_cancel(self) -> None:
        self.dismiss(None)


class HeaderPicker(ModalScreen[int | None]):
    """Pick one header of a message (its index in `rows`)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    HeaderPicker { align: center middle; }
    HeaderPicker > Vertical { width: 90; height: auto; max-height: 80%; border: thick $accent;
                              padding: 0 1; background: $surface; }
    HeaderPicker OptionList { height: auto; max-height: 20; }
    """

    def __init__(self, rows: list[tuple[str, str]]) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Copy which header's value? (enter)")
            yield OptionList(
                *(Option(Text(fmt.printable(f"{name}: {value}"))) for name, value in self.rows),
                id="header-options",
            )

    @on(OptionList.OptionSelected)
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option_index)

    def action_cancel(self) -> None:
        self.dismiss(None)
