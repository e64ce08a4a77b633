"""Modal screens: a number prompt, a yes/no confirmation and the contextual help."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Markdown


class NumberPrompt(ModalScreen[int | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    NumberPrompt { align: center middle; }
    NumberPrompt > Vertical { width: 50; height: auto; border: thick $accent; padding: 1 2;
                              background: $surface; }
    NumberPrompt #prompt-error { color: $error; height: auto; }
    """

    def __init__(self, title: str, value: int, low: int, high: int) -> None:
        super().__init__()
        self.title_text = title
        self.value = value
        self.low = low
        self.high = high

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(f"{self.title_text} ({self.low} to {self.high})")
            yield Input(str(self.value), id="prompt-input", type="integer")
            yield Label("", id="prompt-error")

    @on(Input.Submitted)
    def _submit(self, event: Input.Submitted) -> None:
        try:
            value = int(event.value)
        except ValueError:
            value = self.low - 1
        if not self.low <= value <= self.high:
            self.query_one("#prompt-error", Label).update(
                f"Enter a whole number from {self.low} to {self.high}."
            )
            return
        self.dismiss(value)

    def action_cancel(self) -> None:
        self.dismiss(None)


class Confirm(ModalScreen[bool]):
    BINDINGS = [
        Binding("escape", "no", "Cancel"),
        Binding("y", "yes", "Yes"),
        Binding("n", "no", "No"),
    ]
    DEFAULT_CSS = """
    Confirm { align: center middle; }
    Confirm > Vertical { width: 60; height: auto; border: thick $error; padding: 1 2;
                         background: $surface; }
    Confirm Horizontal { height: auto; margin-top: 1; }
    Confirm Button { margin-right: 2; }
    """

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, markup=False)
            with Horizontal():
                yield Button("Yes (y)", variant="error", id="confirm-yes")
                yield Button("No (n)", variant="primary", id="confirm-no")

    @on(Button.Pressed, "#confirm-yes")
    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#confirm-no")
    def action_no(self) -> None:
        self.dismiss(False)


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,f1,q", "close", "Close")]
    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; height: 90%; border: thick $accent;
                                  background: $surface; padding: 0 1; }
    """

    def __init__(self, markdown: str) -> None:
        super().__init__()
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Markdown(self.markdown, id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
