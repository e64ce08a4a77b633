"""While a key is answered, the UI thread keeps the interpreter's lock longer
(process-wide: only in the `mailbus` command's own process, see speed/__init__.py).

The workbench shares the GIL with the engine's threads (and, in `bench.workbench`, a
10,000 msg/s flood). A thread that waits for the lock asks its holder to drop it after
`sys.getswitchinterval()` (5 ms by default); a view switch's layout and paint, 20-40 ms of
pure Python, is thus cut into slices with the other threads' turns in between, which is
most of the gap between a key's CPU time and its wall time. Raised to 20 ms for the
whole process, the interval answered keys sooner but delayed the engine all the time;
here it is raised only from a key event to the frame that answers it and the view fill
that follows (two refreshes), then put back. It works both ways: a thread that takes
the lock while the UI thread waits in the event loop may keep it up to 20 ms too; the
net, measured in the same run (docs/benchmarks.md, "Workbench keys under a flood"),
is keys 2-4 ms sooner at the median and 3-7 ms at p95, the engine's rate unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

KEY_SWITCH_INTERVAL_S = 0.02

# Two refreshes: the frame that answers the key, then the one after the view's fill.
_REFRESHES_HELD = 2


class KeyTurn:
    """Raises the switch interval for a key and puts the previous one back after it."""

    def __init__(self, after_refresh: Callable[[Callable[[], None]], object]) -> None:
        self._after_refresh = after_refresh  # App.call_after_refresh
        self._saved: float | None = None  # the interval before the first key held
        self._held = 0  # keys not yet answered

    @property
    def active(self) -> bool:
        return self._saved is not None

    def key(self) -> None:
        """A key arrived: keep the lock longer until its frame and the fill after it."""
        if self._saved is None:
            self._saved = sys.getswitchinterval()
            sys.setswitchinterval(KEY_SWITCH_INTERVAL_S)
        self._held += 1
        self._after_refresh(lambda: self._refreshed(_REFRESHES_HELD - 1))

    def _refreshed(self, left: int) -> None:
        if left:
            self._after_refresh(lambda: self._refreshed(left - 1))
            return
        self._held -= 1
        if self._held <= 0:
            self.release()

    def release(self) -> None:
        """The interval as it was (at the end of the last key, or when the app ends)."""
        self._held = 0
        if self._saved is not None:
            sys.setswitchinterval(self._saved)
            self._saved = None
