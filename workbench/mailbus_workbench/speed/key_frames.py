"""Just after a key, a change is painted at once.

Textual paints on a 60 Hz timer: a screen with something to repaint resumes it when its
queue is idle, and the frame comes at the timer's next slot, up to 16.7 ms later (8 on
average), whatever the change. Within KEY_FRAME_WINDOW_S of a key this screen paints
as soon as it is idle instead, so a key's answer (a cursor moved, a view shown) reaches
the terminal without that wait; away from keys, the flood's repaints keep Textual's pace.
The Textual internals it needs are in mailbus_workbench.textual_internals.
"""

from __future__ import annotations

import time

from mailbus_workbench.textual_internals import FrameScreen

# Long enough for a key's cascade (the action, the messages it posts, the widgets'
# repaints), short enough that a flood's refreshes are not painted at once for long.
KEY_FRAME_WINDOW_S = 0.1


class KeyScreen(FrameScreen):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._key_at = float("-inf")  # monotonic time of the last key

    def key_pressed(self) -> None:
        self._key_at = time.monotonic()

    def paint_when_idle(self) -> bool:
        return time.monotonic() - self._key_at < KEY_FRAME_WINDOW_S
