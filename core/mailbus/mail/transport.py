"""`create_transport(options, tracer)` for `transport = "email"`.

Reads the options (url-smtp, url-imap, username, password, from, recipients,
tls-verify, ca-file, polling-period-ms) and an optional `[mail]` table for tuning:

    [mail]
    start-uid = 1            # read what is already in the inbox (default: new mail only)
    idle = "auto"            # "auto": fast polls while mail flows, IDLE when quiet;
                             # "always" (IDLE between polls), "never" (poll every period)
    max-period-ms = 80       # auto: the poll gap doubles up to this after empty polls
    quiet-ms = 2000          # auto: no new mail for this long -> IMAP IDLE
    idle-recheck-s = 30      # longest IDLE before one poll (bounds a missed announcement)
    batch = 500              # messages per FETCH while catching up on a backlog
    max-message-bytes = 10485760
    reconnect-max-s = 10     # cap of the reconnect / resend back-off
    mailbox = "INBOX"

Both servers are contacted before it returns: a wrong password, an unreachable server
or a certificate that does not verify is an error at init, not a log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mailbus.backoff import Backoff
from mailbus.errors import ConfigError
from mailbus.mail.imap_receiver import DEFAULT_MAX_MESSAGE_BYTES, ImapReceiver, ImapSettings
from mailbus.mail.smtp_sender import SmtpSender, SmtpSettings
from mailbus.mail.tls import TlsSettings
from mailbus.options import Options
from mailbus.trace import Tracer
from mailbus.transport import Transport

_MAIL_KEYS = {
    "start-uid": int,
    "idle": str,
    "max-period-ms": float,
    "quiet-ms": float,
    "idle-recheck-s": float,
    "batch": int,
    "max-message-bytes": int,
    "reconnect-max-s": float,
    "mailbox": str,
}


def mail_section(options: Options) -> dict[str, Any]:
    """The `[mail]` table, checked: unknown keys and wrong types are ConfigErrors."""
    raw: Mapping[str, Any] = options.sections.get("mail", {})
    out: dict[str, Any] = {}
    for key, value in raw.items():
        kind = _MAIL_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"mail.{key}", "unknown key")
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise ConfigError(f"mail.{key}", f"expected {kind.__name__}")
        out[key] = value
    for key in ("start-uid", "batch", "max-message-bytes"):
        if key in out and out[key] < 1:
            raise ConfigError(f"mail.{key}", "must be >= 1")
    if "reconnect-max-s" in out and not 0.1 <= out["reconnect-max-s"] <= 3600:
        raise ConfigError("mail.reconnect-max-s", "must be between 0.1 and 3600")
    return out


def create_transport(options: Options, tracer: Tracer) -> Transport:
    section = mail_section(options)
    tls = TlsSettings(verify=options.tls_verify, ca_file=options.ca_file)
    cap = section.get("reconnect-max-s", 10.0)
    own = options.address
    sign = None
    if "signing" in options.sections:
        from mailbus.signing.gate import signer_from_options  # loads dkimpy

        signer = signer_from_options(options)
        sign = signer.sign if signer is not None else None
    sender = SmtpSender(
        SmtpSettings(
            options.url_smtp,
            options.username,
            options.password,
            tls,
            default_recipients=(own,),
            sign=sign,
        ),
        tracer,
        backoff=Backoff(initial=min(0.2, cap), maximum=cap),
    )
    receiver = ImapReceiver(
        ImapSettings(
            options.url_imap,
            options.username,
            options.password,
            tls,
            mailbox=section.get("mailbox", "INBOX"),
        ),
        tracer,
        period_s=options.polling_period_ms / 1000.0,
        start_uid=section.get("start-uid"),
        batch=section.get("batch", 500),
        idle=section.get("idle", "auto"),
        max_period_s=section["max-period-ms"] / 1000.0 if "max-period-ms" in section else None,
        quiet_s=section.get("quiet-ms", 2000.0) / 1000.0,
        idle_recheck_s=section.get("idle-recheck-s", 30.0),
        backoff=Backoff(initial=min(0.1, cap), maximum=cap),
        max_message_bytes=section.get("max-message-bytes", DEFAULT_MAX_MESSAGE_BYTES),
    )
    try:
        receiver.connect()
        sender.check_login()
    except BaseException:
        receiver.close()
        sender.close(timeout=0)
        raise
    sender.start()
    return Transport(sender, receiver, name="email")
