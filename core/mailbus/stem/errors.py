"""The exceptions Stem raises, and the names of the trace events it emits."""

from __future__ import annotations

from mailbus.errors import MailbusError

# Trace event kinds (TraceEvent.kind); each error event carries the message's dump.
ADDRESSING_ERROR = "stem.addressing_error"  # no cell for the address (or a loop refused)
NO_METHOD = "stem.no_method"  # the cell has neither the delivery method nor msg_in
UNDELIVERABLE = "stem.undeliverable"  # no way out: unknown hub, portal failure, bad email
CELL_ERROR = "stem.cell_error"  # a delivery method raised
DELIVERED = "stem.delivered"  # a cell's method was called
FORWARDED = "stem.forwarded"  # a message left through a portal
RECEIVED = "stem.received"  # a message came in through a portal


class StemError(MailbusError):
    """Base class of the errors Stem raises."""


class AddressError(StemError, ValueError):
    """A string or mapping that is not a Stem address `hub:cell:target`."""


class MessageError(StemError, ValueError):
    """A message that cannot be dispatched (no `to`, no `from`, a cmd without `cmd`...)."""


class PortalFormatError(StemError, ValueError):
    """An email that does not carry a Stem message a portal can read."""


class CallTimeoutError(StemError, TimeoutError):
    """No reply to a command within the time given to `Hub.call`."""
