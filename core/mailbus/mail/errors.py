"""Errors of the mail transport; each is a TransportError and says what to fix."""

from __future__ import annotations

from mailbus.errors import CredentialsRefused, TransportError


class MailLoginError(CredentialsRefused):
    """The server refused the username or password."""


class MailConnectError(TransportError):
    """The server could not be reached (refused, unknown host, timed out)."""


class MailTLSError(TransportError):
    """TLS failed: the certificate did not verify, or the server offered no TLS."""


class MailConnectionLimitError(TransportError):
    """The server refused another connection for the account (too many at once): the
    password was right, so this is not a MailLoginError."""
