"""Pick one of a message's numeric fields to plot: a box with completion over a list of
the fields (fuzzy filtered as one types)."""

from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList

from mailbus_workbench.model.fuzzy import fuzzy_filter
from mailbus_workbench.widgets.suggest import NameSuggester


class FieldPrompt(ModalScreen[str | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    DEFAULT_CSS = """
    FieldPrompt { align: center middle; }
    FieldPrompt > Vertical { width: 64; height: auto; max-height: 80%; border: thick $accent;
                             padding: 1 2; background: $surface; }
    FieldPrompt OptionList { height: auto; max-height: 12; }
    FieldPrompt #field-error { color: $error; height: auto; }
    """

    def __init__(self, fields: list[str]) -> None:
        super().__init__()
        self.fields = fields

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label("Plot which field? (→ completes, enter plots)")
            yield Input(id="field-input", suggester=NameSuggester(lambda: self.fields))
            yield OptionList(*self.fields, id="field-list")
            yield Label("", id="field-error")

    @on(Input.Changed, "#field-input")
    def _narrow(self, event: Input.Changed) -> None:
        listed = self.query_one("#field-list", OptionList)
        listed.clear_options()
        listed.add_options(fuzzy_filter(event.value, self.fields) if event.value else self.fields)

    @on(Input.Submitted, "#field-input")
    def _submit(self, event: Input.Submitted) -> None:
        if event.value in self.fields:
            self.dismiss(event.value)
            return
        matches = fuzzy_filter(event.value, self.fields)
        if not matches:
            self.query_one("#field-error", Label).update("No numeric field matches.")
            return
        self.dismiss(matches[0])

    @on(OptionList.OptionSelected, "#field-list")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(str(event.option.prompt))

    def action_cancel(self) -> None:
        self.dismiss(None)
