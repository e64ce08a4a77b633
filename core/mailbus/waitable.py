"""What subscriptions, clients, servers and guard conditions share: wait sets can
wait on them, and they wake those wait sets when they become ready."""

from __future__ import annotations

import threading


class Waitable:
    def __init__(self) -> None:
        self._wait_conditions: tuple[threading.Condition, ...] = ()
        # Attach and detach rebuild the tuple; two at once must not lose one.
        self._attach_lock = threading.Lock()

    def is_ready(self) -> bool:
        raise NotImplementedError

    def attach(self, condition: threading.Condition) -> None:
        with self._attach_lock:
            self._wait_conditions = (*self._wait_conditions, condition)

    def detach(self, condition: threading.Condition) -> None:
        with self._attach_lock:
            conditions = list(self._wait_conditions)
            for index, attached in enumerate(conditions):
                if attached is condition:
                    del conditions[index]  # one attachment per call
                    break
            self._wait_conditions = tuple(conditions)

    def wake(self) -> None:
        """Wake every wait set waiting on this item."""
        for condition in self._wait_conditions:
            with condition:
                condition.notify_all()
