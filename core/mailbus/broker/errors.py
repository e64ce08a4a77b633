"""The exceptions the broker raises. Each names the module, link or byte it concerns."""

from __future__ import annotations

from mailbus.errors import MailbusError


class BrokerError(MailbusError):
    """Base class of the broker's errors."""


class BrokerClosedError(BrokerError, RuntimeError):
    """The broker was destroyed (its reference count reached zero)."""


class UnknownModuleError(BrokerError, LookupError):
    """No module of that name (or that object) is attached to the broker."""


class DuplicateModuleError(BrokerError, ValueError):
    """A module of that name, or that very object, is already attached."""


class LinkError(BrokerError, ValueError):
    """A link that cannot be added or removed (duplicate, self-link, missing)."""


class PublishTimeoutError(BrokerError, TimeoutError):
    """A blocking publish waited its whole timeout for room in some sinks' queues.

    The message was queued for every other sink; `sinks` names the ones that refused it,
    so the caller knows exactly where it did not arrive."""

    def __init__(self, source: str, sinks: tuple[str, ...], timeout: float) -> None:
        super().__init__(
            f"publish from {source!r}: no room in the queue of {', '.join(sinks)} "
            f"within {timeout:g} s; the message was not queued there"
        )
        self.source = source
        self.sinks = sinks
        self.timeout = timeout


class ModuleStartError(BrokerError):
    """A module's start() raised; the original exception is the cause."""


class WireFormatError(BrokerError, ValueError):
    """Bytes that are not a valid broker message (`offset` is where it went wrong)."""

    def __init__(self, problem: str, offset: int = 0) -> None:
        super().__init__(f"broker message at byte {offset}: {problem}")
        self.problem = problem
        self.offset = offset


class GatewayConfigError(BrokerError, ValueError):
    """A gateway description that cannot be used; `where` is a JSON path like
    `modules[2].loader`."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}" if where else problem)
        self.where = where
        self.problem = problem
