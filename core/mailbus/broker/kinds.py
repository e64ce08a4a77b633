"""Event kinds of the module broker (docs/broker.md)."""

from __future__ import annotations

from mailbus.event_kind import EventKind


class BrokerKind(EventKind):
    PUBLISHED = ("broker.published", "a module published a message | name")
    DELIVERED = ("broker.delivered", "a message reached a module | name")
    DROPPED = ("broker.dropped", "a full queue dropped a message | name, detail")
    REFUSED = ("broker.refused", "a message was refused (failed or unknown sink) | name")
    MODULE_FAILED = ("broker.module_failed", "a module raised or its thread died | detail")
    MODULE_ADDED = ("broker.module_added", "a module was added | name, extra.kind")
    MODULE_STARTED = ("broker.module_started", "a module started | name")
    MODULE_REMOVED = ("broker.module_removed", "a module was removed | name")
    LINK_ADDED = ("broker.link_added", "a link between two modules was made | extra")
    LINK_REMOVED = ("broker.link_removed", "a link was removed | extra")
    DESTROYED = ("broker.destroyed", "the broker was destroyed | detail")
    BRIDGE_REJECTED = (
        "broker.bridge_rejected",
        "a bridge refused a message it cannot carry | name, message_id, detail",
    )
