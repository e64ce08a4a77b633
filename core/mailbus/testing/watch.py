"""A subscription that hands each message to a callback instead of queueing it: what
the kit's observers (expectations, the system's readiness, golden runs) subscribe with."""

from __future__ import annotations

from collections.abc import Callable

from mailbus.envelope import Message
from mailbus.host import EntityHost
from mailbus.subscription import Subscription


class Watch(Subscription):
    def __init__(self, host: EntityHost, topic: str, seen: Callable[[Message], None]) -> None:
        self._seen = seen
        super().__init__(host, topic, depth=1)

    def deliver(self, message: Message) -> bool:
        self._seen(message)
        return True
