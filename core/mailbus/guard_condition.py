"""Guard conditions: a trigger that any thread can pull to wake a wait set."""

from __future__ import annotations

import threading
import weakref

from mailbus.errors import WaitSetError
from mailbus.waitable import Waitable


class GuardCondition(Waitable):
    """Triggered until a wait returns it as ready. In one wait set at a time."""

    def __init__(self, name: str = "") -> None:
        super().__init__()
        self.name = name
        self._triggered = False
        # Weak: a wait set dropped without clear() must not hold its guards for ever.
        self._owner: weakref.ref[object] | None = None
        self._lock = threading.Lock()

    def trigger(self) -> None:
        with self._lock:
            self._triggered = True
        self.wake()

    def is_ready(self) -> bool:
        return self._triggered

    def _take_trigger(self) -> bool:
        """Read and clear the trigger in one step, so that a trigger landing while a
        wait returns is kept for the next wait instead of being erased."""
        with self._lock:
            triggered = self._triggered
            self._triggered = False
            return triggered

    def _claim(self, owner: object) -> None:
        with self._lock:
            current = self._owner() if self._owner is not None else None
            if current is not None and current is not owner:
                raise WaitSetError(
                    f"guard condition {self.name or id(self)!r} is already in another wait set"
                )
            self._owner = weakref.ref(owner)

    def release(self, owner: object) -> None:
        with self._lock:
            if self._owner is not None and self._owner() is owner:
                self._owner = None
