"""The transport interface: an email sender and an email receiver.

Every transport (in-process, SMTP/IMAP, PostOffice) implements these two small classes,
so the engine above never knows how an email travels.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from dataclasses import dataclass

from mailbus.email_message import Email, validate
from mailbus.errors import MessageTooLarge


@dataclass(frozen=True, slots=True)
class RawEmail:
    """Bytes that arrived but are not parsed yet; `origin` identifies them for reports
    (an IMAP UID, a PostOffice letter number)."""

    data: bytes
    origin: str = ""


Inbound = Email | RawEmail


class EmailSender(abc.ABC):
    """Sends emails. `send` must not block the caller on the network for long.

    Every email is validated here, once, whatever the transport: in-process delivery
    must refuse what a mail server would (header injection, bad names), or code that
    works in a unit test fails over mail. Transports implement `deliver`."""

    # The largest encoded email this transport delivers (None: no known limit), and the
    # option that sets it: `deliver` refuses a larger one at once (`check_size`) rather
    # than let it fail later on a delivery thread, unseen by the caller.
    max_email_bytes: int | None = None
    limit_option: str = ""

    def check_size(self, size: int) -> None:
        """MessageTooLarge if an email of `size` bytes is over `max_email_bytes`."""
        limit = self.max_email_bytes
        if limit is not None and size > limit:
            raise MessageTooLarge(
                f"the email is {size:,} bytes, over this transport's limit of {limit:,} "
                f"bytes ({self.limit_option or 'max-email-bytes'})"
            )

    def send(self, email: Email) -> None:
        """Hand `email` to the transport; InvalidNameError if it would corrupt or inject
        headers, TransportError if the transport cannot take it."""
        validate(email)
        self.deliver(email)

    @abc.abstractmethod
    def deliver(self, email: Email) -> None:
        """Hand a validated `email` to the transport; raise TransportError if it cannot
        take it."""

    def reply(self, original: Email, reply: Email) -> None:
        """Send `reply` as an answer to `original`: In-Reply-To and References name
        the original's Message-ID and, unless `reply` names recipients, it goes to the
        original's sender."""
        references = (*original.references, original.message_id) if original.message_id else ()
        self.send(
            Email(
                subject=reply.subject,
                body=reply.body,
                sender=reply.sender,
                to=reply.to or ((original.sender,) if original.sender else ()),
                cc=reply.cc,
                bcc=reply.bcc,
                headers=reply.headers,
                message_id=reply.message_id,
                in_reply_to=original.message_id,
                references=references[-8:],
            )
        )

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the transport's resources; sending afterwards is an error."""


class EmailReceiver(abc.ABC):
    """Receives emails in the order the transport delivers them."""

    # How long one `receive` call may wait when nothing comes, if longer than the
    # polling period: a receiver whose `wake` always ends a wait sets it, so that an
    # idle engine is not woken every period for nothing.
    idle_wait_s: float = 0.0

    @abc.abstractmethod
    def receive(self, timeout: float | None) -> list[Inbound]:
        """Return the emails that arrived, waiting up to `timeout` seconds (None: for
        ever) for at least one. An empty list means the wait timed out or `wake` was
        called."""

    @abc.abstractmethod
    def wake(self) -> None:
        """Make a blocked `receive` return at once (used at shutdown)."""

    def set_consumer(self, consumer: Callable[[Inbound], None]) -> bool:
        """Offer to call `consumer` on the sending thread for every email instead of
        queueing it for `receive`. Return True if this receiver does so (the in-process
        one does, saving a thread hand-off); the default declines."""
        return False

    def follow(  # noqa: B027 - optional hook
        self, topics: frozenset[str], services: frozenset[str], clients: frozenset[str]
    ) -> None:
        """What the context now receives: the topics it subscribes to, the services it
        serves and those it calls. A receiver that can read only that (the routed
        email mode) uses it; the default reads everything and ignores it."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release the transport's resources."""


@dataclass(frozen=True, slots=True)
class Transport:
    """A sender and a receiver that belong together."""

    sender: EmailSender
    receiver: EmailReceiver
    name: str = "custom"

    def close(self) -> None:
        self.sender.close()
        self.receiver.close()
