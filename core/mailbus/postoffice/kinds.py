"""Event kinds of the PostOffice daemon and transport (docs/postoffice.md). The
transport emits the daemon's kinds with `extra["side"] = "participant"`."""

from __future__ import annotations

from mailbus.event_kind import EventKind


class PostOfficeKind(EventKind):
    BOX_CREATED = ("postoffice.box_created", "a mailbox was created | name")
    CHECKED_OUT = ("postoffice.checked_out", "a connection checked a box out | name, extra.peer")
    RETURNED = ("postoffice.returned", "a box was returned | name")
    AUTH_FAILED = (
        "postoffice.auth_failed",
        "a wrong password | name (the box), extra.peer, extra.failures (from that host)",
    )
    AUTH_REFUSED = (
        "postoffice.auth_refused",
        "a password not checked (back-off crowded, hashing busy): NOAUTH | name, detail",
    )
    BOX_REFUSED = (
        "postoffice.box_refused",
        "CREATEBOX refused (the box exists, or a bad name) | name, detail, extra.peer",
    )
    TIMEOUT = ("postoffice.timeout", "a connection timed out | name, extra.peer, extra.phase")
    LETTER_IN = ("postoffice.letter_in", "a letter was stored | extra.sender, letter_id, to")
    LETTER_OUT = ("postoffice.letter_out", "a letter was handed out | extra.sender, letter_id")
    LETTER_REFUSED = ("postoffice.letter_refused", "a letter was refused | name, detail")
    LETTERS_DROPPED = (
        "postoffice.letters_dropped",
        "a full box dropped its oldest letters (`when-full`) | name, extra",
    )
    BOX_EMPTIED = ("postoffice.box_emptied", "a box was emptied | name")
    BOX_REMOVED = ("postoffice.box_removed", "a box was removed | name, detail")
    BOX_KEPT = ("postoffice.box_kept", "a participant kept its boxes (`keep-boxes`) | name")
    SEND_RETRYING = (
        "postoffice.send_retrying",
        "a publisher waits out a daemon outage with back-off | detail",
    )
    SEND_ABANDONED = (
        "postoffice.send_abandoned",
        "a message given up after the retry time | message_id, detail",
    )
    SEND_FAILED = ("postoffice.send_failed", "a message the daemon refused | message_id, detail")
