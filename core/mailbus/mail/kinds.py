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
    RELAY_STARTED = (
        "mail.relay_started",
        "the host relay reads the inbox and listens for participants | detail = socket, "
        "extra.next_uid",
    )
    RELAY_JOINED = (
        "mail.relay_joined",
        "a participant connected to the relay | extra.last_uid, extra.catch_up",
    )
    RELAY_DROPPED = (
        "mail.relay_dropped",
        "the relay let a participant go: gone, too slow (queue over relay-queue-bytes) or "
        "garbage on the socket | detail, extra.reason",
    )
    RELAY_CONNECTED = (
        "mail.relay_connected",
        "a participant connected to its host relay | detail = socket, extra.last_uid",
    )
    RELAY_LOST = (
        "mail.relay_lost",
        "a participant lost its relay and reconnects with back-off | detail",
    )
