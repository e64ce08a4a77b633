"""The exceptions Mailbus raises. Each says what went wrong and what it concerns."""

from __future__ import annotations


class MailbusError(Exception):
    """Base class of every error Mailbus raises on purpose."""


class InvalidNameError(MailbusError, ValueError):
    """A topic, service, header or address that cannot be used safely."""


class EmailFormatError(MailbusError, ValueError):
    """Bytes that are not an email Mailbus can read."""


class ForeignEmailError(EmailFormatError):
    """A well-formed email that was not written by Mailbus (a newsletter, a bounce)."""


class ConfigError(MailbusError):
    """A missing or malformed option; `key` names it."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"option {key!r}: {problem}")
        self.key = key
        self.problem = problem


class ContextError(MailbusError, RuntimeError):
    """The context is used in a state that does not allow it (not initialised, shut down)."""


class WaitSetError(MailbusError, RuntimeError):
    """A wait set was used against its rules (a guard condition in two wait sets)."""


class TransportError(MailbusError):
    """The transport could not send or receive; the operation may be retried."""


class CredentialsRefused(TransportError):
    """The server was reached and refused the username or password: the options, not
    the server, need fixing."""


class MessageTooLarge(TransportError):
    """An email larger than the transport delivers, refused before it was sent; the
    message names the limit and the option that sets it."""


class ServiceTimeoutError(MailbusError, TimeoutError):
    """A service call got no response within its timeout."""
