"""What the `[mail]` table says about reading the inbox, for whoever reads it: a
participant's own receiver (mail.transport) and the host relay's reader (relay.server)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mailbus.backoff import Backoff
from mailbus.mail.imap_receiver import DEFAULT_MAX_MESSAGE_BYTES, ImapSettings
from mailbus.mail.tls import TlsSettings
from mailbus.options import Options


def imap_settings(options: Options, section: Mapping[str, Any]) -> ImapSettings:
    return ImapSettings(
        options.url_imap,
        options.username,
        options.password,
        TlsSettings(verify=options.tls_verify, ca_file=options.ca_file),
        mailbox=section.get("mailbox", "INBOX"),
    )


def receiver_parameters(options: Options, section: Mapping[str, Any]) -> dict[str, Any]:
    """The ImapReceiver keyword arguments the options ask for (start-uid aside: only a
    participant's own receiver may start elsewhere than at new mail)."""
    cap = section.get("reconnect-max-s", 10.0)
    return {
        "period_s": options.polling_period_ms / 1000.0,
        "batch": section.get("batch", 500),
        "idle": section.get("idle", "auto"),
        "max_period_s": section["max-period-ms"] / 1000.0 if "max-period-ms" in section else None,
        "quiet_s": section.get("quiet-ms", 2000.0) / 1000.0,
        "idle_recheck_s": section.get("idle-recheck-s", 30.0),
        "backoff": Backoff(initial=min(0.1, cap), maximum=cap),
        "max_message_bytes": section.get("max-message-bytes", DEFAULT_MAX_MESSAGE_BYTES),
    }
