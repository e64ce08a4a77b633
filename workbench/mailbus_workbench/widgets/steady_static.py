"""A Static updated often (a player's or recorder's status, four times a second) that
asks for the screen's layout only when its height can change."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text
from textual.visual import VisualType
from textual.widgets import Static


class SteadyStatic(Static):
    """Textual lays the whole screen out again at every `Static.update` (its height is
    `auto`), 20-100 ms with a session's timeline and events on screen. A text with as
    many lines as the last one, none wider than the widget, keeps its height: only the
    widget is redrawn."""

    _shape: tuple[int, int] | None = None  # (lines, width) of the last text that fit

    def update(self, content: VisualType = "", *, layout: bool = True) -> None:
        width = self.content_region.width
        lines = (content.plain if isinstance(content, Text) else str(content)).split("\n")
        fits = width > 0 and all(cell_len(line) <= width for line in lines)
        shape = (len(lines), width) if fits else None
        steady = shape is not None and shape == self._shape
        self._shape = shape
        super().update(content, layout=layout and not steady)
