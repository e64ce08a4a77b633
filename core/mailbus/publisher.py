"""Publishers: send messages on one topic."""

from __future__ import annotations

import itertools
import time
from collections.abc import Mapping

from mailbus import headers as H
from mailbus.errors import InvalidNameError
from mailbus.gid import new_gid
from mailbus.host import EntityHost
from mailbus.names import check_name
from mailbus.trace import Kind, trace_sent


class Publisher:
    def __init__(self, context: EntityHost, topic: str) -> None:
        self.topic = check_name(topic, "topic")
        self.gid = new_gid()
        self.published = 0
        self._sequence = itertools.count(1)
        self.host = context

    def __repr__(self) -> str:
        return f"Publisher({self.topic!r}, gid={self.gid[:8]})"

    def publish(self, body: str, headers: Mapping[str, str] | None = None) -> str:
        """Send `body` on the topic; return the email's Message-ID.

        `headers` are extra headers (names and values are validated)."""
        context = self.host
        context.check_open()
        timestamp = time.time_ns()
        sequence = next(self._sequence)
        meta = {
            H.SOURCE_TIMESTAMP: str(timestamp),
            H.PUBLISHER_GID: self.gid,
            H.PUBLISHER_SEQUENCE_NUMBER: str(sequence),
        }
        if headers:
            clash = [name for name in headers if name.lower() in H.METADATA]
            if clash:
                raise InvalidNameError(f"header {clash[0]!r} is Mailbus metadata")
            meta = {**headers, **meta}
        email = context.outgoing(self.topic, body, meta)
        context.sender.send(email)
        self.published += 1
        tracer = context.tracer
        if tracer.active:
            trace_sent(tracer, Kind.PUBLISHED, email, self.gid, sequence, timestamp)
        return email.message_id
