"""The views' screen: just after a key, a change is painted at once (issue 15 item 8).

Textual paints on a 60 Hz timer: a screen with something to repaint resumes it when its
queue is idle, and the frame comes at the timer's next slot, up to 16.7 ms later (8 on
average), whatever the change. Within KEY_FRAME_WINDOW_S of a key this screen paints
as soon as it is idle instead, so a key's answer (a cursor moved, a view shown) reaches
the terminal without that wait; away from keys, the flood's repaints keep Textual's pace.

This overrides `Screen._on_idle` and calls `Screen._on_timer_update`, Textual's own
frame (8.x internals): tests/workbench/test_app_speed.py checks that a key is painted
with the timer stopped, so a Textual that renames them fails there.
"""

from __future__ import annotations

import time

from textual import events
from textual.screen import Screen

# Long enough for a key's cascade (the action, the messages it posts, the widgets'
# repaints), short enough that a flood's refreshes are not painted at once for long.
KEY_FRAME_WINDOW_S = 0.1


class KeyScreen(Screen[object]):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key_at = float("-inf")  # monotonic time of the last key

    def key_pressed(self) -> None:
        self._key_at = time.monotonic()

    def _answering_key(self) -> bool:
        return time.monotonic() - self._key_at < KEY_FRAME_WINDOW_S

    async def _on_idle(self, event: events.Idle) -> None:
        if (
            self._answering_key()
            and not self.app._batch_count
            and self.is_current
            and (
                self._layout_required
                or self._scroll_required
                or self._repaint_required
                or self._dirty_widgets
            )
            and not self._recompose_required
        ):
            event.prevent_default()
            self._on_timer_update()  # the frame now, not at the timer's next slot
            return
        await super()._on_idle(event)
