"""Event kinds of the PostOffice daemon and transport (docs/postoffice.md). The
transport emits the daemon's kinds with `extra["side"] = "participant"`."""

from __future__ import annotations

from mailbus.event_kind import EventKind, Extra

# What the participant's transport adds to the kinds it emits (postoffice.transport).
_PARTICIPANT = {
    "side": Extra(str, "`participant` when the transport reports (absent: the daemon)"),
    "connection": Extra(str, "the transport's `send` or `receive` connection"),
}
_PEER = {"peer": Extra(str, "the client's address")}


class PostOfficeKind(EventKind):
    BOX_CREATED = (
        "postoffice.box_created",
        "a mailbox was created | name",
        {**_PEER, **_PARTICIPANT},
    )
    CHECKED_OUT = (
        "postoffice.checked_out",
        "a connection checked a box out | name",
        {**_PEER, **_PARTICIPANT},
    )
    RETURNED = ("postoffice.returned", "a box was returned | name, detail", _PARTICIPANT)
    AUTH_FAILED = (
        "postoffice.auth_failed",
        "a wrong password | name (the box), detail",
        {**_PEER, "failures": Extra(int, "from that host"), **_PARTICIPANT},
    )
    AUTH_REFUSED = (
        "postoffice.auth_refused",
        "a password not checked (back-off crowded, hashing busy): NOAUTH | name, detail",
        _PEER,
    )
    BOX_REFUSED = (
        "postoffice.box_refused",
        "CREATEBOX refused (the box exists, or a bad name) | name, detail",
        _PEER,
    )
    TIMEOUT = (
        "postoffice.timeout",
        "a connection timed out | name, detail",
        {**_PEER, "phase": Extra(str, "the protocol's phase"), **_PARTICIPANT},
    )
    LETTER_IN = (
        "postoffice.letter_in",
        "a letter was stored | name, size",
        {
            "sender": Extra(str, "the sending box"),
            "letter_id": Extra(int),
            "to": Extra(str | None, "the box it was addressed to (a group's name...)"),
            **_PARTICIPANT,
        },
    )
    LETTER_OUT = (
        "postoffice.letter_out",
        "a letter was handed out | name, size",
        {"sender": Extra(str, "the sending box"), "letter_id": Extra(int), **_PARTICIPANT},
    )
    LETTER_REFUSED = (
        "postoffice.letter_refused",
        "a letter was refused | name, detail",
        {"sender": Extra(str, "the sending box")},
    )
    LETTERS_DROPPED = (
        "postoffice.letters_dropped",
        "a full box dropped its oldest letters (`when-full`) | name, detail",
        {"count": Extra(int, "dropped now"), "dropped": Extra(int, "by this box in all")},
    )
    BOX_EMPTIED = (
        "postoffice.box_emptied",
        "a box was emptied | name, detail",
        {"letters": Extra(int, "how many it held")},
    )
    BOX_REMOVED = (
        "postoffice.box_removed",
        "a box was removed | name, detail",
        {"letters": Extra(int, "how many it held"), **_PARTICIPANT},
    )
    BOX_KEPT = (
        "postoffice.box_kept",
        "a participant kept its boxes (`keep-boxes`) | name, detail",
        _PARTICIPANT,
    )
    SEND_RETRYING = (
        "postoffice.send_retrying",
        "a publisher waits out a daemon outage with back-off | message_id, detail",
        {"attempts": Extra(int), "retry_in_s": Extra(float, "the back-off before the next try")},
    )
    SEND_ABANDONED = (
        "postoffice.send_abandoned",
        "messages given up after the retry time | detail",
        {"count": Extra(int), "message_ids": Extra(list[str], "the first 100")},
    )
    SEND_FAILED = ("postoffice.send_failed", "a message the daemon refused | message_id, detail")
