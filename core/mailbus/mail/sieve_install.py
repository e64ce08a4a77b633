"""Installing the routed mode's Sieve script over ManageSieve (RFC 5804, sievelib).

The script is stored as `mailbus` and made the active one, unless the account already
runs another active script: Mailbus then refuses (it would switch the user's own
filters off) and says how to include its script instead. Installing is idempotent: an
identical script already active is left alone, so every participant of an account may
install it at start-up. Certificates are verified like IMAP's (mailbus.mail.tls).
"""

from __future__ import annotations

import socket
import ssl
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from sievelib import managesieve

from mailbus.errors import TransportError
from mailbus.mail.sieve_script import SCRIPT_NAME
from mailbus.mail.tls import TlsSettings, ssl_context, warn_unverified
from mailbus.options import check_url
from mailbus.trace import Tracer

DEFAULT_PORT = 4190
CONNECT_TIMEOUT_S = 30.0


class MailSieveError(TransportError):
    """The routed mode's Sieve script could not be installed; the message says why."""


@dataclass(frozen=True, slots=True)
class SieveSettings:
    url: str  # sieve://host[:port], STARTTLS as RFC 5804 requires
    username: str
    password: str = field(repr=False)
    tls: TlsSettings = field(default_factory=TlsSettings)

    def __post_init__(self) -> None:
        check_url("mail.url-sieve", self.url, ("sieve",))

    @property
    def host(self) -> str:
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        return urlsplit(self.url).port or DEFAULT_PORT

    @property
    def server(self) -> str:
        return f"sieve://{self.host}:{self.port}"


class _VerifyingClient(managesieve.Client):  # type: ignore[misc]
    """sievelib's client with our TLS context: its own trusts only the system's CAs
    (no `ca-file`, no opting out). It names the hook `__enable_ssl`, hence the mangled
    name."""

    def __init__(self, settings: SieveSettings) -> None:
        super().__init__(settings.host, settings.port)
        self._context = ssl_context(settings.tls)

    def _Client__enable_ssl(self, keyfile: Any = None, certfile: Any = None) -> None:
        plain: socket.socket = self.sock  # type: ignore[has-type]
        try:
            self.sock = self._context.wrap_socket(plain, server_hostname=self.srvhostname)
        except ssl.SSLError as exc:
            raise managesieve.Error(f"TLS failed: {exc}") from None


def install_script(settings: SieveSettings, script: str, tracer: Tracer | None = None) -> bool:
    """Store `script` as Mailbus's and make it active; True if anything changed."""
    s = settings
    try:
        # sievelib connects without a timeout: a host that drops packets would hang
        # it for minutes. Reach the port first, with one.
        socket.create_connection((s.host, s.port), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise MailSieveError(f"cannot reach ManageSieve at {s.server}: {exc}") from None
    client = _VerifyingClient(s)
    try:
        try:
            ok = client.connect(s.username, s.password, starttls=True)
        except managesieve.Error as exc:
            raise MailSieveError(f"ManageSieve at {s.server}: {exc}") from None
        except OSError as exc:
            raise MailSieveError(f"cannot reach ManageSieve at {s.server}: {exc}") from None
        if not ok:
            raise MailSieveError(
                f"ManageSieve login to {s.server} as {s.username!r} was refused: "
                "check username and password (MAILBUS_PASSWORD)"
            )
        warn_unverified(s.tls, s.server, tracer)
        return _put_and_activate(client, s.server, script)
    finally:
        if client.sock is not None:
            try:
                client.logout()
            except (managesieve.Error, OSError):
                client.sock.close()


def _put_and_activate(client: managesieve.Client, server: str, script: str) -> bool:
    listed = client.listscripts()
    if listed is None:
        raise MailSieveError(f"{server}: LISTSCRIPTS failed: {client.errmsg!r}")
    active, _others = listed
    if active not in (None, SCRIPT_NAME):
        raise MailSieveError(
            f"{server} already runs the Sieve script {active!r}; Mailbus will not switch "
            f'it off. Add `require "include"; include :personal "{SCRIPT_NAME}";` at '
            f"its top (RFC 6609), or make {SCRIPT_NAME!r} the active script yourself"
        )
    if active == SCRIPT_NAME:
        stored = client.getscript(SCRIPT_NAME) or ""
        if stored.splitlines() == script.splitlines():  # sievelib rejoins lines with \n
            return False
    if not client.putscript(SCRIPT_NAME, script):
        raise MailSieveError(f"{server} refused Mailbus's Sieve script: {client.errmsg!r}")
    if active != SCRIPT_NAME and not client.setactive(SCRIPT_NAME):
        raise MailSieveError(f"{server} did not activate the script: {client.errmsg!r}")
    return True
