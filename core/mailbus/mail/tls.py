"""TLS settings shared by the SMTP sender and the IMAP receiver.

Verification is on by default, against the system's trust store or a configured CA
file. Turning it off is an explicit option that warns (log, Python warning and trace
event) every time a connection is opened with it, not once per process.
"""

from __future__ import annotations

import logging
import ssl
import warnings
from dataclasses import dataclass
from pathlib import Path

import pycurl

from mailbus.errors import ConfigError
from mailbus.mail.kinds import MailKind
from mailbus.tls import client_context
from mailbus.trace import Tracer

log = logging.getLogger(__name__)

TLS_UNVERIFIED = MailKind.TLS_UNVERIFIED


class InsecureTLSWarning(UserWarning):
    """A mail connection was opened without verifying the server's certificate."""


@dataclass(frozen=True, slots=True)
class TlsSettings:
    verify: bool = True
    ca_file: str = ""  # empty: the system's trust store

    def __post_init__(self) -> None:
        if self.ca_file and not Path(self.ca_file).is_file():
            raise ConfigError("ca-file", f"no such file: {self.ca_file}")


def warn_unverified(settings: TlsSettings, server: str, tracer: Tracer | None) -> None:
    """Say, every time, that a connection to `server` skips certificate checks."""
    if settings.verify:
        return
    text = f"TLS certificate verification is OFF for {server} (tls-verify = false)"
    log.warning(text)
    warnings.warn(text, InsecureTLSWarning, stacklevel=3)
    if tracer is not None:
        tracer.event(TLS_UNVERIFIED, detail=text, extra={"server": server})


def ssl_context(settings: TlsSettings) -> ssl.SSLContext:
    """A client context: TLS 1.2 or newer, hostname and chain verified unless disabled."""
    return client_context(ca_file=settings.ca_file, verify=settings.verify)


def curl_options(settings: TlsSettings) -> list[tuple[int, object]]:
    """The pycurl options that apply `settings` to a handle."""
    options: list[tuple[int, object]] = [
        (pycurl.SSLVERSION, pycurl.SSLVERSION_TLSv1_2),
        (pycurl.SSL_VERIFYPEER, 1 if settings.verify else 0),
        (pycurl.SSL_VERIFYHOST, 2 if settings.verify else 0),
    ]
    if settings.ca_file:
        options.append((pycurl.CAINFO, settings.ca_file))
    return options
