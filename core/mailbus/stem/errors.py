"""The exceptions Stem raises, and the names of the trace events it emits."""

from __future__ import annotations

from mailbus.errors import MailbusError
from mailbus.stem.kinds import StemKind

# Trace event kinds (TraceEvent.kind); each error event carries the message's dump.
ADDRESSING_ERROR = StemKind.ADDRESSING_ERROR
NO_METHOD = StemKind.NO_METHOD
UNDELIVERABLE = StemKind.UNDELIVERABLE
CELL_ERROR = StemKind.CELL_ERROR
DELIVERED = StemKind.DELIVERED
FORWARDED = StemKind.FORWARDED
RECEIVED = StemKind.RECEIVED


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
