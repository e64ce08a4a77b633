"""Event kinds of the module broker (docs/broker.md)."""

from __future__ import annotations

from mailbus.event_kind import EventKind, Extra

_SOURCE = {"source": Extra(str, "the publishing module")}
_QUEUE = {**_SOURCE, "capacity": Extra(int, "the sink's queue capacity")}


class BrokerKind(EventKind):
    PUBLISHED = (
        "broker.published",
        "a module published a message | name, size",
        {"sinks": Extra(list[str], "the modules it was routed to")},
    )
    DELIVERED = ("broker.delivered", "a message reached a module | name, size", _SOURCE)
    DROPPED = ("broker.dropped", "a full queue dropped a message | name, detail, size", _QUEUE)
    REFUSED = (
        "broker.refused",
        "a message was refused (failed or unknown sink) | name, detail",
        _QUEUE,
    )
    MODULE_FAILED = (
        "broker.module_failed",
        "a module raised or its thread died | name, detail",
        {
            "phase": Extra(str, "the module's method that raised, or `worker`"),
            **_SOURCE,
            "error": Extra(str, "the exception's class"),
        },
    )
    MODULE_ADDED = (
        "broker.module_added",
        "a module was added | name",
        {"kind": Extra(str, "the module's kind"), "capacity": Extra(int, "its queue capacity")},
    )
    MODULE_STARTED = ("broker.module_started", "a module started | name")
    MODULE_REMOVED = (
        "broker.module_removed",
        "a module was removed | name",
        {"delivered": Extra(int), "dropped": Extra(int), "failed": Extra(int)},
    )
    LINK_ADDED = (
        "broker.link_added",
        "a link between two modules was made | name (the sink)",
        {
            **_SOURCE,
            "sink": Extra(str),
            "backpressure": Extra(str, "the link's back-pressure, empty when none"),
        },
    )
    LINK_REMOVED = (
        "broker.link_removed",
        "a link was removed | name (the sink)",
        {**_SOURCE, "sink": Extra(str)},
    )
    DESTROYED = (
        "broker.destroyed",
        "the broker was destroyed | detail",
        {"modules_attached": Extra(list[str], "modules still attached (a mistake of the owner)")},
    )
    BRIDGE_REJECTED = (
        "broker.bridge_rejected",
        "a bridge refused a message it cannot carry | name, message_id, detail",
    )
