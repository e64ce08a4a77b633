"""Mailbus messages, requests and responses, and how each is carried in an email.

A pub/sub message carries Source-Timestamp and Publisher-GID; a request carries
Source-Timestamp, Client-GID and Request-Sequence-Number; a response carries the same
three plus Server-GID, and In-Reply-To/References naming the request's Message-ID.

These objects are shared by every entity that receives them: treat them as read-only
(they are not frozen dataclasses only because freezing costs microseconds per message).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar, Protocol, TypeVar

from mailbus import headers as H
from mailbus.email_message import Email
from mailbus.errors import ForeignEmailError


class EnvelopeKind(StrEnum):
    """What an email carries, as the `detail` of its `email.received` trace event says it:
    readers compare with these members, never with a spelt string."""

    MESSAGE = "message"
    REQUEST = "request"
    RESPONSE = "response"


@dataclass(slots=True)
class MessageInfo:
    """Metadata every message, request and response exposes."""

    source_timestamp_ns: int
    reception_timestamp_ns: int
    source_gid: str
    sequence_number: int = -1  # requests and responses only


@dataclass(slots=True)
class Message:
    """A message published on a topic."""

    kind: ClassVar[EnvelopeKind] = EnvelopeKind.MESSAGE
    topic: str
    body: str
    info: MessageInfo
    email: Email

    @property
    def message_id(self) -> str:
        return self.email.message_id


@dataclass(slots=True)
class Request:
    """A service request as a server takes it."""

    kind: ClassVar[EnvelopeKind] = EnvelopeKind.REQUEST
    service: str
    body: str
    info: MessageInfo
    client_gid: str
    email: Email

    @property
    def sequence_number(self) -> int:
        return self.info.sequence_number

    @property
    def message_id(self) -> str:
        return self.email.message_id


@dataclass(slots=True)
class Response:
    """A service response as a client takes it."""

    kind: ClassVar[EnvelopeKind] = EnvelopeKind.RESPONSE
    service: str
    body: str
    info: MessageInfo
    client_gid: str
    email: Email

    @property
    def sequence_number(self) -> int:
        return self.info.sequence_number

    @property
    def in_reply_to(self) -> str:
        return self.email.in_reply_to


Envelope = Message | Request | Response

E_contra = TypeVar("E_contra", Message, Request, Response, contravariant=True)


class Recipient(Protocol[E_contra]):
    """What routing hands a received envelope to: a subscription takes messages, a
    server requests, a client responses."""

    def deliver(self, envelope: E_contra) -> bool:
        """Take `envelope` (queue it, or hand it to the call awaiting it); False when it is
        refused (the entity is closed, or no call awaits that response)."""
        ...


def _int_header(headers: Mapping[str, str], name: str) -> int:
    value = headers.get(name)
    if value is None:
        raise ForeignEmailError(f"missing header {name}")
    try:
        return H.parse_number(name, value)
    except ValueError as exc:
        raise ForeignEmailError(str(exc)) from None


def open_envelope(email: Email, reception_timestamp_ns: int) -> Envelope:
    """Read the Mailbus message an email carries; ForeignEmailError if it carries none."""
    headers = email.headers
    timestamp = _int_header(headers, H.SOURCE_TIMESTAMP)
    publisher = headers.get(H.PUBLISHER_GID)
    if publisher is not None:
        # Optional (-1 when absent), but refused when present and malformed, like the rest.
        has_number = H.PUBLISHER_SEQUENCE_NUMBER in headers
        sequence = _int_header(headers, H.PUBLISHER_SEQUENCE_NUMBER) if has_number else -1
        info = MessageInfo(timestamp, reception_timestamp_ns, publisher, sequence)
        return Message(email.subject, email.body, info, email)
    client = headers.get(H.CLIENT_GID)
    if client is None:
        raise ForeignEmailError(f"neither {H.PUBLISHER_GID} nor {H.CLIENT_GID} header")
    sequence = _int_header(headers, H.REQUEST_SEQUENCE_NUMBER)
    if email.in_reply_to:
        server = headers.get(H.SERVER_GID, "")
        info = MessageInfo(timestamp, reception_timestamp_ns, server, sequence)
        return Response(email.subject, email.body, info, client, email)
    info = MessageInfo(timestamp, reception_timestamp_ns, client, sequence)
    return Request(email.subject, email.body, info, client, email)
