"""Handlers that route received envelopes to the entities registered with them:
messages to every subscription of their topic, requests to every server of their
service, responses to the client whose GID they carry."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Generic, TypeVar

from mailbus.envelope import Envelope, Message, Recipient, Request, Response
from mailbus.service import ServiceClient, ServiceServer
from mailbus.subscription import Subscription

T = TypeVar("T")
T_envelope = TypeVar("T_envelope", Message, Request, Response)


class Registry(Generic[T]):
    """Entities by key, readable without a lock: writers replace the whole mapping.

    Entities are held weakly, so one that its owner drops without `close()` stops
    receiving and is freed instead of filling a queue nobody reads."""

    def __init__(self) -> None:
        self._by_key: dict[str, tuple[weakref.ref[T], ...]] = {}
        # Re-entrant: a weakref callback may run (garbage collection) while we hold it.
        self._lock = threading.RLock()

    def add(self, key: str, item: T) -> None:
        def forget(ref: weakref.ref[T]) -> None:
            self._discard(key, lambda r: r is ref)

        with self._lock:
            by_key = dict(self._by_key)
            by_key[key] = (*by_key.get(key, ()), weakref.ref(item, forget))
            self._by_key = by_key

    def remove(self, key: str, item: T) -> None:
        self._discard(key, lambda r: r() is item)

    def _discard(self, key: str, matches: Callable[[weakref.ref[T]], bool]) -> None:
        with self._lock:
            by_key = dict(self._by_key)
            rest = tuple(r for r in by_key.get(key, ()) if not matches(r))
            if rest:
                by_key[key] = rest
            else:
                by_key.pop(key, None)
            self._by_key = by_key

    def get(self, key: str) -> tuple[T, ...]:
        refs = self._by_key.get(key)
        if not refs:
            return ()
        return tuple(item for ref in refs if (item := ref()) is not None)

    def refs(self, key: str) -> tuple[weakref.ref[T], ...]:
        """The weak references under `key`, for hot paths that dereference as they go."""
        return self._by_key.get(key, ())

    def keys(self) -> Iterable[str]:
        return self._by_key.keys()


def deliver_to(recipients: Iterable[Recipient[T_envelope]], envelope: T_envelope) -> int:
    """Hand `envelope` to each recipient; how many took it."""
    return sum(1 for recipient in recipients if recipient.deliver(envelope))


class SubscriptionHandler:
    def __init__(self) -> None:
        self.subscriptions: Registry[Subscription] = Registry()

    def handle(self, envelope: Envelope) -> int:
        """Deliver a message; return how many subscriptions took it."""
        if type(envelope) is not Message:
            return 0
        # The path of every message: weak references dereferenced as they go, no list.
        delivered = 0
        for ref in self.subscriptions.refs(envelope.topic):
            recipient: Recipient[Message] | None = ref()
            if recipient is not None and recipient.deliver(envelope):
                delivered += 1
        return delivered


class ServiceHandler:
    def __init__(self) -> None:
        self.servers: Registry[ServiceServer] = Registry()
        self.clients: Registry[ServiceClient] = Registry()

    def handle(self, envelope: Envelope) -> int:
        if type(envelope) is Request:
            return deliver_to(self.servers.get(envelope.service), envelope)
        if type(envelope) is Response:
            clients = self.clients.get(envelope.client_gid)
            return deliver_to((c for c in clients if c.service == envelope.service), envelope)
        return 0
