"""Event kinds of the email transport (docs/mail.md)."""

from __future__ import annotations

from mailbus.event_kind import EventKind


class MailKind(EventKind):
    CONNECTED = ("mail.connected", "the IMAP receiver logged in | detail = server")
    DISCONNECTED = ("mail.disconnected", "the IMAP connection was lost | detail")
    RECONNECT_FAILED = ("mail.reconnect_failed", "a reconnection attempt failed | detail")
    UIDVALIDITY_CHANGED = (
        "mail.uidvalidity_changed",
        "the server renumbered the mailbox; the receiver starts over from its new UIDs | detail",
    )
    OVERSIZED = ("mail.oversized", "an email over the size limit was skipped | extra.size")
    IDLE = (
        "mail.idle",
        "the receiver found the inbox quiet and waits in IMAP IDLE (once per quiet spell) | detail",
    )
    FOLDER_FETCHED = (
        "mail.folder_fetched",
        "the routed receiver fetched new bodies from one folder | extra.folder, extra.bodies, "
        "extra.bytes",
    )
    SIEVE_INSTALLED = (
        "mail.sieve_installed",
        "the routed mode's Sieve script was stored and made active over ManageSieve | detail",
    )
    SENT = ("mail.sent", "the SMTP server accepted an email | message_id")
    SEND_FAILED = (
        "mail.send_failed",
        "an SMTP attempt failed and is retried | message_id, detail, extra.recipients",
    )
    SEND_REJECTED = (
        "mail.send_rejected",
        "a permanent 5xx, for the whole email or per refused recipient | extra.recipients, "
        "extra.smtp_codes, extra.delivered_to_others",
    )
    SEND_ABANDONED = ("mail.send_abandoned", "an email still unsent at close | message_id")
    TLS_UNVERIFIED = (
        "mail.tls_unverified",
        "a connection made with certificate verification turned off | detail, extra.server",
    )
    SHARED_ATTACHED = (
        "mail.shared_attached",
        "a context joined the process's running shared IMAP receiver instead of logging in "
        '(`share = "process"`) | detail, extra.contexts',
    )
