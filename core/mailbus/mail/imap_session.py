"""One authenticated IMAP connection: the settings, TLS, login with clear errors, and
the UID FETCH both receivers (the shared inbox and the routed folders) issue."""

from __future__ import annotations

import imaplib
import logging
import ssl
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import imapclient
from imapclient import exceptions as imap_errors
from imapclient.response_parser import parse_fetch_response

from mailbus.mail import imap_wire
from mailbus.mail.errors import (
    MailConnectError,
    MailConnectionLimitError,
    MailLoginError,
    MailTLSError,
)
from mailbus.mail.fetch_items import SIZE_ITEMS, response_bytes
from mailbus.mail.tls import TlsSettings, ssl_context, warn_unverified
from mailbus.options import check_url
from mailbus.trace import Tracer

log = logging.getLogger(__name__)

# What a broken or closed connection raises inside imapclient/imaplib.
CONNECTION_ERRORS = (OSError, imaplib.IMAP4.error, imap_errors.IMAPClientError, EOFError)

# RFC 5530 response codes a server gives when the password was right but the account
# has too many connections; Dovecot also names its setting in the text.
_LIMIT_CODES = (
    "[LIMIT]",
    "[UNAVAILABLE]",
    "Maximum number of connections",  # Dovecot
    "Too many open connections",  # Cyrus IMAP (maxlogins_per_user)
)


def connection_limit_refusal(text: str) -> str | None:
    """The server's own words when a LOGIN refusal is a connection limit, else None."""
    cleaned = text.removeprefix("b'").removeprefix('b"').rstrip("'\"")
    return cleaned if any(code in cleaned for code in _LIMIT_CODES) else None


@dataclass(frozen=True, slots=True)
class ImapSettings:
    url: str
    username: str
    password: str = field(repr=False)
    tls: TlsSettings = field(default_factory=TlsSettings)
    mailbox: str = "INBOX"
    timeout_s: float = 30.0

    def __post_init__(self) -> None:
        check_url("url-imap", self.url, ("imap", "imaps"))  # messages show it redacted
        parts = urlsplit(self.url)
        if parts.path.strip("/"):
            # imap://host/Folder names the mailbox, as in RFC 5092.
            object.__setattr__(self, "mailbox", parts.path.strip("/"))

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        parts = urlsplit(self.url)
        return parts.port or (993 if parts.scheme == "imaps" else 143)

    @property
    def implicit_tls(self) -> bool:
        return self.url.startswith("imaps://")

    @property
    def server(self) -> str:
        return f"{urlsplit(self.url).scheme}://{self.host}:{self.port}"


def open_session(s: ImapSettings, tracer: Tracer) -> imapclient.IMAPClient:
    """Connect, secure and log in; raise a clear MailError on failure. The caller
    selects a mailbox and shuts the client down on its own errors."""
    try:
        context = ssl_context(s.tls)
        client = imapclient.IMAPClient(
            s.host, s.port, ssl=s.implicit_tls, ssl_context=context, timeout=s.timeout_s
        )
    except ssl.SSLError as exc:
        raise MailTLSError(f"TLS with {s.server} failed: {exc}") from None
    except OSError as exc:
        raise MailConnectError(f"cannot reach IMAP server {s.server}: {exc}") from None
    except (imaplib.IMAP4.error, imap_errors.IMAPClientError) as exc:
        raise MailConnectError(f"{s.server} does not speak IMAP: {exc}") from None
    try:
        if not s.implicit_tls:
            if b"STARTTLS" not in client.capabilities():
                raise MailTLSError(f"{s.server} offers no STARTTLS; use imaps://")
            try:
                client.starttls(context)
            except ssl.SSLError as exc:
                raise MailTLSError(f"STARTTLS with {s.server} failed: {exc}") from None
        warn_unverified(s.tls, s.server, tracer)
        try:
            client.login(s.username, s.password)
        except imap_errors.LoginError as exc:
            limit = connection_limit_refusal(str(exc))
            if limit is not None:
                raise MailConnectionLimitError(
                    f"IMAP server {s.server} refused another connection for "
                    f"{s.username!r}: {limit}. Each participant holds one IMAP "
                    "connection; run fewer participants on this account, or raise the "
                    "server's limit (Dovecot: mail_max_userip_connections, Cyrus: "
                    "maxlogins_per_user)"
                ) from None
            raise MailLoginError(
                f"IMAP login to {s.server} as {s.username!r} was refused: "
                "check username and password (MAILBUS_PASSWORD)"
            ) from None
    except CONNECTION_ERRORS as exc:
        # The server went away or spoke garbage during TLS or login.
        shut(client)
        raise MailConnectError(f"connection to {s.server} failed: {exc!r}") from None
    except BaseException:
        shut(client)
        raise
    return client


def shut(client: imapclient.IMAPClient) -> None:
    try:
        client.shutdown()
    except Exception:  # the connection is going away anyway
        log.debug("IMAP shutdown failed", exc_info=True)


def uid_fetch(
    client: imapclient.IMAPClient, uids: str, items: list[bytes], counters: Counter[str]
) -> dict[int, Any]:
    """UID FETCH `uids`, counting the bytes of the answer (body bytes apart)."""
    data = imap_wire.uid_fetch(client, uids, items)
    size = response_bytes(data)
    counters["bytes_fetched"] += size
    if items is not SIZE_ITEMS:
        counters["body_bytes_fetched"] += size
    parsed: dict[int, Any] = dict(parse_fetch_response(data, False, True))
    return parsed
