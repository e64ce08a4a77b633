"""Event kinds of Stem hubs (docs/stem.md); failures carry the message's JSON dump in
`extra`."""

from __future__ import annotations

from mailbus.event_kind import EventKind


class StemKind(EventKind):
    ADDRESSING_ERROR = (
        "stem.addressing_error",
        "no cell for the address (or a loop refused) | detail, extra",
    )
    NO_METHOD = (
        "stem.no_method",
        "the cell has neither the delivery method nor msg_in | detail, extra",
    )
    UNDELIVERABLE = (
        "stem.undeliverable",
        "no way out: unknown hub, portal failure, bad email | detail, extra",
    )
    CELL_ERROR = ("stem.cell_error", "a delivery method raised | detail, extra")
    DELIVERED = ("stem.delivered", "a cell's method was called | name")
    FORWARDED = ("stem.forwarded", "a message left through a portal | name")
    RECEIVED = ("stem.received", "a message came in through a portal | name")
