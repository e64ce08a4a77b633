"""Event kinds of Stem hubs (docs/stem.md); every event carries the hub's name, and the
message's JSON dump in `extra`."""

from __future__ import annotations

from mailbus.event_kind import EventKind, Extra

_HUB = {"hub": Extra(str, "the hub's name")}
_MESSAGE = {
    **_HUB,
    "message": Extra(dict[str, object], "the message's dump (JSON-safe), also in `body`"),
}


class StemKind(EventKind):
    ADDRESSING_ERROR = (
        "stem.addressing_error",
        "no cell for the address (or a loop refused) | name, detail, body",
        _MESSAGE,
    )
    NO_METHOD = (
        "stem.no_method",
        "the cell has neither the delivery method nor msg_in | name, detail, body",
        _MESSAGE,
    )
    UNDELIVERABLE = (
        "stem.undeliverable",
        "no way out: unknown hub, portal failure, bad email | detail, body (an unreadable "
        "email's headers in `headers`, without `message`)",
        _MESSAGE,
    )
    CELL_ERROR = ("stem.cell_error", "a delivery method raised | name, detail, body", _MESSAGE)
    DELIVERED = ("stem.delivered", "a cell's method was called | name, body", _MESSAGE)
    FORWARDED = ("stem.forwarded", "a message left through a portal | name, body", _MESSAGE)
    RECEIVED = ("stem.received", "a message came in through a portal | name, body", _MESSAGE)
