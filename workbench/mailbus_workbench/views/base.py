"""What every view offers the app (a refresh from the model, its help text) and what it
is handed (the workbench parts)."""

from __future__ import annotations

from textual.containers import Container
from textual.widget import Widget

from mailbus_workbench.parts import WorkbenchParts


class View(Container):
    HELP = ""
    # Seconds between refreshes of this view (the model itself pumps at the app's rate).
    REFRESH_EVERY_S = 0.0

    DEFAULT_CSS = "View { height: 1fr; }"

    def __init__(self, parts: WorkbenchParts, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.parts = parts  # handed in: a view never looks the app up

    DEFAULT_FOCUS = ""  # selector of the widget that gets the focus when shown

    HOME_FOCUS = ""  # a widget that is no text field (escape from a field goes there)

    def default_focus_widget(self) -> Widget | None:
        """The widget that gets the keys when this view is shown (None: the view's own)."""
        return self.query_one(self.DEFAULT_FOCUS) if self.DEFAULT_FOCUS else None

    # Both focus now, not as `Widget.focus` does (a callback on the widget's queue): a
    # focus landing late took the keys from a view shown meanwhile by a tab press.
    def focus_default(self) -> None:
        if (widget := self.default_focus_widget()) is not None:
            widget.screen.set_focus(widget)

    def focus_home(self) -> None:
        selector = self.HOME_FOCUS or self.DEFAULT_FOCUS
        if selector:
            widget = self.query_one(selector)
            widget.screen.set_focus(widget)

    def refresh_view(self, now: float) -> None:
        """Show the model's current state; called on the UI thread while visible."""
