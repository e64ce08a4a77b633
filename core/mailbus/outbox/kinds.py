"""Event kinds of the durable outbox (docs/outbox.md); the mail's id, destination and
attempt are in `extra`."""

from __future__ import annotations

from mailbus.event_kind import EventKind, Extra

# What an event about one stored entry carries (outbox.scheduler); `name`, `message_id`
# and `size` are the mail's subject, Message-ID and size in bytes.
_STORED = {
    "entry": Extra(str, "the entry's id (one destination of one mail)"),
    "mail": Extra(str, "the stored mail's id"),
    "destination": Extra(str, "its recipients"),
}
_ENTRY = {
    **_STORED,
    "attempts": Extra(int, "attempts so far"),
    "next_attempt_ns": Extra(int, "when the next is due"),
}


class OutboxKind(EventKind):
    ENQUEUED = (
        "outbox.enqueued",
        "a mail was stored in the outbox | name, message_id, size",
        _STORED,
    )
    SEND_STARTED = (
        "outbox.send_started",
        "an attempt to send a stored mail began | name, message_id, size",
        _ENTRY,
    )
    SENT = ("outbox.sent", "a stored mail was sent | name, message_id, size", _ENTRY)
    RESCHEDULED = (
        "outbox.rescheduled",
        "an attempt failed; the next is scheduled | name, message_id, detail",
        _ENTRY,
    )
    DEAD_LETTERED = (
        "outbox.dead_lettered",
        "a mail ran out of attempts | name, message_id, detail",
        _ENTRY,
    )
    RECOVERED = (
        "outbox.recovered",
        "start-up recovery: what was in flight at a crash is queued again | detail",
        {
            "cleanups_finished": Extra(int),
            "inflight_requeued": Extra(int),
            "uncommitted_removed": Extra(int),
            "set_aside": Extra(int),
            "queued": Extra(int),
            "dead": Extra(int),
            "replayed": Extra(int, "entries put back from the journal after a power cut"),
        },
    )
    CLEANED = (
        "outbox.cleaned",
        "a sent or recovered entry's files were removed | detail",
        {**_ENTRY, "entry_name": Extra(str, "at recovery: the entry cleaned")},
    )
    SET_ASIDE = (
        "outbox.set_aside",
        "a corrupt entry was moved aside, never lost | detail",
        {"entry_name": Extra(str), "state": Extra(str, "the state it was found in")},
    )
    STORAGE_ERROR = ("outbox.storage_error", "the outbox's storage failed | detail", _ENTRY)
    CONTROL = (
        "outbox.control",
        "a retry or purge request carried out by the running sender | detail",
        {"action": Extra(str), "request_id": Extra(str), "done": Extra(int, "entries done")},
    )
    CONTROL_REJECTED = (
        "outbox.control_rejected",
        "a control file was set aside | detail",
        {"file": Extra(str, "the control file's name")},
    )
