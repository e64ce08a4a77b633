"""Updating a text sized by its content without laying the whole screen out."""

from __future__ import annotations

from rich.console import RenderableType
from textual.widgets import Static


def update_text(static: Static, content: RenderableType | str, *, shown: bool = True) -> None:
    """Show `content` in `static`, a text whose height follows its content. Textual lays
    the whole screen out at each `Static.update` (20-60 ms with a flow on screen, and
    these texts follow the flow: the newest message, call or count): only a text whose
    height changes needs that. A text not `shown` now (on a hidden tab) is laid out when
    it is shown."""
    before = static.content_size
    static.update(content, layout=False)
    static.clear_cached_dimensions()  # measured again at the next layout
    if not shown:
        return
    height = static.get_content_height(before, static.app.size, before.width)
    if not before.width or height != before.height:
        static.refresh(layout=True)
