"""Shared helpers of the Pilot tests."""

from __future__ import annotations

from textual.message import Message
from waiting import until

__all__ = ["Posted", "until"]  # until: the Pilot twin of waiting.eventually


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
