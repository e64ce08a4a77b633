"""What an entity (publisher, subscription, service client or server, wait set) needs
from the context that made it: a small seam, so that entities neither name the context
nor reach into its members (and the layers contract needs no exceptions for them)."""

from __future__ import annotations

from typing import Protocol

from mailbus.email_message import Email
from mailbus.trace import Tracer
from mailbus.transport import EmailSender


class EntityHost(Protocol):
    @property
    def tracer(self) -> Tracer: ...

    @property
    def sender(self) -> EmailSender: ...

    @property
    def address(self) -> str: ...

    @property
    def is_initialized(self) -> bool: ...

    @property
    def is_shut_down(self) -> bool:
        """True once shut down: nothing arrives any more (a wait must not block)."""

    def check_open(self) -> None:
        """Raise ContextError unless the host is initialised."""

    def outgoing(self, subject: str, body: str, headers: dict[str, str]) -> Email:
        """An email from this participant to its recipients, with a fresh Message-ID."""

    def increment(self, counter: str) -> None:
        """Count one `counter` event (overflowed, discarded, ...) in the host's counters."""

    def register(self, entity: object) -> None:
        """Let the host deliver to `entity`, wake it at shutdown and list it."""

    def unregister(self, entity: object) -> None:
        """The reverse of `register`; unknown entities are ignored."""
