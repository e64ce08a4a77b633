"""Event kinds of the email transport (docs/mail.md)."""

from __future__ import annotations

from mailbus.event_kind import EventKind, Extra

_RETRY = {"attempt": Extra(int), "retry_in_s": Extra(float, "the back-off before the next try")}
_SMTP = {
    "curl_code": Extra(int, "libcurl's error code"),
    "smtp_code": Extra(int, "the server's reply code (of the first refused recipient)"),
    "attempt": Extra(int),
    "reason": Extra(str, "how the failure is classed (`rejected`, `deferred`...)"),
    "server": Extra(str),
    "recipients": Extra(list[str], "the envelope recipients concerned"),
}


class MailKind(EventKind):
    CONNECTED = (
        "mail.connected",
        "the IMAP receiver logged in | detail = server",
        {
            "first_uid": Extra(int, "the UID it reads from"),
            "uidvalidity": Extra(int),
            "idle": Extra(bool, "whether it will wait in IMAP IDLE"),
            "resumed": Extra(bool, "whether it went on from where it was"),
            "folders": Extra(list[str], "routed mode: the folders it reads"),
            "notify": Extra(bool, "routed mode: whether the server has NOTIFY"),
        },
    )
    DISCONNECTED = ("mail.disconnected", "the IMAP connection was lost | detail")
    RECONNECT_FAILED = (
        "mail.reconnect_failed",
        "a reconnection attempt failed | detail",
        _RETRY,
    )
    UIDVALIDITY_CHANGED = (
        "mail.uidvalidity_changed",
        "the server renumbered the mailbox; the receiver starts over from its new UIDs | detail",
        {"old": Extra(int), "new": Extra(int), "folder": Extra(str, "routed mode")},
    )
    OVERSIZED = (
        "mail.oversized",
        "an email over the size limit (`max-message-bytes`) was skipped unread | detail",
        {"origin": Extra(str, "`uid:N`"), "size": Extra(int, "its size on the server")},
    )
    IDLE = (
        "mail.idle",
        "the receiver found the inbox quiet and waits in IMAP IDLE (once per quiet spell) | detail",
        {"mode": Extra(str, "the `idle` option"), "polls": Extra(int, "polls so far")},
    )
    FOLDER_FETCHED = (
        "mail.folder_fetched",
        "the routed receiver fetched new bodies from one folder | detail",
        {"folder": Extra(str), "bodies": Extra(int), "bytes": Extra(int)},
    )
    SIEVE_INSTALLED = (
        "mail.sieve_installed",
        "the routed mode's Sieve script was stored and made active over ManageSieve | detail",
    )
    SENT = (
        "mail.sent",
        "the SMTP server accepted an email | message_id, size",
        {"attempts": Extra(int), "queued_ns": Extra(int, "when it was handed to the sender")},
    )
    SEND_FAILED = (
        "mail.send_failed",
        "an SMTP attempt failed and is retried | message_id, detail",
        {**_SMTP, "retry_in_s": Extra(float, "the back-off before the next try")},
    )
    SEND_REJECTED = (
        "mail.send_rejected",
        "a permanent 5xx, for the whole email or per refused recipient | message_id, detail",
        {
            **_SMTP,
            "smtp_codes": Extra(list[int], "per refused recipient"),
            "delivered_to_others": Extra(bool, "whether the other recipients got it"),
        },
    )
    SEND_ABANDONED = (
        "mail.send_abandoned",
        "emails still unsent at close | detail",
        {"count": Extra(int), "message_ids": Extra(list[str], "the first 100")},
    )
    TLS_UNVERIFIED = (
        "mail.tls_unverified",
        "a connection made with certificate verification turned off | detail",
        {"server": Extra(str)},
    )
    SHARED_ATTACHED = (
        "mail.shared_attached",
        "a context joined the process's running shared IMAP receiver instead of logging in "
        '(`share = "process"`) | detail',
        {"contexts": Extra(int, "how many contexts read through it now")},
    )
    RELAY_STARTED = (
        "mail.relay_started",
        "the host relay reads the inbox and listens for participants | detail = socket",
        {
            "next_uid": Extra(int, "the UID it reads from"),
            "state": Extra(str, "its UID state file"),
        },
    )
    RELAY_JOINED = (
        "mail.relay_joined",
        "a participant connected to the relay | detail",
        {
            "last_uid": Extra(int, "the last UID the participant has"),
            "catch_up": Extra(int, "how many mails it is behind"),
        },
    )
    RELAY_DROPPED = (
        "mail.relay_dropped",
        "the relay let a participant go: gone, too slow (queue over relay-queue-bytes) or "
        "garbage on the socket | detail",
        {"reason": Extra(str, "`gone`, `too slow`, `garbage`, `refused`, `catch-up failed`")},
    )
    RELAY_CONNECTED = (
        "mail.relay_connected",
        "a participant connected to its host relay | detail = socket",
        {"last_uid": Extra(int, "the last UID it has")},
    )
    RELAY_LOST = (
        "mail.relay_lost",
        "a participant lost its relay and reconnects with back-off | detail",
        {"retry_in_s": Extra(float, "the back-off before the next try")},
    )
