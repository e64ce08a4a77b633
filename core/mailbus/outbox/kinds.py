"""Event kinds of the durable outbox (docs/outbox.md); the mail's id, destination and
attempt are in `extra`."""

from __future__ import annotations

from mailbus.event_kind import EventKind


class OutboxKind(EventKind):
    ENQUEUED = ("outbox.enqueued", "a mail was stored in the outbox | extra")
    SEND_STARTED = ("outbox.send_started", "an attempt to send a stored mail began | extra")
    SENT = ("outbox.sent", "a stored mail was sent | extra")
    RESCHEDULED = ("outbox.rescheduled", "an attempt failed; the next is scheduled | detail")
    DEAD_LETTERED = ("outbox.dead_lettered", "a mail ran out of attempts | detail")
    RECOVERED = ("outbox.recovered", "a mail in flight at a crash was queued again | extra")
    CLEANED = ("outbox.cleaned", "a sent or recovered entry's files were removed | detail")
    SET_ASIDE = ("outbox.set_aside", "a corrupt entry was moved aside, never lost | detail")
    STORAGE_ERROR = ("outbox.storage_error", "the outbox's storage failed | detail")
    CONTROL = (
        "outbox.control",
        "a retry or purge request carried out by the running sender | detail, extra",
    )
    CONTROL_REJECTED = ("outbox.control_rejected", "a control file was set aside | detail")
