"""A draggable divider: resizes the widget before it (mouse), like a split pane."""

from __future__ import annotations

from textual import events
from textual.widget import Widget


class Divider(Widget):
    DEFAULT_CSS = """
    Divider { width: 1; height: 1fr; background: $panel; }
    Divider:hover, Divider.-dragging { background: $accent; }
    """

    def __init__(self, target: str, *, min_width: int = 12, id: str | None = None) -> None:
        super().__init__(id=id)
        self.target = target  # id of the pane this divider resizes
        self.min_width = min_width
        self._dragging = False

    def render(self) -> str:
        return "┃\n" * max(1, self.size.height)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._dragging = True
        self.add_class("-dragging")
        self.capture_mouse()
        event.stop()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if not self._dragging:
            return
        pane = self.screen.query_one(f"#{self.target}")
        width = event.screen_x - pane.region.x
        parent_width = self.parent.size.width if isinstance(self.parent, Widget) else 80
        pane.styles.width = max(self.min_width, min(width, parent_width - self.min_width))
        event.stop()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.remove_class("-dragging")
            self.release_mouse()
            event.stop()
