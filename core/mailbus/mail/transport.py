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
    share = "process"        # contexts of one process on this inbox share one receiver
                             # (one connection); "none": a receiver of its own
    # Routed mode (docs/mail.md): the server's Sieve files Mailbus mail into one folder
    # per topic / service; a participant reads only the folders of what it receives.
    routing = "sieve"        # default "inbox": every participant reads the shared inbox
    routed-topics = ["robot/pose"]
    routed-services = ["add"]
    folder-prefix = "mailbus"
    url-sieve = "sieve://mail.example.org:4190"  # install the script over ManageSieve
    routed-read = "own"      # "all": every routed folder and INBOX (an observer)
    # Or every participant process of the host reads through `mailbus mail-relay`:
    share = "relay"          # (docs/mail.md, "The mail relay")
    relay-socket = "/run/user/1000/mailbus/mail/relay.sock"  # default: named after the account

Both servers are contacted before it returns: a wrong password, an unreachable server
or a certificate that does not verify is an error at init, not a log line.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from mailbus.backoff import Backoff
from mailbus.errors import ConfigError, InvalidNameError
from mailbus.mail.imap_receiver import ImapReceiver, ImapSettings
from mailbus.mail.kinds import MailKind
from mailbus.mail.receiver_options import imap_settings, receiver_parameters
from mailbus.mail.relay.config import check_relay_keys
from mailbus.mail.relay.receiver import NudgingSender, relay_receiver
from mailbus.mail.routed_receiver import RoutedImapReceiver
from mailbus.mail.shared_receiver import SharedReceiverHandle, ShareKey
from mailbus.mail.sieve_install import SieveSettings, install_script
from mailbus.mail.sieve_script import DEFAULT_PREFIX, Routes, check_prefix, sieve_script
from mailbus.mail.smtp_sender import SmtpSender, SmtpSettings
from mailbus.mail.tls import TlsSettings
from mailbus.options import Options, check_url
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
    "routing": str,
    "routed-topics": list,
    "routed-services": list,
    "folder-prefix": str,
    "url-sieve": str,
    "routed-read": str,
    "share": str,
    "relay-socket": str,
    "relay-queue-bytes": int,
}
ROUTING_MODES = ("inbox", "sieve")
SHARE_MODES = ("process", "none", "relay")


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
    _check_routing(out)
    _check_share(out)
    return out


def _check_share(section: dict[str, Any]) -> None:
    """The `share` mode, with the keys that only go with it: asked for explicitly where
    it cannot be had, it is refused rather than ignored."""
    share = section.get("share", "process")
    if share not in SHARE_MODES:
        raise ConfigError("mail.share", f"expected one of {', '.join(SHARE_MODES)}, got {share!r}")
    if share != "relay":
        for key in ("relay-socket", "relay-queue-bytes"):
            if key in section:
                raise ConfigError(f"mail.{key}", 'only with share = "relay"')
    if share == "none" or "share" not in section:
        return  # the default gives way to routing and start-uid (see _receiver)
    if section.get("routing") == "sieve":
        raise ConfigError(
            "mail.share", 'only with routing = "inbox": a routed receiver reads its own folders'
        )
    if share == "relay":
        check_relay_keys(section)
    elif "start-uid" in section:
        raise ConfigError("mail.share", "not with start-uid: a shared receiver reads only new mail")


def _check_routing(section: dict[str, Any]) -> None:
    for key in ("routed-topics", "routed-services"):
        if not all(isinstance(name, str) for name in section.get(key, [])):
            raise ConfigError(f"mail.{key}", "expected a list of names (strings)")
    routing = section.get("routing", "inbox")
    if routing not in ROUTING_MODES:
        raise ConfigError("mail.routing", f"expected inbox or sieve, got {routing!r}")
    routed_keys = ("routed-topics", "routed-services", "folder-prefix", "url-sieve", "routed-read")
    if routing == "inbox":
        for key in routed_keys:
            if key in section:
                raise ConfigError(f"mail.{key}", 'only with routing = "sieve"')
        return
    for key in ("mailbox", "start-uid"):
        if key in section:
            raise ConfigError(f"mail.{key}", 'only with routing = "inbox" (the shared inbox)')
    if "url-sieve" in section:
        check_url("mail.url-sieve", section["url-sieve"], ("sieve",))
    if section.get("routed-read", "own") not in ("own", "all"):
        raise ConfigError(
            "mail.routed-read", f"expected own or all, got {section['routed-read']!r}"
        )
    routes_of(section)  # refuses a name that cannot be routed, at start


def routes_of(section: Mapping[str, Any]) -> Routes:
    """The names routed to their own folders; a name that cannot be is a ConfigError."""
    prefix = section.get("folder-prefix", DEFAULT_PREFIX)
    try:
        check_prefix(prefix)
    except InvalidNameError as exc:
        raise ConfigError("mail.folder-prefix", str(exc)) from None
    for key in ("routed-topics", "routed-services"):
        try:
            Routes(**{key.removeprefix("routed-"): tuple(section.get(key, ()))}, prefix=prefix)
        except InvalidNameError as exc:
            raise ConfigError(f"mail.{key}", str(exc)) from None
    return Routes(
        tuple(section.get("routed-topics", ())), tuple(section.get("routed-services", ())), prefix
    )


def _receiver(
    section: Mapping[str, Any],
    imap: ImapSettings,
    tracer: Tracer,
    routes: Routes | None,
    **parameters: Any,
) -> ImapReceiver | SharedReceiverHandle:
    """The receiver `[mail] share` asks for, not connected yet. Routed mode and
    `start-uid` always get one of their own (their reading is the context's own)."""
    if routes is not None:
        read_all = section.get("routed-read") == "all"
        return RoutedImapReceiver(imap, tracer, routes=routes, read_all=read_all, **parameters)
    if section.get("share", "process") == "none" or "start-uid" in section:
        return ImapReceiver(imap, tracer, **parameters)
    key = ShareKey(imap, tuple(sorted(parameters.items())))
    return SharedReceiverHandle(key, partial(ImapReceiver, imap, **parameters), tracer)


def create_transport(options: Options, tracer: Tracer) -> Transport:
    section = mail_section(options)
    tls = TlsSettings(verify=options.tls_verify, ca_file=options.ca_file)
    cap = section.get("reconnect-max-s", 10.0)
    own = options.address
    sign = None
    if "signing" in options.sections:
        from mailbus.signing.gate import signer_from_sections  # loads dkimpy

        signer = signer_from_sections(options.sections)
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
    imap = imap_settings(options, section)
    routes = routes_of(section) if section.get("routing") == "sieve" else None
    # share = "relay": the participants of a host read through their relay (mailbus.mail.relay).
    relay = relay_receiver(options, section, tracer) if section.get("share") == "relay" else None
    receiver = relay or _receiver(
        section,
        imap,
        tracer,
        routes,
        start_uid=section.get("start-uid"),
        **receiver_parameters(options, section),
    )
    try:
        if routes is not None and "url-sieve" in section:
            sieve = SieveSettings(section["url-sieve"], options.username, options.password, tls)
            if install_script(sieve, sieve_script(routes), tracer):
                tracer.event(MailKind.SIEVE_INSTALLED, detail=f"{sieve.server}: {routes.folders()}")
        receiver.connect()
        sender.check_login()
    except BaseException:
        receiver.close()
        sender.close(timeout=0)
        raise
    sender.start()
    if relay is not None:
        return Transport(NudgingSender(sender, relay), receiver, name="email")
    return Transport(sender, receiver, name="email")
