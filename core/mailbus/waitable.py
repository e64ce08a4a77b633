"""What subscriptions, clients, servers and guard conditions share: wait sets can
wait on them, and they wake those wait sets when they become ready."""

from __future__ import annotations

import threading


class Waitable:
    def __init__(self) -> None:
        self._wait_conditions: tuple[threading.Condition, ...] = ()

    def is_ready(self) -> bool:
        raise NotImplementedError

    def _attach(self, condition: threading.Condition) -> None:
        self._wait_conditions = (*self._wait_conditions, condition)

    def _detach(self, condition: threading.Condition) -> None:
        self._wait_conditions = tuple(c for c in self._wait_conditions if c is not condition)

    def _wake_waiters(self) -> None:
        for condition in self._wait_conditions:
            with condition:
                condition.notify_all()
