"""Shared helpers of the Pilot tests."""

from __future__ import annotations

import time
from collections.abc import Callable

from textual.message import Message
from textual.pilot import Pilot


async def until(
    pilot: Pilot[object], condition: Callable[[], object], what: str, timeout: float = 10.0
) -> None:
    """Let the app run until `condition()` holds; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.02)


class Posted:
    """Collects the messages posted in an app (pass `.hook` as run_test's message_hook)."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self._seen: set[int] = set()  # ids of kept messages (kept alive, so unique)

    def hook(self, message: Message) -> None:
        # The hook sees a bubbling message at each node it reaches: keep it once.
        if id(message) not in self._seen:
            self._seen.add(id(message))
            self.messages.append(message)

    def of(self, kind: type[Message]) -> list[Message]:
        return [m for m in self.messages if isinstance(m, kind)]
