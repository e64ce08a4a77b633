"""Stem's message model on the Mailbus engine: cells in hubs, hubs joined by portals.

    from mailbus.stem import Cell, Hub

    class Clock(Cell):
        def time_cmd(self, msg):
            return "12:00"            # answered as a `response` message

    with Hub("home") as hub:
        hub.register_cell(Clock(), "clock")
        print(hub.call("clock", "time", timeout=1.0).data)

See docs/stem.md.
"""

from mailbus.stem.address import Address
from mailbus.stem.errors import (
    ADDRESSING_ERROR,
    CELL_ERROR,
    NO_METHOD,
    UNDELIVERABLE,
    AddressError,
    CallTimeoutError,
    MessageError,
    PortalFormatError,
    StemError,
)
from mailbus.stem.hub import Cell, Hub
from mailbus.stem.message import StemMessage
from mailbus.stem.portal import Portal, inbox_topic
from mailbus.stem.registry import DEFAULT, CellRegistry, PortalRegistry

__all__ = [
    "ADDRESSING_ERROR",
    "CELL_ERROR",
    "DEFAULT",
    "NO_METHOD",
    "UNDELIVERABLE",
    "Address",
    "AddressError",
    "CallTimeoutError",
    "Cell",
    "CellRegistry",
    "Hub",
    "MessageError",
    "Portal",
    "PortalFormatError",
    "PortalRegistry",
    "StemError",
    "StemMessage",
    "inbox_topic",
]
