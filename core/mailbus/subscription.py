"""Subscriptions: a bounded queue of the messages published on one topic.

Overflow policy: when the queue holds `depth` messages, DROP_OLDEST (the default, as
ROS's keep-last history) discards the oldest queued message to make room, DROP_NEWEST
discards the message that arrived. Either way `overflowed` counts it and an
`subscription.overflowed` trace event names it: nothing is lost in silence.
"""

from __future__ import annotations

import threading
from collections import deque
from enum import StrEnum

from mailbus.envelope import Message
from mailbus.gid import new_gid
from mailbus.host import EntityHost
from mailbus.names import check_name
from mailbus.trace import Kind
from mailbus.waitable import Waitable

DEFAULT_DEPTH = 1000


class OverflowPolicy(StrEnum):
    DROP_OLDEST = "drop_oldest"
    DROP_NEWEST = "drop_newest"


class Subscription(Waitable):
    def __init__(
        self,
        context: EntityHost,
        topic: str,
        *,
        depth: int = DEFAULT_DEPTH,
        overflow: OverflowPolicy = OverflowPolicy.DROP_OLDEST,
    ) -> None:
        super().__init__()
        if depth < 1:
            raise ValueError("subscription depth must be at least 1")
        self.topic = check_name(topic, "topic")
        self.gid = new_gid()
        self.depth = depth
        self.overflow = OverflowPolicy(overflow)
        self.received = 0
        self.overflowed = 0
        self._queue: deque[Message] = deque()
        self._lock = threading.Lock()
        self.host = context
        self._closed = False
        context.register(self)

    def __repr__(self) -> str:
        return f"Subscription({self.topic!r}, queued={len(self._queue)})"

    def is_ready(self) -> bool:
        return bool(self._queue)

    def __len__(self) -> int:
        return len(self._queue)

    def take(self) -> Message | None:
        """The oldest queued message, or None."""
        with self._lock:
            if not self._queue:
                return None
            message = self._queue.popleft()
        tracer = self.host.tracer
        if tracer.active:
            tracer.event(
                Kind.TAKEN,
                name=self.topic,
                gid=self.gid,
                source_gid=message.info.source_gid,
                message_id=message.message_id,
                source_timestamp_ns=message.info.source_timestamp_ns,
            )
        return message

    def deliver(self, message: Message) -> bool:
        """Queue `message` (the oldest or it dropped when full, by the overflow policy);
        False when the subscription is closed."""
        dropped: Message | None = None
        with self._lock:
            if self._closed:
                return False
            # Waiters block only on an empty queue: wake them on the first message only.
            wake = not self._queue
            self.received += 1
            if len(self._queue) >= self.depth:
                self.overflowed += 1
                if self.overflow is OverflowPolicy.DROP_NEWEST:
                    dropped = message
                else:
                    dropped = self._queue.popleft()
                    self._queue.append(message)
            else:
                self._queue.append(message)
        tracer = self.host.tracer
        if tracer.active and dropped is not message:
            tracer.event(
                Kind.DELIVERED,
                name=self.topic,
                gid=self.gid,
                source_gid=message.info.source_gid,
                message_id=message.message_id,
            )
        if dropped is not None:
            self.host.increment("overflowed")
            tracer = self.host.tracer
            if tracer.active:
                tracer.event(
                    Kind.OVERFLOWED,
                    name=self.topic,
                    gid=self.gid,
                    message_id=dropped.message_id,
                    detail=f"{self.overflow.value}, depth {self.depth}",
                )
        if wake:
            self.wake()
        return True

    def close(self) -> None:
        with self._lock:
            self._closed = True
        self.host.unregister(self)
