"""Portals: the link from one hub to another over a Mailbus context.

Naming convention: every hub that takes messages on a context subscribes to the topic
`stem/<hub name>`, its inbox there. A portal to hub R publishes on `stem/R`. Each email
carries the message's addresses and attributes in `Stem-*` headers and its data as the
JSON body (`null` when there is none); the data is read with `json.loads` only, never
with anything that can run code. Two more headers belong to the hop, not the message:
`Stem-Hub`, the hub that sent this email (the receiver's `in_portal`), and `Stem-Hops`,
how many portals the message has crossed (a route loop ends at `MAX_HOPS`).

`encode` and `decode` are pure functions; `Portal` is the thin part that publishes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from mailbus.email_message import MAX_PLAIN_HEADER_LENGTH
from mailbus.stem.address import Address, check_part
from mailbus.stem.errors import AddressError, MessageError, PortalFormatError
from mailbus.stem.message import StemMessage
from mailbus.stem.registry import DEFAULT

if TYPE_CHECKING:
    from mailbus.context import Context
    from mailbus.publisher import Publisher
    from mailbus.stem.hub import Hub

TOPIC_PREFIX = "stem/"
MAX_HOPS = 16
MAX_DATA_CHARS = 8 * 1024 * 1024

H_HUB = "Stem-Hub"
H_HOPS = "Stem-Hops"
ADDRESS_HEADERS = (("to", "Stem-To"), ("from", "Stem-From"), ("reply_to", "Stem-Reply-To"))
# Attribute values travel JSON-encoded (ASCII, control characters escaped), so any
# string is safe in a header and its type (str, int, bool) survives the trip.
ATTRIBUTE_HEADERS = (
    ("type", "Stem-Type"),
    ("cmd", "Stem-Cmd"),
    ("reply_type", "Stem-Reply-Type"),
    ("log", "Stem-Log"),
    ("status", "Stem-Status"),
    ("ack_req", "Stem-Ack-Req"),
    ("msg_id", "Stem-Msg-Id"),
    ("reply_id", "Stem-Reply-Id"),
)
_ATTRIBUTE_TYPES: dict[str, tuple[type, ...]] = {
    "type": (str,),
    "cmd": (str,),
    "reply_type": (str,),
    "log": (str,),
    "status": (str,),
    "ack_req": (bool,),
    "msg_id": (int, str),
    "reply_id": (int, str),
}


def inbox_topic(hub: str) -> str:
    """The topic on which hub `hub` takes messages from other hubs."""
    return TOPIC_PREFIX + check_part(hub, "hub")


def encode(message: StemMessage, sender_hub: str, hops: int) -> tuple[dict[str, str], str]:
    """Headers and body of the email that carries `message` one hop further.

    A `from` or `reply_to` address without a hub names a cell of the hub the message
    comes from, so it gets `sender_hub`: replies find their way back. Raise
    PortalFormatError for what cannot travel (data JSON cannot hold)."""
    headers = {H_HUB: check_part(sender_hub, "hub"), H_HOPS: str(hops)}
    for name, header in ADDRESS_HEADERS:
        address = message.address(name)
        if address is None:
            continue
        if name != "to" and not address.hub:
            address = address.replace(hub=sender_hub)
        headers[header] = str(address)
    for name, header in ATTRIBUTE_HEADERS:
        value = getattr(message, name)
        if value is None or (name == "ack_req" and value is False):
            continue
        text = json.dumps(value)
        if len(text) > MAX_PLAIN_HEADER_LENGTH:
            raise PortalFormatError(f"attribute {name!r} is too long to travel in a header")
        headers[header] = text
    try:
        body = json.dumps(message.data, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise PortalFormatError(f"data cannot travel as JSON: {exc}") from None
    if len(body) > MAX_DATA_CHARS:
        raise PortalFormatError(f"data is longer than {MAX_DATA_CHARS} characters as JSON")
    return headers, body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


def _json(text: str, what: str) -> Any:
    try:
        return _DECODER.decode(text)
    except (ValueError, RecursionError) as exc:
        raise PortalFormatError(f"{what} is not valid JSON: {exc}") from None


def decode(headers: Mapping[str, str], body: str) -> tuple[StemMessage, str, int]:
    """The message an email carries, the hub that sent it and the hops so far.

    Raise PortalFormatError, saying what is wrong, for anything else."""
    lowered = {k.lower(): v for k, v in headers.items()}
    sender = lowered.get(H_HUB.lower(), "")
    try:
        if not check_part(sender, "hub"):
            raise PortalFormatError(f"no {H_HUB} header: not a Stem portal email")
    except AddressError as exc:
        raise PortalFormatError(f"{H_HUB}: {exc}") from None
    hops_text = lowered.get(H_HOPS.lower(), "")
    if not hops_text.isascii() or not hops_text.isdigit() or len(hops_text) > 4:
        raise PortalFormatError(f"{H_HOPS} {hops_text[:20]!r} is not a small number")
    fields: dict[str, Any] = {}
    for name, header in ADDRESS_HEADERS:
        text = lowered.get(header.lower())
        if text is not None:
            try:
                fields["from_" if name == "from" else name] = Address.parse(text)
            except AddressError as exc:
                raise PortalFormatError(f"{header}: {exc}") from None
    for name, header in ATTRIBUTE_HEADERS:
        text = lowered.get(header.lower())
        if text is None:
            continue
        value = _json(text, header)
        kinds = _ATTRIBUTE_TYPES[name]
        if not isinstance(value, kinds) or (bool not in kinds and isinstance(value, bool)):
            raise PortalFormatError(
                f"{header} must be a JSON {' or '.join(k.__name__ for k in kinds)}"
            )
        fields[name] = value
    if len(body) > MAX_DATA_CHARS:
        raise PortalFormatError(f"body is longer than {MAX_DATA_CHARS} characters")
    fields["data"] = _json(body, "body")
    try:
        message = StemMessage(**fields)
        message.validate()
    except MessageError as exc:
        raise PortalFormatError(str(exc)) from None
    return message, sender, int(hops_text)


class Portal:
    """One hub's link to one remote hub over one context. A hub makes these: `client`
    portals with `Hub.connect`, `accepted` ones when a hub it listens for writes first."""

    def __init__(self, hub: Hub, context: Context, remote: str, *, kind: str = "client") -> None:
        if remote == hub.name:
            raise ValueError(f"a portal cannot join hub {remote!r} to itself")
        if remote == DEFAULT:
            raise ValueError(f"no hub may be called {DEFAULT}: that is the default portal")
        self.hub = hub
        self.context = context
        self.remote = check_part(remote, "hub")
        self.kind = kind
        self.sent = 0
        self.received = 0
        self._publisher: Publisher = context.publisher(inbox_topic(remote))

    def __repr__(self) -> str:
        return f"Portal({self.hub.name!r} -> {self.remote!r}, {self.kind})"

    def send(self, message: StemMessage, hops: int) -> str:
        """Publish `message` to the remote hub; return the email's Message-ID.
        Raise PortalFormatError or a Mailbus error if it cannot go."""
        headers, body = encode(message, self.hub.name, hops)
        message_id = self._publisher.publish(body, headers)
        self.sent += 1
        return message_id
